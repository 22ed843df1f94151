"""Defragmentation plans: the fewest migrations that make room for a guest.

A large pinned guest (a whole NUMA node with its 1 GiB pages, say) may
fit on no host although the cloud has room: the room is scattered over
cells half used by small guests. Moving a few of them elsewhere frees a
cell. A plan here says which guests to move, and where, for the new
guest to fit on one host (the target):

* plans are tried by increasing number of moves (0, 1, 2, ...), on
  every candidate host, so the first found is one of the smallest: the
  fewest migrations, not a greedy eviction of the largest guests;
* a set of the target's guests is kept when the new guest fits on the
  target once the set's usage is released (the same NUMA fit a claim
  runs) and the set's guests can all be placed elsewhere at once (the
  drain search, numamig.scheduler.drain.plan, the target left out);
* when they cannot, guests of third hosts may move too (chains): guest
  A leaves the target for host X only once guest B left X for host Y.
  For a set of the target's guests, the third-host guests considered
  are those of the hosts where one of the set would fit were the host's
  movable guests gone (and, for longer chains, the same for those
  guests in turn), at most MAX_HELPERS of them; every set of them of
  the size left is tried with the drain search, each guest barred from
  the host it leaves, the third hosts' guests free to go to the target
  as long as the new guest still fits there after them. The moves run
  so that a move into a host comes after every planned move off it;
  the drain search goes on past a plan whose moves would wait on each
  other in a circle (drain.plan's ``accept``);
* the search stops after ``max_steps`` sets or past ``max_moves``
  moves, and says so.

Three answers, as for drains (``Plan.outcome``): a plan (one of the
fewest moves); no plan of up to ``max_moves`` moves exists (proven:
every set of guests was tried, each set's drain search ran out, and no
guest of a third host was left out of the chains); or none found
within the limits (a set's drain search reached its step limit, the
sets reached ``max_steps``, or the chains considered only the guests of
the hosts where a moved guest could go, at most MAX_HELPERS of them: in
a large cloud the usual answer when no plan is found).

Pure: the caller gives the candidate hosts' topologies (usage and
reservations applied) with their guests' placements and requests, and
the destinations' views; nothing is read, reserved or changed.
"""

import dataclasses
import itertools

from numamig import exception
from numamig.numa import fit as numa_fit
from numamig.numa import usage
from numamig.numa import view_usage
from numamig.numa import views as numa_views
from numamig.scheduler import drain

DEFAULT_MAX_MOVES = 4
DEFAULT_MAX_STEPS = 20000
# Most guests of third hosts one set's chains consider moving, and most
# third hosts examined for one guest: what bounds a chain search in a
# large cloud (the sets tried are bounded by max_steps as well).
MAX_HELPERS = 24
MAX_CHAIN_HOSTS = 64


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
    """A host the new guest may go to once some of its guests left (or,
    among ``movable``, a host whose guests may leave to make room)."""

    host: str
    topology: object          # HostNUMATopology, usage applied
    residents: tuple = ()


@dataclasses.dataclass(frozen=True)
class Move:
    """One migration of a plan: ``guest`` (a drain.Guest) from
    ``source`` to ``host``, placed there as ``placement``."""

    guest: object
    source: str
    host: str
    placement: object


@dataclasses.dataclass(frozen=True)
class Plan:
    """Where the new guest goes and the moves that make room for it.

    ``host`` is None when no plan within the limits makes room;
    ``reason`` says why then, and ``proven`` whether no plan exists.
    ``moves`` are Moves in the order to run
    them (a move into a host after every move off it); ``placement`` is
    the new guest's placement (a placed.Placement) once they ran.
    """

    host: str
    placement: object
    moves: tuple
    steps: int
    stopped: bool
    reason: str = None
    proven: bool = False

    @property
    def found(self):
        return self.host is not None

    @property
    def outcome(self):
        """drain.PLANNED, drain.NO_PLAN (proven) or drain.NOT_FOUND."""
        if self.found:
            return drain.PLANNED
        return drain.NO_PLAN if self.proven else drain.NOT_FOUND

    @property
    def chained(self):
        """Moves of guests of other hosts than the target."""
        return sum(1 for move in self.moves if move.source != self.host)


def plan(request, candidates, destinations, limits=None, strategy='spread',
         pagesize_kb=None, max_moves=DEFAULT_MAX_MOVES,
         max_steps=DEFAULT_MAX_STEPS, movable=()):
    """The fewest moves that let ``request`` fit on one candidate.

    :param request: the new guest's unplaced InstanceNUMATopology.
    :param candidates: Candidates, best first (ties keep this order).
    :param destinations: drain.Destinations the moved guests may go to
        (a candidate among them is left out for its own guests).
    :param movable: Candidates of destination hosts whose guests may
        move to make room for a guest moved off the target (chains);
        empty: only the target's guests move.
    """
    search = _Search(request, destinations, movable, limits, strategy,
                     pagesize_kb, max_steps)
    for total in range(max_moves + 1):
        # The target's guests alone first (one drain search per set),
        # then with ever more guests of third hosts.
        for size in range(total, 0, -1) if total else (0,):
            for candidate in candidates:
                found = search.at(candidate, size, total - size)
                if found is not None:
                    return found
                if search.stopped:
                    return search.none(
                        True, f"no plan found, though one may exist: the "
                              f"search stopped after {search.steps} sets "
                              f"(the limit, [scheduler] "
                              f"drain_plan_max_steps) at {total} move(s)")
    if search.unsure:
        return search.none(False, f"no plan of up to {max_moves} move(s) "
                                  f"found on {len(candidates)} host(s), "
                                  f"though one may exist: "
                                  f"{search.unsure[0]}")
    return search.none(False, f"no plan exists: no set of up to "
                              f"{max_moves} guest(s) on {len(candidates)} "
                              f"host(s) makes room for it", proven=True)


class _Search:
    """The sets tried so far and what is known of them."""

    def __init__(self, request, destinations, movable, limits, strategy,
                 pagesize_kb, max_steps):
        self.request = request
        self.destinations = tuple(destinations)
        self.movable = {c.host: c for c in movable}
        self.order = [d.host for d in self.destinations
                      if d.host in self.movable]
        self.fit_args = {'limits': limits, 'strategy': strategy}
        self.pagesize_kb = pagesize_kb
        self.max_steps = max_steps
        self.steps = 0
        self.stopped = False
        # Why a search that found nothing proves nothing.
        self.unsure = []
        self._rooms = {}          # (host, uuids) -> placement or None
        self._hosts_for = {}      # (host, uuid) -> chain hosts
        self._emptied = {}        # host -> topology, movable guests gone
        self._every = None        # host -> its movable guests

    def none(self, stopped, reason, proven=False):
        return Plan(None, None, (), self.steps, stopped, reason, proven)

    def _undecided(self, why):
        if why not in self.unsure:
            self.unsure.append(why)

    def _drain(self, guests, destinations, accept=None):
        """drain.plan of a set's guests; a search that reached its
        limit leaves the set undecided."""
        moved = drain.plan(guests, destinations, max_steps=self.max_steps,
                           accept=accept, **self.fit_args)
        if moved.outcome == drain.NOT_FOUND:
            self._undecided(f"the drain search of a set reached its limit "
                            f"of {self.max_steps} placements ([scheduler] "
                            f"drain_plan_max_steps)")
        return moved

    def at(self, candidate, size, helpers):
        """A Plan moving ``size`` of the candidate's guests and
        ``helpers`` guests of third hosts, or None."""
        if helpers and not self.movable:
            return None
        movable = [r for r in candidate.residents if r.request is not None]
        for group in itertools.combinations(movable, size):
            if not self._tick():
                return None
            placement = self._room(candidate, group)
            if placement is None:
                continue
            if helpers:
                found = self._chains(candidate, group, helpers)
                if found is not None:
                    moves, placement = found
                else:
                    moves = None
            else:
                moves = self._direct(candidate, group)
            if moves is not None:
                return Plan(candidate.host, placement, moves, self.steps,
                            False)
            if self.stopped:
                return None
        return None

    def _tick(self):
        if self.steps >= self.max_steps:
            self.stopped = True
            return False
        self.steps += 1
        return True

    def _room(self, candidate, group):
        """The new guest's placement on the candidate once ``group``
        left, or None."""
        key = (candidate.host, frozenset(r.uuid for r in group))
        if key not in self._rooms:
            self._rooms[key] = self._fit_after(candidate, group)
        return self._rooms[key]

    def _fit_after(self, candidate, group):
        freed = _released(candidate.topology, group)
        if freed is None:
            # The records and the report disagree: skip it.
            self._undecided(f"the records of {candidate.host}'s guests and "
                            f"its report disagree")
            return None
        result = numa_fit.fit(numa_views.HostView.of(freed), self.request,
                              pagesize_kb=self.pagesize_kb, **self.fit_args)
        return result.placement if result.fits else None

    def _direct(self, candidate, group):
        """The group's moves when they all fit elsewhere as it is."""
        if not group:
            return ()
        moved = self._drain([_guest(r) for r in group],
                            self._others(candidate.host, {}))
        if not moved.complete:
            return None
        return tuple(Move(m.guest, candidate.host, m.host, m.placement)
                     for m in moved.moves)

    def _chains(self, candidate, group, helpers):
        """The moves of the group and of ``helpers`` guests of third
        hosts that make room for the group, or None."""
        pool = self._pool(candidate.host, group, helpers)
        for chosen in itertools.combinations(pool, helpers):
            if not self._tick():
                return None
            moves = self._chain(candidate, group, chosen)
            if moves is not None:
                return moves
        return None

    def _pool(self, target, group, depth):
        """(host, Resident) of third hosts whose leaving may help: the
        guests of the hosts where the group would fit were they gone,
        then of the hosts where those would, ``depth`` levels deep."""
        pool, seen = [], {target}
        frontier = [(target, r) for r in group]
        for _ in range(depth):
            reached = []
            for host, resident in frontier:
                for other in self._chain_hosts(host, resident):
                    if other in seen:
                        continue
                    seen.add(other)
                    for guest in self.movable[other].residents:
                        if guest.request is None:
                            continue
                        pool.append((other, guest))
                        reached.append((other, guest))
                        if len(pool) >= MAX_HELPERS:
                            self._check_pool(target, pool)
                            return pool
            frontier = reached
        self._check_pool(target, pool)
        return pool

    def _check_pool(self, target, pool):
        """A pool without every movable guest of the third hosts leaves
        the sets it misses untried: nothing is proven then."""
        if self._every is None:
            self._every = {host: sum(1 for r in candidate.residents
                                     if r.request is not None)
                           for host, candidate in self.movable.items()}
        every = sum(self._every.values()) - self._every.get(target, 0)
        if len(pool) < every:
            self._undecided(f"chains considered {len(pool)} of the "
                            f"{every} guests of other hosts (those of the "
                            f"hosts a moved guest could go to, at most "
                            f"{MAX_HELPERS})")

    def _chain_hosts(self, host, resident):
        """Hosts (not ``host``) where the resident fits once their
        movable guests are gone: those where it does not fit now first,
        at most MAX_CHAIN_HOSTS, in destination order."""
        key = (host, resident.uuid)
        if key in self._hosts_for:
            return self._hosts_for[key]
        blocked, fitting = [], []
        views = {d.host: d.view for d in self.destinations}
        for other in self.order:
            if other == host:
                continue
            if len(blocked) + len(fitting) >= MAX_CHAIN_HOSTS:
                break
            emptied = self._emptied_of(other)
            if emptied is None or not self._fits(resident, emptied):
                continue
            if self._fits(resident, views[other]):
                fitting.append(other)
            else:
                blocked.append(other)
        self._hosts_for[key] = blocked + fitting
        return self._hosts_for[key]

    def _emptied_of(self, host):
        if host not in self._emptied:
            candidate = self.movable[host]
            self._emptied[host] = _released(candidate.topology, [
                r for r in candidate.residents if r.request is not None])
        return self._emptied[host]

    def _fits(self, resident, topology):
        return numa_fit.fit(numa_views.HostView.of(topology),
                            resident.request, pagesize_kb=resident.pagesize_kb,
                            **self.fit_args).fits

    def _chain(self, candidate, group, chosen):
        released = {}
        for host, resident in chosen:
            topology = released.get(host, self.movable[host].topology)
            released[host] = _released(topology, [resident])
            if released[host] is None:
                return None
        target = candidate.host
        freed = _released(candidate.topology, group)
        guests = [_guest(r, exclude=frozenset({target})) for r in group] + [
            _guest(r, exclude=frozenset({host})) for host, r in chosen]
        sources = {r.uuid: host for host, r in chosen}
        # Third hosts' guests may go to the target if the new guest
        # still fits there after them (its least preferred destination).
        destinations = self._others(target, released) + [
            drain.Destination(target, numa_views.HostView.of(freed))]
        outcome = {}

        def accept(found):
            moves = _ordered([Move(m.guest, sources.get(m.guest.uuid,
                                                        target),
                                   m.host, m.placement) for m in found])
            if moves is None:
                return False
            view = numa_views.HostView.of(freed)
            for move in moves:
                if move.host == target:
                    view = view_usage.apply(view, move.placement)
            result = numa_fit.fit(view, self.request,
                                  pagesize_kb=self.pagesize_kb,
                                  **self.fit_args)
            if not result.fits:
                return False
            outcome['moves'], outcome['placement'] = moves, \
                result.placement
            return True

        moved = self._drain(guests, destinations, accept=accept)
        if not moved.complete:
            return None
        return outcome['moves'], outcome['placement']

    def _others(self, target, released):
        """The destinations but the target, with ``released``
        ({host: topology}) for the hosts third-host guests leave."""
        return [drain.Destination(d.host, numa_views.HostView.of(
                    released[d.host])) if d.host in released else d
                for d in self.destinations if d.host != target]


def _guest(resident, exclude=frozenset()):
    return drain.Guest(resident.uuid, resident.name, resident.request,
                       resident.pagesize_kb, exclude=exclude)


def _released(topology, residents):
    """``topology`` without the residents' usage, or None when it does
    not hold it."""
    try:
        for resident in residents:
            topology = usage.release(topology, resident.placed)
    except exception.UsageConflict:
        return None
    return topology


def _ordered(moves):
    """The moves in an order that runs each move into a host after every
    move off it, otherwise in the drain search's order (which keeps the
    order of the moves into one host, the one their placements were
    fitted in); None when they wait on each other in a circle."""
    left = list(moves)
    ordered = []
    while left:
        leaving = {move.source for move in left}
        ready = next((move for move in left if move.host not in leaving),
                     None)
        if ready is None:
            return None
        left.remove(ready)
        ordered.append(ready)
    return tuple(ordered)
