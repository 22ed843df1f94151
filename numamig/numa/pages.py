"""Choosing the page size that backs a guest cell on a host cell.

Free pages of a pool are total - used - reserved (the pool object's
``free``). A guest cell's memory must be a whole number of pages.
"""

from numamig.objects import instance_numa


def candidate_sizes(host_cell, request):
    """Return the page sizes to try for ``request``, preferred first.

    'small' is the cell's smallest pool, 'large' the others from the
    largest down (the largest that fits wins, so that few big pages back
    the guest), 'any' every pool from the largest down; an explicit size
    is tried alone.
    """
    sizes = sorted(pool.size_kb for pool in host_cell.mempages)
    if request == instance_numa.PAGESIZE_SMALL:
        return sizes[:1]
    if request == instance_numa.PAGESIZE_LARGE:
        return sizes[:0:-1]
    if request == instance_numa.PAGESIZE_ANY:
        return sizes[::-1]
    return [request]


def pages_needed(memory_mb, size_kb):
    """Return how many pages of ``size_kb`` hold ``memory_mb``, or None.

    None: the memory is not a whole number of such pages.
    """
    memory_kb = memory_mb * 1024
    if memory_kb % size_kb:
        return None
    return memory_kb // size_kb


def choose(host_cell, memory_mb, request):
    """Return (page size in KiB, None) or (None, why no size fits)."""
    problems = []
    for size in candidate_sizes(host_cell, request):
        pool = host_cell.pages_of(size)
        needed = pages_needed(memory_mb, size)
        if pool is None:
            problems.append(f"no {size} KiB page pool")
        elif needed is None:
            problems.append(f"{memory_mb} MiB is not a multiple of "
                            f"{size} KiB pages")
        elif needed > pool.free:
            problems.append(f"needs {needed} free {size} KiB pages, has "
                            f"{pool.free}")
        else:
            return size, None
    if not problems:
        return None, "has no huge page pool"
    return None, '; '.join(problems)
