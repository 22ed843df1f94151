"""Fit a guest's NUMA request onto a host's NUMA topology.

The one entry point the destination's move claim, the scheduler's filter
and the operator's dry run share. Guest cells go to distinct host cells;
whether a guest cell fits a host cell does not depend on where the others
go, so the search is a bipartite matching (polynomial), and the answer is
the lexicographically first assignment in the strategy's host-cell order:

- ``spread``: emptiest host cells first (most free dedicated pCPUs, then
  most free memory, then most shared-CPU headroom), so guests do not pile
  onto one node;
- ``pack``: fullest first, so whole cells stay free for large guests.

Ties keep host cell id order. Inputs are never modified.

Nearest first: on a host whose cells are not all equally far apart
(numa/distance.py), a guest of several cells goes to the fitting set of
host cells of least distance cost (distance.cost: the sum over pairs of
guest cells of the distance between their host cells); among sets of
equal cost, the answer is the one the order above gives first. On a host
whose remote distances are all equal every set costs the same, no set is
compared and the answer is exactly the order's first (_nearest).

A fit reads views of its inputs (numa/views.py: made here when it is
given the objects), decides from counts, and leaves the pins, the placed
topology and a refusal's text to be worked out when the FitResult is
read (numa/result.py).
"""

import functools
import itertools
import math
import typing

from numamig import exception
from numamig.numa import cellfit
from numamig.numa import distance
from numamig.numa import matching
from numamig.numa import pci
from numamig.numa import placed
from numamig.numa import result
from numamig.numa import views

STRATEGIES = ('spread', 'pack')

# Sets of host cells the nearest-first search compares exactly, at most:
# C(8, 4) = 70 on an 8-node host (two sockets of NPS4), C(12, 6) = 924;
# beyond it (16 nodes and more) it compares one set per host cell
# (_nearby_sets) and may miss the least cost, never doing worse than the
# order's first.
MAX_SETS = 1000


class Distance(typing.NamedTuple):
    """The distance side of a fit's answer.

    ``cost``: distance.cost of the host cells chosen. ``excess``:
    distance.excess, what the scheduler's distance weigher reads.
    ``reason``: why these cells, naming the cost.
    """

    cost: int
    excess: int
    reason: str


def fit(host_topology, request, limits=None, strategy='spread',
        pagesize_kb=None):
    """Place ``request`` on ``host_topology`` and return a FitResult.

    :param host_topology: HostNUMATopology with its current usage, or a
        views.HostView of one (made once, it serves many fits).
    :param request: InstanceNUMATopology from constraints.get_numa_request
        (host cells and pins it may carry are ignored and recomputed), or
        a views.RequestView of one.
    :param limits: NUMALimits (or views.LimitsView) applied per host
        cell, or None.
    :param strategy: 'spread' or 'pack'.
    :param pagesize_kb: a page size every guest cell must use (a migrating
        guest keeps its source's page size), or None.
    :raises InvalidFitParameter: for an unknown strategy or page size, or
        a request without guest cells.
    """
    _check_parameters(strategy, pagesize_kb)
    wanted = views.RequestView.of(request)
    host_view = views.HostView.of(host_topology)
    hosts = host_view.order(strategy)
    demands = wanted.demands(pagesize_kb)
    limits = views.limits_view(limits)
    picked = None
    if wanted.pci_requests:
        found, failure = _device_fit(host_view, hosts, wanted, demands,
                                     limits)
        if not failure:
            found, picked = found
    elif len(demands) == 1:
        found, failure = _first_fit(hosts, wanted.guests[0], demands[0],
                                    limits)
    else:
        found, failure = _matching_fit(host_view, hosts, wanted.guests,
                                       demands, limits)
    if failure:
        return result.FitResult(False, reason=failure)
    return result.FitResult(True, placement=functools.partial(
        _placement, wanted, found, picked), distance=functools.partial(
        _distance, host_view, found))


def refusal_reasons(found):
    """What a refused fit ran out of: a frozenset of cellfit.REASONS
    (every host cell's reason for the guest cell that fits nowhere, or
    CELLS when the guest cells are more than the host cells they fit);
    empty for a fit. Worked out from the checks the fit made, never from
    its text."""
    if found.fits:
        return frozenset()
    deferred = found[1]
    func = getattr(deferred, 'func', None)
    if func is _nowhere_reason:
        _guest, hosts, outcomes = deferred.args
        if hosts:
            return frozenset(cellfit.reason_of(why) for why, _ in outcomes)
    if func is _device_reason:
        return frozenset((cellfit.PCI_DEVICES,))
    return frozenset((cellfit.CELLS,))


def _check_parameters(strategy, pagesize_kb):
    if strategy not in STRATEGIES:
        raise exception.InvalidFitParameter(
            name='strategy', value=strategy,
            reason=f"must be one of {', '.join(STRATEGIES)}")
    if pagesize_kb is not None and (
            isinstance(pagesize_kb, bool) or not isinstance(pagesize_kb, int)
            or pagesize_kb < 4 or pagesize_kb & (pagesize_kb - 1)):
        raise exception.InvalidFitParameter(
            name='pagesize_kb', value=pagesize_kb,
            reason="must be a power of two of at least 4 KiB")


def _placement(wanted, found, picked=None):
    """Return the placed.Placement of the guest cells on the host cells
    ``found``: (host cell view, guest cell view, demand, page size) each,
    or a _Nearest giving them; ``picked``: the PCI functions chosen
    ((alias, address, node) each), None for a guest without devices.

    The pCPUs are chosen here, when someone reads the placement: check()
    passing for each pair means the choice succeeds.
    """
    found, _compared = _chosen(found)
    cells = []
    for host, guest, demand, pagesize in found:
        cells.append(cellfit.place(host, guest, demand, pagesize,
                                   demand.pinned - len(guest.pcpuset)))
    devices = None
    if picked is not None:
        guest_of = {host.id: guest.id for host, guest, _d, _s in found}
        devices = placed.PlacedPCI(
            wanted.pci_requests, wanted.pci_policy,
            tuple((alias, address, node, guest_of.get(node))
                  for alias, address, node in picked))
    return placed.Placement(wanted.instance_uuid, tuple(cells),
                            wanted.emulator_threads_policy, devices)


def _distance(host_view, found):
    """Return the Distance of the host cells ``found`` (or a _Nearest)
    took; why names how many sets nearer than the order's first the
    search checked, if it compared any (it compares none when all cost
    the same or only one set is possible)."""
    found, compared = _chosen(found)
    cells = [host for host, _guest, _demand, _size in found]
    cost = distance.cost(cells)
    excess = distance.excess(cells, host_view.cells)
    ids = ', '.join(str(cell.id) for cell in sorted(cells,
                                                    key=lambda c: c.id))
    if len(cells) == 1:
        why = "one guest cell: no distance between guest cells"
    elif compared is not None:
        why = (f"the nearest set of host cells it fits; {compared} nearer "
               f"than the strategy's first checked" if compared else
               "no set of host cells is nearer")
    elif host_view.uniform():
        why = "every pair of host cells is equally far"
    else:
        why = "the only fitting set of host cells"
    return Distance(cost, excess,
                    f"host cells {ids}: distance cost {cost} ({why})")


def _device_fit(host_view, hosts, wanted, demands, limits):
    """Choose host cells for a guest with PCI requests, and its devices:
    return (((host, guest, demand, page size) per guest cell, picked),
    None) or (None, why not, deferred).

    Which host cells the guest may take depends on its devices'
    policies, so the sets of host cells the guest cells fit are tried in
    the strategy's order (the lexicographic order of their positions;
    for a guest of one cell, exactly first-fit's order), each with the
    first matching of the guest cells onto it, and the first set whose
    nodes let numa.pci.choose find every device wins. At most MAX_SETS
    sets are tried (C(12, 6) = 924 on a 12-cell host).
    """
    guests = wanted.guests
    table, failure = _fit_table(hosts, guests, demands, limits, {})
    if failure:
        return None, failure
    pci_view = host_view.pci
    if pci_view is None:
        return None, functools.partial(
            _device_reason, wanted.pci_requests, None, ())
    prepared = pci.prepare(pci_view.devices, pci_view.blocked,
                           wanted.pci_requests)
    short = pci.shortfall(prepared, wanted.pci_requests)
    if short:
        # Too few on the whole host: no set of host cells can help.
        return None, functools.partial(
            _device_reason, wanted.pci_requests, short, 0)
    usable = sorted(set().union(*table))
    first_why = None
    cell_sets = 0
    for chosen_set in itertools.islice(
            itertools.combinations(usable, len(guests)), MAX_SETS):
        allowed = frozenset(chosen_set)
        chosen, violation = matching.first_perfect_matching(
            [[p for p in row if p in allowed] for row in table], len(hosts))
        if violation:
            continue
        cell_sets += 1
        nodes = [hosts[position].id for position in chosen_set]
        picked, why = pci.choose(pci_view.devices, pci_view.blocked,
                                 wanted.pci_requests, nodes,
                                 pci_view.socket_of, prepared)
        if why is None:
            found = tuple((hosts[position], guests[index], demands[index],
                           table[index][position])
                          for index, position in enumerate(chosen))
            return (found, picked), None
        if first_why is None:
            first_why = why
    if not cell_sets:
        chosen, violation = matching.first_perfect_matching(
            [list(row) for row in table], len(hosts))
        return None, functools.partial(_hall_reason, violation, guests,
                                       hosts)
    return None, functools.partial(_device_reason, wanted.pci_requests,
                                   first_why, cell_sets)


def _device_reason(requests, why, cell_sets):
    aliases = ', '.join(f"{r.alias}:{r.count}" for r in requests)
    if why is None:
        return (f"PCI devices {aliases}: the host has no PCI devices "
                f"([pci] device_spec admits none)")
    if not cell_sets:
        return f"PCI devices {aliases}: {why}"
    return (f"PCI devices {aliases} fit none of the {cell_sets} sets of "
            f"host cells the guest cells fit; on the first: {why}")


def _first_fit(hosts, guest, demand, limits):
    """Choose the first host cell a guest of one cell fits: return
    (((host, guest, demand, page size),), None) or (None, why it fits
    nowhere, deferred)."""
    outcomes = []
    for host in hosts:
        why, size = cellfit.check(host, demand, limits)
        if why is None:
            return ((host, guest, demand, size),), None
        outcomes.append((why, size))
    return None, functools.partial(_nowhere_reason, guest, hosts, outcomes)


def _matching_fit(host_view, hosts, guests, demands, limits):
    """Choose distinct host cells for the guest cells: return (a
    (host, guest, demand, page size) per guest cell, or a _Nearest
    working it out when read, None) or (None, why they do not fit,
    deferred).

    Whether the guest fits never depends on distances, so a caller that
    reads only the decision (the scheduler's filter on every host) pays
    nothing for nearest first: the search runs when the placement or the
    distance is read.
    """
    known = {}
    found = _greedy_fit(hosts, guests, demands, limits, known)
    table = None
    if found is None:
        table, failure = _fit_table(hosts, guests, demands, limits, known)
        if failure:
            return None, failure
        # Rows list host positions in ascending order: preferred first.
        chosen, violation = matching.first_perfect_matching(
            [list(row) for row in table], len(hosts))
        if violation:
            return None, functools.partial(_hall_reason, violation,
                                           guests, hosts)
        found = tuple((hosts[position], guests[index], demands[index],
                       table[index][position])
                      for index, position in enumerate(chosen))
    if len(guests) < len(hosts):
        return _Nearest(host_view, hosts, guests, demands, limits, known,
                        table, found), None
    return found, None


class _Nearest:
    """The nearest-first choice of a guest that fits, worked out once
    when first read (_nearest); until then it holds the order's first
    answer and what the fit checked (``known``, ``table``)."""

    __slots__ = ('_args', '_answer')

    def __init__(self, host_view, hosts, guests, demands, limits, known,
                 table, first):
        self._args = (host_view, hosts, guests, demands, limits, known,
                      table, first)
        self._answer = None

    def answer(self):
        """Return (a (host, guest, demand, page size) per guest cell,
        sets compared or None)."""
        if self._answer is None:
            self._answer = self._work_out()
        return self._answer

    def _work_out(self):
        (host_view, hosts, guests, demands, limits, known, table,
         first) = self._args
        if host_view.uniform():
            return first, None
        if table is None:
            # The greedy answer checked only some host cells.
            table, _ = _fit_table(hosts, guests, demands, limits, known)
        positions = {id(host): position
                     for position, host in enumerate(hosts)}
        chosen, compared = _nearest(
            host_view, hosts, table,
            [positions[id(host)] for host, *_ in first])
        return tuple((hosts[position], guests[index], demands[index],
                      table[index][position])
                     for index, position in enumerate(chosen)), compared


def _chosen(found):
    """(cells found, sets compared) of a fit's ``found``."""
    if isinstance(found, _Nearest):
        return found.answer()
    return found, None


def _nearest(host_view, hosts, table, first):
    """Return (host position per guest cell, sets compared) of least
    distance cost; ``first`` is the order's first perfect matching.

    The cost depends only on the set of host cells (distance.cost), so
    the search ranks the sets of as many host cells as guest cells,
    among the cells some guest cell fits, by cost, and asks the matching
    whether the guest cells fit each set of the least cost below
    ``first``'s. Among the fitting sets of that cost, the answer is the
    lexicographically first matching of any of them in the strategy's
    order: the first matching of each set, the least of them, which is
    what the order alone would choose among those sets. If no set costs
    less than ``first``'s, ``first`` is the answer: it comes before every
    other matching, those of its cost included, so equal-distance hosts
    and ties keep today's answer.
    """
    count = len(table)
    usable = sorted(set().union(*table))
    if len(usable) == count:
        return first, None
    pairs = host_view.between()
    ids = [hosts[position].id for position in usable]
    between = [[pairs.get((a, b), 0) for b in ids] for a in ids]
    index_of = {position: index for index, position in enumerate(usable)}
    bound = sum(between[index_of[a]][index_of[b]]
                for a, b in itertools.combinations(first, 2))
    nearest = min(between[a][b]
                  for a, b in itertools.combinations(range(len(ids)), 2))
    if bound == nearest * count * (count - 1) // 2:
        # Every pair of the first is as near as any pair can be.
        return first, 0
    if math.comb(len(usable), count) <= MAX_SETS:
        sets = itertools.combinations(range(len(usable)), count)
    else:
        sets = _nearby_sets(between, count)
    ranked = {}
    for chosen in sets:
        cost = sum(between[a][b]
                   for a, b in itertools.combinations(chosen, 2))
        if cost < bound:
            ranked.setdefault(cost, []).append(
                frozenset(usable[index] for index in chosen))
    compared = 0
    for cost in sorted(ranked):
        matchings = []
        for allowed in ranked[cost]:
            compared += 1
            chosen, violation = matching.first_perfect_matching(
                [[p for p in row if p in allowed] for row in table],
                len(hosts))
            if not violation:
                matchings.append(chosen)
        if matchings:
            return min(matchings), compared
    return first, compared


def _nearby_sets(between, count):
    """Index sets to compare on a host of too many sets: for each cell,
    it and the ``count - 1`` cells nearest to it (nearer first, then in
    the strategy's order). At most one set per cell; ``between`` is the
    cells' pair distance matrix."""
    sets = set()
    for anchor, row in enumerate(between):
        others = sorted((index for index in range(len(row))
                         if index != anchor),
                        key=lambda index: (row[index], index))
        sets.add(tuple(sorted([anchor] + others[:count - 1])))
    return sorted(sets)


def _greedy_fit(hosts, guests, demands, limits, known):
    """Give each guest cell in turn the first host cell it fits that the
    ones before it left; return what _matching_fit does, or None if a
    guest cell finds none.

    When every guest cell finds one, that is the lexicographically first
    perfect matching: each guest cell got the most preferred host cell
    the ones before it left, and the ones after it all found one. Most
    guests end here, and the host cells after each one's choice are
    never checked. ``known`` keeps the checks made,
    {demand: outcomes in host order so far}, for the full search.
    """
    taken = set()
    found = []
    count = len(hosts)
    for guest, demand in zip(guests, demands, strict=True):
        outcomes = known.setdefault(demand, [])
        position = 0
        while True:
            if position == len(outcomes):
                if position == count:
                    return None
                outcomes.append(cellfit.check(hosts[position], demand,
                                              limits))
            why, size = outcomes[position]
            if why is None and position not in taken:
                break
            position += 1
        taken.add(position)
        found.append((hosts[position], guest, demand, size))
    return tuple(found)


def _fit_table(hosts, guests, demands, limits, known):
    """Return ({host position: page size} per guest cell, None) or
    (None, the reason the first guest cell fitting nowhere fails).

    Stopping at a guest cell that fits no host cell is right: no
    assignment can place it. Guest cells of equal demands fit the same
    host cells, so each demand is checked once per host cell; ``known``
    holds the checks made already ({demand: outcomes in host order}).
    """
    table = []
    for guest, demand in zip(guests, demands, strict=True):
        outcomes = known.setdefault(demand, [])
        outcomes.extend(cellfit.check(host, demand, limits)
                        for host in hosts[len(outcomes):])
        row = {pos: size for pos, (why, size) in enumerate(outcomes)
               if why is None}
        if not row:
            return None, functools.partial(_nowhere_reason, guest, hosts,
                                           outcomes)
        table.append(row)
    return table, None


def _nowhere_reason(guest, hosts, outcomes):
    if not hosts:
        return f"guest cell {guest.id}: the host has no NUMA cells"
    why = '; '.join(f"host cell {host.id} {cellfit.explain(why)}"
                    for host, (why, _) in
                    sorted(zip(hosts, outcomes, strict=True),
                           key=lambda pair: pair[0].id))
    return f"guest cell {guest.id} fits on no host cell: {why}"


def _hall_reason(violation, guests, hosts):
    guest_positions, host_positions = violation
    guest_ids = sorted(guests[g].id for g in guest_positions)
    host_ids = sorted(hosts[h].id for h in host_positions)
    return (f"guest cells {guest_ids} fit only on host cells {host_ids}, "
            f"and each guest cell needs a host cell of its own")
