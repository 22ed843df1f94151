"""Drain plans: a destination and a placement for every guest at once.

Emptying a host one guest at a time, each sent to the best host for it
alone (Nova's way), fails where an order exists that succeeds: an early
small guest takes the only cell a later large one could use. A plan
places every guest of the host before anything moves, as one search.

What a plan is decides what the search must try. The moves into one
destination take their claims one after another in the plan's order,
and the destination's claim runs the NUMA fit on what the moves before it left:
the placement a guest gets is the fit's for that order, never one the
planner picks. A plan is therefore an assignment of the guests to
destinations and, per destination, an order of its guests; the cells
and pCPUs follow. The search tries every assignment and every order
(so every cell choice the fit can make for these guests), within
``max_steps`` placements fitted:

* the guest with the fewest destinations left goes next (ties: the
  largest first), so the hardest guests choose while there is room;
* it is tried on each destination (fullest first: best fit), at every
  position among the guests planned there so far, the end first; a
  guest put before others re-fits the ones after it. Any order of a
  destination's guests is built this way exactly once;
* after each insertion the guests still to place are checked against
  the destination (forward checking): it stays open for one while the
  guest fits at its end, or its pinned pCPUs are no more than the ones
  no order can take from it; a guest left with no destination undoes
  the last choice (backtracking).

Symmetries skip only branches shown empty by one tried before:

* a state the search has shown to lead to no plan (every branch from
  it failed) is not searched again when reached another way, nor one
  that differs from it only by guests of one kind or interchangeable
  destinations swapped;
* two destinations with the same free resources, the same kinds of
  guests planned there in the same order and the same guests barred
  from them (``exclude``) are interchangeable: one is tried per guest;
* guests of one kind (equal demands per guest cell, page size and
  barred hosts) are interchangeable: a destination on which one's
  whole subtree failed is closed to those placed after it on that
  path, and a guest is inserted on one side only of a run of its kind.

A guest that does not fit where the guests planned so far put it drops
that branch, yet a guest inserted before them later could have moved
them to other cells or functions and made room (a claim takes the
emptiest cells, and a guest's own nodes' functions first): the search's
"none" is checked by building every destination's orders from their
first guest on (_Orders), within PROOF_STEPS_FACTOR x ``max_steps``
steps of its own, a state
whose guests left pin more pCPUs than the destinations left have free
cut short.

So an incomplete plan is one of two answers: the search ran out (no
plan exists, ``Plan.outcome`` NO_PLAN) or reached ``max_steps``
(NOT_FOUND: a plan may exist). A guest that cannot move at all (a
problem, no destination, fits on none alone) makes it NO_PLAN whatever
the search of the others did. Each step fits guests on views and
accounts the placement on a view (numa/view_usage.py), without copying
objects.

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

#: Placements a plan may fit before it stops (the conductor passes
#: ``[scheduler] drain_plan_max_steps``).
DEFAULT_MAX_STEPS = 20000
#: Plan.outcome: every guest placed; no plan exists (proven); no plan
#: found within max_steps (one may exist).

#: The steps the proof that no plan exists (_Orders) may take beyond the
#: search's, in multiples of ``max_steps``: bench_drain.py --clouds 3
#: has tight hosts whose proof needs up to 100,000 placements when the
#: search stops short of 20,000 (2.4 s of CPU at most).
PROOF_STEPS_FACTOR = 9
PLANNED = 'plan'
NO_PLAN = 'none'
NOT_FOUND = 'stopped'
OUTCOMES = (PLANNED, NO_PLAN, NOT_FOUND)
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
    ``steps``: placements fitted (an insertion re-fits the guests after
    it), of at most ``max_steps`` (give or take one insertion's);
    ``stopped``:
    the search reached that limit. ``proven``: an incomplete plan
    proves that none exists (see ``outcome``).
    """

    moves: tuple
    unplaced: tuple
    kept_free: dict
    steps: int
    stopped: bool
    max_steps: int = DEFAULT_MAX_STEPS
    proven: bool = True

    @property
    def complete(self):
        """Whether every guest has a destination: the host can be
        emptied."""
        return not self.unplaced

    @property
    def outcome(self):
        """PLANNED, NO_PLAN (proven) or NOT_FOUND (within max_steps)."""
        if not self.unplaced:
            return PLANNED
        return NO_PLAN if self.proven else NOT_FOUND


def plan(guests, destinations, limits=None, strategy='spread',
         keep_free_nodes=0, max_steps=DEFAULT_MAX_STEPS, accept=None):
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
    :param max_steps: placements the search may fit (an insertion
        before other guests re-fits them, one step each).
    :param accept: called with the Moves of the guests with a NUMA
        request once each has a place (in the order to run them);
        False goes on searching. It must give the same answer when
        guests of one kind, or interchangeable destinations, swap
        places (a defragmentation refuses moves that wait on each
        other in a circle).
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
    # A guest that cannot move at all settles the answer.
    certain = bool(unplaced)
    search = _Search(searched, views, order, limits, strategy, max_steps,
                     accept)
    found = search.run()
    if len(found) < len(searched) and not (search.stopped or
                                           search.impossible):
        # The proof of "none" gets steps of its own: on tight hosts it
        # needs several times what the search used, and a host said
        # undecided costs an operator more than the proof's seconds.
        search.max_steps = search.steps + PROOF_STEPS_FACTOR * max_steps
        found = _Orders(search).run() or found
    moves.extend(found)
    unplaced.extend(search.unplaced(found))
    return Plan(tuple(moves), tuple(unplaced), kept, search.steps,
                search.stopped, max_steps,
                certain or search.impossible or not search.stopped)

def answer_outcome(answer):
    """The answer of a drain plan as the conductor sends it (plain
    data, numamig.conductor.drain.plan): PLANNED, NO_PLAN or
    NOT_FOUND. A conductor older than these answers proved nothing: its
    incomplete plans are NOT_FOUND."""
    found = answer['search'].get('outcome')
    if found is None:
        found = NOT_FOUND if answer['unplaced'] else PLANNED
    return found


def why_not(answer):
    """Why a plan's data does not empty its host, in one sentence that
    keeps "no plan exists" apart from "none found within the limit"."""
    unplaced = answer['unplaced']
    if not unplaced:
        return answer['admission']['refused']
    first = (f"{len(unplaced)} guest(s) have no destination, e.g. "
             f"{unplaced[0]['name']}: {unplaced[0]['reason']}")
    if answer_outcome(answer) == NOT_FOUND:
        limit = answer['search'].get('max_steps', answer['search']['steps'])
        return (f"no plan found within {limit} placements, though one may "
                f"exist (raise [scheduler] drain_plan_max_steps to search "
                f"further): {first}")
    return f"no plan exists: {first}"


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
                (cell for cell in view.cells if cell.id not in keep),
                view.pci)
        views[destination.host] = view
    return kept, views


class _Search:
    """Backtracking over (destination, position) per guest, with forward
    checking.

    Per destination: ``lists`` the guests planned there in order,
    ``chains`` the views after each (``chains[h][0]`` is the free
    view), ``placements`` theirs. ``open[i]``: {destination: whether
    guest i fits at its end now} of the destinations still open to it.
    Every change is recorded on ``trail`` and undone from it.
    """

    def __init__(self, guests, views, order, limits, strategy, max_steps,
                 accept):
        self.guests = guests
        self.rank = {host: index for index, host in enumerate(order)}
        self.fit_args = {'limits': limits, 'strategy': strategy}
        self.max_steps = max_steps
        # What the operator set; max_steps grows for the proof of none.
        self.limit = max_steps
        self.accept = accept
        self.steps = 0
        self.stopped = False
        keys = [(g.request.demands(g.pagesize_kb), g.pagesize_kb,
                 g.exclude, g.request.device_key()) for g in guests]
        # Guests of one kind are interchangeable: whatever one can do,
        # another can in its place (the barred hosts are part of it, and
        # the devices it asks: two guests of equal CPUs and memory, one
        # asking a device, do not fit on the same hosts).
        kinds = {}
        self.kind = [kinds.setdefault(key, len(kinds)) for key in keys]
        self.barred = [key[2] for key in keys]
        self.size = [_size(key[0]) for key in keys]
        # Pinned pCPUs each guest takes at least, whatever the order.
        self.pcpus = [sum(d.pinned for d in key[0]) for key in keys]
        self.lists = dict.fromkeys(views, ())
        self.chains = {host: (view,) for host, view in views.items()}
        self.placements = dict.fromkeys(views, ())
        self.pinned = dict.fromkeys(views, 0)
        self.room = {host: sum(cell.free_count for cell in view.cells)
                     for host, view in views.items()}
        self.refusals = {}
        self.open = [self._initial(index) for index in range(len(guests))]
        # The destinations each guest fits alone (what _Orders reads).
        self.open_at_start = [frozenset(domain) for domain in self.open]
        # A guest that fits nowhere alone is not searched for: the others
        # are placed without it (and no plan empties the host).
        self.searched = [i for i, domain in enumerate(self.open) if domain]
        self.impossible = len(self.searched) < len(guests)
        self.trail = []
        self.placed = {}             # guest index -> destination
        self.best = None             # the most guests placed together
        self.best_count = -1
        self.failed = {}             # kind -> Counter of closed hosts
        # States proven to lead to no plan (every branch failed).
        self.dead = set()
        self._classes = {}
        self._class_ids = {}
        self._free = {}

    def _fit(self, index, view):
        guest = self.guests[index]
        return numa_fit.fit(view, guest.request,
                            pagesize_kb=guest.pagesize_kb, **self.fit_args)

    def _initial(self, index):
        """{destination: True} of those the guest fits alone (shared
        by the guests of its kind)."""
        kind = self.kind[index]
        if kind in self.refusals:
            return dict.fromkeys(self.refusals[kind][0], True)
        domain, refused = [], {}
        for host in sorted(self.chains, key=self.rank.get):
            if host in self.barred[index]:
                continue
            result = self._fit(index, self.chains[host][0])
            if result.fits:
                domain.append(host)
            else:
                refused[host] = result
        self.refusals[kind] = (tuple(domain), refused)
        return dict.fromkeys(domain, True)

    def run(self):
        """Search; return the Moves of the complete plan, or of the most
        guests the search could place together."""
        if self._place_next():
            return self._moves()
        return self.best or []

    def _moves(self):
        """The Moves of what is placed now: each destination's in its
        order, the first of every destination first."""
        moves = []
        for host in set(self.placed.values()):
            for position, (index, placement) in enumerate(zip(
                    self.lists[host], self.placements[host], strict=True)):
                moves.append((position, self.rank[host],
                              Move(self.guests[index], host, placement)))
        moves.sort(key=lambda item: item[:2])
        return [move for _, _, move in moves]

    def _place_next(self):
        """Place the guests left; True once every guest is placed (and
        the plan accepted). One frame per guest placed: a host of a few
        hundred guests stays well within Python's recursion limit."""
        left = [i for i in self.searched if i not in self.placed]
        if not left:
            return self.accept is None or bool(self.accept(self._moves()))
        state = self._state()
        if state in self.dead:
            return False
        index = min(left, key=lambda i: (self._open(i), self.size[i],
                                         self.guests[i].uuid))
        # Hosts this guest's subtree failed on are closed to the guests
        # of its kind placed after it on this path: a plan with such a
        # guest there would, the two guests swapped, have been found in
        # that subtree.
        failed = self.failed.setdefault(self.kind[index],
                                        collections.Counter())
        closed, tried = [], set()
        for host in self._candidates(index, failed):
            signature = self._signature(host)
            if signature in tried:
                continue
            tried.add(signature)
            for position in self._positions(index, host):
                if self.steps >= self.max_steps:
                    self.stopped = True
                    return False
                mark = self._insert(index, host, position)
                if mark is None:
                    continue
                if self._place_next():
                    return True
                self._undo(mark)
                if self.stopped:
                    return False
            failed[host] += 1
            closed.append(host)
        failed.subtract(closed)
        # Every branch failed: so does any way back to this state.
        self.dead.add(state)
        return False

    def _state(self):
        """What the rest of the search depends on, the same for states
        that differ only by guests of one kind or interchangeable
        destinations swapped: the kinds planned per destination class,
        in order."""
        return tuple(sorted(self._signature(host)
                            for host in set(self.placed.values())))

    def _open(self, index):
        """How many destinations guest ``index`` has left open."""
        domain = self.open[index]
        failed = self.failed.get(self.kind[index])
        if not failed:
            return len(domain)
        return len(domain) - sum(1 for host, count in failed.items()
                                 if count > 0 and host in domain)

    def _candidates(self, index, failed):
        """The guest's open destinations: those it fits at the end of
        first, fullest first, made one by one (most guests take the
        first: a heap, not a sort of every host); then the others."""
        heap, later = [], []
        for host, at_end in self.open[index].items():
            if failed[host] > 0:
                continue
            entry = (self._free_of(host), self.rank[host], host)
            (heap if at_end else later).append(entry)
        heapq.heapify(heap)
        while heap:
            yield heapq.heappop(heap)[2]
        for entry in sorted(later):
            yield entry[2]

    def _positions(self, index, host):
        """Where among the host's guests to insert the guest: the end
        first (if it fits there), then ever earlier; of the positions
        around a run of guests of its kind (same plans), one."""
        planned = self.lists[host]
        kind = self.kind[index]
        last = len(planned) if self.open[index][host] else \
            len(planned) - 1
        for position in range(last, -1, -1):
            if position < len(planned) and \
                    self.kind[planned[position]] == kind:
                continue
            yield position

    def _free_of(self, host):
        """_free of the host's current view, worked out once per view."""
        view = self.chains[host][-1]
        cached = self._free.get(host)
        if cached is None or cached[0] is not view:
            cached = self._free[host] = (view, _free(view))
        return cached[1]

    def _insert(self, index, host, position):
        """Insert guest ``index`` at ``position`` on ``host`` and re-fit
        the guests after it; strike ``host`` from the guests it can no
        longer take. Returns the trail mark, or None (nothing changed,
        or undone already) when a guest does not fit or one is left
        with no destination."""
        planned = self.lists[host]
        order = planned[:position] + (index,) + planned[position:]
        chain = list(self.chains[host][:position + 1])
        placements = list(self.placements[host][:position])
        for guest in order[position:]:
            # A step is a placement fitted: an insertion before others
            # costs one per guest it re-fits.
            self.steps += 1
            result = self._fit(guest, chain[-1])
            if not result.fits:
                return None
            placement = result.placement
            chain.append(view_usage.apply(chain[-1], placement))
            placements.append(placement)
        mark = len(self.trail)
        self.trail.append((None, host, (planned, self.chains[host],
                                        self.placements[host],
                                        self.pinned[host])))
        self.lists[host] = order
        self.chains[host] = tuple(chain)
        self.placements[host] = tuple(placements)
        self.pinned[host] += self.pcpus[index]
        self.placed[index] = host
        count = len(self.placed)
        if count > self.best_count and count < len(self.searched):
            # What a plan that cannot empty the host shows.
            self.best_count = count
            self.best = self._moves()
        if not self._check(host):
            self._undo(mark)
            return None
        return mark

    def _check(self, host):
        """Forward checking on ``host``: False when a guest still to
        place has no destination left."""
        view = self.chains[host][-1]
        verdicts = {}
        for other in self.searched:
            if other in self.placed:
                continue
            domain = self.open[other]
            was = domain.get(host)
            if was is None:
                continue
            kind = self.kind[other]
            if kind not in verdicts:
                verdicts[kind] = self._fit(other, view).fits
            if verdicts[kind]:
                now = True
            elif self.pinned[host] + self.pcpus[other] <= self.room[host]:
                now = False         # it may fit before some guests there
            else:
                now = None
            if now == was:
                continue
            self.trail.append((other, host, was))
            if now is None:
                del domain[host]
                if not self._open(other):
                    return False
            else:
                domain[host] = now
        return True

    def _undo(self, mark):
        while len(self.trail) > mark:
            other, host, old = self.trail.pop()
            if other is None:
                planned = self.lists[host]
                (self.lists[host], self.chains[host],
                 self.placements[host], self.pinned[host]) = old
                for index in set(planned) - set(old[0]):
                    del self.placed[index]
            else:
                self.open[other][host] = old

    def _signature(self, host):
        """What a destination's future depends on: equal for two hosts
        with the same free view, the same kinds of guests planned there
        in the same order, and the same kinds barring them (then one is
        tried)."""
        return (self._class(host),
                tuple(self.kind[i] for i in self.lists[host]))

    def _class(self, host):
        """A number per class of interchangeable free destinations."""
        cached = self._classes.get(host)
        if cached is None:
            view = self.chains[host][0]
            key = (
                tuple((c.id, frozenset(c.cpuset), frozenset(c.pcpuset),
                       frozenset(c.pinned_cpus),
                       tuple(frozenset(group) for group in c.siblings),
                       c.memory_mb, c.memory_usage_mb, c.cpu_usage, c.pools)
                      for c in view.cells),
                # Hosts alike but for their PCI functions are not
                # interchangeable for a guest that asks devices.
                None if view.pci is None else view.pci.key(),
                frozenset(self.kind[i] for i in self.searched
                          if host in self.barred[i]))
            cached = self._classes[host] = self._class_ids.setdefault(
                key, len(self._class_ids))
        return cached

    def unplaced(self, found):
        """An Unplaced, with its reason, for every guest the plan lacks."""
        placed = {move.guest.uuid for move in found}
        return [Unplaced(guest, self._reason(index))
                for index, guest in enumerate(self.guests)
                if guest.uuid not in placed]

    def _reason(self, index):
        fits_on, refused = self.refusals[self.kind[index]]
        if not fits_on:
            return _nowhere(refused, len(self.chains))
        alone = (f"it fits alone on {len(fits_on)} destination(s) "
                 f"({_names(list(fits_on))})")
        if self.stopped:
            return (f"{alone}; no plan placing it with the other guests "
                    f"was found within {self.limit} placements (the "
                    f"search's limit, and {PROOF_STEPS_FACTOR} times as many "
                    f"to prove none), "
                    f"though one may exist")
        if self.impossible:
            return (f"{alone}, but not together with the other guests "
                    f"that can move: every destination and every order "
                    f"of the guests on each was tried")
        return (f"{alone}, but not together with the other guests: no "
                f"plan exists (every destination and every order of the "
                f"guests on each was tried)")


class _Orders:
    """The proof behind a search's "no plan": every order of every share
    of the guests per destination, each order built from its first guest
    on, so that a guest that does not fit stops only the orders that
    begin as tried (a placement depends on the guests before it alone).

    _Search inserts guests among the ones planned: it drops an order
    when a guest does not fit where the guests planned so far put it,
    yet a guest inserted before them later may move them to other host
    cells or functions (the claim takes the emptiest cells, a guest's
    own nodes' functions first) and make room for it. Its plans are
    right; its "none" is checked here, within the steps it left.

    Destinations are filled in their order, each with its guests in
    their order, then closed; a state of the rest (the destination, its
    view, the kinds of the guests left, and for ``accept`` the kinds
    planned so far) that led to nothing is not searched again; of the
    guests of one kind left, one is tried.
    """

    def __init__(self, search):
        self.search = search
        self.hosts = sorted(search.chains, key=search.rank.get)
        self.dead = set()
        self.done = []           # (host, ((guest, placement), ...))
        # Free pCPUs of the destinations after each one.
        self.later_room = [sum(search.room[h] for h in self.hosts[i + 1:])
                           for i in range(len(self.hosts))]

    def run(self):
        """The Moves of a plan, or None (``search.stopped`` set when
        the steps ran out first)."""
        left = tuple(self.search.searched)
        if not self._open(0, left):
            return None
        first = self.hosts[0]
        if self._fill(0, self.search.chains[first][0], (), left):
            return self.moves
        return None

    def _open(self, position, left):
        """Whether every guest left has a destination from ``position``
        on that it fits alone."""
        later = set(self.hosts[position:])
        return all(later.intersection(self.search.open_at_start[g])
                   for g in left)

    def _state_key(self, position, view, placed, left):
        search = self.search
        cells = tuple((c.id, frozenset(c.pinned_cpus), c.memory_usage_mb,
                       c.cpu_usage, c.pools) for c in view.cells)
        used = None if view.pci is None else view.pci.used
        kinds = tuple(sorted(search.kind[g] for g in left))
        planned = None
        if search.accept is not None:
            # What accept reads differs with the guests planned anywhere.
            planned = tuple((host, tuple(search.kind[g] for g, _ in moved))
                            for host, moved in self.done + [(None, placed)])
        return position, cells, used, kinds, planned

    def _fill(self, position, view, placed, left):
        search = self.search
        host = self.hosts[position]
        if not left:
            self.done.append((host, placed))
            accepted = self._accept()
            self.done.pop()
            return accepted
        key = self._state_key(position, view, placed, left)
        if key in self.dead:
            return False
        # The pinned pCPUs the guests left take at least must be free
        # on this destination and the ones after it.
        if sum(search.pcpus[g] for g in left) > \
                sum(cell.free_count for cell in view.cells) + \
                self.later_room[position]:
            self.dead.add(key)
            return False
        tried = set()
        for guest in left:
            kind = search.kind[guest]
            if kind in tried or host not in search.open_at_start[guest]:
                continue
            tried.add(kind)
            if search.steps >= search.max_steps:
                search.stopped = True
                return False
            search.steps += 1
            result = search._fit(guest, view)
            if not result.fits:
                continue
            placement = result.placement
            rest = tuple(g for g in left if g != guest)
            if self._fill(position, view_usage.apply(view, placement),
                          placed + ((guest, placement),), rest):
                return True
            if search.stopped:
                return False
        if position + 1 < len(self.hosts) and self._open(position + 1, left):
            self.done.append((host, placed))
            following = self.hosts[position + 1]
            if self._fill(position + 1, search.chains[following][0], (),
                          left):
                return True
            self.done.pop()
            if search.stopped:
                return False
        self.dead.add(key)
        return False

    def _accept(self):
        moves = []
        for host, placed in self.done:
            for position, (guest, placement) in enumerate(placed):
                moves.append((position, self.search.rank[host],
                              Move(self.search.guests[guest], host,
                                   placement)))
        moves.sort(key=lambda item: item[:2])
        self.moves = [move for _, _, move in moves]
        accept = self.search.accept
        return accept is None or bool(accept(self.moves))


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
