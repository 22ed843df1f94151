"""Fitting ONE guest cell onto ONE host cell: the check and the placement.

Whether a guest cell fits a host cell depends on nothing but the two
cells (guest cells always go to distinct host cells), which is what lets
fit.py treat the whole guest as an assignment problem. ``check`` is cheap
(counts only) and says why not; ``place`` builds the placed cell.
"""

import typing

from numamig.numa import pages
from numamig.numa import placed
from numamig.numa import vmem
from numamig.objects import fields


class Demand(typing.NamedTuple):
    """What a guest cell needs from a host cell, without vCPU ids.

    Guest cells with equal demands fit the same host cells, so the fit
    checks each distinct demand once per host cell. (A named tuple: a
    fit makes one per guest cell, and it is the cheapest to make.)
    ``pinned_policy``: the cell's CPU policy pins vCPUs (dedicated or
    mixed, even for a mixed cell whose vCPUs all float), so its memory
    may not be overcommitted.
    """

    floating: int
    pinned: int
    memory_mb: int
    pagesize: int | None
    thread_policy: str | None
    pinned_policy: bool = False


_PINNED_POLICIES = (fields.CPUAllocationPolicy.DEDICATED,
                    fields.CPUAllocationPolicy.MIXED)


def demand_of(guest_cell, extra_pcpus, pagesize_kb):
    """Return the Demand of a guest cell.

    :param extra_pcpus: dedicated pCPUs wanted beyond the vCPUs' (1 for
        isolated emulator threads on guest cell 0).
    :param pagesize_kb: a page size forced on every cell, or None.
    """
    pagesize = pagesize_kb or guest_cell.pagesize
    return Demand(len(guest_cell.cpuset),
                  len(guest_cell.pcpuset) + extra_pcpus,
                  vmem.held_mb(guest_cell), pagesize,
                  guest_cell.cpu_thread_policy,
                  guest_cell.cpu_policy in _PINNED_POLICIES)


# Why a guest cell fits no host cell, in a bounded set of words (a
# metric's label): what the check that refused it counted.
HUGE_PAGES = 'huge-pages'
MEMORY = 'memory'
DEDICATED_PCPUS = 'dedicated-pcpus'
CPU_THREADS = 'cpu-threads'
SHARED_CPUS = 'shared-cpus'
CELLS = 'cells'
# The guest's PCI devices fit no set of host cells its cells fit.
PCI_DEVICES = 'pci-devices'
REASONS = (HUGE_PAGES, MEMORY, DEDICATED_PCPUS, CPU_THREADS, SHARED_CPUS,
           CELLS, PCI_DEVICES)
# (words of a check's template, the reason), first match wins: every
# template the checks return is named by one (tests/unit/numa checks it
# on generated refusals).
_REASON_WORDS = (
    (('page pool', 'KiB pages'), HUGE_PAGES),
    (('dedicated pCPUs',), DEDICATED_PCPUS),
    (('cores for isolate', 'sibling threads', 'SMT'), CPU_THREADS),
    (('shared pCPUs', 'floating vCPUs'), SHARED_CPUS),
    (('MiB',), MEMORY),
)


def reason_of(why):
    """The REASONS word of a check's why (a (template, values) pair)."""
    template = why[0]
    for words, reason in _REASON_WORDS:
        if any(word in template for word in words):
            return reason
    raise ValueError(f"no reason names the check {template!r}")


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
        cell's size bounds floating vCPUs and unpinned memory.
    """
    size = None
    if demand.pagesize is not None:
        size, why = pages.choose(host_cell, demand.memory_mb,
                                 demand.pagesize)
        if size is None:
            return why, None
    else:
        why = _check_memory(host_cell, demand.memory_mb, limits,
                            demand.pinned_policy)
        if why:
            return why, None
    why = _check_floating(host_cell, demand.floating, limits)
    if why is None and demand.pinned:
        why = host_cell.cores.check(demand.thread_policy, demand.pinned)
    return why, (None if why else size)


def _check_memory(host_cell, memory_mb, limits, pinned_policy):
    """Check a guest cell without a page size.

    Whatever the ratio, no guest cell is larger than the host cell or,
    when the cell reports page pools, than what its smallest pages hold
    (pages.small_page_memory). A pinned guest cell takes no more than is
    free: memory is never overcommitted under pinned vCPUs. Any other is
    bounded by ram_allocation_ratio when there are limits.
    """
    small = host_cell.small_memory
    if memory_mb > host_cell.memory_mb:
        return ("needs %d MiB, the cell has %d MiB",
                (memory_mb, host_cell.memory_mb))
    if small is not None and memory_mb > small[0]:
        return ("needs %d MiB of small pages, the cell has %d MiB "
                "outside huge pages and reservations", (memory_mb, small[0]))
    if pinned_policy:
        why = _check_free_memory(host_cell, memory_mb, small)
        if why:
            return why
    if limits is None:
        return None
    ratio = limits.ram_ratio
    limit = host_cell.memory_mb * ratio
    if host_cell.memory_usage_mb + memory_mb > limit:
        return ("needs %d MiB, %d of %g MiB (ram_allocation_ratio %g) "
                "are used",
                (memory_mb, host_cell.memory_usage_mb, limit, ratio))
    if small is not None and small[1] + memory_mb > small[0] * ratio:
        return ("needs %d MiB of small pages, %d of %g MiB outside huge "
                "pages and reservations (ram_allocation_ratio %g) are used",
                (memory_mb, small[1], small[0] * ratio, ratio))
    return None


def _check_free_memory(host_cell, memory_mb, small):
    """Check a pinned guest cell's memory against what is free: of the
    small pages when the cell reports pools, else of the cell."""
    if small is not None:
        capacity, used = small
        if used + memory_mb > capacity:
            return ("needs %d MiB of small pages free for pinned vCPUs "
                    "(never overcommitted), %d of %d MiB outside huge pages "
                    "and reservations are used", (memory_mb, used, capacity))
        return None
    if host_cell.memory_usage_mb + memory_mb > host_cell.memory_mb:
        return ("needs %d MiB free for pinned vCPUs (never overcommitted), "
                "%d of %d MiB are used",
                (memory_mb, host_cell.memory_usage_mb, host_cell.memory_mb))
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

