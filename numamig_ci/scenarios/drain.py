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

# (vCPUs, huge pages) of the guests the drained host runs.
GUESTS = ((1, 8), (1, 8), (2, 8), (1, 16))
# Huge pages of the destination's node 0 left free beside its resident:
# fewer than the guests need together, so the plan uses both nodes.
LEFT_ON_NODE0 = 16
PARALLEL = 2
# Each move is one real migration of a TCG guest in a TCG host.
MOVE_TIMEOUT_S = 180


@scenario('drain-huge-pages',
          "A host running four pinned huge-page guests is drained through "
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
    """No guest left in the host's libvirtd, nothing in its report."""
    s.backend.refresh()
    left = s.backend.guests(host)
    if left:
        s.fail('(drained host)', host, 'libvirt domains', 'none',
               sorted(left.values()))
    for cell in s.topology(host).cells:
        used = {p.size_kb: p.used for p in cell.mempages if p.used}
        if cell.pinned_cpus or used:
            s.fail('(drained host)', host, f"reported usage of node "
                                           f"{cell.id}", 'nothing',
                   f"pinned {domain.fmt(frozenset(cell.pinned_cpus))}, "
                   f"pages used {used}")
