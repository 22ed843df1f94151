"""The kernel's own view of a guest's memory, on nested hosts.

Backends with the 'kernel_view' feature (--nested) let a scenario read,
from inside the machine that runs the libvirtd hosts, the per-node huge
page counters (``/sys/devices/system/node/node*/hugepages/*``) and a
QEMU process's ``numa_maps`` and ``numastat -p``. These checks do not
trust libvirt or numamig: pages the guest really holds show in the
kernel's counters and maps, wherever the XML says they are.

The libvirtd hosts of one nested machine share its kernel, so a move
from host A's node X to host B's node Y gives back X's pages and takes
Y's: ``expected_after`` computes that from the counters before.
"""

import re

from numamig import cpuspec
from numamig_ci import domain

FEATURE = 'kernel_view'
# The name (comm, 15 characters) of QEMU's main thread, which runs the
# emulator's work and follows <emulatorpin>.
MAIN_THREAD = 'qemu-system-x86'
_NODE_PAGES = re.compile(r'\bN(\d+)=(\d+)')


def available(s):
    return FEATURE in s.backend.features


def counters(s):
    """{(kernel, node, page size KiB): free pages} every kernel counts
    now (hosts of one machine share its kernel)."""
    return {key: free for key, (free, _total)
            in s.backend.kernel_pages().items()}


def pool(counts, size_kb):
    """{(kernel, node): free pages} of the ``size_kb`` pools in
    ``counts`` (as ``counters`` returns them): what a log line shows."""
    return {(kernel, node): free for (kernel, node, size), free
            in sorted(counts.items()) if size == size_kb}


def where(s, host, node):
    """(kernel, node): host ``host``'s node ``node`` in the counters."""
    return s.backend.kernel_of(host), node


def expected_after(before, size_kb, pages, freed, taken):
    """The counters after ``pages`` pages of ``size_kb`` were given back
    on ``freed`` ((kernel, node) or None) and taken on ``taken``."""
    after = dict(before)
    if freed is not None:
        after[freed + (size_kb,)] += pages
    if taken is not None:
        after[taken + (size_kb,)] -= pages
    return after


def check_counters(s, guest, host, expected, what):
    """Fail for every pool whose free count is not ``expected``."""
    actual = counters(s)
    for key, free in sorted(expected.items()):
        if actual.get(key) != free:
            kernel, node, size = key
            s.fail(guest, host, f"kernel {kernel} node{node} hugepages-"
                                f"{size}kB free_hugepages",
                   f"{free} ({what})", actual.get(key))
    return actual


def hugepage_nodes(s, host, guest):
    """{node: pages of any huge size} the guest's QEMU maps, and the
    ``bind:`` node lists of those mappings, from its ``numa_maps``."""
    name = s.backend.guests(host)[guest.uuid]
    pid = s.backend.deployment.qemu_pid(host, name)
    maps = s.backend.agent_of(host).numa_maps(pid)
    nodes, binds = {}, set()
    for line in maps.splitlines():
        if 'kernelpagesize_kB=4 ' in line + ' ' or 'huge' not in line:
            continue
        for node, count in _NODE_PAGES.findall(line):
            nodes[int(node)] = nodes.get(int(node), 0) + int(count)
        bind = re.search(r'\bbind:([\d,-]+)', line)
        if bind:
            binds.add(bind.group(1))
    return nodes, binds, pid


def check_bound(s, guest, host, node, pages):
    """The guest's huge pages are all on ``node``, bound there
    (QEMU's memory backend policy, seen in ``numa_maps``)."""
    nodes, binds, pid = hugepage_nodes(s, host, guest)
    s.say(f"kernel view of {guest.name} on {host}: huge pages per node "
          f"{nodes}, bind {sorted(binds) or 'none'}; numastat -p:\n"
          f"{s.backend.agent_of(host).numastat(pid).strip()}")
    if nodes != {node: pages}:
        s.fail(guest, host, 'QEMU numa_maps huge pages per node',
               {node: pages}, nodes)
    if binds != {str(node)}:
        s.fail(guest, host, 'QEMU numa_maps bind policy', f"bind:{node}",
               sorted(binds) or 'none')
    name = s.backend.guests(host)[guest.uuid]
    for inactive in (False, True):
        xml = domain.parse(
            s.backend.agent_of(host).dumpxml(host, name, inactive))
        if xml.memnodes.get(0) != frozenset({node}):
            s.fail(guest, host, f"virsh dumpxml{' --inactive' * inactive} "
                                f"<memnode cellid='0'>", node,
                   domain.fmt(xml.memnodes.get(0)))


def check_binds(s, guest, host, nodes):
    """QEMU's guest memory is bound per guest cell (``bind:N`` in
    ``numa_maps``) to exactly the host nodes ``nodes`` (the records'
    guest cells); the rest of the process (bound to the guest's whole
    ``<numatune><memory>`` nodeset) stays within them."""
    pid = s.backend.deployment.qemu_pid(host,
                                        s.backend.guests(host)[guest.uuid])
    binds = {frozenset(cpuspec.parse_cpu_spec(b)) for b in re.findall(
        r'\bbind:([\d,-]+)', s.backend.agent_of(host).numa_maps(pid))}
    expected = frozenset(nodes)
    cells = {b for b in binds if len(b) == 1}
    s.say(f"kernel view of {guest.name} on {host}: memory bound to nodes "
          f"{sorted(domain.fmt(b) for b in binds) or 'none'}")
    if cells != {frozenset({n}) for n in expected}:
        s.fail(guest, host, 'QEMU numa_maps per-node bind policies',
               sorted(expected), sorted(domain.fmt(b) for b in cells))
    wider = [b for b in binds if not b <= expected]
    if wider:
        s.fail(guest, host, 'QEMU numa_maps bind policies',
               f"within nodes {domain.fmt(expected)}",
               sorted(domain.fmt(b) for b in wider))


def check_emulator(s, guest, host):
    """QEMU's emulator threads (named after QEMU itself) may run exactly
    on <emulatorpin>."""
    if guest.uuid not in s.backend.guests(host):
        return        # the placement checks reported that already
    xml = domain.parse(s.backend.domain_xml(host, guest.uuid))
    pid = s.backend.deployment.qemu_pid(host,
                                        s.backend.guests(host)[guest.uuid])
    threads = s.backend.agent_of(host).thread_affinity(pid)
    main = threads.get(MAIN_THREAD, [])
    s.say(f"kernel view of {guest.name} on {host}: emulator thread "
          f"Cpus_allowed_list {main}, <emulatorpin> "
          f"{domain.fmt(xml.emulator_pins)}")
    expected = domain.fmt(xml.emulator_pins)
    # QEMU names more than one thread after itself: each must be there.
    if {domain.fmt(frozenset(cpuspec.parse_cpu_spec(c))) for c in main} \
            != {expected}:
        s.fail(guest, host, 'QEMU emulator thread Cpus_allowed_list',
               f"<emulatorpin> {expected}", main or 'no such thread')
