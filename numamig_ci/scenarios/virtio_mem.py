"""virtio-mem per host node, read from the guest kernel and the host's.

A guest with two guest cells, each on its own node of a two-node nested
host and each with a virtio-mem device backed by that node, boots a real
Linux kernel with the virtio_mem driver (the backend's
``boot_guest_kernel``). ``numamig-manage instance memory set --host-node
P --exact`` grows the guest node that host node P backs, then
``numamig-manage host reclaim HOST --node P --exact`` takes part of it
back: both run as command lines, as an operator runs them.

Nothing numamig records is trusted for the verdict. After each step:

* the guest kernel's MemTotal of each guest node, printed on its console
  by its own init (``/sys/devices/system/node/nodeN/meminfo``): the
  guest node on P changed by exactly the MiB asked, the other not at all;
* libvirt's live XML of both devices (``<requested>``, ``<current>``);
* the host kernel's view, inside the nested machine: the pages QEMU
  holds on each host node in each device's memory (``numa_maps``, the
  devices populate what they plug), exactly the plugged MiB on P and
  none on the other node; and each host node's free memory (sysfs
  ``nodeN/meminfo`` MemFree), which on P moved by the MiB asked and on
  the other node not, both within NOISE_MB.

The same node check is then made against the other host node, where it
must fail (a negative control on the very counters read): a check that
cannot tell the nodes apart would prove nothing.
"""

import json
import os
import re
import subprocess
import sys
import time

from lxml import etree

from numamig_ci.results import Failure
from numamig_ci.results import ScenarioSkipped
from numamig_ci.scenarios.registry import scenario
from numamig_ci.session import DEDICATED

# Per guest cell (MiB): its boot memory and its device's size. The
# device starts empty; GROW_MB is plugged on one guest node, then
# RECLAIM_MB of it reclaimed from the host node backing it.
CELL_MB = 128
DEVICE_MB = 512
GROW_MB = 256
RECLAIM_MB = 128
SPECS = dict(DEDICATED, **{'hw:numa_nodes': '2',
                           'hw:virtio_mem_size': str(DEVICE_MB),
                           'hw:virtio_mem_requested': '0',
                           'hw:virtio_mem_min': '0'})
# How far a host node's free memory may be from the change: the libvirtd
# hosts, the machine's agent, QEMU's own allocations, the guest touching
# its boot memory there as it onlines and offlines blocks, and freed
# pages still on the kernel's per-CPU lists (not counted free). Measured
# in 5 runs: up to 18 MiB short on the node, up to 17 MiB elsewhere.
NOISE_MB = 48
KIB = 1024
PAGE_KB = 4
# Measured in the nested host, the guest's init prints its first line
# 10-16 s after create under KVM (Layout.kvm), 113-173 s under TCG.
BOOT_S = 900
# How long the guest kernel's MemTotal may take to show a change numamig
# says is done (its init prints one line a second, slower under TCG).
CONSOLE_S = 300
CLI_TIMEOUT_S = 900
_CONSOLE = re.compile(r'^VMEM((?: \d+=\d+)+)\s*$', re.MULTILINE)
_NODE_PAGES = re.compile(r'\bN(\d+)=(\d+)')


@scenario('virtio-mem-per-node',
          "A guest with two guest cells on two host nodes, each with a "
          "virtio-mem device, booted with a real guest kernel: 'numamig-"
          "manage instance memory set --host-node P --exact' grows the "
          "guest node on host node P, 'numamig-manage host reclaim HOST "
          "--node P --exact' takes part of it back; the guest kernel's "
          "MemTotal per guest node, libvirt's live devices and the host "
          "kernel's per-node counters (QEMU's numa_maps, sysfs meminfo) "
          "move on node P only, by exactly the MiB asked.",
          requires=('multi_node', 'kernel_view', 'guest_kernel'))
def virtio_mem_per_node(s):
    host = _two_node_host(s)
    started = time.monotonic()
    guest = s.create(host, 2, memory_mb=2 * CELL_MB, specs=dict(SPECS),
                     label='vmem')
    cells = {c.id: c.host_cell for c in s.record(guest).numa_topology.cells}
    if len(set(cells.values())) != 2:
        s.fail(guest, host, 'record guest cells -> host nodes',
               'two distinct host nodes', cells)
        return
    # Host node P: the highest the guest has a cell on (node 0 also
    # holds the machine's kernel and daemons); guest node g is on it.
    node = max(cells.values())
    other = min(cells.values())
    cell = next(c for c, n in cells.items() if n == node)
    console, create_s = s.backend.boot_guest_kernel(host, guest)
    first = _wait_console(console, BOOT_S, lambda lines: bool(lines))
    if first is None:
        s.fail(guest, host, 'guest kernel console (VMEM lines)',
               f"a line within {BOOT_S} s", _tail(console))
        return
    boot_s = time.monotonic() - started
    s.say(f"guest kernel booted in the nested host: its init's first line "
          f"{first[1]:.1f} s after libvirt's create (which took "
          f"{create_s:.1f} s); guest node {cell} on host node {node}, "
          f"guest node {1 - cell} on host node {other}")
    base = _settled(console)
    if base is None or set(base) != {0, 1}:
        s.fail(guest, host, 'guest kernel MemTotal per guest node',
               'two guest nodes', base)
        return
    views = {'boot': _host_view(s, host, guest, node, other)}
    s.say(f"at boot: {_brief(base, views['boot'], node, other)}")

    steps = (('grow', GROW_MB, ['instance', 'memory', 'set', guest.uuid,
                                '--host-node', str(node), '--size',
                                str(GROW_MB), '--exact']),
             ('reclaim', GROW_MB - RECLAIM_MB,
              ['host', 'reclaim', host, '--node', str(node), '--size',
               str(RECLAIM_MB), '--exact']))
    previous = 'boot'
    for step, plugged_mb, argv in steps:
        answer, took = _manage(s, guest, host, argv)
        if answer is None:
            return
        s.check(check_answer(guest.name, host, answer, cell, plugged_mb,
                             ' '.join(argv[:2])))
        expected = {c: base[c] + (plugged_mb * KIB if c == cell else 0)
                    for c in base}
        seen = _wait_console(console, CONSOLE_S,
                             lambda lines, want=expected:
                             bool(lines) and lines[-1] == want)
        memtotal = seen[0][-1] if seen else _last(console)
        if seen is None:
            s.fail(guest, host, 'guest kernel MemTotal per guest node (kB)',
                   expected, memtotal, f"not within {CONSOLE_S} s")
        s.check(check_devices(guest.name, host, s.backend.agent_of(
            host).dumpxml(host, s.backend.guests(host)[guest.uuid]),
            {cell: plugged_mb, 1 - cell: 0}))
        views[step] = _host_view(s, host, guest, node, other)
        s.check(check_device_pages(guest.name, host, views[step]['device'],
                                   {node: plugged_mb, other: 0}))
        delta_mb = plugged_mb - (GROW_MB if step == 'reclaim' else 0)
        s.check(check_free_moved(guest.name, host,
                                 views[previous]['free'], views[step]['free'],
                                 node, other, delta_mb))
        s.say(f"{' '.join(argv[:2])} ({took:.1f} s): "
              f"{_brief(memtotal, views[step], node, other)}")
        # Negative control: the same counters, checked as if the change
        # had been on the other host node, must fail.
        wrong = check_free_moved(guest.name, host, views[previous]['free'],
                                 views[step]['free'], other, node, delta_mb)
        if not wrong:
            s.fail(guest, host, f"negative control after {step}: host node "
                               f"{other} checked for node {node}'s change",
                   'a failure', 'none: the counters cannot tell the nodes '
                                'apart')
        else:
            s.say(f"negative control after {step}: checked against host "
                  f"node {other}, it fails: {wrong[0].element}: expected "
                  f"{wrong[0].expected}, got {wrong[0].actual}")
        previous = step
    s.say(f"virtio-mem per host node: {time.monotonic() - started:.0f} s "
          f"from create (guest kernel to its init {first[1]:.1f} s, all of "
          f"it {boot_s:.1f} s)")


def _two_node_host(s):
    for host in s.hosts:
        nodes = [n for n, cpus in host.cells.items() if cpus & host.dedicated]
        if len(nodes) >= 2:
            return host.name
    raise ScenarioSkipped("needs a host with a dedicated pCPU on each of "
                          "two nodes")


def _manage(s, guest, host, argv):
    """Run ``numamig-manage ARGV --format json``: (its answer, seconds),
    or (None, seconds) with a failure recorded unless it exited 0 with
    JSON."""
    script = os.path.join(os.path.dirname(sys.executable), 'numamig-manage')
    command = [script, '--config-file', s.backend.cli_config(), *argv,
               '--format', 'json']
    started = time.monotonic()
    what = f"numamig-manage {' '.join(argv)}"
    try:
        done = subprocess.run(command, capture_output=True, text=True,
                              timeout=CLI_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        s.fail(guest, host, what, 'an answer',
               f"none within {CLI_TIMEOUT_S} s")
        return None, time.monotonic() - started
    took = time.monotonic() - started
    try:
        answer = json.loads(done.stdout)
    except ValueError:
        answer = None
    if done.returncode != 0 or not isinstance(answer, dict):
        s.fail(guest, host, what, 'exit 0 with its JSON answer',
               f"exit {done.returncode}: {done.stdout.strip()[-300:]}",
               done.stderr.strip()[-300:])
        return None, took
    return answer, took


def check_answer(guest, host, answer, cell, plugged_mb, command):
    """Failures unless a memory change's answer says it is done and the
    guest reached ``plugged_mb`` on guest cell ``cell``."""
    result = answer.get('result') or {}
    guests = result.get('guests') or []
    reached = [g for g in guests if g.get('reached')]
    current = (guests[0].get('current') or {}) if guests else {}
    actual = (answer.get('status'), len(guests), len(reached),
              current.get(str(cell)))
    expected = ('done', 1, 1, plugged_mb)
    if actual == expected:
        return []
    return [Failure(guest, host, f"numamig-manage {command} answer (status, "
                    f"guests, reached, current MiB of guest node {cell})",
                    str(expected), str(actual))]


def check_devices(guest, host, xml, plugged):
    """Failures unless libvirt's live XML has, for each guest node in
    ``plugged`` ({cell: MiB}), a virtio-mem device whose requested and
    current sizes are that."""
    found = devices(xml)
    failures = []
    for cell, mib in sorted(plugged.items()):
        actual = found.get(cell)
        if actual != (mib * KIB, mib * KIB):
            failures.append(Failure(
                guest, host, f"libvirt live <memory model='virtio-mem'> "
                             f"node {cell} (requested, current KiB)",
                str((mib * KIB, mib * KIB)), str(actual)))
    return failures


def devices(xml):
    """{guest cell: (requested KiB, current KiB)} of a domain's
    virtio-mem devices (libvirt writes sizes in KiB)."""
    found = {}
    for el in etree.fromstring(xml.encode()).iterfind(
            "devices/memory[@model='virtio-mem']"):
        node = el.findtext('target/node')
        if node is None:
            continue
        found[int(node)] = tuple(
            int(el.findtext(f'target/{tag}') or -1)
            for tag in ('requested', 'current'))
    return found


def bound_mappings(maps, numa_maps):
    """[(size KiB, bind node list, {node: pages})] of a process's
    mappings with a ``bind:`` policy: ``maps`` gives their extents,
    ``numa_maps`` their policy and pages per node (in base pages)."""
    sizes = {}
    for line in maps.splitlines():
        extent = line.split(' ', 1)[0]
        start, _, end = extent.partition('-')
        if end:
            sizes[int(start, 16)] = (int(end, 16) - int(start, 16)) // KIB
    found = []
    for line in numa_maps.splitlines():
        words = line.split()
        if len(words) < 2 or not words[1].startswith('bind:'):
            continue
        pages = {int(n): int(c) for n, c in _NODE_PAGES.findall(line)}
        found.append((sizes.get(int(words[0], 16), 0), words[1][5:], pages))
    return found


def device_pages(mappings, nodes, device_mb=DEVICE_MB):
    """{host node: pages QEMU holds on it in the device memory bound
    there}: the mappings of at least a device's size (a guest cell's
    boot memory is smaller) bound to that node alone."""
    held = {}
    for node in nodes:
        held[node] = sum(pages.get(node, 0) for size, bind, pages
                         in mappings
                         if bind == str(node) and size >= device_mb * KIB)
    return held


def check_device_pages(guest, host, held, plugged):
    """Failures unless QEMU holds exactly ``plugged`` ({host node: MiB})
    in each node's device memory."""
    expected = {node: mib * KIB // PAGE_KB for node, mib in plugged.items()}
    if held == expected:
        return []
    return [Failure(guest, host, "host kernel: QEMU's pages per host node "
                                 "in virtio-mem memory (numa_maps N<node>)",
                    str(expected), str(held))]


def check_free_moved(guest, host, before, after, node, other, delta_mb,
                     noise_mb=NOISE_MB):
    """Failures unless host node ``node``'s free memory (sysfs MemFree,
    kB, {node: kB} before and after) fell by ``delta_mb`` (rose when
    negative) within ``noise_mb``, and node ``other``'s moved less than
    ``noise_mb``."""
    failures = []
    for which, expected_mb in ((node, delta_mb), (other, 0)):
        used_mb = (before[which] - after[which]) / KIB
        if abs(used_mb - expected_mb) > noise_mb:
            failures.append(Failure(
                guest, host, f"host kernel: node{which} meminfo MemFree "
                             f"fall (MiB)",
                f"{expected_mb} +- {noise_mb}", f"{used_mb:.1f}"))
    return failures


def _host_view(s, host, guest, node, other):
    agent = s.backend.agent_of(host)
    pid = s.backend.deployment.qemu_pid(host,
                                        s.backend.guests(host)[guest.uuid])
    mappings = bound_mappings(agent.maps(pid), agent.numa_maps(pid))
    free = {int(n): fields['MemFree']
            for n, fields in agent.node_meminfo().items()}
    return {'device': device_pages(mappings, (node, other)), 'free': free}


def _brief(memtotal, view, node, other):
    return (f"guest MemTotal kB per guest node {memtotal}; host: QEMU's "
            f"device pages per node {view['device']}, MemFree kB node{node} "
            f"{view['free'][node]}, node{other} {view['free'][other]}")


def console_lines(text):
    """[{guest node: MemTotal kB}] of each complete VMEM line (the
    last one may still be being written)."""
    complete = text[:text.rfind('\n') + 1]
    return [{int(n): int(kb) for n, kb in
             (pair.split('=') for pair in match.split())}
            for match in _CONSOLE.findall(complete)]


def _read(console):
    try:
        with open(console, errors='replace') as f:
            return f.read()
    except OSError:
        return ''


def _last(console):
    lines = console_lines(_read(console))
    return lines[-1] if lines else None


def _tail(console):
    return _read(console)[-300:] or '(empty)'


def _wait_console(console, timeout, done):
    """(lines, seconds) once ``done(lines)`` holds for the console's
    VMEM lines, or None after ``timeout`` s. The guest prints a line a
    second: this waits on it, read again each half second."""
    started = time.monotonic()
    while True:
        lines = console_lines(_read(console))
        if done(lines):
            return lines, time.monotonic() - started
        if time.monotonic() - started > timeout:
            return None
        time.sleep(0.5)


def _settled(console, count=3):
    """The guest's MemTotal per node once ``count`` lines in a row
    agree (it onlines what it plugged between lines), or None."""
    seen = _wait_console(console, CONSOLE_S, lambda lines: len(lines) >= count
                         and all(x == lines[-1] for x in lines[-count:]))
    return seen[0][-1] if seen else None
