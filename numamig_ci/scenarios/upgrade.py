"""Rolling-upgrade scenarios: an old-release source into a guarded host.

During a rolling upgrade the source of a migration may still run the
release before NUMA-aware live migration: it copies its domain XML
verbatim (pins, numatune and page nodesets of ITS host). The
destination's migration guard (numamig.virt.libvirt.guard, a libvirt
``qemu`` hook) rewrites that XML to the destination's claim, or refuses
the migration when the two cannot be reconciled. Here both run for
real: the source's agent restarted as release 1, the destination's
libvirtd running numamig's own hook, and what the guest got read back
from libvirt (live and inactive XML) and from the kernel (vCPU thread
affinity, ``numa_maps``, per-node huge page counters).
"""

import re

from numamig.db import instances as db_instances
from numamig.virt.libvirt import guard_claims
from numamig_ci import domain
from numamig_ci.scenarios import kernel_view
from numamig_ci.scenarios import memory
from numamig_ci.scenarios.registry import scenario
from numamig_ci.session import DEDICATED

OLD_RELEASE = 1
# The mover's huge pages: few enough to fit beside the refused guest's
# on the destination's other node, enough to tell in numa_maps.
PAGES = 8
REFUSED_PAGES = 4
# What the guard's log must say it changed in an XML bound to the
# source's node 0: the guest cell's and the whole guest's memory (its
# huge pages) from node 0 to node 1, the vCPU's and the emulator's pins.
REWRITTEN = (r'memnode 0: [^;]*nodeset=0 -> [^;]*nodeset=1\b',
             r'memory: [^;]*nodeset=0 -> [^;]*nodeset=1\b',
             r'vcpupin 0: cpuset=\S+ -> cpuset=',
             r'emulatorpin: cpuset=\S+ -> cpuset=')


@scenario('guard-old-source',
          "An old-release source sends its XML verbatim, bound to its "
          "node 0; the destination's migration guard runs the guest on "
          "its claimed node 1 (vCPU pins, numatune, memnode, huge pages "
          "rewritten; libvirt and the kernel agree), and refuses a guest "
          "its claim cannot fit: that guest stays on the source and "
          "nothing stays claimed.",
          requires=('huge_pages', 'multi_node', 'kernel_view',
                    'old_release'))
def guard_old_source(s):
    dst, _settings = s.backend.guarded_host()
    (src,) = [h for h in s.backend.hosts if h != dst][:1]
    size = memory.smallest_huge_size(s, dst)
    size, count = memory.huge_pool(s, dst, size_kb=size)
    s.require(size and count, f"host {dst} node 0 has no huge pages")
    # The destination's node 0 pages are taken: its claim is on node 1.
    s.create(dst, 1, memory_mb=count * size // 1024,
             specs=memory.pages_specs(size), label='fills-node')
    mover = s.create(src, 1, memory_mb=PAGES * size // 1024,
                     specs=memory.pages_specs(size), label='old-source')
    s.require(mover.numa_topology.cells[0].host_cell == 0,
              f"host {src} placed the guest on node "
              f"{mover.numa_topology.cells[0].host_cell}, not node 0")
    refused = s.create(src, 1, memory_mb=REFUSED_PAGES * size // 1024,
                       specs=dict(DEDICATED, **{'hw:numa_nodes': '1'}),
                       label='refused')
    with s.backend.as_release(src, OLD_RELEASE):
        moved = _migrate_through_guard(s, mover, src, dst, size)
        _refused_by_guard(s, refused, src, dst, size)
    if moved:
        _check_rewritten(s, mover, src, dst, size)


def _migrate_through_guard(s, mover, src, dst, size):
    kernel = kernel_view.counters(s)
    verbatim = s.backend.domain_xml(src, mover.uuid)
    s.say(f"{src} runs as release {OLD_RELEASE}: it sends {mover.name}'s "
          f"XML verbatim ({_placement(domain.parse(verbatim))})")
    migration = s.migrate(mover, dst)
    if not s.expect_status(migration, mover, 'completed'):
        return False
    # Given back on the source's node 0, taken on the destination's 1.
    after = kernel_view.check_counters(
        s, mover, dst, kernel_view.expected_after(
            kernel, size, PAGES, kernel_view.where(s, src, 0),
            kernel_view.where(s, dst, 1)), 'after the move')
    s.say(f"kernel view: free {size} KiB pages per (kernel, node) before "
          f"the move {kernel_view.pool(kernel, size)}, after "
          f"{kernel_view.pool(after, size)}")
    # As release 1 did, the old source leaves the guest's pins and pages
    # to its next usage recompute; what follows compares against its
    # reports, so they must first hold no usage the guest left behind.
    s.wait_usage_recorded(src, f"release {OLD_RELEASE} source dropped "
                               f"{mover.name}'s usage at a recompute")
    return True


def _check_rewritten(s, mover, src, dst, size):
    """The guest runs on the destination's node 1 as its claim said."""
    record = s.check_placed(mover, dst)
    cell = record.numa_topology.cells[0]
    if (cell.host_cell, cell.pagesize) != (1, size):
        s.fail(mover, dst, 'record placement', f"node 1, {size} KiB pages",
               f"node {cell.host_cell}, {cell.pagesize} KiB pages")
    node1 = s.host(dst).cells[1]
    for persistent in (False, True):
        xml = domain.parse(s.backend.domain_xml(dst, mover.uuid,
                                                persistent))
        which = 'inactive' if persistent else 'live'
        pinned = xml.pinned_pcpus
        if not pinned or not pinned <= node1:
            s.fail(mover, dst, f"{which} <vcpupin>",
                   f"within node 1 ({domain.fmt(node1)})",
                   domain.fmt(pinned))
        if xml.memory_nodeset != frozenset({1}):
            s.fail(mover, dst, f"{which} <numatune><memory nodeset>", 1,
                   domain.fmt(xml.memory_nodeset))
        if xml.pagesizes.get(0) != size:
            s.fail(mover, dst, f"{which} <hugepages><page size>", size,
                   xml.pagesizes.get(0))
    # numa_maps: every huge page on node 1, bound there; memnode in the
    # live and the inactive XML.
    kernel_view.check_bound(s, mover, dst, 1, PAGES)
    kernel_view.check_emulator(s, mover, dst)
    line = _guard_line(s, dst, mover)
    if ': rewritten ' not in line:
        s.fail(mover, dst, 'migration guard log', 'rewritten to the claim',
               line or 'no line for the guest')
        return
    s.say(f"guard log: {line}")
    for pattern in REWRITTEN:
        if not re.search(pattern, line):
            s.fail(mover, dst, 'migration guard log', pattern, line)


def _refused_by_guard(s, guest, src, dst, size):
    """A guest whose record took huge pages while its XML has small ones
    (its record changed under it): the destination claims huge pages,
    its guard refuses the XML, and the guest stays where it was."""
    db = s.backend.database()
    specs = dict(guest.extra_specs)
    db_instances.update(db, guest.uuid, {'extra_specs': dict(
        specs, **{'hw:mem_page_size': str(size)})})
    try:
        before = s.snapshots.take(guest)
        kernel = kernel_view.counters(s)
        migration = s.migrate(guest, dst)
        s.expect_status(migration, guest, 'failed')
        if 'numamig migration guard: cannot be reconciled' not in \
                (migration.error or ''):
            s.fail(guest, dst, 'migration error', "the guard's refusal",
                   (migration.error or '').strip()[:300])
        kernel_view.check_counters(s, guest, dst, kernel,
                                   'as before the refused migration')
        claims = s.api.instance_get_claims_on_host(s.ctxt, dst)
        if any(c.uuid == guest.uuid for c in claims):
            s.fail(guest, dst, 'claims on the destination', 'none',
                   'a claim for the guest')
        settings = s.backend.guarded_host()[1]
        published = guard_claims.read(settings.claims_file,
                                      settings.max_age_s)[1]
        if guest.uuid in published:
            s.fail(guest, dst, "the guard's claims file", 'no claim',
                   f"claim of migration {published[guest.uuid].migration}")
        s.snapshots.compare(guest, before)
    finally:
        db_instances.update(db, guest.uuid, {'extra_specs': specs})
    line = _guard_line(s, dst, guest)
    s.say(f"guard log: {line}")
    if ': refused ' not in line:
        s.fail(guest, dst, 'migration guard log', 'refused', line or
               'no line for the guest')
    s.check_placed(guest, src)


def _guard_line(s, host, guest):
    """The guard's last log line about ``guest``."""
    lines = [line for line in s.backend.guard_log(host).splitlines()
             if re.search(rf'\b{guest.uuid}\b', line)]
    return lines[-1] if lines else ''


def _placement(xml):
    pins = ','.join(f"{v}->{domain.fmt(p)}" for v, p in
                    sorted(xml.pins.items()))
    return (f"vcpupin {pins}, memnodes "
            f"{ {c: domain.fmt(n) for c, n in xml.memnodes.items()} }")
