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
"""

import dataclasses

from numamig import exception
from numamig import objects
from numamig.numa import cellfit
from numamig.numa import hostview
from numamig.numa import matching
from numamig.numa import pinning
from numamig.numa import placed
from numamig.objects import fields

STRATEGIES = ('spread', 'pack')


@dataclasses.dataclass(frozen=True)
class FitResult:
    """The outcome of a fit.

    ``fits``: whether the guest fits. ``topology``: the placed
    InstanceNUMATopology when it does (None otherwise). ``reason``: when it
    does not, which guest cell failed on which host cell and why.
    """

    fits: bool
    topology: objects.InstanceNUMATopology | None = None
    reason: str | None = None


def fit(host_topology, request, limits=None, strategy='spread',
        pagesize_kb=None):
    """Place ``request`` on ``host_topology`` and return a FitResult.

    :param host_topology: HostNUMATopology with its current usage.
    :param request: InstanceNUMATopology from constraints.get_numa_request
        (host cells and pins it may carry are ignored and recomputed).
    :param limits: NUMALimits applied per host cell, or None.
    :param strategy: 'spread' or 'pack'.
    :param pagesize_kb: a page size every guest cell must use (a migrating
        guest keeps its source's page size), or None.
    :raises InvalidFitParameter: for an unknown strategy or page size, or
        a request without guest cells.
    """
    _check_parameters(request, strategy, pagesize_kb)
    hosts = _host_order([hostview.CellView(cell)
                         for cell in host_topology.cells], strategy)
    cores = [pinning.CellCores(cell) for cell in hosts]
    guests = sorted((hostview.GuestView(cell) for cell in request.cells),
                    key=lambda cell: cell.id)
    emulator_policy = request.emulator_threads_policy
    isolate = emulator_policy == fields.CPUEmulatorThreadsPolicy.ISOLATE
    demands = [cellfit.demand_of(g, int(isolate and g.id == 0), pagesize_kb)
               for g in guests]
    if limits is not None:
        limits = hostview.LimitsView(limits)
    table, failure = _fit_table(hosts, cores, guests, demands, limits)
    if failure:
        return FitResult(False, reason=failure)
    if len(table) == 1:
        # One guest cell: the most preferred host cell it fits.
        chosen = [min(table[0])]
    else:
        chosen, violation = matching.first_perfect_matching(
            [sorted(row) for row in table], len(hosts))
        if violation:
            return FitResult(False,
                             reason=_hall_reason(violation, guests, hosts))
    cells = []
    for index, position in enumerate(chosen):
        guest, demand = guests[index], demands[index]
        slots = demand.pinned - len(guest.pcpuset)
        cells.append(cellfit.place(hosts[position], cores[position], guest,
                                   demand, table[index][position], slots))
    return FitResult(True, topology=placed.instance_topology(
        request.instance_uuid, cells, emulator_policy))


def _check_parameters(request, strategy, pagesize_kb):
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
    if request is None or not request.cells:
        raise exception.InvalidFitParameter(
            name='request', value=request,
            reason="has no guest cells; a guest without a NUMA request "
                   "needs no NUMA fit")


def _host_order(cells, strategy):
    def fullness(cell):
        # Smaller is fuller: free dedicated pCPUs, free memory, headroom.
        return (len(cell.free_pcpus),
                cell.memory_mb - cell.memory_usage_mb,
                len(cell.cpuset) - cell.cpu_usage)
    if strategy == 'pack':
        return sorted(cells, key=lambda c: (fullness(c), c.id))
    return sorted(cells, key=lambda c: (tuple(-v for v in fullness(c)), c.id))


def _fit_table(hosts, cores, guests, demands, limits):
    """Return ({host position: page size} per guest cell, None) or
    (None, the reason the first guest cell fitting nowhere fails).

    Stopping at a guest cell that fits no host cell is right: no
    assignment can place it. A guest of one cell takes the first host
    cell that fits it, so the host cells after that one are not checked.
    """
    table = []
    known = {}
    first_only = len(guests) == 1
    for guest, demand in zip(guests, demands, strict=True):
        if demand not in known:
            known[demand] = _outcomes(hosts, cores, demand, limits,
                                      first_only)
        outcomes = known[demand]
        row = {pos: size for pos, (why, size) in enumerate(outcomes)
               if why is None}
        if not row:
            return None, _nowhere_reason(guest, hosts, outcomes)
        table.append(row)
    return table, None


def _outcomes(hosts, cores, demand, limits, first_only):
    """Return cellfit.check's (why, size) per host cell, in host order,
    up to the first that fits if ``first_only``."""
    outcomes = []
    for host, core in zip(hosts, cores, strict=True):
        outcome = cellfit.check(host, core, demand, limits)
        outcomes.append(outcome)
        if first_only and outcome[0] is None:
            break
    return outcomes


def _nowhere_reason(guest, hosts, outcomes):
    if not hosts:
        return f"guest cell {guest.id}: the host has no NUMA cells"
    why = '; '.join(f"host cell {host.id} {why}" for host, (why, _) in
                    sorted(zip(hosts, outcomes, strict=True),
                           key=lambda pair: pair[0].id))
    return f"guest cell {guest.id} fits on no host cell: {why}"


def _hall_reason(violation, guests, hosts):
    guest_positions, host_positions = violation
    guest_ids = sorted(guests[g].id for g in guest_positions)
    host_ids = sorted(hosts[h].id for h in host_positions)
    return (f"guest cells {guest_ids} fit only on host cells {host_ids}, "
            f"and each guest cell needs a host cell of its own")
