"""Defragmentation plans: the fewest migrations that make room for a guest.

A large pinned guest (a whole NUMA node with its 1 GiB pages, say) may
fit on no host although the cloud has room: the room is scattered over
cells half used by small guests. Moving a few of them elsewhere frees a
cell. A plan here says which guests of which host to move, and where,
for the new guest to fit there:

* sets of guests are tried by increasing size (0, 1, 2, ... moves), on
  every candidate host, so the first set found is one of the smallest:
  the fewest migrations, not a greedy eviction of the largest guests;
* a set is kept when the new guest fits on its host once the set's
  usage is released (the same NUMA fit a claim runs) and the set's
  guests can all be placed elsewhere at once (the drain search,
  numamig.scheduler.drain.plan, with the candidate host left out);
* the search stops after ``max_steps`` sets or past ``max_moves``
  guests, and says so: within those limits a plan is the optimum.

Pure: the caller gives the candidate hosts' topologies (usage and
reservations applied) with their guests' placements and requests, and
the destinations' views; nothing is read, reserved or changed.
"""

import dataclasses
import itertools

from numamig import exception
from numamig.numa import fit as numa_fit
from numamig.numa import usage
from numamig.numa import views as numa_views
from numamig.scheduler import drain

DEFAULT_MAX_MOVES = 4
DEFAULT_MAX_STEPS = 20000


@dataclasses.dataclass(frozen=True)
class Resident:
    """A guest of a candidate host.

    :param placed: its placed InstanceNUMATopology on that host.
    :param request: its unplaced request (for its new destination), or
        None for a guest without NUMA characteristics (never moved).
    """

    uuid: str
    name: str
    placed: object
    request: object = None
    pagesize_kb: int = None


@dataclasses.dataclass(frozen=True)
class Candidate:
    """A host the new guest may go to once some of its guests left."""

    host: str
    topology: object          # HostNUMATopology, usage applied
    residents: tuple = ()


@dataclasses.dataclass(frozen=True)
class Plan:
    """Where the new guest goes and the moves that make room for it.

    ``host`` is None when no set within the limits makes room;
    ``reason`` says why then. ``moves`` are drain.Moves in the order to
    run them; ``placement`` is the new guest's placement (a
    placed.Placement) once they ran.
    """

    host: str
    placement: object
    moves: tuple
    steps: int
    stopped: bool
    reason: str = None

    @property
    def found(self):
        return self.host is not None


def plan(request, candidates, destinations, limits=None, strategy='spread',
         pagesize_kb=None, max_moves=DEFAULT_MAX_MOVES,
         max_steps=DEFAULT_MAX_STEPS):
    """The fewest moves that let ``request`` fit on one candidate.

    :param request: the new guest's unplaced InstanceNUMATopology.
    :param candidates: Candidates, best first (ties keep this order).
    :param destinations: drain.Destinations the moved guests may go to
        (a candidate among them is left out for its own guests).
    """
    steps = 0
    for size in range(max_moves + 1):
        for candidate in candidates:
            movable = [r for r in candidate.residents
                       if r.request is not None]
            for group in itertools.combinations(movable, size):
                if steps >= max_steps:
                    return _none(steps, True, f"the search stopped after "
                                 f"{steps} sets (the limit) at {size} "
                                 f"move(s)")
                steps += 1
                found = _try(request, candidate, group, destinations,
                             limits, strategy, pagesize_kb)
                if found is not None:
                    placement, moves = found
                    return Plan(candidate.host, placement, moves, steps,
                                False)
    return _none(steps, False, f"no set of up to {max_moves} guest(s) on "
                 f"{len(candidates)} host(s) makes room for it")


def _try(request, candidate, group, destinations, limits, strategy,
         pagesize_kb):
    """(placement, moves) if moving ``group`` off the candidate makes
    room there, else None."""
    freed = candidate.topology
    try:
        for resident in group:
            freed = usage.release(freed, resident.placed)
    except exception.UsageConflict:
        return None     # the records and the report disagree: skip it
    result = numa_fit.fit(numa_views.HostView.of(freed), request,
                          limits=limits, strategy=strategy,
                          pagesize_kb=pagesize_kb)
    if not result.fits:
        return None
    if not group:
        return result.placement, ()
    others = [d for d in destinations if d.host != candidate.host]
    moved = drain.plan([drain.Guest(r.uuid, r.name, r.request,
                                    r.pagesize_kb) for r in group],
                       others, limits=limits, strategy=strategy)
    if not moved.complete:
        return None
    return result.placement, moved.moves


def _none(steps, stopped, reason):
    return Plan(None, None, (), steps, stopped, reason)
