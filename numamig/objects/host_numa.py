"""Host-side NUMA objects: page pools, host cells, the host topology, limits.

A HostNUMATopology describes what a compute host has AND what is used of
it; the NUMA engine (numa/) derives new topologies from it, never editing
one in place.
"""

from oslo_utils import versionutils
from oslo_versionedobjects import fields

from numamig.objects import base
from numamig.objects import fields as nm_fields


def _is_page_size(size_kb):
    # Page sizes are powers of two from 4 KiB (x86 4K/2M/1G, arm64 16K/64K,
    # ppc64 64K/16M/16G). Anything else is a typo or a corrupt report.
    return size_kb >= 4 and size_kb & (size_kb - 1) == 0


@base.quick_getters
@base.register
class NUMAPagesTopology(base.NumamigObject):
    """One page pool of a host cell: ``total`` pages of ``size_kb`` each."""

    # Version 1.0: Initial version
    VERSION = '1.0'

    fields = {
        'size_kb': fields.IntegerField(),
        'total': fields.IntegerField(),
        'used': fields.IntegerField(default=0),
        'reserved': fields.IntegerField(default=0),
    }

    @property
    def free(self):
        """Pages a new guest may take: total - used - reserved."""
        return self.total - self.used - self.get('reserved', 0)

    @property
    def free_kb(self):
        return self.free * self.size_kb

    def _validate(self):
        base.require_nonnegative(self, 'total', 'used', 'reserved')
        if not _is_page_size(self.size_kb):
            raise self.invalid(
                f"unknown page size {self.size_kb} KiB (must be a power of "
                f"two of at least 4 KiB)")
        if self.used + self.get('reserved', 0) > self.total:
            raise self.invalid(
                f"{self.size_kb} KiB pool: used ({self.used}) + reserved "
                f"({self.get('reserved', 0)}) exceed total ({self.total})")


@base.quick_getters
@base.register
class HostNUMACell(base.NumamigObject):
    """A host NUMA node with its CPUs, memory and page pools, and usage.

    ``cpuset`` holds the pCPUs that floating (shared) vCPUs may use,
    ``pcpuset`` the pCPUs reserved for pinned vCPUs; ``pinned_cpus`` is
    the subset of ``pcpuset`` already taken. ``siblings`` lists SMT
    thread groups (only CPUs of this cell). ``cpu_usage`` counts floating
    vCPUs placed on the shared set; ``memory_usage_mb`` memory claimed.
    ``socket`` is the physical package the cell's CPUs are on (libvirt's
    ``socket_id``; None where unknown): the 'socket' PCI NUMA affinity
    policy reads it.
    """

    # Version 1.0 - Release 1: Initial version
    # Version 1.1 - Release 2: socket (the 'socket' PCI affinity policy)
    VERSION = '1.1'

    obj_relationships = {'mempages': [('1.0', '1.0'), ('1.1', '1.0')]}

    fields = {
        'id': fields.IntegerField(),
        'cpuset': fields.SetOfIntegersField(default=set()),
        'pcpuset': fields.SetOfIntegersField(default=set()),
        'pinned_cpus': fields.SetOfIntegersField(default=set()),
        'siblings': fields.ListOfSetsOfIntegersField(default=[]),
        'memory_mb': fields.IntegerField(),
        'memory_usage_mb': fields.IntegerField(default=0),
        'cpu_usage': fields.IntegerField(default=0),
        'mempages': fields.ListOfObjectsField('NUMAPagesTopology',
                                              default=[]),
        'distances': nm_fields.IntToIntField(default={}),
        'socket': fields.IntegerField(nullable=True, default=None),
    }

    def obj_make_compatible(self, primitive, target_version):
        """A 1.0 receiver knows no sockets: the 'socket' PCI policy is
        refused by a peer that cannot read them anyway."""
        super().obj_make_compatible(primitive, target_version)
        if versionutils.convert_version_to_tuple(target_version) < (1, 1):
            primitive.pop('socket', None)

    def obj_version_needed(self):
        return self.VERSION if self.get('socket') is not None else '1.0'

    # The set fields are oslo.versionedobjects' coerced sets, whose
    # operators coerce every element of the result again: a report's
    # validation spent most of its time there. The reads below work on
    # plain sets (their results are never assigned back).

    @property
    def free_pcpus(self):
        return set(self.pcpuset).difference(self.pinned_cpus)

    @property
    def all_cpus(self):
        return set(self.cpuset).union(self.pcpuset)

    def pages_of(self, size_kb):
        """Return the pool of the given page size, or None."""
        for pool in self.mempages:
            if pool.size_kb == size_kb:
                return pool
        return None

    def _validate(self):
        base.require_nonnegative(self, 'id', 'memory_mb', 'memory_usage_mb',
                                 'cpu_usage', 'socket')
        shared, dedicated = set(self.cpuset), set(self.pcpuset)
        if any(cpu < 0 for cpu in shared) or any(cpu < 0 for cpu in
                                                 dedicated):
            raise self.invalid(f"cell {self.id}: negative CPU id")
        both = shared & dedicated
        if both:
            raise self.invalid(
                f"cell {self.id}: CPUs {sorted(both)} are both shared "
                f"(cpuset) and dedicated (pcpuset)")
        stray = set(self.pinned_cpus) - dedicated
        if stray:
            raise self.invalid(
                f"cell {self.id}: pinned CPUs {sorted(stray)} are not in "
                f"its dedicated set {sorted(self.pcpuset)}")
        self._validate_siblings()
        sizes = [pool.size_kb for pool in self.mempages]
        if len(sizes) != len(set(sizes)):
            raise self.invalid(f"cell {self.id}: duplicate page pool sizes "
                               f"{sorted(sizes)}")

    def _validate_siblings(self):
        seen = set()
        for group in self.siblings:
            twice = seen.intersection(group)
            if twice:
                raise self.invalid(
                    f"cell {self.id}: CPUs {sorted(twice)} appear in "
                    f"two sibling groups")
            seen.update(group)
        outside = seen - self.all_cpus
        if outside:
            raise self.invalid(
                f"cell {self.id}: sibling CPUs {sorted(outside)} are not "
                f"CPUs of this cell")


@base.quick_getters
@base.register
class HostNUMATopology(base.NumamigObject):
    """All NUMA cells of a host, and the PCI functions it can pass through.

    ``pci_devices``: HostPCIDevice each (objects/pci.py), the functions
    the ``[pci] device_spec`` allow-list admits, in address order; which
    are used is derived from the guests' placements (numa/pci.py).
    """

    # Version 1.0 - Release 1: Initial version
    # Version 1.1 - Release 2: pci_devices (HostPCIDevice 1.0);
    #              HostNUMACell 1.1 (socket)
    VERSION = '1.1'

    obj_relationships = {'cells': [('1.0', '1.0'), ('1.1', '1.1')],
                         'pci_devices': [('1.1', '1.0')]}

    fields = {
        'cells': fields.ListOfObjectsField('HostNUMACell', default=[]),
        'pci_devices': fields.ListOfObjectsField('HostPCIDevice',
                                                 default=[]),
    }

    def _obj_make_obj_compatible(self, primitive, target_version, field):
        # A child list a manifest's backport already took out (the
        # message's own pass reaches the object again): nothing to do;
        # OVO would delete it a second time.
        if field in ('pci_devices',) and field not in primitive:
            return
        super()._obj_make_obj_compatible(primitive, target_version, field)

    def obj_make_compatible(self, primitive, target_version):
        """A 1.0 receiver knows no devices: a host reporting to it is
        taken as having none (it schedules no device guest anyway)."""
        super().obj_make_compatible(primitive, target_version)
        if versionutils.convert_version_to_tuple(target_version) < (1, 1):
            primitive.pop('pci_devices', None)

    def obj_version_needed(self):
        """1.0 for a host without devices and sockets: an older peer
        loses nothing of it."""
        if self.get('pci_devices') or any(
                cell.get('socket') is not None for cell in self.cells):
            return self.VERSION
        return '1.0'

    def cell(self, cell_id):
        """Return the cell with the given id.

        :raises KeyError: if the host has no such cell.
        """
        for cell in self.cells:
            if cell.id == cell_id:
                return cell
        raise KeyError(cell_id)

    def _validate(self):
        ids = [cell.id for cell in self.cells]
        if len(ids) != len(set(ids)):
            raise self.invalid(f"duplicate cell ids {sorted(ids)}")
        seen = set()
        for cell in self.cells:
            shared = cell.all_cpus & seen
            if shared:
                raise self.invalid(
                    f"CPUs {sorted(shared)} belong to more than one cell")
            seen |= cell.all_cpus
        addresses = [device.address for device in self.get('pci_devices',
                                                             ())]
        if len(addresses) != len(set(addresses)):
            raise self.invalid(f"duplicate PCI device addresses in "
                               f"{sorted(addresses)}")
        for device in self.get('pci_devices', ()):
            node = device.get('numa_node')
            if node is not None and node not in ids:
                raise self.invalid(
                    f"PCI device {device.address} is on NUMA node {node}, "
                    f"which is not a cell of this host {sorted(ids)}")
            if device.get('parent_addr') == device.address:
                raise self.invalid(
                    f"PCI device {device.address} is its own parent")


@base.register
class NUMALimits(base.NumamigObject):
    """Overcommit ratios a fit must respect, per host cell."""

    # Version 1.0: Initial version
    VERSION = '1.0'

    fields = {
        'cpu_allocation_ratio': fields.FloatField(default=1.0),
        'ram_allocation_ratio': fields.FloatField(default=1.0),
    }

    def _validate(self):
        for name in ('cpu_allocation_ratio', 'ram_allocation_ratio'):
            value = self.get(name)
            if value is not None and not value > 0:
                raise self.invalid(f"{name} must be positive, got {value}")
