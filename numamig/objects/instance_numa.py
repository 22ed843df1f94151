"""Guest-side NUMA objects: guest cells and the guest NUMA topology.

The same classes describe a request (no host cell, no pins yet) and a
placement (host cell chosen, every pinned vCPU mapped to a pCPU). Which
of the two an object is can be asked with ``is_placed``.
"""

from oslo_versionedobjects import fields

from numamig.objects import base
from numamig.objects import fields as nm_fields
from numamig.objects.host_numa import _is_page_size

# Page-size requests a guest cell may carry before it is placed (Nova's
# MEMPAGES_* values): the host's smallest pages, its largest huge pages
# that fit, or any size that fits. A placed cell holds a real size.
PAGESIZE_SMALL = -1
PAGESIZE_LARGE = -2
PAGESIZE_ANY = -3
PAGESIZE_REQUESTS = (PAGESIZE_SMALL, PAGESIZE_LARGE, PAGESIZE_ANY)


@base.register
class InstanceNUMACell(base.NumamigObject):
    """One guest NUMA cell and, once placed, where it runs on the host.

    ``cpuset`` are the guest's floating vCPUs of this cell, ``pcpuset``
    its pinned ones; ``cpu_pinning`` maps each pinned vCPU to its pCPU;
    ``cpuset_reserved`` holds the pCPUs reserved for isolated emulator
    threads (guest cell 0 only); ``pagesize`` is in KiB (None: the host's
    default small pages, no explicit backing; before placement it may be
    one of the PAGESIZE_* requests).
    """

    # Version 1.0: Initial version
    VERSION = '1.0'

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
    }

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
    """A guest's NUMA cells; with host cells and pins once placed."""

    # Version 1.0: Initial version
    VERSION = '1.0'

    obj_relationships = {'cells': [('1.0', '1.0')]}

    fields = {
        'instance_uuid': fields.UUIDField(nullable=True, default=None),
        'cells': fields.ListOfObjectsField('InstanceNUMACell', default=[]),
        'emulator_threads_policy': nm_fields.CPUEmulatorThreadsPolicyField(
            nullable=True, default=None),
    }

    @property
    def vcpus(self):
        return set().union(*(cell.vcpus for cell in self.cells))

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
