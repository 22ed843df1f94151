"""Usage accounting: a host topology with placed guests added or removed.

``apply`` records what a placed guest takes from its host cells (pinned
pCPUs and, for the isolate thread policy, their sibling threads; isolated
emulator pCPUs; pages of the chosen size; memory; floating vCPUs on the
shared set), ``release`` gives it back, ``host_with_usage`` adds many.
All return a NEW topology and never modify their inputs. Each guest is
checked as a whole (all its cells, summed per host cell) before it
changes anything, so a conflict leaves no trace of that guest.
Overcommittable usage (memory, floating vCPUs) is not limited here: the
fit decided that; pins and pages can never be shared, so they are checked.
"""

import collections

from numamig import exception
from numamig import objects
from numamig.numa import pages
from numamig.numa import pci
from numamig.numa import pinning
from numamig.numa import vmem
from numamig.objects import fields

_APPLY, _RELEASE = 1, -1


def apply(host_topology, placed):
    """Return a new HostNUMATopology with ``placed`` using its cells (and
    the PCI functions its placed topology holds).

    :raises UsageConflict: a subclass naming the host cell and the pCPUs
        or pages: a pin already taken or outside the dedicated set, pages
        the pool does not have free, a host cell that does not exist.
    """
    cells, devices = _private(host_topology)
    _change(cells, devices, placed, _APPLY)
    return _topology(host_topology, cells, devices)


def release(host_topology, placed):
    """Return a new HostNUMATopology without the usage of ``placed``.

    :raises UsageConflict: (UsageNotHeld) when the host does not record
        what ``placed`` claims to hold.
    """
    cells, devices = _private(host_topology)
    _change(cells, devices, placed, _RELEASE)
    return _topology(host_topology, cells, devices)


def host_with_usage(host_topology, placed_topologies, on_conflict=None):
    """Return ``host_topology`` with every placed guest applied, in order.

    One private copy of the host cells takes every guest, so the cost
    grows with the guests, not with guests times cells copied.

    :param on_conflict: called as ``on_conflict(placed, exc)`` for a guest
        that clashes with the host or with an earlier guest; that guest is
        left out and the others still count. Without it the conflict is
        raised.
    :raises UsageConflict: as apply() does, when ``on_conflict`` is None.
    """
    cells, devices = _private(host_topology)
    for placed in placed_topologies:
        try:
            _change(cells, devices, placed, _APPLY)
        except exception.UsageConflict as exc:
            if on_conflict is None:
                raise
            on_conflict(placed, exc)
    return _topology(host_topology, cells, devices)


def cleared(host_topology):
    """Return a new HostNUMATopology of the same host with nothing used:
    what the host would offer were every guest gone (pages the host
    reserves for itself stay reserved).
    """
    cells, devices = _private(host_topology)
    for cell in cells.values():
        cell.pinned_cpus = set()
        cell.memory_usage_mb = 0
        cell.cpu_usage = 0
        for pool in cell.mempages:
            pool.used = 0
    for device in devices.values():
        device.instance_uuid = None
    return _topology(host_topology, cells, devices)


def _private(host_topology):
    """Private copies of the host's cells {id: cell} and PCI functions
    {address: device}."""
    return ({cell.id: cell.obj_clone() for cell in host_topology.cells},
            {device.address: device.obj_clone()
             for device in host_topology.get('pci_devices') or ()})


def _topology(host_topology, cells, devices):
    return objects.HostNUMATopology(
        cells=[cells[cell.id] for cell in host_topology.cells],
        pci_devices=[devices[device.address] for device in
                     host_topology.get('pci_devices') or ()])


class CellDemand:
    """What one guest holds in one host cell, summed over its guest cells
    (view_usage sums placements on views with it too)."""

    __slots__ = ('pcpus', 'pages', 'memory_mb', 'floating')

    def __init__(self):
        self.pcpus = set()
        self.pages = collections.Counter()
        self.memory_mb = 0
        self.floating = 0

    def add(self, cell_id, guest_cell_id, pcpus, pages_of_size, memory_mb,
            floating):
        """Add one guest cell: its pCPUs, (page size, pages) or None,
        memory and floating vCPUs.

        :raises UsageConflict: two cells of the guest hold one pCPU.
        """
        if pcpus & self.pcpus:
            raise exception.UsageConflict(
                cell=cell_id, reason=f"guest cell {guest_cell_id} holds "
                                     f"pCPUs {sorted(pcpus & self.pcpus)} "
                                     "that another cell of the same guest "
                                     "holds")
        self.pcpus |= pcpus
        if pages_of_size is not None:
            size, count = pages_of_size
            self.pages[size] += count
        self.memory_mb += memory_mb
        self.floating += floating


def _change(cells, devices, placed, sign):
    """Check the whole guest against ``cells`` and ``devices``, then
    change them."""
    demands = {}
    for guest in placed.cells:
        host_cell = guest.get('host_cell')
        if host_cell is None:
            raise exception.UsageConflict(
                cell=None, reason=f"guest cell {guest.id} is not placed")
        if host_cell not in cells:
            raise exception.UnknownHostCell(cell=host_cell,
                                            guest_cell=guest.id)
        _add_demand(demands.setdefault(host_cell, CellDemand()),
                    cells[host_cell], guest)
    pools = {host_cell: _check_cell(cells[host_cell], demand, sign)
             for host_cell, demand in demands.items()}
    held = _check_devices(devices, placed, sign)
    for host_cell, demand in demands.items():
        _change_cell(cells[host_cell], demand, pools[host_cell], sign)
    holder = (placed.get('instance_uuid') or HOLDER_UNNAMED
              if sign == _APPLY else None)
    for device in held:
        device.instance_uuid = holder


# The holder recorded for a placed topology without an instance uuid (a
# request fitted for a plan or a dry run).
HOLDER_UNNAMED = 'unnamed'


def _check_devices(devices, placed, sign):
    """Return the host functions ``placed`` holds, checked: each known,
    free (apply: its PF or VFs too) or held (release)."""
    addresses = [held.address for held in placed.get('pci_devices') or ()]
    if not addresses:
        return []
    unknown = sorted(a for a in addresses if a not in devices)
    if unknown:
        raise exception.UsageConflict(
            cell=None, reason=f"PCI devices {unknown} are not devices of "
                              f"this host")
    if sign == _RELEASE:
        free = sorted(a for a in addresses
                      if devices[a].get('instance_uuid') is None)
        if free:
            raise exception.UsageNotHeld(
                cell=None, what=f"PCI devices {free}",
                reason="no guest holds them")
        return [devices[a] for a in addresses]
    taken = sorted(set(addresses) & pci.unavailable(
        pci.devices_of(devices.values()),
        pci.held_addresses(devices.values())))
    if taken:
        raise exception.UsageConflict(
            cell=None, reason=f"PCI devices {taken} are used (or their PF "
                              f"or VFs are)")
    return [devices[a] for a in addresses]


def _add_demand(demand, cell, guest):
    size = guest.get('pagesize')
    demand.add(cell.id, guest.id, _pcpus_held(cell, guest),
               None if size is None else (size,
                                          _page_count(cell, guest, size)),
               vmem.held_mb(guest), len(guest.cpuset))


def _check_cell(cell, demand, sign):
    """Check one host cell against a demand; return its page pools."""
    pools = {size: _check_pool(cell, size, count, sign)
             for size, count in demand.pages.items()}
    _check_pcpus(cell, demand.pcpus, sign)
    if sign == _RELEASE:
        for what, held, amount in (
                ('memory', cell.memory_usage_mb, demand.memory_mb),
                ('floating vCPUs', cell.cpu_usage, demand.floating)):
            if held < amount:
                raise exception.UsageNotHeld(
                    cell=cell.id, what=f"{amount} {what}",
                    reason=f"the cell records only {held} used")
    return pools


def _change_cell(cell, demand, pools, sign):
    """Change one host cell (a private copy) by an already checked demand."""
    if sign == _RELEASE:
        cell.pinned_cpus = cell.pinned_cpus - demand.pcpus
    else:
        cell.pinned_cpus = cell.pinned_cpus | demand.pcpus
    cell.memory_usage_mb += sign * demand.memory_mb
    cell.cpu_usage += sign * demand.floating
    for size, count in demand.pages.items():
        pools[size].used += sign * count


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


def _page_count(cell, guest, size):
    """Return how many pages of ``size`` a guest cell holds, checked."""
    if size <= 0:
        raise exception.UsageConflict(
            cell=cell.id, reason=f"guest cell {guest.id} holds a page size "
                                 f"request ({size}), not a placed size")
    pool = cell.pages_of(size)
    memory_mb = vmem.held_mb(guest)
    count = pages.pages_needed(memory_mb, size)
    if pool is None or count is None:
        problem = ("the cell has no such pool" if pool is None else
                   f"{memory_mb} MiB is not a whole number of pages")
        raise exception.UsageConflict(
            cell=cell.id,
            reason=f"guest cell {guest.id} uses {size} KiB pages: {problem}")
    return count


def _check_pool(cell, size, count, sign):
    """Return the cell's pool of ``size`` once it can give or take back."""
    pool = cell.pages_of(size)
    if sign == _APPLY and count > pool.free:
        raise exception.PagesExhausted(cell=cell.id, needed=count,
                                       size_kb=size, free=pool.free)
    if sign == _RELEASE and count > pool.used:
        raise exception.UsageNotHeld(
            cell=cell.id, what=f"{count} pages of {size} KiB",
            reason=f"only {pool.used} are used")
    return pool
