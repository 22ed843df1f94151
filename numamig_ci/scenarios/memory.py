"""Memory and node scenarios: huge pages kept and moved, page-size
mismatch refused, fewer destination nodes, multi-node guests."""

from numamig.objects import fields
from numamig_ci.scenarios import distances
from numamig_ci.scenarios import kernel_view
from numamig_ci.scenarios.registry import scenario
from numamig_ci.session import DEDICATED

GIB_KB = 1024 * 1024
# Statuses a migration reaches only once the source starts copying.
COPYING = fields.MigrationStatus.STARTED


def huge_pool(s, host, node=0, size_kb=None):
    """(size_kb, total) of node ``node``'s largest huge page pool (of
    ``size_kb`` pages if given)."""
    for cell in s.topology(host).cells:
        if cell.id == node:
            pools = [(p.size_kb, p.total - p.reserved)
                     for p in cell.mempages if p.size_kb > 4 and p.total
                     and size_kb in (None, p.size_kb)]
            return max(pools) if pools else (None, 0)
    return None, 0


def pages_specs(size_kb):
    return dict(DEDICATED, **{'hw:mem_page_size': str(size_kb),
                              'hw:numa_nodes': '1'})


def smallest_huge_size(s, host, node=0):
    """The smallest huge page size node ``node`` of ``host`` has pages
    of, or None: the size most hosts have, and the one the 1 GiB variant
    (``huge-pages-1g``) does not already prove."""
    for cell in s.topology(host).cells:
        if cell.id == node:
            sizes = [p.size_kb for p in cell.mempages
                     if p.size_kb > 4 and p.total - p.reserved]
            return min(sizes) if sizes else None
    return None


def usable_pages(s, host, size_kb):
    """{node: pages of ``size_kb`` numamig may give guests} of ``host``
    (nodes without any left out)."""
    usable = {}
    for cell in s.topology(host).cells:
        count = sum(p.total - p.reserved for p in cell.mempages
                    if p.size_kb == size_kb)
        if count:
            usable[cell.id] = count
    return usable


def past_full_node_pair(pages, order):
    """(source, destination) for the huge-page problem, or None.

    ``pages`` is {host: {node: usable pages}} of one page size, ``order``
    the hosts in the backend's order. The destination needs pages on
    node 0 (a guest takes them all) and on another node (where the mover
    must land); the source, any page for the mover. Preferred, in this
    order: a destination whose node 0 has more pages than any other node
    (the guest filling it can go nowhere else), a source with pages on
    node 0 only (hosts sharing one kernel: the mover's page then comes
    back on node 0 while another node loses one, which the kernel's
    counters show; a move from one host's node 1 to the other's node 1
    would show as no change at all).
    """
    fitting = []
    for src in order:
        if not pages.get(src):
            continue
        for dst in order:
            on_dst = pages.get(dst, {})
            others = [count for node, count in on_dst.items() if node]
            if dst != src and on_dst.get(0) and others:
                fitting.append(((on_dst[0] <= max(others),
                                 set(pages[src]) != {0}), src, dst))
    if not fitting:
        return None
    _rank, src, dst = min(fitting, key=lambda item: item[0])
    return src, dst


@scenario('huge-pages',
          "A huge-page guest keeps its page size and lands on the "
          "destination node that still has free pages of that size.",
          requires=('huge_pages', 'multi_node'))
def huge_pages(s):
    src, dst = s.pair()
    size, count = huge_pool(s, dst, size_kb=smallest_huge_size(s, dst))
    s.require(size and count >= 2, f"host {dst} node 0 has no huge pages")
    move_past_full_node(s, src, dst, size, count)


@scenario('huge-pages-1g',
          "The huge-page problem with 1 GiB pages: a guest keeps them and "
          "lands on the destination node that still has one free, another "
          "guest having taken a node's.",
          requires=('huge_pages', 'multi_node'))
def huge_pages_1g(s):
    pages = {host: usable_pages(s, host, GIB_KB) for host in s.backend.hosts}
    pair = past_full_node_pair(pages, list(s.backend.hosts))
    s.require(pair is not None,
              f"needs a destination with 1 GiB pages on node 0 and on "
              f"another node and a source with one; 1 GiB pages per node "
              f"here: {describe_pages(pages)}")
    src, dst = pair
    move_past_full_node(s, src, dst, GIB_KB, pages[dst][0])


def describe_pages(pages):
    return '; '.join(f"{host} {nodes or 'none'}"
                     for host, nodes in pages.items())


def move_past_full_node(s, src, dst, size, count):
    """The spec's huge-page problem with pages of ``size`` KiB: a guest
    takes the ``count`` pages of ``dst``'s node 0, then a one-page guest
    from ``src`` must land on another node of ``dst``, its page given
    back on the source's node and taken on the new one (the kernel's own
    counters, where the backend can read them)."""
    resident = s.create(dst, 1, memory_mb=count * size // 1024,
                        specs=pages_specs(size), label='fills-node')
    full = resident.numa_topology.cells[0].host_cell
    mover = s.create(src, 1, memory_mb=size // 1024,
                     specs=pages_specs(size), label='pages')
    kernel = kernel_view.counters(s) if kernel_view.available(s) else None
    migration = s.migrate(mover, dst)
    if not s.expect_status(migration, mover, 'completed'):
        return
    record = s.check_placed(mover, dst)
    cell = record.numa_topology.cells[0]
    if cell.pagesize != size:
        s.fail(mover, dst, 'record pagesize', f"{size} KiB (kept)",
               f"{cell.pagesize} KiB")
    if cell.host_cell == full:
        s.fail(mover, dst, "<memnode cellid='0'> nodeset",
               f"a node other than {full} (its pages are taken)",
               cell.host_cell)
    if kernel is not None:
        # The pages really moved: given back on the source's node, taken
        # on the destination's; the full node lost none to the mover.
        after = kernel_view.check_counters(
            s, mover, dst, kernel_view.expected_after(
                kernel, size, 1, kernel_view.where(
                    s, src, mover.numa_topology.cells[0].host_cell),
                kernel_view.where(s, dst, cell.host_cell)),
            'after the move')
        s.say(f"kernel view: free {size} KiB pages per (kernel, node) "
              f"before the move {kernel_view.pool(kernel, size)}, after "
              f"{kernel_view.pool(after, size)}")
        kernel_view.check_bound(s, mover, dst, cell.host_cell, 1)
    s.check_host(dst)
    s.check_host(src)


@scenario('huge-page-rollback',
          "The destination fails after its QEMU took the guest's huge "
          "pages: the guest keeps running on the source on its pages, and "
          "every kernel page counter is as before the migration.",
          requires=('huge_pages', 'kernel_view', 'inject_failure'))
def huge_page_rollback(s):
    src, dst = s.pair()
    size, count = huge_pool(s, src, size_kb=smallest_huge_size(s, src))
    s.require(size and count, f"host {src} node 0 has no huge pages")
    pages = min(count, 16)
    mover = s.create(src, 1, memory_mb=pages * size // 1024,
                     specs=pages_specs(size), label='pages')
    node = mover.numa_topology.cells[0].host_cell
    before = s.snapshots.take(mover)
    kernel = kernel_view.counters(s)
    with s.backend.inject_failure(dst):
        migration = s.migrate(mover, dst)
    s.expect_status(migration, mover, 'failed')
    kernel_view.check_counters(s, mover, dst, kernel,
                               'as before the migration')
    kernel_view.check_bound(s, mover, src, node, pages)
    s.snapshots.compare(mover, before)
    s.check_placed(mover, src)
    s.check_host(dst)


@scenario('page-size-mismatch',
          "A guest whose page size the destination has no free pages of "
          "is refused before any memory is copied; the source is "
          "untouched.",
          requires=('huge_pages',))
def page_size_mismatch(s):
    src, dst = s.pair()
    size, _count = huge_pool(s, src)
    s.require(size, f"host {src} has no huge pages")
    for cell in s.topology(dst).cells:
        free = sum(p.free for p in cell.mempages if p.size_kb == size)
        if free:
            s.create(dst, 1, memory_mb=free * size // 1024,
                     specs=dict(pages_specs(size)), label='takes-pages')
    mover = s.create(src, 1, memory_mb=size // 1024,
                     specs=dict(DEDICATED, **{'hw:mem_page_size': 'large',
                                              'hw:numa_nodes': '1'}),
                     label='large')
    s.require(mover.numa_topology.cells[0].pagesize == size,
              f"host {src} did not back 'large' with {size} KiB pages")
    before = s.snapshots.take(mover)
    migration = s.migrate(mover, dst)
    s.expect_status(migration, mover, 'error')
    copied = [h.status for h in migration.history if h.status in COPYING]
    if copied:
        s.fail(mover, src, 'migration history', 'refused before copying',
               f"reached {', '.join(copied)}")
    s.snapshots.compare(mover, before)
    s.check_placed(mover, src)
    s.check_host(dst)


@scenario('fewer-nodes',
          "A guest on a node the destination does not have moves onto one "
          "of the destination's nodes.", requires=('multi_node',))
def fewer_nodes(s):
    names = sorted(s.backend.hosts, key=lambda h: -len(s.host(h).cells))
    src, dst = names[0], names[-1]
    nodes = len(s.host(dst).cells)
    s.require(len(s.host(src).cells) > nodes,
              "needs a host with more NUMA nodes than another")
    specs = dict(DEDICATED, **{'hw:numa_nodes': '1'})
    guest = None
    for _ in range(len(s.host(src).cells)):
        guest = s.create(src, 1, specs=specs, label='node')
        if guest.numa_topology.cells[0].host_cell >= nodes:
            break
    node = guest.numa_topology.cells[0].host_cell
    s.require(node >= nodes, f"no guest landed beyond node {nodes - 1}")
    migration = s.migrate(guest, dst)
    if s.expect_status(migration, guest, 'completed'):
        record = s.check_placed(guest, dst)
        if record.numa_topology.cells[0].host_cell not in s.host(dst).cells:
            s.fail(guest, dst, "<memnode cellid='0'> nodeset",
                   f"one of nodes {sorted(s.host(dst).cells)}",
                   record.numa_topology.cells[0].host_cell)
        s.check_host(dst)


@scenario('multi-node',
          "A two-node guest moves with each guest node on its own "
          "destination node.", requires=('multi_node',))
def multi_node(s):
    src, dst = s.pair()
    specs = dict(DEDICATED, **{'hw:numa_nodes': '2'})
    guest = s.create(src, 4, specs=specs, label='two-nodes')
    migration = s.migrate(guest, dst)
    if s.expect_status(migration, guest, 'completed'):
        record = s.check_placed(guest, dst)
        nodes = [c.host_cell for c in record.numa_topology.cells]
        if len(set(nodes)) != 2:
            s.fail(guest, dst, '<numatune><memnode>', 'two distinct nodes',
                   nodes)
        if kernel_view.available(s):
            kernel_view.check_binds(s, guest, dst, nodes)
            # Told its distances (issue 39): one kernel, so the ones it
            # booted with are the destination's too.
            distances.check_told_as_kernel(s, guest, dst)
        s.check_host(dst)
