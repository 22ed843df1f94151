"""The cache's hosts kept in weight order, with their capacity summaries.

``select_destinations`` walks hosts best first and stops once it has
``max_candidates``; it must not weigh or sort 10,000 hosts per request.
So the cache keeps, per host, an immutable HostRecord (its topology with
reservations applied, its weight and its capacity.HostCapacity, made
when that host's topology changes: report, reservation, release,
expiry), and this index keeps the records sorted for each strategy, as
weighers.order sorts them: spread by (-weight, host), pack by (weight,
host). Changing one host costs a bisection and a list insertion.

The index also keeps the cloud-wide best cell (HostCapacity.most_of), so
that a request no cell anywhere can hold is answered without a walk; it
is recomputed only after the host that held a maximum shrinks.

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
        self._best = None

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
        if self._best is not None:
            self._best = capacity.HostCapacity.most_of(
                (self._best, new.capacity))

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
        if self._best is not None and _holds_a_maximum(record.capacity,
                                                       self._best):
            self._best = None

    def walk(self, strategy):
        """Return a list of the records in ``strategy`` order (a copy)."""
        return list(self._records[strategy])

    def best(self):
        """Return the HostCapacity of the best cell of every host."""
        if self._best is None:
            self._best = capacity.HostCapacity.most_of(
                record.capacity
                for record in self._records[weighers.SPREAD])
        return self._best


def _holds_a_maximum(cap, best):
    return (cap.cells == best.cells or cap.pcpus == best.pcpus or
            cap.shared == best.shared or cap.memory == best.memory or
            cap.free_memory == best.free_memory or
            any(best.pages.get(size) == free
                for size, free in cap.pages.items()))
