"""NUMAMigrateInfo: what the destination tells the source to write in XML.

An InstanceNUMATopology is not enough for the source to build the
destination's domain XML: the destination also decides where emulator
threads go, which vCPUs are realtime and what its shared pCPU set is. This
object is the hypervisor-neutral, versioned carrier of those decisions.
"""

from oslo_versionedobjects import fields

from numamig.objects import base
from numamig.objects import fields as nm_fields
from numamig.objects.host_numa import _is_page_size

# A node's distance to itself, and the largest distance (unreachable), in
# ACPI's SLIT as libvirt's <distances> takes them.
LOCAL_DISTANCE = 10
MAX_DISTANCE = 255


@base.register
class NUMAMigrateInfo(base.NumamigObject):
    """The destination's placement of a migrating guest, for the XML.

    ``cpu_pins``: vCPU -> host pCPUs (one pCPU for pinned vCPUs; the
    shared set for floating vCPUs of a NUMA guest). ``cell_pins``: guest
    cell -> host node (a set of exactly one node). ``emulator_pins``:
    pCPUs for the emulator (and I/O) threads. ``sched_vcpus`` and
    ``sched_priority``: realtime vCPUs and their FIFO priority.
    ``pagesizes``: guest cell -> page size in KiB for cells backed by
    explicit pages. ``floating_cpus``: the destination's shared set for
    ``<vcpu cpuset>``; None removes the attribute. ``cell_distances``:
    guest cell -> guest cell -> the destination's distance between the
    host nodes they are placed on, for the guest's ``<distances>`` (the
    guest kernel reads them at boot); empty when the destination does
    not know them all (libvirt gave it no full table), for a guest of
    one cell, or from a destination that does not tell them: the
    guest's XML then carries none.
    """

    # Version 1.0: Initial version (release 2; its development steps ship
    #              as this one version, as LiveMigrateData 1.1's do:
    #              cell_distances joined before release 2, and no release
    #              before it sends or receives NUMAMigrateInfo)
    VERSION = '1.0'

    fields = {
        'cpu_pins': nm_fields.IntToIntSetField(default={}),
        'cell_pins': nm_fields.IntToIntSetField(default={}),
        'emulator_pins': fields.SetOfIntegersField(default=set()),
        'sched_vcpus': fields.SetOfIntegersField(default=set()),
        'sched_priority': fields.IntegerField(nullable=True, default=None),
        'pagesizes': nm_fields.IntToIntField(default={}),
        'floating_cpus': fields.SetOfIntegersField(nullable=True,
                                                   default=None),
        'cell_distances': nm_fields.IntToIntMapField(default={}),
    }

    @property
    def host_nodes(self):
        """Every host node the guest's memory lives on."""
        return set().union(*self.get('cell_pins', {}).values())

    def _validate(self):
        self._validate_ids()
        for cell, nodes in self.get('cell_pins', {}).items():
            if len(nodes) != 1:
                raise self.invalid(
                    f"guest cell {cell} must be pinned to exactly one host "
                    f"node, got {sorted(nodes)}")
        for vcpu, pcpus in self.get('cpu_pins', {}).items():
            if not pcpus:
                raise self.invalid(f"vCPU {vcpu} is pinned to no pCPU")
        rt_stray = self.get('sched_vcpus', set()) - set(
            self.get('cpu_pins', {}))
        if rt_stray and self.get('cpu_pins'):
            raise self.invalid(
                f"realtime vCPUs {sorted(rt_stray)} have no pins")
        priority = self.get('sched_priority')
        if self.get('sched_vcpus') and priority is None:
            raise self.invalid("realtime vCPUs given without sched_priority")
        if priority is not None and not 1 <= priority <= 99:
            raise self.invalid(
                f"sched_priority must be within 1-99, got {priority}")
        for cell, size in self.get('pagesizes', {}).items():
            if not _is_page_size(size):
                raise self.invalid(
                    f"guest cell {cell}: unknown page size {size} KiB")
            if cell not in self.get('cell_pins', {}):
                raise self.invalid(
                    f"page size for guest cell {cell}, which has no host "
                    f"node pin")
        self._validate_distances()

    def _validate_distances(self):
        # What libvirt and the guest's firmware table take: a full table
        # over the placed cells, 10 to a cell itself, 11-255 between two
        # (a guest kernel ignores a whole SLIT with a remote entry of 10
        # or less).
        table = self.get('cell_distances', {})
        if not table:
            return
        cells = set(self.get('cell_pins', {}))
        for cell in sorted(set(table) | cells):
            row = table.get(cell)
            if row is None or cell not in cells or set(row) != cells:
                raise self.invalid(
                    f"cell_distances must give every guest cell's distance "
                    f"to each of {sorted(cells)}; guest cell {cell} has "
                    f"{sorted(row or ())}")
            for other, value in sorted(row.items()):
                low = LOCAL_DISTANCE if other == cell else LOCAL_DISTANCE + 1
                high = LOCAL_DISTANCE if other == cell else MAX_DISTANCE
                if not low <= value <= high:
                    raise self.invalid(
                        f"distance from guest cell {cell} to {other} must "
                        f"be within {low}-{high}, got {value}")

    def _validate_ids(self):
        # Keys are checked by the field type; pCPU and node ids are not.
        named = {
            'cpu_pins': set().union(*self.get('cpu_pins', {}).values()),
            'cell_pins': set().union(*self.get('cell_pins', {}).values()),
            'emulator_pins': self.get('emulator_pins', set()),
            'sched_vcpus': self.get('sched_vcpus', set()),
            'floating_cpus': self.get('floating_cpus') or set(),
        }
        for name, ids in named.items():
            negative = sorted(i for i in ids if i < 0)
            if negative:
                raise self.invalid(f"{name} holds negative ids {negative}")
