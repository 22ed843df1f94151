"""Keep a cached host topology small: frozen, shared sets in its cells.

A reported HostNUMATopology as oslo.versionedobjects builds it holds each
set and list of its cells in a coercing container (a set or list that
carries, in its own ``__dict__``, the field it belongs to), about 130 KB
for a host of 8 cells of 32 threads: 1.3 GB at 10,000 hosts. Most of it
describes hardware that many hosts share (the CPU sets, the SMT sibling
groups, the NUMA distances) and never changes between two reports.

``Interner.freeze`` rewrites the cells of a topology the cache owns:

- the hardware sets become FrozenSets (lists of them for the sibling
  groups, plain dicts for distances) shared by every host and report
  that have the same ones; the pinned pCPUs a FrozenSet of their own;
- the coercing lists become plain lists;
- a page pool nothing uses becomes one object shared per size and count;
- each object's set of changed field names (OVO keeps one per object,
  some 700 bytes for a cell) becomes a shared FrozenSet.

Every field keeps an equal value, so readers, equality, copies and
serialization are unchanged; an attempt to edit a set in place fails
instead of silently changing other hosts, and so does setting a field
(OVO records the change in the frozen set of changed names), though
only after the value is set. The sibling lists stay lists, as the
field's equality needs, and are shared too: topologies handed to the
cache must not be edited, and numa/ always derives new ones.
"""

_HARDWARE = ('cpuset', 'pcpuset')


class FrozenSet(set):
    """A set that refuses to change.

    A ``set`` (not a frozenset) because oslo.versionedobjects' set fields
    accept nothing else when an object is copied; no ``__dict__`` and no
    coercion data, so it weighs what a plain set does. Operators such as
    ``|`` and ``-`` return plain sets, as for any set subclass.
    """

    __slots__ = ()

    def _refuse(self, *args, **kwargs):
        raise TypeError(
            "this set belongs to the scheduler's host cache and may be "
            "shared by several hosts; build a new one instead of editing it")

    add = clear = discard = pop = remove = update = _refuse
    difference_update = intersection_update = _refuse
    symmetric_difference_update = _refuse
    __ior__ = __iand__ = __isub__ = __ixor__ = _refuse


class Interner:
    """The shared values of one cache; call it under the cache's lock.

    The table keeps every distinct hardware description it has seen
    (a few per kind of host), so it stays small as hosts come and go.
    """

    def __init__(self):
        self._sets = {}
        self._siblings = {}
        self._distances = {}
        self._names = {}
        self._pools = {}

    def freeze(self, topology):
        """Rewrite ``topology``'s cells in place (module docstring) and
        return it."""
        attrs = vars(topology)
        if '_obj_cells' not in attrs:
            return topology
        cells = list(attrs['_obj_cells'])
        for cell in cells:
            self._freeze_cell(vars(cell))
        attrs['_obj_cells'] = cells
        self._freeze_changes(attrs)
        return topology

    def _freeze_cell(self, attrs):
        # A set already frozen (a stored report built straight into this
        # form, scheduler/stored.py, or a cell frozen before) is kept: it
        # cannot change, and is shared already.
        for name in _HARDWARE:
            key = '_obj_' + name
            if key in attrs and type(attrs[key]) is not FrozenSet:
                attrs[key] = self._set(attrs[key])
        pinned = attrs.get('_obj_pinned_cpus')
        if pinned is not None and type(pinned) is not FrozenSet:
            attrs['_obj_pinned_cpus'] = FrozenSet(pinned)
        if '_obj_siblings' in attrs and not _frozen_groups(
                attrs['_obj_siblings']):
            groups = tuple(frozenset(group)
                           for group in attrs['_obj_siblings'])
            shared = self._siblings.get(groups)
            if shared is None:
                shared = self._siblings[groups] = [
                    self._set(group) for group in groups]
            attrs['_obj_siblings'] = shared
        if '_obj_distances' in attrs:
            items = tuple(sorted(attrs['_obj_distances'].items()))
            attrs['_obj_distances'] = self._distances.setdefault(
                items, dict(items))
        if '_obj_mempages' in attrs:
            attrs['_obj_mempages'] = [self._pool(pool)
                                      for pool in attrs['_obj_mempages']]
        self._freeze_changes(attrs)

    def _pool(self, pool):
        """Return a shared pool equal to ``pool`` if nothing uses it
        (hardware, which many hosts have), else ``pool``."""
        attrs = vars(pool)
        self._freeze_changes(attrs)
        if attrs.get('_obj_used') or attrs.get('_obj_reserved') or \
                '_obj_size_kb' not in attrs or '_obj_total' not in attrs:
            return pool
        key = (attrs['_obj_size_kb'], attrs['_obj_total'],
               '_obj_used' in attrs, '_obj_reserved' in attrs)
        return self._pools.setdefault(key, pool)

    def _freeze_changes(self, attrs):
        names = attrs.get('_changed_fields')
        if names is not None and type(names) is not FrozenSet:
            key = frozenset(names)
            shared = self._names.get(key)
            if shared is None:
                shared = self._names[key] = FrozenSet(key)
            attrs['_changed_fields'] = shared

    def _set(self, values):
        key = frozenset(values)
        shared = self._sets.get(key)
        if shared is None:
            shared = self._sets[key] = FrozenSet(key)
        return shared


def _frozen_groups(groups):
    return type(groups) is list and all(type(group) is FrozenSet
                                        for group in groups)
