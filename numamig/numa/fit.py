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

A fit reads views of its inputs (numa/views.py: made here when it is
given the objects), decides from counts, and leaves the pins, the placed
topology and a refusal's text to be worked out when the FitResult is
read (numa/result.py).
"""

import functools

from numamig import exception
from numamig.numa import cellfit
from numamig.numa import matching
from numamig.numa import placed
from numamig.numa import result
from numamig.numa import views

STRATEGIES = ('spread', 'pack')


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
    hosts = views.HostView.of(host_topology).order(strategy)
    demands = wanted.demands(pagesize_kb)
    limits = views.limits_view(limits)
    if len(demands) == 1:
        found, failure = _first_fit(hosts, wanted.guests[0], demands[0],
                                    limits)
    else:
        found, failure = _matching_fit(hosts, wanted.guests, demands,
                                       limits)
    if failure:
        return result.FitResult(False, reason=failure)
    return result.FitResult(True, placement=functools.partial(
        _placement, wanted, found))


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


def _placement(wanted, found):
    """Return the placed.Placement of the guest cells on the host cells
    ``found``: (host cell view, guest cell view, demand, page size) each.

    The pCPUs are chosen here, when someone reads the placement: check()
    passing for each pair means the choice succeeds.
    """
    cells = []
    for host, guest, demand, pagesize in found:
        cells.append(cellfit.place(host, guest, demand, pagesize,
                                   demand.pinned - len(guest.pcpuset)))
    return placed.Placement(wanted.instance_uuid, tuple(cells),
                            wanted.emulator_threads_policy)


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


def _matching_fit(hosts, guests, demands, limits):
    """Choose distinct host cells for the guest cells: return (a
    (host, guest, demand, page size) per guest cell, None) or (None, why
    they do not fit, deferred)."""
    known = {}
    found = _greedy_fit(hosts, guests, demands, limits, known)
    if found is not None:
        return found, None
    table, failure = _fit_table(hosts, guests, demands, limits, known)
    if failure:
        return None, failure
    # Rows list host positions in ascending order: preferred first.
    chosen, violation = matching.first_perfect_matching(
        [list(row) for row in table], len(hosts))
    if violation:
        return None, functools.partial(_hall_reason, violation, guests,
                                       hosts)
    return tuple((hosts[position], guests[index], demands[index],
                  table[index][position])
                 for index, position in enumerate(chosen)), None


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
