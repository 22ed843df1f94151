"""The locality watch brings a floating guest's memory to its vCPUs, and
leaves a guest that keeps moving alone, read from the kernel.

A guest with no NUMA characteristics (no pins, no numatune: the kernel
places it) is created on a host of at least two nodes and runs a kernel
that keeps its vCPU busy; its QEMU's memory lands mostly on one node.
Behind libvirt's back, inside the machine, its vCPU threads are then
moved to the other node (sched_setaffinity: the
domain XML pins nothing): every memory access of the guest is now
remote. The compute agents then run on the hosts' own kernel with
``[locality] policy = act`` (a look every few seconds, two looks above
the threshold before a move, two moves per guest within the window). The
watch must move the memory to the vCPUs' node -- the QEMU's
``numa_maps`` before and after, read from the machine's kernel -- and
record it in the live domain XML's metadata and its log. Then the vCPUs
keep moving: sent back to the first node, the watch follows them once
more; sent away again, its budget of two moves is spent and it leaves
the guest alone: the memory stays where it was for several looks and the
agent's log says why.

The kernel's automatic NUMA balancing, which would move the pages
toward the vCPUs by itself, is off meanwhile.

On the nested tier libvirtd runs without the cgroup cpuset controller,
so libvirt refuses a live nodeset: the agent moves the pages with the
kernel's migrate_pages(2) (numamig.virt.libvirt.locality) and pins the
vCPUs through libvirt as everywhere.
"""

import re
import time

from numamig.numa import locality
from numamig_ci import domain
from numamig_ci.results import ScenarioSkipped
from numamig_ci.scenarios.registry import scenario

INTERVAL_S = 5
AGENT_CONFIG = (f'[locality]\npolicy = act\ninterval = {INTERVAL_S}\n'
                f'intervals_above = 2\nmoves_per_guest = 2\n'
                f'flap_window = 100\n')
# A guest's memory is on a node when most of it is there (its remote
# share is then at or below the watch's threshold, 0.5).
ON_NODE = 0.5
# What displacing it must reach before the watch starts.
DISPLACED = 0.7
DISPLACE_TRIES = 3
# How long the watch has to move a guest (two looks, then the move, on a
# TCG machine whose agent takes a few seconds per look).
MOVED_WITHIN_S = 120
# Looks the guest must stay displaced once the watch has given up.
LEFT_ALONE_LOOKS = 4
READ_PAUSE_S = 2.0
# How long its kernel may take to touch its memory once.
SETTLED_WITHIN_S = 90
# How long the watch's record may follow the move it records.
OWN_WITHIN_S = 20


@scenario('locality-watch',
          "A floating guest (no pins, no numatune) whose vCPU threads were "
          "moved to the node its memory is not on is followed there by the "
          "compute agent's locality watch (policy act): its QEMU's memory "
          "per node, read from numa_maps in the host's kernel before and "
          "after; its vCPUs sent back, the watch follows once more; sent "
          "away again, the guest is left alone (moves_per_guest 2): the "
          "memory stays and the agent's log says why.",
          requires=('multi_node', 'kernel_view', 'agents_on_hosts'))
def locality_watch(s):
    host = _two_node_host(s)
    kernel = s.backend.agent_of(host)
    # The kernel's automatic NUMA balancing would move the pages itself
    # (seen: within 94 s, before the watch had looked twice).
    was = kernel.numa_balancing(0)
    try:
        _follow_and_give_up(s, host, kernel)
    finally:
        kernel.numa_balancing(was)


def _follow_and_give_up(s, host, kernel):
    cells = s.host(host).cells
    guest = s.create(host, 1, specs={}, label='floating')
    name = s.backend.guests(host)[guest.uuid]
    # Restarted with the dirtying kernel (numamig_ci.slow_copy, as the
    # held migrations are): its vCPU never idles. An idle guest's vCPU
    # thread sleeps where it last ran, and the ``processor`` libvirt
    # reports stays there whatever its affinity (seen: the watch then
    # rightly found the memory local).
    with s.backend.hold_migration(host, guest):
        pass
    xml = domain.parse(kernel.dumpxml(host, name))
    if xml.pins or xml.memnodes:
        s.fail(guest, host, 'a floating guest', 'no pins, no memnode',
               f"pins {xml.pins}, memnodes {xml.memnodes}")
        return
    pid = s.backend.deployment.qemu_pid(host, name)
    # Its kernel touches its memory once, then rewrites the same pages:
    # displaced before that, new pages would land by the vCPUs anyway.
    start = _settled(kernel, pid)
    # The vCPUs go to the node holding less of its memory, the rest of
    # its memory to the other one (a busy guest's pages may fail to move
    # at first: a few tries).
    vcpus = min((0, 1), key=lambda n: (start.get(n, 0), n))
    there = 1 - vcpus
    threads = kernel.set_vcpu_threads_affinity(pid, sorted(cells[vcpus]))
    for _try in range(DISPLACE_TRIES):
        kernel.migrate_pages(pid, str(vcpus), str(there))
        before = _memory(kernel, pid)
        if _share(before, there) >= DISPLACED:
            break
    s.say(f"kernel view before: {guest.name}'s memory per node {before} "
          f"(KiB, numa_maps; {start} once its kernel had touched it); "
          f"its vCPU threads {threads} sent to node {vcpus} (CPUs "
          f"{domain.fmt(cells[vcpus])})")
    if _share(before, there) < DISPLACED:
        raise ScenarioSkipped(f"{guest.name}'s memory could not be moved "
                              f"off node {vcpus} ({before})")
    log = _AgentLog(s, host, guest)
    with s.backend.agents_on_hosts(AGENT_CONFIG) as took:
        s.say(f"compute agents started on their hosts' kernel in "
              f"{took:.1f} s")
        # The memory follows the vCPUs, twice: the watch's budget.
        for number, label in ((1, 'kernel view after'),
                              (2, 'vCPUs sent back: kernel view after')):
            memory, waited = _wait_moved(kernel, pid, vcpus, log, number)
            s.say(f"{label} the watch's move {number}: memory per node "
                  f"{memory} (KiB) {waited:.0f} s after; live metadata "
                  f"{_own(kernel, host, name)}")
            if log.moves() < number or _share(memory, vcpus) <= ON_NODE:
                s.fail(guest, host, f"move {number} of the watch",
                       f"> {ON_NODE:.0%} of the memory on node {vcpus}, "
                       f"{number} moves in its log",
                       f"{memory}, {log.moves()} moves")
                return
            vcpus, there = there, vcpus
            kernel.set_vcpu_threads_affinity(pid, sorted(cells[vcpus]))
        # Sent away a third time: its budget is spent.
        stayed = _stays_on(kernel, pid, there,
                           LEFT_ALONE_LOOKS * INTERVAL_S)
        alone = log.left_alone()
        s.say(f"vCPUs sent to node {vcpus} a third time: memory per node "
              f"over {LEFT_ALONE_LOOKS} looks {stayed}; the agent moved it "
              f"{log.moves()} times; "
              + (alone or 'no line leaving it alone'))
        if not all(_share(m, there) > ON_NODE for m in stayed):
            s.fail(guest, host, 'QEMU numa_maps once its budget is spent',
                   f"stays on node {there}", stayed)
        if log.moves() != 2 or alone is None:
            s.fail(guest, host, "the agent's log", 'two moves, then left '
                   'alone', f"{log.moves()} moves, "
                   f"{'left alone' if alone else 'not left alone'}")


class _AgentLog:
    """What the host's compute agent logged about the guest."""

    def __init__(self, s, host, guest):
        self.deployment = s.backend.deployment
        self.host = host
        self.uuid = guest.uuid

    def _text(self):
        return self.deployment.log_tail(self.host, None)

    def moves(self):
        return len(re.findall(rf'locality watch moved guest {self.uuid}',
                              self._text()))

    def left_alone(self):
        found = re.search(rf'locality watch leaves guest {self.uuid} '
                          rf'alone: [^\n]*', self._text())
        return found.group(0) if found else None


def _settled(kernel, pid):
    """The QEMU's memory per node once two reads READ_PAUSE_S apart
    differ by at most a MiB (at most SETTLED_WITHIN_S)."""
    deadline = time.monotonic() + SETTLED_WITHIN_S
    last = _memory(kernel, pid)
    while time.monotonic() < deadline:
        time.sleep(READ_PAUSE_S)
        now = _memory(kernel, pid)
        if abs(sum(now.values()) - sum(last.values())) <= 1024:
            return now
        last = now
    return last


def _wait_moved(kernel, pid, node, log, number):
    """(memory per node, seconds) once the watch logged ``number`` moves
    and most of the memory is on ``node``, or at the deadline."""
    start = time.monotonic()
    while True:
        memory = _memory(kernel, pid)
        waited = time.monotonic() - start
        if (log.moves() >= number and _share(memory, node) > ON_NODE) \
                or waited >= MOVED_WITHIN_S:
            return memory, waited
        time.sleep(READ_PAUSE_S)


def _two_node_host(s):
    for name, cfg in s.backend.hosts.items():
        if {0, 1} <= set(cfg.cells):
            return name
    raise ScenarioSkipped("needs a host with nodes 0 and 1")


def _memory(kernel, pid):
    return locality.memory_by_node(kernel.numa_maps(pid))


def _share(memory, node):
    total = sum(memory.values())
    return memory.get(node, 0) / total if total else 0.0


def _own(kernel, host, name):
    """The watch's record in the live XML's metadata (written just after
    the memory moved: a few reads)."""
    deadline = time.monotonic() + OWN_WITHIN_S
    while True:
        found = re.search(r'<\S*move [^>]*/>', kernel.dumpxml(host, name))
        if found or time.monotonic() >= deadline:
            return found.group(0) if found else 'none'
        time.sleep(READ_PAUSE_S)


def _stays_on(kernel, pid, node, for_s):
    """The QEMU's memory per node, read every READ_PAUSE_S for
    ``for_s`` seconds (stopping early once most left ``node``)."""
    seen = []
    deadline = time.monotonic() + for_s
    while time.monotonic() < deadline:
        memory = _memory(kernel, pid)
        seen.append(memory)
        if _share(memory, node) < ON_NODE:
            break
        time.sleep(READ_PAUSE_S)
    return seen
