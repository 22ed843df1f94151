"""Drain plans: a destination and a placement for every guest at once.

Emptying a host one guest at a time, each sent to the best host for it
alone (Nova's way), fails where an order exists that succeeds: an early
small guest takes the only cell a later large one could use. A plan
places every guest of the host before anything moves, as one search:

* the guest with the fewest destinations left goes first (ties: the
  largest first), so the hardest guests choose while there is room;
* each guest tries its destinations fullest first (best fit), keeping
  the emptier hosts for the guests after it;
* every placement is checked at once against the other guests still to
  place (forward checking): a destination that no longer fits one of
  them is struck from its list, and a guest left with none undoes the
  last choice (backtracking) and tries the next one;
* two destinations whose free resources are identical are tried once
  per guest: what fails on one fails on the other.

The search is exhaustive within ``max_steps`` placements: a plan that
finds no room for a guest either proved there is none or says that it
stopped at the limit. Each step fits guests on views and accounts the
placement on a view (numa/view_usage.py), without copying objects.

Everything here is pure: the caller gives the guests (their requests as
numa.views.RequestView) and the destinations (their free resources as
numa.views.HostView, reservations applied, best weight first), and gets
a Plan; nothing is read, reserved or changed. No maintained solver is
used: a constraint solver (OR-tools CP-SAT, say) would need the NUMA fit
(thread policies, page budgets, the pinning rules) re-expressed as
linear constraints, which would then differ from the fit the
destinations' claims run, and the plans it found could be refused.
"""

import collections
import dataclasses
import heapq

from numamig.numa import fit as numa_fit
from numamig.numa import view_usage
from numamig.numa import views as numa_views

#: Placements a plan may try before it stops (the conductor passes
#: ``[scheduler] drain_plan_max_steps``).
DEFAULT_MAX_STEPS = 20000
# How many destinations' refusals an unplaced guest's reason names.
_NAMED = 5


@dataclasses.dataclass(frozen=True)
class Guest:
    """A guest of the host to drain.

    :param request: its numa.views.RequestView, or None for a guest
        without NUMA characteristics (any destination takes it).
    :param pagesize_kb: the page size it keeps, or None.
    :param problem: why it cannot be moved at all (unusable specs, a
        migration of it in progress), or None.
    :param exclude: hosts it may not go to although they are
        destinations of the others (a defragmentation's guest moved off
        a third host must not go back there).
    """

    uuid: str
    name: str
    request: object = None
    pagesize_kb: int = None
    problem: str = None
    exclude: frozenset = frozenset()


@dataclasses.dataclass(frozen=True)
class Destination:
    """A host that may receive guests, and its free resources now."""

    host: str
    view: object             # numa.views.HostView


@dataclasses.dataclass(frozen=True)
class Move:
    """One guest's destination and placement (a placed.Placement, None
    for a guest without NUMA characteristics)."""

    guest: Guest
    host: str
    placement: object


@dataclasses.dataclass(frozen=True)
class Unplaced:
    guest: Guest
    reason: str


@dataclasses.dataclass(frozen=True)
class Plan:
    """A drain plan.

    ``moves`` in the order to run them: each placement was fitted on
    its destination as the moves before it leave it. ``kept_free``:
    {host: ids of the whole cells the plan leaves free there}.
    ``steps``: placements tried; ``stopped``: the search reached its
    limit before it could decide.
    """

    moves: tuple
    unplaced: tuple
    kept_free: dict
    steps: int
    stopped: bool

    @property
    def complete(self):
        """Whether every guest has a destination: the host can be
        emptied."""
        return not self.unplaced


def plan(guests, destinations, limits=None, strategy='spread',
         keep_free_nodes=0, max_steps=DEFAULT_MAX_STEPS):
    """Return the Plan that empties a host of ``guests``, or the most of
    it the search found.

    :param guests: Guests, in any order (or objects with the same
        attributes; ``request`` may be the InstanceNUMATopology itself).
    :param destinations: Destinations, best first (the scheduler's
        weight order): guests without a NUMA request take the first.
    :param limits: NUMALimits (or a views.LimitsView) or None.
    :param strategy: the host-cell order of the fit ('spread' or
        'pack'), the one the destinations' claims use.
    :param keep_free_nodes: whole NUMA cells to leave free on every
        destination: of the cells nothing uses, the highest-numbered
        ones are kept out of the plan.
    :param max_steps: placements the search may try.
    """
    limits = numa_views.limits_view(limits)
    kept, views = _keep_free(destinations, keep_free_nodes)
    order = [d.host for d in destinations]
    moves, unplaced, searched = [], [], []
    for guest in guests:
        if guest.problem:
            unplaced.append(Unplaced(guest, guest.problem))
        elif guest.request is None:
            allowed = _floating_destinations(guest, order, views)
            if allowed:
                moves.append(Move(guest, allowed[0], None))
            else:
                unplaced.append(Unplaced(guest, "no destination is left"))
        else:
            searched.append(Guest(guest.uuid, guest.name,
                                  numa_views.RequestView.of(guest.request),
                                  guest.pagesize_kb,
                                  exclude=_excluded(guest)))
    search = _Search(searched, views, order, limits, strategy, max_steps)
    found = search.run()
    moves.extend(found)
    unplaced.extend(search.unplaced(found))
    return Plan(tuple(moves), tuple(unplaced), kept, search.steps,
                search.stopped)


def _floating_destinations(guest, order, views):
    """The destinations, best first, of a guest without a NUMA request:
    those it is not barred from with a cell left once the kept-free
    cells are taken out (its vCPUs float over the cells it may use; on a
    host whose every cell is kept free it would use a kept one)."""
    return [host for host in order
            if host not in _excluded(guest) and views[host].cells]


def _excluded(guest):
    """The guest's excluded hosts (callers may pass objects without
    the attribute)."""
    return frozenset(getattr(guest, 'exclude', None) or ())


def _keep_free(destinations, count):
    """Return ({host: kept cell ids}, {host: view without them})."""
    kept, views = {}, {}
    for destination in destinations:
        view = destination.view
        idle = [cell.id for cell in view.cells if cell.is_idle()]
        keep = frozenset(sorted(idle)[len(idle) - count:]) if count else ()
        if keep:
            kept[destination.host] = tuple(sorted(keep))
            view = numa_views.HostView.of_cells(
                cell for cell in view.cells if cell.id not in keep)
        views[destination.host] = view
    return kept, views


class _Search:
    """Backtracking with forward checking over the guests' destinations.

    ``domains[i]``: the destinations guest i fits on as the placements
    made so far leave them; struck destinations are put back from
    ``trail`` when a placement is undone.
    """

    def __init__(self, guests, views, order, limits, strategy, max_steps):
        self.guests = guests
        self.views = dict(views)
        self.rank = {host: index for index, host in enumerate(order)}
        self.fit_args = {'limits': limits, 'strategy': strategy}
        self.max_steps = max_steps
        self.steps = 0
        self.stopped = False
        # Guests of one key are interchangeable (their domains, refusals
        # and failures are shared): the excluded hosts are part of it.
        self.keys = [(g.request.demands(g.pagesize_kb), g.pagesize_kb,
                      g.exclude) for g in guests]
        # The largest first among equally constrained guests.
        self.size = [_size(key[0]) for key in self.keys]
        self.refusals = {}
        self.domains = [self._initial_domain(i) for i in range(len(guests))]
        # A guest that fits nowhere alone is not searched for: the others
        # are placed without it.
        self.searched = [i for i, domain in enumerate(self.domains)
                         if domain]
        self.trail = []
        self.assigned = {}           # guest index -> (host, placement)
        self.best = {}
        self.failed = {}             # request key -> Counter of hosts
        self._signatures = {}
        self._free = {}              # host -> (view, its _free)

    def _fit(self, index, view):
        guest = self.guests[index]
        return numa_fit.fit(view, guest.request,
                            pagesize_kb=guest.pagesize_kb, **self.fit_args)

    def _initial_domain(self, index):
        """Where the guest fits alone; guests of one request share it."""
        key = self.keys[index]
        if key in self.refusals:
            return set(self.refusals[key][0])
        domain, refused = set(), {}
        for host in sorted(self.views, key=self.rank.get):
            if host in key[2]:
                continue
            result = self._fit(index, self.views[host])
            if result.fits:
                domain.add(host)
            else:
                refused[host] = result
        self.refusals[key] = (frozenset(domain), refused)
        return set(domain)

    def run(self):
        """Search; return the Moves of the complete plan, or of the most
        guests the search could place together."""
        self._place_next()
        return [Move(self.guests[i], host, placement)
                for i, (host, placement) in self.best.items()]

    def _place_next(self):
        """Place the guests left; True once every guest is placed."""
        left = [i for i in self.searched if i not in self.assigned]
        if not left:
            return True
        index = min(left, key=lambda i: (self._open(i), self.size[i],
                                         self.guests[i].uuid))
        # Hosts this guest's subtree failed on are closed to the guests
        # of the same request placed after it on this path: a solution
        # with such a guest there would, its two guests swapped, have
        # been found in that subtree.
        failed = self.failed.setdefault(self.keys[index],
                                        collections.Counter())
        closed, tried = [], set()
        for host in self._candidates(index, failed):
            if self.steps >= self.max_steps:
                self.stopped = True
                return False
            signature = self._signature(host)
            if signature in tried:
                continue
            tried.add(signature)
            result = self._fit(index, self.views[host])
            if not result.fits:
                continue
            self.steps += 1
            mark = self._assign(index, host, result.placement)
            if mark is not None and self._place_next():
                return True
            if mark is not None:
                self._undo(index, host, mark)
            if self.stopped:
                return False
            failed[host] += 1
            closed.append(host)
        failed.subtract(closed)
        return False

    def _open(self, index):
        """How many destinations guest ``index`` has left open."""
        domain = self.domains[index]
        failed = self.failed.get(self.keys[index])
        if not failed:
            return len(domain)
        return len(domain) - sum(1 for host, count in failed.items()
                                 if count > 0 and host in domain)

    def _candidates(self, index, failed):
        """The guest's open destinations, fullest first, made one by one:
        most guests take the first (a heap, not a sort of every host)."""
        heap = [(self._free_of(h), self.rank[h], h)
                for h in self.domains[index] if failed[h] <= 0]
        heapq.heapify(heap)
        while heap:
            yield heapq.heappop(heap)[2]

    def _free_of(self, host):
        """_free of the host's current view, worked out once per view."""
        view = self.views[host]
        cached = self._free.get(host)
        if cached is None or cached[0] is not view:
            cached = self._free[host] = (view, _free(view))
        return cached[1]

    def _assign(self, index, host, placement):
        """Place guest ``index``; strike ``host`` from the guests it no
        longer fits. Returns the trail mark, or None (undone already)
        when a guest is left with no destination."""
        mark = len(self.trail)
        old = self.views[host]
        self.views[host] = view_usage.apply(old, placement)
        self.assigned[index] = (host, placement)
        self.trail.append((None, host, old))
        if len(self.assigned) > len(self.best):
            # The most guests placed together so far: what a plan that
            # cannot empty the host shows.
            self.best = dict(self.assigned)
        verdicts = {}
        emptied = False
        for other in self.searched:
            if other in self.assigned or host not in self.domains[other]:
                continue
            key = self.keys[other]
            if key not in verdicts:
                verdicts[key] = self._fit(other, self.views[host]).fits
            if not verdicts[key]:
                self.domains[other].discard(host)
                self.trail.append((other, host, None))
                emptied = emptied or not self._open(other)
        if emptied:
            self._undo(index, host, mark)
            return None
        return mark

    def _undo(self, index, host, mark):
        while len(self.trail) > mark:
            other, struck, view = self.trail.pop()
            if other is None:
                self.views[struck] = view
            else:
                self.domains[other].add(struck)
        del self.assigned[index]

    def _signature(self, host):
        """What a destination's fits depend on, equal for two hosts
        whose free resources are the same (then one is tried)."""
        view = self.views[host]
        cached = self._signatures.get(host)
        if cached is not None and cached[0] is view:
            return cached[1]
        signature = tuple(
            (c.id, frozenset(c.cpuset), frozenset(c.pcpuset),
             frozenset(c.pinned_cpus),
             tuple(frozenset(group) for group in c.siblings), c.memory_mb,
             c.memory_usage_mb, c.cpu_usage, c.pools) for c in view.cells)
        self._signatures[host] = (view, signature)
        return signature

    def unplaced(self, found):
        """An Unplaced, with its reason, for every guest the plan lacks."""
        placed = {move.guest.uuid for move in found}
        return [Unplaced(guest, self._reason(index))
                for index, guest in enumerate(self.guests)
                if guest.uuid not in placed]

    def _reason(self, index):
        fits_on, refused = self.refusals[self.keys[index]]
        if not fits_on:
            return _nowhere(refused, len(self.views))
        alone = (f"it fits alone on {len(fits_on)} destination(s) "
                 f"({_names(sorted(fits_on, key=self.rank.get))})")
        if self.stopped:
            return (f"{alone}; the search stopped after {self.steps} "
                    f"placements (the limit) before it found room for it "
                    f"with the other guests")
        return (f"{alone}, but not together with the other guests: every "
                f"arrangement was tried")


def _size(demands):
    """Sort key putting the largest guest first."""
    return (-sum(d.pinned for d in demands),
            -sum(d.memory_mb for d in demands), -len(demands))


def _free(view):
    """Free dedicated pCPUs, then free memory: smaller is fuller."""
    return (sum(cell.free_count for cell in view.cells),
            sum(cell.memory_mb - cell.memory_usage_mb for cell in view.cells))


def _names(hosts):
    shown = ', '.join(hosts[:_NAMED])
    return shown + (f" and {len(hosts) - _NAMED} more"
                    if len(hosts) > _NAMED else '')


def _nowhere(refused, count):
    if not count:
        return "no destination is left"
    named = sorted(refused)[:_NAMED]
    why = '; '.join(f"{host}: {refused[host].reason}" for host in named)
    more = count - len(named)
    return (f"it fits on none of the {count} destination(s): {why}"
            + (f"; and {more} more" if more > 0 else ''))
