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
    if not host_cell.mempages:
        return None
    small = min(host_cell.mempages, key=lambda pool: pool.size_kb)
    capacity = (small.total - (small.reserved or 0)) * small.size_kb // 1024
    in_huge = sum(pool.used * pool.size_kb for pool in host_cell.mempages
                  if pool is not small) // 1024
    return capacity, max(0, host_cell.memory_usage_mb - in_huge)


def free_pages(host_cell, pool):
    """Return the pages of ``pool`` a guest may take.

    For the smallest pool, no more than its memory has left once guests
    without a page size are counted too (module docstring).
    ``host_cell`` is a views.CellView with its ``page_sizes`` and
    ``small_memory`` already worked out.
    """
    if pool.size_kb != host_cell.page_sizes[0]:
        return pool.free
    capacity, used = host_cell.small_memory
    return min(pool.free,
               max(0, capacity - used) * 1024 // pool.size_kb)


def choose(host_cell, memory_mb, request):
    """Return (page size in KiB, None) or (None, why no size fits).

    ``host_cell`` is a views.CellView (its ``free_pages``).
    """
    problems = []
    free_pages = host_cell.free_pages
    for size in candidate_sizes(host_cell, request):
        needed = pages_needed(memory_mb, size)
        free = free_pages.get(size)
        if free is not None and needed is not None and needed <= free:
            return size, None
        if free is None:
            problems.append(f"no {size} KiB page pool")
        elif needed is None:
            problems.append(f"{memory_mb} MiB is not a multiple of "
                            f"{size} KiB pages")
        else:
            problems.append(f"needs {needed} free {size} KiB pages, has "
                            f"{free}")
    if not problems:
        return None, "has no huge page pool"
    return None, '; '.join(problems)
