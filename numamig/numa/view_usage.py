"""Usage accounting on views: a HostView with one more placed guest.

numa.usage.apply copies the host's versioned objects (milliseconds for
a host of 8 cells); a search that places dozens of guests one after the
other and takes some back (a drain plan) cannot pay that per step. This
module does the same accounting on the views a fit reads (numa/views.py)
and returns a new HostView, sharing the cells the guest does not touch.
A unit test checks that it gives what a view of ``usage.apply``'s result
gives.

Inputs are never modified; a placement that clashes with the view (a
pin already taken, pages that are not free) raises as usage.apply does,
so a bug can never hide behind a quietly wrong plan.
"""

from numamig import exception
from numamig.numa import pages
from numamig.numa import pinning
from numamig.numa import usage
from numamig.numa import views
from numamig.numa import vmem
from numamig.objects import fields


def apply(host_view, placement):
    """Return a new HostView with ``placement`` using its cells.

    :param host_view: a views.HostView.
    :param placement: a placed.Placement (FitResult.placement) made by a
        fit on this view (or one whose cells hold the same usage).
    :raises UsageConflict: a subclass naming the host cell and what
        clashes, as numa.usage.apply; nothing is returned then.
    """
    by_id = {cell.id: cell for cell in host_view.cells}
    demands = {}
    for placed in placement.cells:
        cell = by_id.get(placed.host_cell)
        if cell is None:
            raise exception.UnknownHostCell(cell=placed.host_cell,
                                            guest_cell=placed.guest.id)
        _add(demands.setdefault(cell.id, usage.CellDemand()), cell, placed)
    changed = {cell_id: _used(by_id[cell_id], demand)
               for cell_id, demand in demands.items()}
    return views.HostView.of_cells(
        (changed.get(cell.id, cell) for cell in host_view.cells),
        _pci_used(host_view.pci, placement))


def _pci_used(pci_view, placement):
    """The host's PCIView with the placement's devices held, checked as
    usage.apply checks them."""
    devices = placement.pci.devices if placement.pci else ()
    if not devices:
        return pci_view
    addresses = {address for _alias, address, _node, _cell in devices}
    known = set() if pci_view is None else {
        d.address for d in pci_view.devices}
    if addresses - known:
        raise exception.UsageConflict(
            cell=None, reason=f"PCI devices {sorted(addresses - known)} "
                              f"are not devices of this host")
    if addresses & pci_view.blocked:
        raise exception.UsageConflict(
            cell=None, reason=f"PCI devices "
                              f"{sorted(addresses & pci_view.blocked)} are "
                              f"used (or their PF or VFs are)")
    return pci_view.with_used(addresses)


def _add(demand, cell, placed):
    guest = placed.guest
    pcpus = set(placed.pins.values()) | (placed.reserved or set())
    if guest.cpu_thread_policy == fields.CPUThreadAllocationPolicy.ISOLATE:
        pcpus = pinning.isolate_siblings(cell, pcpus)
    pages_of_size = None
    if placed.pagesize is not None:
        count = pages.pages_needed(vmem.held_mb(guest), placed.pagesize)
        if count is None or placed.pagesize not in cell.free_pages:
            raise exception.UsageConflict(
                cell=cell.id, reason=f"guest cell {guest.id} uses "
                                     f"{placed.pagesize} KiB pages the cell "
                                     f"cannot give")
        pages_of_size = (placed.pagesize, count)
    demand.add(cell.id, guest.id, pcpus, pages_of_size, vmem.held_mb(guest),
               len(guest.cpuset))


def _used(cell, demand):
    outside = demand.pcpus - cell.pcpuset
    if outside:
        raise exception.CPUNotDedicated(cell=cell.id, pcpus=sorted(outside),
                                        dedicated=sorted(cell.pcpuset))
    if demand.pcpus & cell.pinned_cpus:
        raise exception.CPUAlreadyPinned(
            cell=cell.id, pcpus=sorted(demand.pcpus & cell.pinned_cpus))
    for size, count in demand.pages.items():
        # A pool's own free pages, as usage.apply checks them (the
        # small-page budget is the fit's business).
        free = next(total - used - (reserved or 0)
                    for pool_size, total, used, reserved in cell.pools
                    if pool_size == size)
        if count > free:
            raise exception.PagesExhausted(cell=cell.id, needed=count,
                                           size_kb=size, free=free)
    return cell.used(demand.pcpus, demand.memory_mb, demand.floating,
                     demand.pages)
