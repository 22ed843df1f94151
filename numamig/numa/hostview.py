"""Plain, read-only snapshots of the cells and limits a fit reads.

Reading a versioned object's field goes through OVO's property machinery
(a Python call with hasattr and getattr, about a microsecond each); a fit
reads every host cell's fields many times and the guest cells' a few
times. A snapshot copies the fields once per fit into plain slots with
the same names, so that fitting code reads either kind alike. The values
are shared, not copied: nothing in the fit modifies them.
"""

import collections
import operator

Pool = collections.namedtuple('Pool', ('size_kb', 'total', 'used',
                                       'reserved', 'free'))

_HOST_FIELDS = ('id', 'cpuset', 'pcpuset', 'pinned_cpus', 'siblings',
                'memory_mb', 'memory_usage_mb', 'cpu_usage', 'mempages')
_POOL_FIELDS = ('size_kb', 'total', 'used', 'reserved')
_LIMIT_FIELDS = ('cpu_allocation_ratio', 'ram_allocation_ratio')
_GUEST_FIELDS = ('id', 'cpuset', 'pcpuset', 'memory_mb', 'pagesize',
                 'cpu_policy', 'cpu_thread_policy', 'realtime_vcpus')


def reader(names):
    """Return a function reading the named fields of a versioned object.

    OVO keeps a set field's value in the instance attribute
    ``_obj_<name>``; reading those directly skips the property machinery.
    If one is unset, every field is read the normal way, which raises the
    usual error for an unset field without a default.
    """
    direct = operator.itemgetter(*('_obj_' + name for name in names))

    def read(obj):
        try:
            return direct(vars(obj))
        except KeyError:
            return tuple(getattr(obj, name) for name in names)
    return read


_read_host = reader(_HOST_FIELDS)
_read_pool = reader(_POOL_FIELDS)
_read_guest = reader(_GUEST_FIELDS)
_read_limits = reader(_LIMIT_FIELDS)


class CellView:
    """The fields of a HostNUMACell the fit reads, copied once."""

    __slots__ = _HOST_FIELDS + ('free_pcpus', '_pools')

    def __init__(self, host_cell):
        (self.id, self.cpuset, self.pcpuset, self.pinned_cpus,
         self.siblings, self.memory_mb, self.memory_usage_mb,
         self.cpu_usage, pools) = _read_host(host_cell)
        # As HostNUMACell.free_pcpus, which is computed on every read.
        self.free_pcpus = self.pcpuset - self.pinned_cpus
        self.mempages = []
        for pool in pools:
            size_kb, total, used, reserved = _read_pool(pool)
            reserved = reserved or 0
            self.mempages.append(Pool(size_kb, total, used, reserved,
                                      total - used - reserved))
        self._pools = {pool.size_kb: pool for pool in self.mempages}

    def pages_of(self, size_kb):
        """Return the pool of the given page size, or None."""
        return self._pools.get(size_kb)


class GuestView:
    """The fields of an InstanceNUMACell request the fit reads."""

    __slots__ = _GUEST_FIELDS

    def __init__(self, guest_cell):
        (self.id, self.cpuset, self.pcpuset, self.memory_mb, self.pagesize,
         self.cpu_policy, self.cpu_thread_policy,
         self.realtime_vcpus) = _read_guest(guest_cell)


class LimitsView:
    """The ratios of a NUMALimits, read once, with its ``get``."""

    __slots__ = _LIMIT_FIELDS

    def __init__(self, limits):
        (self.cpu_allocation_ratio,
         self.ram_allocation_ratio) = _read_limits(limits)

    def get(self, name, default=None):
        """Return a ratio, or ``default`` when it is None."""
        value = getattr(self, name)
        return default if value is None else value
