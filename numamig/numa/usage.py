"""Usage accounting: a host topology with a placed guest added or removed.

``apply`` records what a placed guest takes from its host cells (pinned
pCPUs and, for the isolate thread policy, their sibling threads; isolated
emulator pCPUs; pages of the chosen size; memory; floating vCPUs on the
shared set), ``release`` gives it back. Both return a NEW topology and
check everything before changing anything, so a conflict leaves no trace.
Overcommittable usage (memory, floating vCPUs) is not limited here: the
fit decided that; pins and pages can never be shared, so they are checked.
"""

from numamig import exception
from numamig import objects
from numamig.numa import pages
from numamig.numa import pinning
from numamig.objects import fields

_APPLY, _RELEASE = 1, -1


def apply(host_topology, placed):
    """Return a new HostNUMATopology with ``placed`` using its cells.

    :raises UsageConflict: a subclass naming the host cell and the pCPUs
        or pages: a pin already taken or outside the dedicated set, pages
        the pool does not have free, a host cell that does not exist.
    """
    return _change(host_topology, placed, _APPLY)


def release(host_topology, placed):
    """Return a new HostNUMATopology without the usage of ``placed``.

    :raises UsageConflict: (UsageNotHeld) when the host does not record
        what ``placed`` claims to hold.
    """
    return _change(host_topology, placed, _RELEASE)


def host_with_usage(host_topology, placed_topologies):
    """Return ``host_topology`` with every placed guest applied, in order.

    :raises UsageConflict: as apply() does, for the first guest that
        clashes with the host or with an earlier guest.
    """
    result = host_topology
    for placed in placed_topologies:
        result = apply(result, placed)
    return result


def _change(host_topology, placed, sign):
    cells = {cell.id: cell.obj_clone() for cell in host_topology.cells}
    for guest in placed.cells:
        host_cell = guest.get('host_cell')
        if host_cell is None:
            raise exception.UsageConflict(
                cell=None, reason=f"guest cell {guest.id} is not placed")
        if host_cell not in cells:
            raise exception.UnknownHostCell(cell=host_cell,
                                            guest_cell=guest.id)
        _change_cell(cells[host_cell], guest, sign)
    return objects.HostNUMATopology(
        cells=[cells[cell.id] for cell in host_topology.cells])


def _change_cell(cell, guest, sign):
    """Check, then change, one host cell (a private copy) for one guest."""
    pcpus = _pcpus_held(cell, guest)
    pool, page_count = _pages_held(cell, guest, sign)
    floating = len(guest.cpuset)
    _check_pcpus(cell, pcpus, sign)
    if sign == _RELEASE:
        for what, held, amount in (
                ('memory', cell.memory_usage_mb, guest.memory_mb),
                ('floating vCPUs', cell.cpu_usage, floating)):
            if held < amount:
                raise exception.UsageNotHeld(
                    cell=cell.id, what=f"{amount} {what}",
                    reason=f"the cell records only {held} used")
        cell.pinned_cpus = cell.pinned_cpus - pcpus
    else:
        cell.pinned_cpus = cell.pinned_cpus | pcpus
    cell.memory_usage_mb += sign * guest.memory_mb
    cell.cpu_usage += sign * floating
    if pool is not None:
        pool.used += sign * page_count


def _pcpus_held(cell, guest):
    pcpus = set((guest.get('cpu_pinning') or {}).values())
    pcpus |= guest.get('cpuset_reserved') or set()
    if (guest.get('cpu_thread_policy')
            == fields.CPUThreadAllocationPolicy.ISOLATE):
        pcpus = pinning.isolate_siblings(cell, pcpus)
    return pcpus


def _check_pcpus(cell, pcpus, sign):
    outside = pcpus - cell.pcpuset
    if outside:
        raise exception.CPUNotDedicated(
            cell=cell.id, pcpus=sorted(outside),
            dedicated=sorted(cell.pcpuset))
    if sign == _APPLY and pcpus & cell.pinned_cpus:
        raise exception.CPUAlreadyPinned(
            cell=cell.id, pcpus=sorted(pcpus & cell.pinned_cpus))
    if sign == _RELEASE and pcpus - cell.pinned_cpus:
        raise exception.UsageNotHeld(
            cell=cell.id, what=f"pCPUs {sorted(pcpus - cell.pinned_cpus)}",
            reason="they are not pinned")


def _pages_held(cell, guest, sign):
    """Return (the cell's pool of the guest's page size, pages), checked."""
    size = guest.get('pagesize')
    if size is None:
        return None, 0
    if size <= 0:
        raise exception.UsageConflict(
            cell=cell.id, reason=f"guest cell {guest.id} holds a page size "
                                 f"request ({size}), not a placed size")
    pool = cell.pages_of(size)
    count = pages.pages_needed(guest.memory_mb, size)
    if pool is None or count is None:
        problem = ("the cell has no such pool" if pool is None else
                   f"{guest.memory_mb} MiB is not a whole number of pages")
        raise exception.UsageConflict(
            cell=cell.id,
            reason=f"guest cell {guest.id} uses {size} KiB pages: {problem}")
    if sign == _APPLY and count > pool.free:
        raise exception.PagesExhausted(cell=cell.id, needed=count,
                                       size_kb=size, free=pool.free)
    if sign == _RELEASE and count > pool.used:
        raise exception.UsageNotHeld(
            cell=cell.id, what=f"{count} pages of {size} KiB",
            reason=f"only {pool.used} are used")
    return pool, count
