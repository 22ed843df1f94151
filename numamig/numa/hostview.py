"""A plain, read-only snapshot of a host cell for the fit's inner loops.

Reading a versioned object's field goes through OVO's property machinery
(about a microsecond each); a fit reads every host cell's fields many
times. The snapshot takes them once per fit into plain attributes with
the same names, so that fitting code reads either kind alike.
"""

import collections

Pool = collections.namedtuple('Pool', ('size_kb', 'free'))


class CellView:
    """The fields of a HostNUMACell the fit reads, copied once."""

    __slots__ = ('id', 'cpuset', 'pcpuset', 'pinned_cpus', 'siblings',
                 'memory_mb', 'memory_usage_mb', 'cpu_usage', 'mempages',
                 '_pools')

    def __init__(self, host_cell):
        read = _reader(host_cell)
        self.id = read('id')
        self.cpuset = read('cpuset')
        self.pcpuset = read('pcpuset')
        self.pinned_cpus = read('pinned_cpus')
        self.siblings = read('siblings')
        self.memory_mb = read('memory_mb')
        self.memory_usage_mb = read('memory_usage_mb')
        self.cpu_usage = read('cpu_usage')
        self.mempages = []
        for pool in read('mempages'):
            pool_read = _reader(pool)
            self.mempages.append(Pool(
                pool_read('size_kb'), pool_read('total') - pool_read('used')
                - (pool_read('reserved') or 0)))
        self._pools = {pool.size_kb: pool for pool in self.mempages}

    def pages_of(self, size_kb):
        """Return the pool of the given page size, or None."""
        return self._pools.get(size_kb)


def _reader(obj):
    """Return a fast field reader of a versioned object.

    OVO keeps a set field's value in the instance attribute
    ``_obj_<name>``; reading that directly skips the property machinery.
    The values are shared, not copied: nothing in the fit modifies them.
    An unset field falls back to the normal (raising) attribute access.
    """
    values = vars(obj)

    def read(name):
        try:
            return values['_obj_' + name]
        except KeyError:
            return getattr(obj, name)
    return read
