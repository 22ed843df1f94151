"""Plain, read-only views of the host, request and limits a fit reads.

Reading a versioned object's field goes through OVO's property machinery
(a Python call with hasattr and getattr, about a microsecond each); a fit
reads every host cell's fields many times and the guest cells' a few
times. A view copies the fields once into plain slots with the same
names, so that fitting code reads either kind alike, and works out once
what every fit of the host asks again: free pCPUs, free pages per size,
the small-page budget, the host-cell order of each strategy and (on first
need) the core layout.

A view is a snapshot: it reflects the object when it was made and shares
its sets (nothing in a fit modifies them). Whoever fits many guests
against one host, as the scheduler does, makes the HostView once and
passes it to every fit, and makes a new one when the topology changes;
whoever fits one request on many hosts makes its RequestView and
LimitsView once. fit() makes whatever view it is not given.
"""

import itertools

from numamig import exception
from numamig.numa import cellfit
from numamig.numa import distance
from numamig.numa import pages
from numamig.numa import pci
from numamig.numa import pinning
from numamig.objects import base
from numamig.objects import fields

_HOST_FIELDS = ('id', 'cpuset', 'pcpuset', 'pinned_cpus', 'siblings',
                'memory_mb', 'memory_usage_mb', 'cpu_usage')
_POOL_FIELDS = ('size_kb', 'total', 'used', 'reserved')
_LIMIT_FIELDS = ('cpu_allocation_ratio', 'ram_allocation_ratio')
_GUEST_FIELDS = ('id', 'cpuset', 'pcpuset', 'memory_mb', 'pagesize',
                 'cpu_policy', 'cpu_thread_policy', 'realtime_vcpus',
                 'virtio_mem_size_mb', 'virtio_mem_block_kb',
                 'virtio_mem_requested_mb', 'virtio_mem_current_mb')


_read_host = base.field_reader(_HOST_FIELDS + ('mempages',))
_read_pool = base.field_reader(_POOL_FIELDS)
_read_guest = base.field_reader(_GUEST_FIELDS)
_read_limits = base.field_reader(_LIMIT_FIELDS)


class _View:
    """What every view shares: ``of``, for callers given either kind."""

    __slots__ = ()

    @classmethod
    def of(cls, obj):
        """Return a view of ``obj``, or ``obj`` if it is one already."""
        return obj if isinstance(obj, cls) else cls(obj)


class CellView:
    """A HostNUMACell's fields, with what fits derive from them.

    ``free_pcpus``/``free_count``: dedicated pCPUs not pinned.
    ``shared_count``: pCPUs of the shared set. ``page_sizes``: the page
    pools' sizes, smallest first. ``free_pages``: {size: pages a guest
    may take} and ``small_memory``: the small-page budget (both from
    pages.budget).
    ``cores``: the pinning.CellCores of the cell, whose layouts are built
    by the first fit that needs them. ``distances``: the cell's row of
    the host's distance table, {cell id: distance} (numa/distance.py).
    """

    __slots__ = _HOST_FIELDS + (
        'distances', 'pools', 'free_pcpus', 'free_count', 'shared_count',
        'page_sizes',
        'free_pages', 'small_memory', 'cores')

    def __init__(self, host_cell):
        (self.id, self.cpuset, self.pcpuset, self.pinned_cpus,
         self.siblings, self.memory_mb, self.memory_usage_mb,
         self.cpu_usage, pools) = _read_host(host_cell)
        # Older reports may leave the table unset: no table, as empty.
        self.distances = (host_cell.distances
                          if host_cell.obj_attr_is_set('distances') else {})
        # (size_kb, total, used, reserved): sizes are unique in a cell,
        # so the tuples sort by size.
        self._derive(tuple(sorted([_read_pool(pool) for pool in pools])))

    def _derive(self, pools):
        self.pools = pools
        # As HostNUMACell.free_pcpus, which is computed on every read.
        self.free_pcpus = self.pcpuset - self.pinned_cpus
        self.free_count = len(self.free_pcpus)
        self.shared_count = len(self.cpuset)
        self.small_memory, self.free_pages = pages.budget(
            pools, self.memory_usage_mb)
        self.page_sizes = tuple(self.free_pages)    # in pool order
        self.cores = pinning.CellCores(self)

    def used(self, pcpus, memory_mb, floating, pages_used):
        """Return a new CellView of this cell with more in use.

        :param pcpus: pCPUs newly pinned (a set, already checked free).
        :param memory_mb: memory newly used; ``floating``: floating
            vCPUs newly counted on the shared set.
        :param pages_used: {page size: pages newly used}.
        What numa.usage.apply does to a HostNUMACell, on a view: a
        search that places many guests one after another (a drain plan)
        makes a view per step instead of copying objects.
        """
        cell = CellView.__new__(CellView)
        (cell.id, cell.cpuset, cell.pcpuset, cell.siblings,
         cell.memory_mb, cell.distances) = (
             self.id, self.cpuset, self.pcpuset, self.siblings,
             self.memory_mb, self.distances)
        cell.pinned_cpus = self.pinned_cpus | pcpus
        cell.memory_usage_mb = self.memory_usage_mb + memory_mb
        cell.cpu_usage = self.cpu_usage + floating
        cell._derive(tuple(
            (size, total, used + pages_used.get(size, 0), reserved)
            for size, total, used, reserved in self.pools))
        return cell

    def is_idle(self):
        """Whether nothing uses the cell: no pin, memory, floating
        vCPU nor page (a NUMA node an operator may want kept whole)."""
        return not (self.pinned_cpus & self.pcpuset or self.memory_usage_mb
                    or self.cpu_usage or any(used for _, _, used, _ in
                                             self.pools))

    def fullness(self):
        """Smaller is fuller: free dedicated pCPUs, free memory, then
        shared-CPU headroom."""
        return (self.free_count, self.memory_mb - self.memory_usage_mb,
                self.shared_count - self.cpu_usage)


class HostView(_View):
    """A HostNUMATopology's cells as CellViews, with each strategy's order.

    ``cells`` keeps the topology's order; ``order(strategy)`` gives the
    cells in the order a fit tries them, worked out once per strategy.
    """

    __slots__ = ('cells', '_orders', '_uniform', '_between', 'pci')

    def __init__(self, host_topology):
        self.cells = tuple(CellView(cell) for cell in host_topology.cells)
        self._orders = {}
        self._uniform = None
        self._between = None
        self.pci = PCIView.of_host(host_topology)

    def uniform(self):
        """Whether every pair of the host's cells is equally far apart
        (distance.uniform), worked out once: on such a host every set of
        host cells costs the same and the fit compares none."""
        if self._uniform is None:
            self._uniform = distance.uniform(self.cells)
        return self._uniform

    def between(self):
        """{(cell id, cell id): distance.between} of every pair of
        distinct cells, worked out once: the nearest-first search of
        every fit on this host reads it."""
        if self._between is None:
            found = {}
            for first, second in itertools.combinations(self.cells, 2):
                found[first.id, second.id] = found[second.id, first.id] = \
                    distance.between(first, second)
            self._between = found
        return self._between

    @classmethod
    def of_cells(cls, cells, pci=None):
        """Return a HostView of the given CellViews (in that order):
        what view_usage makes after a placement, and what a plan makes
        of a host with some cells left out. ``pci``: its PCIView (None:
        no devices)."""
        view = cls.__new__(cls)
        view.cells = tuple(cells)
        view._orders = {}
        view._uniform = None
        view._between = None
        view.pci = pci
        return view

    def order(self, strategy):
        """Return the cells in ``strategy`` order ('spread': emptiest
        first; 'pack': fullest first); ties keep host cell id order."""
        try:
            return self._orders[strategy]
        except KeyError:
            pass
        if strategy == 'pack':
            def key(cell):
                return cell.fullness(), cell.id
        else:
            def key(cell):
                free, memory, headroom = cell.fullness()
                return (-free, -memory, -headroom), cell.id
        order = self._orders[strategy] = tuple(sorted(self.cells, key=key))
        return order


class PCIView:
    """A host's PCI functions as a device fit reads them.

    ``devices``: pci.Device tuples in address order; ``used``: the
    addresses guests hold; ``blocked``: those no new guest may take
    (pci.unavailable); ``socket_of``: {host cell id: socket or None}.
    """

    __slots__ = ('devices', 'used', 'blocked', 'socket_of')

    def __init__(self, devices, used, socket_of):
        self.devices = devices
        self.used = frozenset(used)
        self.blocked = frozenset(pci.unavailable(devices, self.used))
        self.socket_of = socket_of

    @classmethod
    def of_host(cls, host_topology):
        """The PCIView of a HostNUMATopology with usage, or None for a
        host without devices (the fit of a device-less guest reads
        nothing of it)."""
        host_devices = host_topology.get('pci_devices')
        if not host_devices:
            return None
        return cls(pci.devices_of(host_devices),
                   pci.held_addresses(host_devices),
                   {cell.id: cell.get('socket')
                    for cell in host_topology.cells})

    def key(self):
        """What a fit reads of these functions, hashable: two hosts with
        equal keys give a guest the same devices."""
        return (self.devices, self.blocked,
                tuple(sorted(self.socket_of.items())))

    def with_used(self, addresses):
        """A new PCIView with ``addresses`` held too."""
        return PCIView(self.devices, self.used | set(addresses),
                       self.socket_of)


class GuestView:
    """The fields of an InstanceNUMACell request the fit reads."""

    __slots__ = _GUEST_FIELDS

    def __init__(self, guest_cell):
        (self.id, self.cpuset, self.pcpuset, self.memory_mb, self.pagesize,
         self.cpu_policy, self.cpu_thread_policy, self.realtime_vcpus,
         self.virtio_mem_size_mb, self.virtio_mem_block_kb,
         self.virtio_mem_requested_mb,
         self.virtio_mem_current_mb) = _read_guest(guest_cell)


class RequestView(_View):
    """A guest's InstanceNUMATopology request as the fit reads it.

    ``guests``: GuestViews in guest cell id order. ``demands(pagesize_kb)``
    gives their cellfit.Demands, worked out once per forced page size.

    :raises InvalidFitParameter: for a request without guest cells.
    """

    __slots__ = ('instance_uuid', 'emulator_threads_policy', 'guests',
                 '_demands', 'pci_requests', 'pci_policy')

    def __init__(self, request):
        if request is None or not request.cells:
            raise exception.InvalidFitParameter(
                name='request', value=request,
                reason="has no guest cells; a guest without a NUMA request "
                       "needs no NUMA fit")
        self.instance_uuid = request.instance_uuid
        self.emulator_threads_policy = request.emulator_threads_policy
        self.guests = tuple(sorted((GuestView(cell) for cell in request.cells),
                                   key=lambda cell: cell.id))
        self._demands = {}
        # PCIRequests (objects) and the guest's policy; () for most.
        self.pci_requests = tuple(request.get('pci_requests') or ())
        self.pci_policy = request.get('pci_numa_affinity_policy')

    def device_key(self):
        """What a fit reads of the guest's device requests, hashable:
        guests with equal demands and equal keys fit alike (() and None
        for a guest without devices)."""
        return (tuple((r.alias, r.count, r.get('vendor_id'),
                       r.get('product_id'), r.get('device_type'),
                       r.get('numa_policy')) for r in self.pci_requests),
                self.pci_policy)

    def demands(self, pagesize_kb=None):
        """Return each guest cell's Demand, with ``pagesize_kb`` (a page
        size forced on every cell) or the cell's own."""
        try:
            return self._demands[pagesize_kb]
        except KeyError:
            pass
        isolate = (self.emulator_threads_policy ==
                   fields.CPUEmulatorThreadsPolicy.ISOLATE)
        # Isolated emulator threads take one more pCPU on guest cell 0's.
        demands = self._demands[pagesize_kb] = tuple(
            cellfit.demand_of(guest, int(isolate and guest.id == 0),
                              pagesize_kb) for guest in self.guests)
        return demands


class LimitsView(_View):
    """The allocation ratios of a NUMALimits, read once.

    ``cpu_ratio``/``ram_ratio``: the ratio, 1.0 where it is unset.
    """

    __slots__ = ('cpu_ratio', 'ram_ratio')

    def __init__(self, limits):
        cpu, ram = _read_limits(limits)
        self.cpu_ratio = cpu or 1.0
        self.ram_ratio = ram or 1.0


def limits_view(limits):
    """Return LimitsView.of(``limits``), or None for no limits."""
    return None if limits is None else LimitsView.of(limits)
