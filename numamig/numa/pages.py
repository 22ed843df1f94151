"""Choosing the page size that backs a guest cell on a host cell.

Free pages of a pool are total - used - reserved (the pool object's
``free``). A guest cell's memory must be a whole number of pages.

The smallest pool is shared: guests that ask for small pages are charged
to it (pages used) and to the cell's memory usage, guests that ask for no
page size to the memory usage only (their memory may be overcommitted,
pages cannot). So what the smallest pool really has left is its capacity
(total - reserved) minus the memory usage not held in huge pages; both
kinds of guest are checked against that, so neither can take memory the
other holds, nor memory that sits in huge page pools.
"""

from numamig.objects import instance_numa


def candidate_sizes(host_cell, request):
    """Return the page sizes to try for ``request``, preferred first.

    ``host_cell`` is a views.CellView. 'small' is the cell's smallest
    pool, 'large' the others from the
    largest down (the largest that fits wins, so that few big pages back
    the guest), 'any' every pool from the largest down; an explicit size
    is tried alone.
    """
    sizes = host_cell.page_sizes
    if request == instance_numa.PAGESIZE_SMALL:
        return sizes[:1]
    if request == instance_numa.PAGESIZE_LARGE:
        return sizes[:0:-1]
    if request == instance_numa.PAGESIZE_ANY:
        return sizes[::-1]
    return (request,)


def pages_needed(memory_mb, size_kb):
    """Return how many pages of ``size_kb`` hold ``memory_mb``, or None.

    None: the memory is not a whole number of such pages.
    """
    memory_kb = memory_mb * 1024
    if memory_kb % size_kb:
        return None
    return memory_kb // size_kb


def small_page_memory(host_cell):
    """Return (capacity, used) MiB of the cell's smallest pages, or None.

    None: the cell reports no page pools, so only its memory_mb bounds
    guests without a page size. ``used`` is the memory usage not held in
    the larger pools (never below zero, whatever the report says).
    """
    pools = sorted(host_cell.mempages, key=lambda pool: pool.size_kb)
    return _small_budget(pools, host_cell.memory_usage_mb)


def _small_budget(pools, memory_usage_mb):
    if not pools:
        return None
    small = pools[0]
    capacity = (small.total - (small.reserved or 0)) * small.size_kb // 1024
    in_huge = 0
    for pool in pools[1:]:
        in_huge += pool.used * pool.size_kb
    return capacity, max(0, memory_usage_mb - in_huge // 1024)


def budget(pools, memory_usage_mb):
    """Return (small_page_memory, {size: pages a guest may take}).

    :param pools: the cell's pools, smallest first, each with its
        ``free`` pages (views.Pool).
    The smallest pool gives no more than its memory has left once guests
    without a page size are counted too (module docstring).
    """
    small_memory = _small_budget(pools, memory_usage_mb)
    free = {pool.size_kb: pool.free for pool in pools}
    if small_memory is not None:
        capacity, used = small_memory
        small = pools[0]
        free[small.size_kb] = min(
            small.free, max(0, capacity - used) * 1024 // small.size_kb)
    return small_memory, free


def choose(host_cell, memory_mb, request):
    """Return (page size in KiB, None) or (None, why no size fits).

    ``host_cell`` is a views.CellView (its ``free_pages``); why is a
    (template, values) pair, made text only if someone reads it.
    """
    problems = []
    free_pages = host_cell.free_pages
    for size in candidate_sizes(host_cell, request):
        needed = pages_needed(memory_mb, size)
        free = free_pages.get(size)
        if free is not None and needed is not None and needed <= free:
            return size, None
        if free is None:
            problems.append(("no %d KiB page pool", (size,)))
        elif needed is None:
            problems.append(("%d MiB is not a multiple of %d KiB pages",
                             (memory_mb, size)))
        else:
            problems.append(("needs %d free %d KiB pages, has %d",
                             (needed, size, free)))
    if not problems:
        return None, ("has no huge page pool", ())
    return None, ('; '.join(template for template, _ in problems),
                  sum((values for _, values in problems), ()))
