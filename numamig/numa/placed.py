"""Building the placed InstanceNUMATopology a fit returns, cheaply.

The normal constructor coerces every field through OVO's setters (tens
of microseconds per guest cell, more than the whole search takes). The
fit already holds values of exactly the coerced types (ints, sets of
ints, an int-to-int dict, enum strings taken from the validated request),
so these builders store them the way the constructor would: every field
set and marked changed, as numamig's objects always have them, and sets
and lists in OVO's coercing collection types, which check what is added
later. The unit tests compare the results with normally constructed
objects (fields, primitives, changed fields, stored attributes and their
types), so a change in OVO's storage shows up there first.
"""

import typing

from oslo_versionedobjects import fields as ovo_fields

from numamig import objects

_CELL = objects.InstanceNUMACell
_TOPOLOGY = objects.InstanceNUMATopology
# The element types of the collections, as the fields declare them.
_INTEGER = ovo_fields.Field(ovo_fields.Integer())
_GUEST_CELL = ovo_fields.Field(ovo_fields.Object(_CELL.obj_name()))
_BASES = {ovo_fields.CoercedSet: set, ovo_fields.CoercedList: list}


def _coerced(collection_type, element, obj, name, items):
    """Return OVO's coercing collection holding ``items``.

    The items are of the element type already, so they go in through the
    base type, uncoerced; what is added later is coerced. The attributes
    are the ones CoercedCollectionMixin and enable_coercing set.
    """
    base = _BASES[collection_type]
    result = base.__new__(collection_type)
    base.__init__(result, items)
    result.__dict__ = {'_element_type': element, '_obj': obj,
                       '_field': name}
    return result


def instance_cell(guest, host_cell, pagesize, pins, reserved):
    """Return a placed InstanceNUMACell.

    :param guest: the request's guest cell (or its views.GuestView);
        its sets are copied, so the result shares nothing with it.
    :param pins: a new {vCPU: pCPU} dict; ``reserved`` a new set or None.
    """
    cell = _CELL.__new__(_CELL)
    int_set = ovo_fields.CoercedSet
    vars(cell).update({
        '_context': None,
        '_changed_fields': set(_CELL.fields),
        '_obj_id': guest.id,
        '_obj_host_cell': host_cell,
        '_obj_cpuset': _coerced(int_set, _INTEGER, cell, 'cpuset',
                                guest.cpuset),
        '_obj_pcpuset': _coerced(int_set, _INTEGER, cell, 'pcpuset',
                                 guest.pcpuset),
        '_obj_memory_mb': guest.memory_mb,
        '_obj_pagesize': pagesize,
        '_obj_cpu_pinning': pins,
        '_obj_cpuset_reserved': None if reserved is None else _coerced(
            int_set, _INTEGER, cell, 'cpuset_reserved', reserved),
        '_obj_cpu_policy': guest.cpu_policy,
        '_obj_cpu_thread_policy': guest.cpu_thread_policy,
        '_obj_realtime_vcpus': _coerced(int_set, _INTEGER, cell,
                                        'realtime_vcpus',
                                        guest.realtime_vcpus or ()),
    })
    return cell


def instance_topology(instance_uuid, cells, emulator_threads_policy):
    """Return a placed InstanceNUMATopology of the given cells."""
    topology = _TOPOLOGY.__new__(_TOPOLOGY)
    vars(topology).update({
        '_context': None,
        '_changed_fields': set(_TOPOLOGY.fields),
        '_obj_instance_uuid': instance_uuid,
        '_obj_cells': _coerced(ovo_fields.CoercedList, _GUEST_CELL,
                               topology, 'cells', cells),
        '_obj_emulator_threads_policy': emulator_threads_policy,
    })
    return topology


class PlacedCell(typing.NamedTuple):
    """Where a fit put one guest cell, in plain values.

    ``guest``: the request's guest cell (or its views.GuestView);
    ``pins``: {vCPU: pCPU}; ``reserved``: the isolated emulator threads'
    pCPUs or None.
    """

    guest: object
    host_cell: int
    pagesize: int | None
    pins: dict
    reserved: set | None


class Placement(typing.NamedTuple):
    """A whole fit's answer in plain values, turned into the placed
    InstanceNUMATopology by ``topology()`` when someone needs it (a
    scheduler fitting a guest on many hosts needs it for one)."""

    instance_uuid: str | None
    cells: tuple
    emulator_threads_policy: str | None

    def topology(self):
        """Return a new placed InstanceNUMATopology.

        Each call builds a new one that shares nothing with the others.
        """
        return instance_topology(
            self.instance_uuid,
            [instance_cell(cell.guest, cell.host_cell, cell.pagesize,
                           dict(cell.pins),
                           None if cell.reserved is None
                           else set(cell.reserved))
             for cell in self.cells],
            self.emulator_threads_policy)
