"""Choosing the page size that backs a guest cell on a host cell.

Free pages of a pool are total - used - reserved (``budget``). A guest
cell's memory must be a whole number of pages.

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
    pools = sorted((pool.size_kb, pool.total, pool.used, pool.reserved)
                   for pool in host_cell.mempages)
    return budget(pools, host_cell.memory_usage_mb)[0]


def budget(pools, memory_usage_mb):
    """Return (small_page_memory, {size: pages a guest may take}).

    :param pools: (size_kb, total, used, reserved) per pool, smallest
        first (a None reserved counts as 0).
    A pool's free pages are total - used - reserved; the smallest pool
    gives no more than its memory has left once guests without a page
    size are counted too (module docstring).
    """
    free = {}
    in_huge_kb = 0
    for size_kb, total, used, reserved in pools:
        free[size_kb] = total - used - (reserved or 0)
        in_huge_kb += used * size_kb
    if not pools:
        return None, free
    size_kb, total, used, reserved = pools[0]
    in_huge_kb -= used * size_kb
    capacity = (total - (reserved or 0)) * size_kb // 1024
    small_used = max(0, memory_usage_mb - in_huge_kb // 1024)
    free[size_kb] = min(free[size_kb],
                        max(0, capacity - small_used) * 1024 // size_kb)
    return (capacity, small_used), free


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
