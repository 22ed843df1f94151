"""Guest-side NUMA objects: guest cells and the guest NUMA topology.

The same classes describe a request (no host cell, no pins yet) and a
placement (host cell chosen, every pinned vCPU mapped to a pCPU). Which
of the two an object is can be asked with ``is_placed``.
"""

from oslo_utils import versionutils
from oslo_versionedobjects import fields

from numamig.objects import base
from numamig.objects import fields as nm_fields
from numamig.objects import pci
from numamig.objects.host_numa import _is_page_size

# Page-size requests a guest cell may carry before it is placed (Nova's
# MEMPAGES_* values): the host's smallest pages, its largest huge pages
# that fit, or any size that fits. A placed cell holds a real size.
PAGESIZE_SMALL = -1
PAGESIZE_LARGE = -2
PAGESIZE_ANY = -3
PAGESIZE_REQUESTS = (PAGESIZE_SMALL, PAGESIZE_LARGE, PAGESIZE_ANY)


VIRTIO_MEM_FIELDS = ('virtio_mem_size_mb', 'virtio_mem_block_kb',
                     'virtio_mem_requested_mb', 'virtio_mem_current_mb')


def virtio_mem_problem(size_mb, block_kb, requested_mb, current_mb=None):
    """Return why a virtio-mem device's sizes are wrong, or None.

    QEMU's rules: a power-of-two block size of at least 1 MiB, a size
    that is a whole number of blocks, a requested size of whole blocks
    between 0 and the size. ``current_mb`` (what the guest reports) is
    only bounded by the size.
    """
    if block_kb is None or block_kb < 1024 or block_kb & (block_kb - 1):
        return (f"block size {block_kb} KiB must be a power of two of at "
                f"least 1024 KiB")
    if size_mb < 1 or (size_mb * 1024) % block_kb:
        return (f"size {size_mb} MiB must be a positive whole number of "
                f"{block_kb} KiB blocks")
    if requested_mb is None or not 0 <= requested_mb <= size_mb or \
            (requested_mb * 1024) % block_kb:
        return (f"requested {requested_mb} MiB must be whole {block_kb} "
                f"KiB blocks between 0 and the size {size_mb} MiB")
    if current_mb is not None and not 0 <= current_mb <= size_mb:
        return (f"current {current_mb} MiB must be between 0 and the size "
                f"{size_mb} MiB")
    return None


@base.register
class InstanceNUMACell(base.NumamigObject):
    """One guest NUMA cell and, once placed, where it runs on the host.

    ``cpuset`` are the guest's floating vCPUs of this cell, ``pcpuset``
    its pinned ones; ``cpu_pinning`` maps each pinned vCPU to its pCPU;
    ``cpuset_reserved`` holds the pCPUs reserved for isolated emulator
    threads (guest cell 0 only); ``pagesize`` is in KiB (None: the host's
    default small pages, no explicit backing; before placement it may be
    one of the PAGESIZE_* requests).

    The ``virtio_mem_*`` fields describe the cell's virtio-mem device
    (None: the cell has none): ``virtio_mem_size_mb`` is its maximum,
    ``virtio_mem_block_kb`` its block size, ``virtio_mem_requested_mb``
    what the host last asked the guest to have plugged and
    ``virtio_mem_current_mb`` what the guest last reported plugged (None
    until it reports). ``memory_mb`` stays the cell's boot memory; the
    host holds ``memory_held_mb`` for the cell (see numa/vmem.py).
    """

    # Version 1.0 - Release 1: Initial version
    # Version 1.1 - Release 2: virtio_mem_size_mb, virtio_mem_block_kb,
    #              virtio_mem_requested_mb, virtio_mem_current_mb
    #              (virtio-mem devices)
    VERSION = '1.1'

    fields = {
        'id': fields.IntegerField(),
        'host_cell': fields.IntegerField(nullable=True, default=None),
        'cpuset': fields.SetOfIntegersField(default=set()),
        'pcpuset': fields.SetOfIntegersField(default=set()),
        'memory_mb': fields.IntegerField(),
        'pagesize': fields.IntegerField(nullable=True, default=None),
        'cpu_pinning': nm_fields.IntToIntField(default={}),
        'cpuset_reserved': fields.SetOfIntegersField(nullable=True,
                                                     default=None),
        'cpu_policy': nm_fields.CPUAllocationPolicyField(nullable=True,
                                                         default=None),
        'cpu_thread_policy': nm_fields.CPUThreadAllocationPolicyField(
            nullable=True, default=None),
        'realtime_vcpus': fields.SetOfIntegersField(default=set()),
        'virtio_mem_size_mb': fields.IntegerField(nullable=True,
                                                  default=None),
        'virtio_mem_block_kb': fields.IntegerField(nullable=True,
                                                   default=None),
        'virtio_mem_requested_mb': fields.IntegerField(nullable=True,
                                                       default=None),
        'virtio_mem_current_mb': fields.IntegerField(nullable=True,
                                                     default=None),
    }

    def obj_make_compatible(self, primitive, target_version):
        """A 1.0 receiver knows no virtio-mem device: the fields go.

        Peers of API versions that carry InstanceNUMACell 1.0 never see a
        guest with virtio-mem (the conductor refuses such destinations),
        so dropping them loses nothing a 1.0 peer could act on.
        """
        super().obj_make_compatible(primitive, target_version)
        if versionutils.convert_version_to_tuple(target_version) < (1, 1):
            for name in VIRTIO_MEM_FIELDS:
                primitive.pop(name, None)

    @property
    def has_virtio_mem(self):
        return self.get('virtio_mem_size_mb') is not None

    def obj_version_needed(self):
        """1.0 for a cell without a virtio-mem device: an older peer
        loses nothing of it."""
        return self.VERSION if self.has_virtio_mem else '1.0'

    @property
    def virtio_mem_held_mb(self):
        """Host memory the cell's virtio-mem device holds: the larger of
        what was asked for (growth is held before the guest plugs it)
        and what the guest still has plugged (a shrink is released only
        once the guest really unplugged)."""
        if not self.has_virtio_mem:
            return 0
        return max(self.get('virtio_mem_requested_mb') or 0,
                   self.get('virtio_mem_current_mb') or 0)

    @property
    def memory_held_mb(self):
        """Boot memory plus what the virtio-mem device holds."""
        return self.memory_mb + self.virtio_mem_held_mb

    @property
    def vcpus(self):
        """All vCPUs of the cell, floating and pinned.

        A plain set: OVO's coercing set would coerce every vCPU again to
        build a value nobody stores."""
        return set.union(self.cpuset, self.pcpuset)

    @property
    def is_pinned(self):
        return bool(self.get('cpu_pinning'))

    def _validate(self):
        base.require_nonnegative(self, 'id', 'host_cell')
        if self.get('memory_mb') is not None and self.memory_mb <= 0:
            raise self.invalid(
                f"guest cell {self.id}: memory_mb must be positive, got "
                f"{self.memory_mb}")
        pagesize = self.get('pagesize')
        if (pagesize in PAGESIZE_REQUESTS
                and self.get('host_cell') is None):
            pass  # a request, resolved to a real size by the fit
        elif pagesize is not None and not _is_page_size(pagesize):
            raise self.invalid(
                f"guest cell {self.id}: unknown page size {pagesize} KiB")
        both = self.cpuset & self.pcpuset
        if both:
            raise self.invalid(
                f"guest cell {self.id}: vCPUs {sorted(both)} are both "
                f"floating and pinned")
        self._validate_pins()
        self._validate_virtio_mem()

    def _validate_virtio_mem(self):
        values = {name: self.get(name) for name in VIRTIO_MEM_FIELDS}
        size, block = values['virtio_mem_size_mb'], \
            values['virtio_mem_block_kb']
        if size is None:
            stray = sorted(k for k, v in values.items() if v is not None)
            if stray:
                raise self.invalid(
                    f"guest cell {self.id}: {', '.join(stray)} without "
                    f"virtio_mem_size_mb")
            return
        why = virtio_mem_problem(size, block,
                                 values['virtio_mem_requested_mb'],
                                 values['virtio_mem_current_mb'])
        if why:
            raise self.invalid(f"guest cell {self.id}: virtio-mem {why}")

    def _validate_pins(self):
        pinning = self.get('cpu_pinning') or {}
        stray = set(pinning) - self.pcpuset
        if stray:
            raise self.invalid(
                f"guest cell {self.id}: pins for vCPUs {sorted(stray)} that "
                f"are not pinned vCPUs of this cell {sorted(self.pcpuset)}")
        if pinning and set(pinning) != self.pcpuset:
            missing = sorted(self.pcpuset - set(pinning))
            raise self.invalid(
                f"guest cell {self.id}: pinned vCPUs {missing} have no pCPU")
        pcpus = list(pinning.values())
        negative = sorted(p for p in pcpus if p < 0)
        if negative:
            raise self.invalid(
                f"guest cell {self.id}: vCPUs pinned to negative pCPUs "
                f"{negative}")
        if len(pcpus) != len(set(pcpus)):
            raise self.invalid(
                f"guest cell {self.id}: two vCPUs pinned to one pCPU in "
                f"{dict(sorted(pinning.items()))}")
        overlap = set(pcpus) & (self.get('cpuset_reserved') or set())
        if overlap:
            raise self.invalid(
                f"guest cell {self.id}: pCPUs {sorted(overlap)} are both "
                f"vCPU pins and emulator thread pCPUs")
        rt_stray = self.realtime_vcpus - self.vcpus
        if rt_stray:
            raise self.invalid(
                f"guest cell {self.id}: realtime vCPUs {sorted(rt_stray)} "
                f"are not vCPUs of this cell")


@base.register
class InstanceNUMATopology(base.NumamigObject):
    """A guest's NUMA cells; with host cells and pins once placed.

    PCI passthrough (objects/pci.py): ``pci_requests`` are the devices
    the guest asks for (PCIRequest each, from ``pci_passthrough:alias``);
    ``pci_numa_affinity_policy`` the guest's
    ``hw:pci_numa_affinity_policy`` (None: each alias' own, else
    'legacy'); once placed, ``pci_devices`` the host functions the claim
    holds (InstancePCIDevice each, in request order).
    """

    # Version 1.0 - Release 1: Initial version
    # Version 1.1 - Release 2: InstanceNUMACell 1.1 (virtio-mem devices);
    #              pci_requests, pci_numa_affinity_policy, pci_devices
    #              (PCI passthrough)
    VERSION = '1.1'

    obj_relationships = {'cells': [('1.0', '1.0'), ('1.1', '1.1')],
                         'pci_requests': [('1.1', '1.0')],
                         'pci_devices': [('1.1', '1.0')]}

    fields = {
        'instance_uuid': fields.UUIDField(nullable=True, default=None),
        'cells': fields.ListOfObjectsField('InstanceNUMACell', default=[]),
        'emulator_threads_policy': nm_fields.CPUEmulatorThreadsPolicyField(
            nullable=True, default=None),
        'pci_requests': fields.ListOfObjectsField('PCIRequest', default=[]),
        'pci_numa_affinity_policy': fields.StringField(nullable=True,
                                                       default=None),
        'pci_devices': fields.ListOfObjectsField('InstancePCIDevice',
                                                 default=[]),
    }

    def _obj_make_obj_compatible(self, primitive, target_version, field):
        # A child list a manifest's backport already took out (the
        # message's own pass reaches the object again): nothing to do;
        # OVO would delete it a second time.
        if field in ('pci_requests', 'pci_devices') and field not in primitive:
            return
        super()._obj_make_obj_compatible(primitive, target_version, field)

    def obj_make_compatible(self, primitive, target_version):
        """A 1.0 receiver knows no PCI devices: the fields go (the
        conductor sends no device guest to such a peer)."""
        super().obj_make_compatible(primitive, target_version)
        if versionutils.convert_version_to_tuple(target_version) < (1, 1):
            for name in ('pci_requests', 'pci_numa_affinity_policy',
                         'pci_devices'):
                primitive.pop(name, None)

    @property
    def vcpus(self):
        return set().union(*(cell.vcpus for cell in self.cells))

    @property
    def has_virtio_mem(self):
        return any(cell.has_virtio_mem for cell in self.get('cells', ()))

    @property
    def has_pci(self):
        """Whether the guest asks for or holds PCI devices."""
        return bool(self.get('pci_requests') or self.get('pci_devices'))

    def obj_version_needed(self):
        """1.1 only for a guest with virtio-mem or PCI devices."""
        return (self.VERSION if self.has_virtio_mem or self.has_pci
                else '1.0')

    @property
    def cpu_pinning(self):
        """vCPU -> pCPU over all cells."""
        result = {}
        for cell in self.cells:
            result.update(cell.get('cpu_pinning') or {})
        return result

    @property
    def cpuset_reserved(self):
        """pCPUs reserved for emulator threads over all cells."""
        return set().union(*((c.get('cpuset_reserved') or set())
                             for c in self.cells))

    @property
    def is_placed(self):
        return bool(self.cells) and all(
            c.get('host_cell') is not None for c in self.cells)

    def _validate(self):
        ids = [cell.id for cell in self.cells]
        if sorted(ids) != list(range(len(ids))):
            raise self.invalid(
                f"guest cell ids must be 0..{len(ids) - 1}, got {ids}")
        seen = set()
        for cell in self.cells:
            if cell.vcpus & seen:
                raise self.invalid(
                    f"vCPUs {sorted(cell.vcpus & seen)} belong to more than "
                    f"one guest cell")
            seen |= cell.vcpus
        if seen and seen != set(range(len(seen))):
            raise self.invalid(
                f"vCPUs must be numbered 0..{len(seen) - 1}, got "
                f"{sorted(seen)}")
        self._validate_placement()
        self._validate_pci()

    def _validate_pci(self):
        policy = self.get('pci_numa_affinity_policy')
        if policy is not None and policy not in pci.NUMA_POLICIES:
            raise self.invalid(
                f"pci_numa_affinity_policy must be one of "
                f"{', '.join(pci.NUMA_POLICIES)}, got {policy!r}")
        aliases = [r.alias for r in self.get('pci_requests', ())]
        if len(aliases) != len(set(aliases)):
            raise self.invalid(f"PCI alias requested twice: {aliases}")
        held = [d.address for d in self.get('pci_devices', ())]
        if len(held) != len(set(held)):
            raise self.invalid(f"one PCI device held twice: {held}")
        cells = {c.id for c in self.cells}
        stray = sorted(d.guest_cell for d in self.get('pci_devices', ())
                       if d.get('guest_cell') is not None
                       and d.guest_cell not in cells)
        if stray:
            raise self.invalid(
                f"PCI devices given to guest cells {stray} the guest does "
                f"not have")

    def _validate_placement(self):
        hosts = [c.host_cell for c in self.cells
                 if c.get('host_cell') is not None]
        if len(hosts) != len(set(hosts)):
            raise self.invalid(
                f"two guest cells placed on one host cell: {hosts}")
        pcpus = [p for c in self.cells
                 for p in (c.get('cpu_pinning') or {}).values()]
        if len(pcpus) != len(set(pcpus)):
            raise self.invalid("one pCPU is pinned by vCPUs of two cells")
