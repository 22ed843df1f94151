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


class FitResult:
    """The outcome of a fit, read-only.

    ``fits``: whether the guest fits. ``placement``: where each guest
    cell goes, in plain values (placed.Placement), or None. ``topology``:
    the same as the placed InstanceNUMATopology, or None. ``reason``:
    when it does not fit, which guest cell failed on which host cell and
    why. Two results are equal when they say the same: fits, reason and
    placed topology.

    :param reason: the text, or a functools.partial making it.
    :param placement: a placed.Placement, or a functools.partial making
        one. Either is called once, on first read.
    """

    __slots__ = ('fits', '_reason', '_placement', '_topology')

    def __init__(self, fits, reason=None, placement=None):
        init = object.__setattr__
        init(self, 'fits', fits)
        init(self, '_reason', reason)
        init(self, '_placement', placement)
        init(self, '_topology', None)

    def __setattr__(self, name, value):
        raise AttributeError(f"a FitResult is read-only; cannot set {name}")

    @property
    def reason(self):
        reason = _resolved(self._reason)
        object.__setattr__(self, '_reason', reason)
        return reason

    @property
    def placement(self):
        placement = _resolved(self._placement)
        object.__setattr__(self, '_placement', placement)
        return placement

    @property
    def topology(self):
        if self._topology is None and self.placement is not None:
            object.__setattr__(self, '_topology', self.placement.topology())
        return self._topology

    def __eq__(self, other):
        if not isinstance(other, FitResult):
            return NotImplemented
        return ((self.fits, self.reason, self.topology) ==
                (other.fits, other.reason, other.topology))

    __hash__ = None

    def __repr__(self):
        return (f"FitResult(fits={self.fits!r}, reason={self.reason!r}, "
                f"topology={self.topology!r})")
