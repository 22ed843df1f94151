"""Host maintenance scenarios: a drain carried out by the conductor.

``numamig-manage host drain HOST`` plans a destination and placement for
every guest of the host at once, disables it and moves the guests, a
few at a time. Here the moves are real libvirtd migrations of pinned,
huge-page guests between two hosts of one kernel, so what the plan said
is held against what libvirt and the kernel show afterwards: each
guest's pins and memnode (live and inactive XML), its vCPU threads'
affinity, its huge pages in ``numa_maps`` on the planned node, and the
per-node page counters (every page the drained host's guests held is
given back on its node, taken on the planned one).
"""

import time

from numamig import objects
from numamig.db import drains
from numamig.db import primitives
from numamig_ci import domain
from numamig_ci.scenarios import kernel_view
from numamig_ci.scenarios import memory
from numamig_ci.scenarios.registry import scenario
from numamig_ci.session import DEDICATED

# (vCPUs, huge pages) of the guests the drained host runs.
GUESTS = ((1, 8), (2, 8), (1, 16))
# Huge pages of the destination's node 0 left free beside its resident:
# fewer than the guests need together, so the plan uses both nodes.
LEFT_ON_NODE0 = 16
PARALLEL = 2
# Each move is one real migration of a TCG guest in a TCG host.
MOVE_TIMEOUT_S = 180
# The guest on the node a defragmentation frees.
SMALL_PAGES = 4


@scenario('drain-huge-pages',
          "A host running three pinned huge-page guests is drained through "
          "the conductor with real migrations: every guest runs on its "
          "planned node of the destination (libvirt and the kernel "
          "agree), the drained host reports nothing used and every page "
          "its guests held is back in the kernel's counters.",
          requires=('huge_pages', 'multi_node', 'kernel_view'))
def drain_huge_pages(s):
    src, dst = s.pair()
    size = memory.smallest_huge_size(s, src)
    pages = memory.usable_pages(s, src, size) if size else {}
    s.require(sum(pages.values()) >= sum(p for _v, p in GUESTS),
              f"host {src} has too few huge pages for the guests: {pages}")
    _size, count = memory.huge_pool(s, dst, size_kb=size)
    if count > LEFT_ON_NODE0:
        s.create(dst, 1, memory_mb=(count - LEFT_ON_NODE0) * size // 1024,
                 specs=memory.pages_specs(size), label='resident')
    guests = [s.create(src, vcpus, memory_mb=count * size // 1024,
                       specs=memory.pages_specs(size), label=f'drained{i}')
              for i, (vcpus, count) in enumerate(GUESTS)]
    counts = {g.uuid: n for g, (_v, n) in zip(guests, GUESTS, strict=True)}
    before = kernel_view.counters(s)
    started = time.monotonic()
    try:
        data = s.api.host_drain_start(s.ctxt, src, PARALLEL, to=[dst])
        data = _wait(s, data, MOVE_TIMEOUT_S * len(guests))
    finally:
        s.api.host_set_disabled(s.ctxt, src, False)
    s.say(f"drain of {src}: {data['status']} in "
          f"{time.monotonic() - started:.0f} s, {data['report']}")
    if data['status'] != drains.COMPLETED:
        s.fail('(drain)', src, 'drain status', drains.COMPLETED,
               data['status'], str(data['report']))
        return
    planned = _planned(s, data['uuid'])
    expected = dict(before)
    for guest in guests:
        record = s.check_placed(guest, dst)
        topology = planned.get(guest.uuid)
        if topology is None:
            s.fail(guest, dst, 'drain plan', 'a planned placement', 'none')
            continue
        _check_as_planned(s, guest, record, dst, topology)
        node = topology.cells[0].host_cell
        kernel_view.check_bound(s, guest, dst, node, counts[guest.uuid])
        kernel_view.check_emulator(s, guest, dst)
        expected = kernel_view.expected_after(
            expected, size, counts[guest.uuid],
            kernel_view.where(s, src, guest.numa_topology.cells[0].host_cell),
            kernel_view.where(s, dst, node))
    after = kernel_view.check_counters(s, '(drained guests)', src, expected,
                                       "each guest's pages back on its "
                                       "source node, taken on its planned "
                                       "one")
    s.say(f"kernel view: free {size} KiB pages per (kernel, node) before "
          f"the drain {kernel_view.pool(before, size)}, after "
          f"{kernel_view.pool(after, size)}")
    _check_empty(s, src)
    _check_holds_no_pages(s, src, dst, set(s.host(src).cells), size, after,
                          '(drained host)')
    s.check_host(dst)


def _wait(s, data, timeout):
    """Follow the drain until it ends or ``timeout`` s pass."""
    deadline = time.monotonic() + timeout
    while data['status'] in drains.ACTIVE:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        data = s.api.host_drain_wait(s.ctxt, data, min(left, 30))
    return data


def _planned(s, drain_uuid):
    """{instance uuid: the placement the drain planned} (the last plan,
    when a move was planned again)."""
    found = {}
    for move in drains.get(s.backend.database(), drain_uuid)['moves']:
        found[move['instance_uuid']] = primitives.load(
            move['planned_topology'], objects.InstanceNUMATopology,
            'drain_moves', move['instance_uuid'], 'planned_topology')
    return found


def _check_as_planned(s, guest, record, dst, topology):
    """The guest's record, live XML and vCPU threads show the planned
    node and pins."""
    wanted = {c.id: (c.host_cell, dict(c.cpu_pinning))
              for c in topology.cells}
    got = {c.id: (c.host_cell, dict(c.cpu_pinning))
           for c in record.numa_topology.cells}
    if got != wanted:
        s.fail(guest, dst, 'record placement (cell: node, pins)',
               f"as planned {wanted}", got)
    xml = domain.parse(s.backend.domain_xml(dst, guest.uuid))
    planned_pins = {v: frozenset({p}) for c in topology.cells
                    for v, p in c.cpu_pinning.items()}
    if xml.pins != planned_pins:
        s.fail(guest, dst, 'live <vcpupin>', f"as planned {planned_pins}",
               xml.pins)
    affinity = s.backend.vcpu_affinity(dst, guest.uuid)
    if affinity != planned_pins:
        s.fail(guest, dst, 'QEMU vCPU threads Cpus_allowed_list',
               f"as planned {planned_pins}", affinity)


def _check_empty(s, host):
    """No guest left in the host's libvirtd."""
    s.backend.refresh()
    left = s.backend.guests(host)
    if left:
        s.fail('(drained host)', host, 'libvirt domains', 'none',
               sorted(left.values()))


@scenario('defragment-node',
          "A defragmentation through the conductor makes room for a guest "
          "taking a whole node's huge pages on a host whose two nodes "
          "both run a guest: the one guest that can move does, with a "
          "real migration, onto its planned node, and the kernel's "
          "counters show the freed node's every huge page free.",
          requires=('huge_pages', 'multi_node', 'kernel_view'))
def defragment_node(s):
    src, dst = s.pair()
    size = memory.smallest_huge_size(s, src)
    pages = memory.usable_pages(s, src, size) if size else {}
    s.require(sorted(pages) == [0, 1] and pages[0] > pages[1] > SMALL_PAGES,
              f"host {src} needs more {size} KiB pages on node 0 than on "
              f"node 1: {pages}")
    # Node 0 full (node 1 has too few pages for this one), then a small
    # guest on node 1: neither node has room for a whole node's guest.
    full = s.create(src, 1, memory_mb=pages[0] * size // 1024,
                    specs=memory.pages_specs(size), label='node0')
    small = s.create(src, 1, memory_mb=SMALL_PAGES * size // 1024,
                     specs=memory.pages_specs(size), label='node1')
    placed = {g.uuid: g.numa_topology.cells[0].host_cell
              for g in (full, small)}
    s.require(sorted(placed.values()) == [0, 1],
              f"host {src} placed its guests on nodes "
              f"{sorted(placed.values())}")
    node = placed[small.uuid]
    _leave_one_way(s, dst, node, size, pages[0])
    before = kernel_view.counters(s)
    # The guest room is made for: the freed node's pages.
    data = s.api.host_defragment_start(
        s.ctxt, 1, pages[node] * size // 1024, memory.pages_specs(size),
        PARALLEL, hosts=[src], max_moves=2)
    data = _wait(s, data, MOVE_TIMEOUT_S * 2)
    s.say(f"defragmentation of {src}: {data['status']}, {data['report']}")
    if data['status'] != drains.COMPLETED or not data['report']['room']:
        s.fail('(defragmentation)', src, 'status, room',
               f"{drains.COMPLETED}, room made",
               f"{data['status']}, {data['report']['room_reason']}")
        return
    planned = _planned(s, data['uuid'])
    if set(planned) != {small.uuid}:
        s.fail('(defragmentation)', src, 'guests moved',
               f"{small.name} only (the other fits nowhere else)",
               sorted(planned))
        return
    s.check_placed(full, src)
    record = s.check_placed(small, dst)
    topology = planned[small.uuid]
    _check_as_planned(s, small, record, dst, topology)
    kernel_view.check_bound(s, small, dst, topology.cells[0].host_cell,
                            SMALL_PAGES)
    after = kernel_view.check_counters(
        s, small, src, kernel_view.expected_after(
            before, size, SMALL_PAGES, kernel_view.where(s, src, node),
            kernel_view.where(s, dst, topology.cells[0].host_cell)),
        "the moved guest's pages back on its source node")
    _check_holds_no_pages(s, src, dst, {node}, size, after,
                          '(defragmentation)')
    # Neither host holds a huge page of the node now: every pool of it
    # is whole in the kernel's counters.
    kernel, _node = kernel_view.where(s, src, node)
    for (k, n, pool_size), (free, total) in sorted(
            s.backend.kernel_pages().items()):
        if (k, n) == (kernel, node) and free != total:
            s.fail('(defragmentation)', src, f"kernel node{node} "
                                             f"hugepages-{pool_size}kB "
                                             f"free_hugepages",
                   f"{total} (the whole pool)", free)
    s.check_host(src)
    s.check_host(dst)


def _leave_one_way(s, dst, node, size, too_many):
    """Leave ``dst`` room for one of the guests only: no dedicated CPU on
    ``node`` (a guest of small pages takes them all, so that no huge page
    of ``node`` is held on ``dst``), and on its other node fewer free
    pages than ``too_many`` but enough for a small guest."""
    host = s.host(dst)
    cpus = len(host.cells[node] & host.dedicated)
    blocker = s.create(dst, cpus, specs=dict(DEDICATED, **{
        'hw:numa_nodes': '1'}), label='takes-cpus')
    s.require(blocker.numa_topology.cells[0].host_cell == node,
              f"host {dst} placed the guest taking node {node}'s CPUs on "
              f"node {blocker.numa_topology.cells[0].host_cell}")
    (other,) = [n for n in host.cells if n != node][:1]
    free = memory.usable_pages(s, dst, size).get(other, 0)
    taken = max(SMALL_PAGES, free - too_many + 1)
    s.require(free - taken >= SMALL_PAGES,
              f"host {dst} node {other} has {free} {size} KiB pages: not "
              f"enough for the small guest beside {taken} taken")
    resident = s.create(dst, 1, memory_mb=taken * size // 1024,
                        specs=memory.pages_specs(size), label='takes-pages')
    s.require(resident.numa_topology.cells[0].host_cell == other,
              f"host {dst} placed the guest taking pages on node "
              f"{resident.numa_topology.cells[0].host_cell}")


def _check_holds_no_pages(s, src, dst, nodes, size, counts, what):
    """Host ``src`` holds no page of ``nodes`` any more: the kernel's
    free pages there are the pool less what ``dst``'s guests hold (their
    QEMUs' ``numa_maps``), and its report shows nothing used."""
    s.backend.refresh()
    for cell in s.topology(src).cells:
        if cell.id in nodes and (cell.pinned_cpus or any(
                p.used for p in cell.mempages)):
            s.fail(what, src, f"reported usage of node {cell.id}",
                   'nothing', f"pinned "
                   f"{domain.fmt(frozenset(cell.pinned_cpus))}, pages used "
                   f"{ {p.size_kb: p.used for p in cell.mempages} }")
    held = {}
    for uuid in s.backend.guests(dst):
        guest = s.api.instance_get(s.ctxt, uuid)
        for node, count in kernel_view.hugepage_nodes(s, dst,
                                                      guest)[0].items():
            held[node] = held.get(node, 0) + count
    pools = s.backend.kernel_pages()
    for node in sorted(nodes):
        key = kernel_view.where(s, src, node) + (size,)
        total = pools[key][1]
        s.say(f"kernel view: node {node} has {counts.get(key)} of {total} "
              f"{size} KiB pages free; {dst}'s guests hold "
              f"{held.get(node, 0)} there, {src}'s none")
        if counts.get(key) != total - held.get(node, 0):
            s.fail(what, src, f"kernel node{node} hugepages-{size}kB "
                              f"free_hugepages",
                   f"{total - held.get(node, 0)} (the pool less {dst}'s "
                   f"guests' pages)", counts.get(key))
