"""The answer of a fit: the decision now, its details when read.

Deciding whether a guest fits takes counts only (cellfit.check); which
pCPUs it gets, the placed InstanceNUMATopology and, for a guest that does
not fit, the text saying why, are worked out from what the decision
found, on first read. A scheduler weighing a guest against every host
reads the placement of the one it chooses; a caller that reads
everything pays what it did before. What is deferred depends only on
values the fit never changes (views, the request's cells), so reading
it later gives what reading it at once would have.
"""

import functools


def _resolved(value):
    if isinstance(value, functools.partial):
        return value()
    return value


class FitResult(tuple):
    """The outcome of a fit, read-only.

    ``fits``: whether the guest fits. ``placement``: where each guest
    cell goes, in plain values (placed.Placement), or None. ``topology``:
    the same as the placed InstanceNUMATopology, or None. ``reason``:
    when it does not fit, which guest cell failed on which host cell and
    why. Two results are equal when they say the same: fits, reason and
    placed topology.

    ``distance``: when it fits, the fit.Distance of the host cells
    chosen (their distance cost and why them); None otherwise. It takes
    no part in equality: placements equal, results equal.

    :param reason: the text, or a functools.partial making it.
    :param placement: a placed.Placement, or a functools.partial making
        one. Either is called once, on first read.
    :param distance: a fit.Distance, or a functools.partial making one.

    (A tuple, as a named tuple is: every fit makes one, and a tuple is
    the cheapest read-only object to make. Its fourth item holds what has
    been worked out: reason, placement, topology, distance.)
    """

    __slots__ = ()

    def __new__(cls, fits, reason=None, placement=None, distance=None):
        return tuple.__new__(cls, (fits, reason, placement, [None] * 4,
                                   distance))

    @property
    def fits(self):
        return self[0]

    def _made(self, index):
        made = self[3]
        if made[index] is None:
            made[index] = _resolved(self[index + 1])
        return made[index]

    @property
    def reason(self):
        return self._made(0)

    @property
    def placement(self):
        return self._made(1)

    @property
    def distance(self):
        made = self[3]
        if made[3] is None:
            made[3] = _resolved(self[4])
        return made[3]

    @property
    def topology(self):
        made = self[3]
        if made[2] is None and self.placement is not None:
            made[2] = self.placement.topology()
        return made[2]

    def __eq__(self, other):
        if not isinstance(other, FitResult):
            return NotImplemented
        return ((self.fits, self.reason, self.topology) ==
                (other.fits, other.reason, other.topology))

    def __ne__(self, other):
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = None

    def __repr__(self):
        return (f"FitResult(fits={self.fits!r}, reason={self.reason!r}, "
                f"topology={self.topology!r})")

    def __reduce__(self):
        # Pickled (a fork, a copy) as what it says, details worked out.
        return (_rebuilt, (self.fits, self.reason, self.placement,
                           self.distance))


def _rebuilt(fits, reason, placement, distance=None):
    return FitResult(fits, reason, placement, distance)
