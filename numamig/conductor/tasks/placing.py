"""The order in which a scheduled placement tries hosts, shared by the
live-migration task and the build of a new guest.

A scheduled placement (no host named) tries the scheduler's candidates
best first; when none takes the guest and ``[virtio_mem]
placement_reclaim`` is on, it tries the hosts the scheduler refused only
for memory on one node (tasks.placement_reclaim.scheduled_options),
least reclaimed first, each with reclaim-then-claim
(tasks.placement_reclaim.PlacementReclaimTask). Both kinds count
against the same budget (``[conductor] migrate_max_retries`` for a
migration; none for a build, whose candidates are all tried), and a host
that answers busy costs none. Keeping this walk in one place keeps the
two placements' bounds and give-back the same.
"""

import dataclasses


@dataclasses.dataclass
class Tries:
    """The hosts a placement tried: ``attempts`` refused (each costs one
    of ``budget``, None: no bound), ``busy`` were at their incoming
    limit (no cost); ``answer`` is the taker's, once one took it."""

    budget: int | None
    attempts: list = dataclasses.field(default_factory=list)
    busy: list = dataclasses.field(default_factory=list)
    answer: object = None

    def room(self):
        """Whether another host may be tried."""
        return self.budget is None or len(self.attempts) < self.budget

    def tried(self, host):
        return host in self.attempts or host in self.busy

    def exclude(self):
        """The hosts a reclaim is not to consider: tried already."""
        return set(self.attempts) | set(self.busy)


def first_taker(candidates, try_one, reclaim_options=None, budget=None):
    """Try ``candidates`` in order, then the hosts a reclaim would open,
    until one takes the guest or ``budget`` refusals were met.

    :param try_one: called with (host, Choice or None, Tries); returns
        the host's answer, or None once it appended the host to the
        Tries' ``attempts`` (refused) or ``busy``. With a Choice, the
        reclaim comes first (PlacementReclaimTask).
    :param reclaim_options: called with the hosts to exclude, returns
        placement_reclaim.Options; None: no reclaim (off, or a named
        host). Asked only once the candidates are exhausted.
    :returns: Tries, with ``answer`` None when no host took the guest.
    """
    tries = Tries(budget)
    for host in candidates:
        if not tries.room():
            return tries
        tries.answer = try_one(host, None, tries)
        if tries.answer is not None:
            return tries
    if reclaim_options is None or not tries.room():
        return tries
    for prospect, choice in reclaim_options(tries.exclude()).ranked:
        if not tries.room():
            break
        if tries.tried(prospect.host):
            continue
        tries.answer = try_one(prospect.host, choice, tries)
        if tries.answer is not None:
            break
    return tries

