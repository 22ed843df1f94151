"""Fitting ONE guest cell onto ONE host cell: the check and the placement.

Whether a guest cell fits a host cell depends on nothing but the two
cells (guest cells always go to distinct host cells), which is what lets
fit.py treat the whole guest as an assignment problem. ``check`` is cheap
(counts only) and says why not; ``place`` builds the placed cell.
"""

import typing

from numamig.numa import pages
from numamig.numa import placed


class Demand(typing.NamedTuple):
    """What a guest cell needs from a host cell, without vCPU ids.

    Guest cells with equal demands fit the same host cells, so the fit
    checks each distinct demand once per host cell. (A named tuple: a
    fit makes one per guest cell, and it is the cheapest to make.)
    """

    floating: int
    pinned: int
    memory_mb: int
    pagesize: int | None
    thread_policy: str | None


def demand_of(guest_cell, extra_pcpus, pagesize_kb):
    """Return the Demand of a guest cell.

    :param extra_pcpus: dedicated pCPUs wanted beyond the vCPUs' (1 for
        isolated emulator threads on guest cell 0).
    :param pagesize_kb: a page size forced on every cell, or None.
    """
    pagesize = pagesize_kb or guest_cell.pagesize
    return Demand(len(guest_cell.cpuset),
                  len(guest_cell.pcpuset) + extra_pcpus,
                  guest_cell.memory_mb, pagesize,
                  guest_cell.cpu_thread_policy)


def explain(why):
    """Return the text of a check's why: a (template, values) pair.

    Checks return pairs, not text, because a fit checks many host cells
    whose reasons nobody reads once another cell fits.
    """
    template, values = why
    return template % values


def check(host_cell, demand, limits):
    """Return (None, page size) if the demand fits, else (why, None).

    ``why`` is a (template, values) pair (explain()).

    :param host_cell: a views.CellView.
    :param limits: views.LimitsView or None. Without limits only the
        cell's size bounds floating vCPUs and small-page memory.
    """
    size = None
    if demand.pagesize is not None:
        size, why = pages.choose(host_cell, demand.memory_mb,
                                 demand.pagesize)
        if size is None:
            return why, None
    else:
        why = _check_memory(host_cell, demand.memory_mb, limits)
        if why:
            return why, None
    why = _check_floating(host_cell, demand.floating, limits)
    if why is None and demand.pinned:
        why = host_cell.cores.check(demand.thread_policy, demand.pinned)
    return why, (None if why else size)


def _check_memory(host_cell, memory_mb, limits):
    """Check a guest cell without a page size: against the cell's memory,
    then against what its smallest pages have (pages.small_page_memory).
    Without limits only the sizes count."""
    ratio = 1.0 if limits is None else limits.ram_ratio
    if limits is None:
        if memory_mb > host_cell.memory_mb:
            return ("needs %d MiB, the cell has %d MiB",
                    (memory_mb, host_cell.memory_mb))
    else:
        limit = host_cell.memory_mb * ratio
        if host_cell.memory_usage_mb + memory_mb > limit:
            return ("needs %d MiB, %d of %g MiB (ram_allocation_ratio %g) "
                    "are used",
                    (memory_mb, host_cell.memory_usage_mb, limit, ratio))
    small = host_cell.small_memory
    if small is None:
        return None
    return _check_small_memory(memory_mb, *small,
                               None if limits is None else ratio)


def _check_small_memory(memory_mb, capacity, used, ratio):
    """Check memory against the smallest pages; ratio None: no limits."""
    if ratio is None:
        if memory_mb > capacity:
            return ("needs %d MiB of small pages, the cell has %d MiB "
                    "outside huge pages and reservations",
                    (memory_mb, capacity))
    elif used + memory_mb > capacity * ratio:
        return ("needs %d MiB of small pages, %d of %g MiB outside huge "
                "pages and reservations (ram_allocation_ratio %g) are used",
                (memory_mb, used, capacity * ratio, ratio))
    return None


def _check_floating(host_cell, floating, limits):
    if not floating:
        return None
    shared = host_cell.shared_count
    if floating > shared:
        return ("needs %d shared pCPUs for floating vCPUs, has %d",
                (floating, shared))
    if limits is None:
        return None
    ratio = limits.cpu_ratio
    limit = shared * ratio
    if host_cell.cpu_usage + floating > limit:
        return ("needs %d floating vCPUs, %d of %g (cpu_allocation_ratio "
                "%g) are used", (floating, host_cell.cpu_usage, limit, ratio))
    return None


def place(host_cell, guest_cell, demand, pagesize, emulator_slots):
    """Return the placed.PlacedCell; check() must have passed.

    Pinned vCPUs take the chosen slots in vCPU order; the last
    ``emulator_slots`` slots become the emulator threads' pCPUs.
    """
    chosen = host_cell.cores.choose(demand.thread_policy, demand.pinned)
    vcpus = sorted(guest_cell.pcpuset)
    pins = dict(zip(vcpus, chosen[:len(vcpus)], strict=True))
    reserved = set(chosen[len(vcpus):]) if emulator_slots else None
    return placed.PlacedCell(guest_cell, host_cell.id, pagesize, pins,
                             reserved)

