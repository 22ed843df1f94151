"""Which refused hosts a reclaim could open to a guest, best first.

With ``[virtio_mem] placement_reclaim``, a scheduled migration that no
candidate took looks at the hosts the scheduler refused: a host short
only of memory on one node can take the guest once the guests there
give back virtio-mem slack (numa.placement_reclaim). Asking that of a
host reads its guests' records and runs the chooser, so a cloud of
thousands of hosts must not be asked whole. The hosts are narrowed in
three steps, each dearer and on fewer hosts:

1. every host (``gap``, from its capacity summary, O(1)): up, enabled,
   not excluded, its hypervisor type, and short of nothing a reclaim
   cannot give; its memory gap (a lower bound of what must be freed)
   within ``placement_reclaim_max_mb``;
2. the ``max_hosts`` of least gap (then the scheduler's weight order):
   the host's own fit, with memory freed on each node, says how little
   would do (numa.placement_reclaim.estimate);
3. the conductor asks the chooser of each (their guests' slack) and
   ranks the answers (numa.placement_reclaim.rank): least reclaimed
   first, then the scheduler's order.

Pure: no I/O, nothing given is modified.
"""

import dataclasses


@dataclasses.dataclass(frozen=True)
class Prospect:
    """A host worth asking: ``order`` is its place in the scheduler's
    weight order, ``node`` and ``need_mb`` what its own fit says a
    reclaim must free (numa.placement_reclaim.Estimate)."""

    host: str
    order: int
    node: int
    need_mb: int


@dataclasses.dataclass(frozen=True)
class Prospects:
    """``prospects`` ranked (``by_need``); ``qualified``: hosts the
    capacity summaries let through step 1; ``looked_at``: the hosts
    estimated (step 2, at most ``max_hosts``)."""

    prospects: tuple
    qualified: int
    looked_at: int

    def describe(self, max_mb, max_hosts):
        """One line for an operator: what was looked at, and why not
        more."""
        if not self.qualified:
            return (f"no host is short only of memory within "
                    f"placement_reclaim_max_mb ({max_mb} MiB)")
        more = self.qualified - self.looked_at
        return (f"{self.qualified} host(s) short only of memory within "
                f"{max_mb} MiB, {self.looked_at} looked at"
                + (f" ({more} more not: placement_reclaim_max_hosts is "
                   f"{max_hosts})" if more else ''))


def shortlist(gaps, max_hosts):
    """The ``max_hosts`` entries of least gap, then scheduler order.

    :param gaps: (gap MiB, scheduler order, anything) triples.
    :returns: a new list, best first.
    """
    return sorted(gaps, key=lambda entry: entry[:2])[:max_hosts]


def by_need(prospects):
    """Prospects least need first, then the scheduler's order."""
    return tuple(sorted(prospects, key=lambda p: (p.need_mb, p.order)))
