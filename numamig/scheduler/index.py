"""The cache's hosts kept in weight order, with their capacity summaries.

``select_destinations`` walks hosts best first and stops once it has
``max_candidates``; it must not weigh or sort 10,000 hosts per request.
So the cache keeps, per host, an immutable HostRecord (its topology with
reservations applied, its weight and its capacity.HostCapacity, made
when that host's topology changes: report, reservation, release,
expiry), and this index keeps the records sorted for each strategy, as
weighers.order sorts them: spread by (-weight, host), pack by (weight,
host). Changing one host costs a bisection and a list insertion.

The index also keeps the cloud-wide best cell (the most any one cell of
any host has of each resource), so that a request no cell anywhere can
hold is answered without a walk. It counts how many hosts have each
value, so that a host shrinking costs a dictionary update, and a new
maximum is searched among the distinct values only when the last host
holding the old one shrank.

Everything here runs under the cache's lock; ``walk`` hands out a copy
of the order, which the caller reads without the lock.
"""

import bisect

from numamig.scheduler import capacity
from numamig.scheduler import weighers


class HostRecord:
    """One host as the last change left it; never edited once made.

    ``view`` (the fit's numa.views.HostView of ``topology``) is made on
    first need and kept with the record, so it lives exactly as long as
    the topology it shows.
    """

    __slots__ = ('host', 'hypervisor_type', 'report', 'topology',
                 'reservations', 'received_at', 'weight', 'capacity',
                 '_view', '_make_view')

    def __init__(self, report, topology, reservations, received_at,
                 weight, capacity_, make_view, view=None):
        self.host = report.host
        self.hypervisor_type = report.hypervisor_type
        self.report = report
        self.topology = topology
        self.reservations = reservations
        self.received_at = received_at
        self.weight = weight
        self.capacity = capacity_
        self._view = view
        self._make_view = make_view

    def view(self):
        """Return the HostView of the topology, made on first need.

        Two threads may both make it; either view is right, one is kept.
        """
        if self._view is None:
            self._view = self._make_view(self.topology)
        return self._view

    def view_if_made(self):
        """Return the view if some fit made it already, else None."""
        return self._view


def _key(strategy, record):
    if strategy == weighers.SPREAD:
        return (-record.weight, record.host)
    return (record.weight, record.host)


class HostIndex:
    """The records of every host in each strategy's order."""

    def __init__(self):
        self._keys = {strategy: [] for strategy in weighers.STRATEGIES}
        self._records = {strategy: [] for strategy in weighers.STRATEGIES}
        self._best = _Best()

    def __len__(self):
        return len(self._records[weighers.SPREAD])

    def put(self, old, new):
        """Replace the record ``old`` (None for a new host) by ``new``."""
        if old is not None:
            self.remove(old)
        for strategy in weighers.STRATEGIES:
            key = _key(strategy, new)
            position = bisect.bisect_left(self._keys[strategy], key)
            self._keys[strategy].insert(position, key)
            self._records[strategy].insert(position, new)
        self._best.count(new.capacity, 1)

    def remove(self, record):
        """Take a host's record out of the index."""
        for strategy in weighers.STRATEGIES:
            key = _key(strategy, record)
            position = bisect.bisect_left(self._keys[strategy], key)
            if self._records[strategy][position] is not record:
                raise AssertionError(
                    f"the scheduler's host index lost track of "
                    f"{record.host}")
            del self._keys[strategy][position]
            del self._records[strategy][position]
        self._best.count(record.capacity, -1)

    def walk(self, strategy):
        """Return a list of the records in ``strategy`` order (a copy)."""
        return list(self._records[strategy])

    def best(self):
        """Return the HostCapacity of the best cell of every host."""
        return self._best.capacity()


class _Maximum:
    """The largest of a multiset of numbers, kept as they come and go."""

    __slots__ = ('_counts', 'value')

    def __init__(self):
        self._counts = {}
        self.value = 0

    def count(self, value, change):
        left = self._counts.get(value, 0) + change
        if left:
            self._counts[value] = left
        else:
            del self._counts[value]
        if change > 0 and value > self.value:
            self.value = value
        elif not left and value == self.value:
            self.value = max(self._counts, default=0)


class _Best:
    """A _Maximum per field of HostCapacity (per page size for pages)."""

    _SCALARS = ('cells', 'pcpus', 'shared', 'memory', 'free_memory')

    def __init__(self):
        self._scalars = {name: _Maximum() for name in self._SCALARS}
        self._pages = {}

    def count(self, cap, change):
        for name, maximum in self._scalars.items():
            maximum.count(getattr(cap, name), change)
        for size, free in cap.pages.items():
            self._pages.setdefault(size, _Maximum()).count(free, change)

    def capacity(self):
        best = capacity.HostCapacity.__new__(capacity.HostCapacity)
        for name, maximum in self._scalars.items():
            setattr(best, name, maximum.value)
        # A size no host has any more stays, with 0 free: harmless.
        best.pages = {size: maximum.value
                      for size, maximum in self._pages.items()}
        return best
