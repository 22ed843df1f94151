"""Build a stored host report straight from its JSON, for the host cache.

A conductor worker feeds its scheduler cache the reports other workers
stored (numamig.conductor.records.sync_reports). Built as every stored
object is (numamig.db.primitives.load: oslo.versionedobjects' hydration,
every set and list of every cell coerced element by element into a
coercing container, the whole report validated), then validated again by
the cache and its containers replaced by the cache's frozen, shared ones
(compact.py), one report of 8 cells took 1.3 ms on an idle core and 3-4
ms on the conductor's busy ones. A worker meeting 6,700 hosts it had
never seen (10,000 hosts, three workers, all reporting at once) built
them on a migration's path for over a minute (issue 37, item 4).

``ReportBuilder.build`` makes the topology's objects directly, in the
form the cache keeps them (frozen sets shared among hosts that have the
same ones, plain lists): what the cache would hold after the old path,
equal field by field, without the containers it throws away. It reads
only the shape the current release stores: every object at its class's
VERSION, every field of the class's, integers as integers. Anything else
(an older row, a PCI device list, a corrupt row) is built the old way,
which reports a bad row as before. It does not validate: the cache does,
once (HostStateCache.update), where the old path validated twice.
"""

import functools

from numamig import objects
from numamig.scheduler import compact

_NS = 'numamig_object'
_NAME, _VERSION, _DATA, _SPACE = (f'{_NS}.name', f'{_NS}.version',
                                  f'{_NS}.data', f'{_NS}.namespace')
_PREFIX = '_obj_'

_CELL_INTS = ('id', 'memory_mb', 'memory_usage_mb', 'cpu_usage')
_CELL_SETS = ('cpuset', 'pcpuset')
_REPORT_STRINGS = ('host', 'hypervisor_uri', 'hypervisor_type', 'fingerprint')
# The report's small optional objects, built by OVO when present.
_REPORT_OBJECTS = {'cpu': objects.HostCPU, 'cpu_power': objects.CPUPowerState,
                   'locality': objects.HostLocality}


class _Unknown(Exception):
    """A primitive outside the shape this module reads."""


class ReportBuilder:
    """Builds stored reports for one host cache.

    Not thread-safe: a conductor worker calls it under its report cursor's
    lock (numamig.conductor.worker.ReportCursor), as it reads reports.
    The tables it keeps hold each distinct hardware description it has
    seen (a few per kind of host), as compact.Interner's do.

    :param fallback: ``fallback(change)`` builds a report the old way
        (numamig.db.compute_nodes.Change.load).
    """

    def __init__(self):
        self._sets = {}
        self._siblings = {}
        self._distances = {}
        # Counts, for tests and benchmarks: built here, built the old way.
        self.direct = 0
        self.fallen_back = 0

    def build(self, change):
        """The ComputeNodeReport of a stored row (numamig.db.compute_nodes.
        Change), as ``change.load()`` builds it.

        :raises StoredRecordInvalid: as ``change.load()``, for a row this
            module does not read itself.
        """
        primitive = change.primitive()
        try:
            report = self._report(change, primitive)
        except Exception:  # noqa: BLE001 - the old path reports it
            # Anything this module does not read (or that fails in OVO's
            # hands, for the small objects) is built the old way, which
            # raises StoredRecordInvalid naming the row if it is bad.
            report = None
        if report is None:
            self.fallen_back += 1
            return change.load()
        self.direct += 1
        return report

    # -- the report -------------------------------------------------------

    def _report(self, change, primitive):
        data = _data(primitive, objects.ComputeNodeReport)
        if 'topology' not in data or 'reported_at' not in data:
            raise _Unknown()
        values = {'topology': self._topology(data['topology'])}
        for name in _REPORT_STRINGS:
            if name in data:
                values[name] = _str(data[name])
        values.setdefault('hypervisor_type', 'qemu')
        if 'service_version' in data:
            values['service_version'] = _int(data['service_version'])
        guard = data.get('migration_guard')
        values['migration_guard'] = None if guard is None else _str(guard)
        for name, cls in _REPORT_OBJECTS.items():
            values[name] = _small_object(data.get(name), cls)
        if 'guest_cpus' in data:
            # The guests' CPUs (a few small objects, none on most hosts'
            # quiet reports), built by OVO as the old path does.
            if type(data['guest_cpus']) is not list:
                raise _Unknown()
            values['guest_cpus'] = [
                _small_object(item, objects.InstanceCPU)
                for item in data['guest_cpus']]
        # A DateTimeField primitive has whole seconds; the column is exact
        # and is what the old path keeps (numamig.db.compute_nodes.
        # _report_from): the text is not parsed.
        _str(data['reported_at'])
        values['reported_at'] = change.reported_at
        return _new(objects.ComputeNodeReport, values)

    def _topology(self, primitive):
        data = _data(primitive, objects.HostNUMATopology)
        if data.get('pci_devices'):
            raise _Unknown()      # rare: the old path builds the devices
        cells = [self._cell(cell) for cell in data.get('cells', ())]
        return _new(objects.HostNUMATopology,
                    {'cells': cells, 'pci_devices': []})

    def _cell(self, primitive):
        data = _data(primitive, objects.HostNUMACell)
        values = {}
        for name in _CELL_INTS:
            if name in data:
                values[name] = _int(data[name])
        if 'id' not in values or 'memory_mb' not in values:
            raise _Unknown()      # the old path names what is missing
        values.setdefault('memory_usage_mb', 0)
        values.setdefault('cpu_usage', 0)
        socket = data.get('socket')
        values['socket'] = None if socket is None else _int(socket)
        for name in _CELL_SETS:
            values[name] = self._set(data.get(name, ()))
        values['pinned_cpus'] = compact.FrozenSet(
            _ints(data.get('pinned_cpus', ())))
        groups = tuple(tuple(_ints(group))
                       for group in data.get('siblings', ()))
        siblings = self._siblings.get(groups)
        if siblings is None:
            siblings = self._siblings[groups] = [self._shared(group)
                                                 for group in groups]
        values['siblings'] = siblings
        values['mempages'] = [self._pool(pool)
                              for pool in data.get('mempages', ())]
        values['distances'] = self._distance_table(data.get('distances', {}))
        return _new(objects.HostNUMACell, values)

    @staticmethod
    def _pool(primitive):
        data = _data(primitive, objects.NUMAPagesTopology)
        # size_kb and total are required (KeyError: the old path names
        # what is missing); used and reserved default to 0.
        return _new(objects.NUMAPagesTopology, {
            'size_kb': _int(data['size_kb']), 'total': _int(data['total']),
            'used': _int(data.get('used', 0)),
            'reserved': _int(data.get('reserved', 0))})

    def _set(self, items):
        return self._shared(tuple(_ints(items)))

    def _shared(self, key):
        shared = self._sets.get(key)
        if shared is None:
            shared = self._sets[key] = compact.FrozenSet(key)
        return shared

    def _distance_table(self, primitive):
        if type(primitive) is not dict:
            raise _Unknown()
        key = tuple(primitive.items())
        shared = self._distances.get(key)
        if shared is None:
            table = {}
            for cell, distance in key:
                number = int(cell)
                if number < 0 or str(number) != cell:
                    raise _Unknown()
                table[number] = _int(distance)
            shared = self._distances[key] = table
        return shared


def _data(primitive, cls):
    """The data of an object primitive of ``cls`` at its VERSION holding
    only fields of ``cls``; else _Unknown."""
    name, version, fields = _shape(cls)
    if type(primitive) is not dict or primitive.get(_NAME) != name or \
            primitive.get(_VERSION) != version or \
            primitive.get(_SPACE) != 'numamig':
        raise _Unknown()
    data = primitive[_DATA]
    if type(data) is not dict or not data.keys() <= fields:
        raise _Unknown()
    return data


@functools.cache
def _shape(cls):
    return cls.obj_name(), cls.VERSION, cls.fields.keys()


def _small_object(primitive, cls):
    """One of the report's small objects, built by OVO as the old path
    does, or None."""
    if primitive is None:
        return None
    obj = cls.obj_from_primitive(primitive)
    if type(obj) is not cls:
        raise _Unknown()
    obj.obj_reset_changes(recursive=True)
    return obj


def _str(value):
    if type(value) is not str:
        raise _Unknown()
    return value


def _int(value):
    if type(value) is not int:
        raise _Unknown()    # a bool, a string, a float: OVO's rules apply
    return value


def _ints(items):
    if type(items) is not list:
        raise _Unknown()
    for item in items:
        if type(item) is not int:
            raise _Unknown()
    return items


def _new(cls, values):
    """An object of ``cls`` at its VERSION holding ``values``, nothing
    changed: what primitives.load leaves after its reset (OVO's
    ``__init__`` sets only the two attributes set here)."""
    obj = cls.__new__(cls)
    stored = obj.__dict__
    stored['_changed_fields'] = set()
    stored['_context'] = None
    stored['VERSION'] = cls.VERSION
    for name, value in values.items():
        stored[_PREFIX + name] = value
    return obj
