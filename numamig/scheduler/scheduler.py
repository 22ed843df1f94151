"""Choose live-migration destinations from the host cache.

The conductor asks ``select_destinations`` for a guest: cached hosts go
through the filters (up, not excluded, same hypervisor type, NUMA fit on
their free resources minus in-flight reservations); those that pass are
returned best first by weight (spread or pack), each with the placement
the fit found, together with the refused hosts and why.

At 10,000 hosts filtering and weighing every host per request takes
seconds, so the selection does not: the cache keeps each host's weight
and a summary of its free capacity up to date as its topology changes
(index.py, capacity.py), and the scheduler walks the hosts best weight
first, skips those whose summary shows they cannot hold the guest (a
necessary condition of the NUMA fit only: a host the index skips is one
the fit would refuse), runs the filters on the others, and stops as soon
as ``max_candidates`` have passed. The candidates, their order and their
placements are those of filtering and weighing every host
(``_select_exhaustive``, kept for tests and the benchmark).

So ``Selection.rejected`` lists the refusals of the hosts examined only,
not of every host as before: the hosts the index skipped are summarised
in ``Selection.skipped`` (per capacity, how many hosts lack it and what
the guest needs), and the hosts left unexamined after the last
candidate are counted in ``Selection.unexamined``. NoValidHost names
both the refused hosts and the shortages.

The conductor then tries the candidates in order. Before it asks a
destination to claim, it reserves the guest there with ``reserve``,
which fits again under the cache's lock: two conductor threads that got
the same candidate cannot both reserve the same pCPUs, and the loser
gets a ReservationConflict and moves to its next candidate. It releases
the reservation (``HostStateCache.release``) when the migration ends.
"""

import collections
import dataclasses

from numamig import exception
from numamig.conf import CONF
from numamig.numa import fit as numa_fit
from numamig.numa import placement_reclaim as numa_reclaim
from numamig.numa import views as numa_views
from numamig.scheduler import capacity
from numamig.scheduler import defragment
from numamig.scheduler import drain
from numamig.scheduler import filters as host_filters
from numamig.scheduler import reclaim_hosts
from numamig.scheduler import weighers

# When nothing fits and the cloud has at most this many hosts, every
# host's own refusal is worked out (the capacity index only summarises).
NAMED_REFUSALS = 64


@dataclasses.dataclass(frozen=True)
class Candidate:
    """A host that can take the guest, with the fit that says where."""

    host: str
    weight: object           # fractions.Fraction, the host's free share
    fit: object              # FitResult, or None for a non-NUMA guest

    @property
    def placement(self):
        """The placed InstanceNUMATopology, or None for a non-NUMA guest."""
        return None if self.fit is None else self.fit.topology


@dataclasses.dataclass(frozen=True)
class Rejection:
    """A host that cannot take the guest: which filter refused it, why."""

    host: str
    filter: str
    reason: str

    def __str__(self):
        return f"{self.host}: {self.reason}"


@dataclasses.dataclass(frozen=True)
class Shortage:
    """Hosts the index skipped because they lack one capacity."""

    capacity: str            # a capacity.* name
    hosts: int
    need: str                # what the guest needs of it

    @property
    def who(self):
        return f"{self.hosts} host{'' if self.hosts == 1 else 's'}"

    @property
    def reason(self):
        return f"too few {self.capacity} ({self.need})"

    def __str__(self):
        return f"{self.who}: {self.reason}"


@dataclasses.dataclass(frozen=True)
class Selection:
    """The answer of ``select_destinations``: ordered candidates, refusals.

    ``candidates`` is best first, at most ``max_candidates`` long;
    ``rejected`` holds the examined hosts that were refused, sorted by
    host name; ``skipped`` the Shortages of the hosts the capacity index
    ruled out without examining them; ``unexamined`` counts the hosts
    not looked at once ``max_candidates`` were found.
    """

    candidates: tuple
    rejected: tuple
    skipped: tuple = ()
    unexamined: int = 0

    @property
    def hosts(self):
        return [candidate.host for candidate in self.candidates]

    def refusals(self):
        """Return {who: why}: each refused host by name, and for the
        hosts the index skipped, 'N hosts' per missing capacity."""
        found = {r.host: r.reason for r in self.rejected}
        found.update((s.who, s.reason) for s in self.skipped)
        return found

    def no_valid_host(self):
        """Return the NoValidHost error naming every refused host and
        summing up the skipped ones."""
        return exception.NoValidHost(reason=self.reason())

    def reason(self):
        """Why no host was chosen: every refused host, the skipped ones
        summed up."""
        reasons = [str(r) for r in self.rejected]
        reasons += [str(s) for s in self.skipped]
        if not reasons:
            return "no compute host has reported to the conductor"
        return "; ".join(reasons)


class Scheduler:
    """Filters and weighs the cached hosts for one guest at a time.

    :param cache: the HostStateCache the conductor feeds with reports.
    :param strategy: ``'spread'`` (emptiest host first) or ``'pack'``
        (fullest first); None: ``[scheduler] strategy``.
    :param max_candidates: how many candidates to return at most; None:
        ``[scheduler] max_candidates``.
    :param filters: HostFilter objects; default ``default_filters``.
    :param cell_strategy: host-cell order of the NUMA fit, ``'spread'``
        or ``'pack'``; None uses ``strategy``. Set it to what the
        destinations' ``[compute]`` option uses, so that the placement
        the scheduler predicts is the one their claims will make.
    """

    def __init__(self, cache, strategy=None, max_candidates=None,
                 filters=None, cell_strategy=None,
                 drain_max_steps=drain.DEFAULT_MAX_STEPS):
        # The options hold the defaults (the conductor passes its
        # settings; tests and tools may rely on CONF).
        if strategy is None:
            strategy = CONF.scheduler.strategy
        if max_candidates is None:
            max_candidates = CONF.scheduler.max_candidates
        cell_strategy = strategy if cell_strategy is None else cell_strategy
        for value in (strategy, cell_strategy):
            if value not in weighers.STRATEGIES:
                raise exception.UnknownSchedulingStrategy(
                    strategy=value, choices=', '.join(weighers.STRATEGIES))
        if isinstance(max_candidates, bool) or \
                not isinstance(max_candidates, int) or max_candidates < 1:
            raise exception.Invalid(
                reason=f"max_candidates must be a positive integer, got "
                       f"{max_candidates!r}")
        self.cache = cache
        self.strategy = strategy
        self.cell_strategy = cell_strategy
        self.max_candidates = max_candidates
        self.drain_max_steps = drain_max_steps
        self.filters = tuple(filters) if filters is not None else \
            host_filters.default_filters()
        # The index's conditions are the NUMA filter's: without that
        # filter, a host short of capacity is a valid destination.
        self._indexed = any(isinstance(f, host_filters.NUMATopologyFilter)
                            for f in self.filters)

    @classmethod
    def from_conf(cls, cache, conf):
        """Build a scheduler from ``[scheduler]`` and ``[compute]``."""
        packing = conf.compute.packing_host_numa_cells_allocation_strategy
        return cls(cache, strategy=conf.scheduler.strategy,
                   max_candidates=conf.scheduler.max_candidates,
                   cell_strategy=weighers.PACK if packing else
                   weighers.SPREAD,
                   drain_max_steps=conf.scheduler.drain_plan_max_steps)

    def select_destinations(self, request, source_host, limits=None,
                            hypervisor_type=None, exclude=(),
                            pagesize_kb=None, disabled=None, guest_cpu=None):
        """Return the Selection of destinations for a guest.

        Nothing is reserved: call ``reserve`` for the candidate tried.

        :param request: the guest's unplaced InstanceNUMATopology (from
            numa.constraints.get_numa_request), or None when the guest
            has no NUMA characteristics; not modified.
        :param source_host: the host the guest runs on, never chosen;
            None for a guest not yet created.
        :param limits: NUMALimits for every host cell, or None.
        :param hypervisor_type: required type; None takes the source
            host's type when the cache knows it, else accepts any.
        :param exclude: host names not to choose.
        :param pagesize_kb: page size the guest must keep, or None.
        :param disabled: {host: reason} of the hosts disabled for
            maintenance, refused with that reason; None: none.
        :param guest_cpu: the guest's cpumodel.GuestCPU when it is known
            before the choice (the standing live-migratable answer), so
            that every host is judged by it; None: the conductor applies
            ``cpu_filter`` to the candidates once the source tells it.
        """
        spec = self._spec(request, source_host, limits, hypervisor_type,
                          exclude, pagesize_kb, disabled, guest_cpu)
        needs = capacity.Needs.of(spec.request_view, spec.limits_view,
                                  spec.pagesize_kb) if self._indexed \
            else None
        walk = self.cache.walk(self.strategy)
        everywhere = needs and needs.short(walk.best)
        if everywhere:
            # No cell in the cloud is big enough: every host lacks it.
            selection = Selection((), (), _shortages(
                needs, {everywhere: len(walk.records)}))
        else:
            selection = self._walk(walk, spec, needs)
        if selection.skipped and not selection.candidates and \
                len(walk.records) <= NAMED_REFUSALS:
            # Nothing fits in a small cloud: an operator reads each
            # host's own reason, which costs a few fits on this path only.
            return self._select_exhaustive(request, source_host, limits,
                                           hypervisor_type, exclude,
                                           pagesize_kb, disabled, guest_cpu)
        return selection

    def _walk(self, walk, spec, needs):
        """Examine the hosts best weight first until ``max_candidates``
        passed: the index rules out what it can (``needs``; None: it
        cannot), the filters judge the rest. The candidates found are
        then ordered nearest first (weighers.by_distance)."""
        candidates, rejected = [], []
        short = collections.Counter()
        examined = 0
        for record in walk.records:
            if len(candidates) == self.max_candidates:
                break
            examined += 1
            lacking = needs and needs.short(record.capacity)
            if lacking:
                short[lacking] += 1
                continue
            verdict, refused_by = self._filter(walk.state(record), spec)
            if verdict.passed:
                candidates.append(Candidate(record.host, record.weight,
                                            verdict.fit))
            else:
                rejected.append(Rejection(record.host, refused_by,
                                          verdict.reason))
        rejected.sort(key=lambda rejection: rejection.host)
        candidates = weighers.by_distance(candidates,
                                          lambda candidate: candidate.fit)
        return Selection(tuple(candidates), tuple(rejected),
                         _shortages(needs, short),
                         len(walk.records) - examined)

    def _select_exhaustive(self, request, source_host, limits=None,
                           hypervisor_type=None, exclude=(),
                           pagesize_kb=None, disabled=None, guest_cpu=None):
        """Filter and weigh EVERY host, as before the index: the
        reference the indexed selection must agree with (tests and
        benchmarks/bench_scheduler.py); same arguments and answer as
        ``select_destinations``, with every refused host listed."""
        spec = self._spec(request, source_host, limits, hypervisor_type,
                          exclude, pagesize_kb, disabled, guest_cpu)
        walk = self.cache.walk(self.strategy)
        weighed, rejected = [], []
        for state in sorted((walk.state(r) for r in walk.records),
                            key=lambda state: state.host):
            verdict, refused_by = self._filter(state, spec)
            if verdict.passed:
                weighed.append((state.host, weighers.weigh(state.topology),
                                verdict.fit))
            else:
                rejected.append(Rejection(state.host, refused_by,
                                          verdict.reason))
        ordered = weighers.order(weighed, self.strategy)
        candidates = [Candidate(host, weight, fit)
                      for host, weight, fit in ordered]
        # As _walk: the first max_candidates by weight, nearest first.
        candidates = weighers.by_distance(
            candidates[:self.max_candidates],
            lambda candidate: candidate.fit)
        return Selection(tuple(candidates), tuple(rejected))

    def reclaim_prospects(self, request, source_host, max_mb, max_hosts,
                          limits=None, exclude=(), pagesize_kb=None,
                          disabled=None):
        """The hosts a placement reclaim could open to the guest, best
        first (reclaim_hosts): up, enabled, not excluded, of the
        source's hypervisor type, short of nothing but memory on one
        node, at most ``max_mb`` MiB of it by their own fit. At most
        ``max_hosts`` hosts are fitted; every other host costs a look at
        its capacity summary. Nothing is reserved.

        :returns: reclaim_hosts.Prospects (none for a guest without a
            NUMA request: the NUMA fit never refuses it).
        """
        spec = self._spec(request, source_host, limits, None, exclude,
                          pagesize_kb, disabled)
        if request is None:
            return reclaim_hosts.Prospects((), 0, 0)
        needs = capacity.Needs.of(spec.request_view, spec.limits_view,
                                  spec.pagesize_kb)
        walk = self.cache.walk(self.strategy)
        gaps = []
        for order, record in enumerate(walk.records):
            gap = needs.reclaim_gap_mb(record.capacity)
            if gap is None or gap > max_mb or not self._filter(
                    walk.state(record, with_view=False), spec,
                    fitting=False)[0].passed:
                continue
            gaps.append((gap, order, record))
        looked = reclaim_hosts.shortlist(gaps, max_hosts)
        prospects = []
        for _gap, order, record in looked:
            found = numa_reclaim.estimate(
                record.view(), spec.request_view, max_mb,
                limits=spec.limits_view or spec.limits,
                strategy=self.cell_strategy, pagesize_kb=pagesize_kb)
            # A host that fits as it is was refused for something else
            # (the candidates' claims): no reclaim is for it.
            if found is not None and found.need_mb:
                prospects.append(reclaim_hosts.Prospect(
                    record.host, order, found.node, found.need_mb))
        return reclaim_hosts.Prospects(reclaim_hosts.by_need(prospects),
                                       len(gaps), len(looked))

    def plan_drain(self, source_host, guests, limits=None, disabled=None,
                   to=None, keep_free_nodes=0, max_steps=None):
        """Plan moving every guest off ``source_host`` at once (drain.py).

        Destinations are the cached hosts the filters other than the
        NUMA fit accept (up, enabled, not the source, its hypervisor
        type), best weight first, each with its free resources as the
        last report and the reservations in flight leave them; the plan
        then fits the guests. Nothing is reserved.

        :param guests: drain.Guests.
        :param disabled: {host: reason} of the hosts disabled for
            maintenance.
        :param to: host names the destinations are chosen among, or None
            for any.
        :param max_steps: placements the plan may try; None: this
            scheduler's ``drain_max_steps``.
        :returns: (drain.Plan, {host: why it is no destination}).
        :raises HostNotFound: the source never reported.
        """
        source = self.cache.get(source_host)
        spec = self._spec(None, source_host, None, source.hypervisor_type,
                          (), None, disabled)
        walk = self.cache.walk(self.strategy)
        destinations, left_out = [], {}
        for record in walk.records:
            if record.host == source_host or \
                    (to is not None and record.host not in to):
                continue
            verdict, _ = self._filter(walk.state(record, with_view=False),
                                      spec)
            if verdict.passed:
                destinations.append(drain.Destination(record.host,
                                                      record.view()))
            else:
                left_out[record.host] = verdict.reason
        plan = drain.plan(guests, destinations, limits=limits,
                          strategy=self.cell_strategy,
                          keep_free_nodes=keep_free_nodes,
                          max_steps=max_steps or self.drain_max_steps)
        return plan, left_out

    def plan_defragment(self, request, residents, limits=None,
                        disabled=None, hosts=None, pagesize_kb=None,
                        max_moves=defragment.DEFAULT_MAX_MOVES):
        """The fewest moves that make room for ``request`` (defragment.py).

        Candidates and destinations are the cached hosts the filters
        other than the NUMA fit accept (up, enabled), best weight first,
        with their free resources as the last report and reservations
        leave them; the guests of every destination may move to make
        room for a guest moved off the target (chains). Nothing is
        reserved.

        :param residents: {host: defragment.Residents (or alike)} of the
            hosts' guests that may move.
        :param hosts: names the new guest may go to, or None for any.
        :returns: defragment.Plan.
        """
        spec = self._spec(None, None, None, None, (), None, disabled)
        walk = self.cache.walk(self.strategy)
        movable, destinations = [], []
        for record in walk.records:
            verdict, _ = self._filter(walk.state(record, with_view=False),
                                      spec)
            if not verdict.passed:
                continue
            destinations.append(drain.Destination(record.host,
                                                  record.view()))
            movable.append(defragment.Candidate(
                record.host, record.topology,
                tuple(residents.get(record.host, ()))))
        candidates = [c for c in movable if hosts is None or c.host in hosts]
        return defragment.plan(request, candidates, destinations,
                               limits=limits, strategy=self.cell_strategy,
                               pagesize_kb=pagesize_kb, max_moves=max_moves,
                               max_steps=self.drain_max_steps,
                               movable=movable)

    def cpu_filter(self, hosts, guest_cpu):
        """The CPU filter alone, on chosen ``hosts``: (the hosts whose
        reported CPU can run ``guest_cpu``, in order, {refused host:
        reason}). A host the cache does not know is kept (its precheck
        decides).

        The guest's CPU comes with the source's answer, after the
        choice; the conductor applies this to the candidates then.
        """
        spec = host_filters.RequestSpec(None, guest_cpu=guest_cpu)
        check = host_filters.CPUModelFilter()
        kept, refusals = [], {}
        for host in hosts:
            try:
                verdict = check.check(self.cache.get(host), spec)
            except exception.HostNotFound:
                verdict = host_filters.PASS
            if verdict.passed:
                kept.append(host)
            else:
                refusals[host] = verdict.reason
        return kept, refusals

    def reserve(self, host, instance_uuid, project_id, request, limits=None,
                pagesize_kb=None):
        """Fit the guest on ``host``'s free resources now and reserve it.

        The fit runs under the cache's lock against the host as it is at
        that instant, so concurrent reservations never over-commit it.

        :returns: the Reservation, whose ``topology`` is the placement.
        :raises HostNotFound: if the host never reported.
        :raises ReservationConflict: if the guest no longer fits there.
        """
        if request is None:
            raise exception.Invalid(
                reason=f"instance {instance_uuid} has no NUMA request; "
                       f"there is nothing to reserve on {host}")

        def place(topology):
            result = numa_fit.fit(topology, request, limits=limits,
                                  strategy=self.cell_strategy,
                                  pagesize_kb=pagesize_kb)
            if not result.fits:
                raise exception.ReservationConflict(
                    instance_uuid=instance_uuid, host=host,
                    reason=f"it no longer fits: {result.reason}")
            return result.topology

        return self.cache.reserve_fitting(host, instance_uuid, project_id,
                                          place)

    def guest_spec(self, request, source_host, limits=None,
                   pagesize_kb=None, guest_cpu=None):
        """A guest's RequestSpec and capacity.Needs (None: the index
        says nothing) for ``judge``, made once per guest: the standing
        live-migratable answer re-checks a guest against one host at a
        time, many times."""
        spec = self._spec(request, source_host, limits, None, (),
                          pagesize_kb, None, guest_cpu)
        needs = capacity.Needs.of(spec.request_view, spec.limits_view,
                                  spec.pagesize_kb) if self._indexed \
            else None
        return spec, needs

    def judge(self, state, spec, needs=None):
        """Every filter on one host alone (a HostState): its Verdict.
        The capacity index rules out first what it can, as the walk
        does, so that a guest too big for the host costs no fit."""
        lacking = needs and state.capacity is not None and \
            needs.short(state.capacity)
        if lacking:
            return host_filters.Verdict(f"too few {lacking}")
        verdict, _ = self._filter(state, spec)
        return verdict

    def _spec(self, request, source_host, limits, hypervisor_type, exclude,
              pagesize_kb, disabled=None, guest_cpu=None):
        if isinstance(exclude, str):
            # A bare host name would be excluded letter by letter.
            raise exception.Invalid(
                reason=f"exclude must be a collection of host names, got "
                       f"the string {exclude!r}")
        if hypervisor_type is None and source_host is not None:
            hypervisor_type = self._source_type(source_host)
        return host_filters.RequestSpec(
            request=request, source_host=source_host, limits=limits,
            hypervisor_type=hypervisor_type, exclude=frozenset(exclude),
            disabled=dict(disabled or {}), pagesize_kb=pagesize_kb,
            strategy=self.cell_strategy, guest_cpu=guest_cpu,
            request_view=(None if request is None
                          else numa_views.RequestView.of(request)),
            limits_view=numa_views.limits_view(limits))

    def _source_type(self, source_host):
        try:
            return self.cache.get(source_host).hypervisor_type
        except exception.HostNotFound:
            return None

    def _filter(self, state, spec, fitting=True):
        """Run the filters in order; return the last Verdict and its filter.

        The first refusal ends the run; a pass returns the NUMA filter's
        verdict so its fit travels with the candidate. ``fitting``
        False: every filter but the NUMA fit.
        """
        last = host_filters.PASS
        for host_filter in self.filters:
            if not fitting and isinstance(host_filter,
                                          host_filters.NUMATopologyFilter):
                continue
            verdict = host_filter.check(state, spec)
            if not verdict.passed:
                return verdict, host_filter.name
            if verdict.fit is not None:
                last = verdict
        return last, None


def _shortages(needs, counts):
    """Return the Shortages of the hosts the index skipped, in the order
    the index tests the capacities."""
    return tuple(Shortage(name, counts[name], needs.describe(name))
                 for name in (capacity.CELLS, capacity.PCPUS,
                              capacity.SHARED, capacity.MEMORY,
                              capacity.PAGES) if counts.get(name))
