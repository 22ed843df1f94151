"""Whether each guest could be live-migrated now: a standing answer.

An operator learns that a guest cannot move at the worst moment, during
a drain for urgent maintenance. This keeps, for every guest, the answer
a migration request would get now, with typed reasons, so that it can
be read (and alerted on) before it is needed.

Recomputing every guest against every host at each report would cost
guests x hosts fits per report: at 10,000 hosts that is the scheduler's
whole budget many times over. The answer is kept instead by *witness*:

* a guest that can move keeps one host it fits on (its witness, taken
  among the scheduler's candidates by the guest's own hash, so that the
  guests do not all pile their witness onto the emptiest host);
* a report of host H re-checks against H alone the guests whose
  witness is H (has H stopped taking them?) and the guests that cannot
  move (does H take them now?); a single-host check is one fit;
* only a guest whose answer may have changed is looked at again whole
  (a full selection), and at most ``budget`` of them per call: the
  rest wait in a queue (their answer is stale, never wrong for longer
  than the queue takes to drain);
* what no report announces (a host that stops reporting, the weights
  moving) is caught by a sweep that re-examines a few guests per
  interval, round robin.

After the queue drains, the answer of every guest equals a full
recompute (tests/unit/scheduler/test_migratable.py checks it against
one on generated clouds). The closest miss named for a guest that
cannot move is as of its last whole look.

Pure: it reads the scheduler's cache through the Scheduler and is told
what changed; nothing here reads or writes the database.
"""

import collections
import dataclasses
import zlib

from numamig import exception

YES = 'yes'
NO = 'no'
DEGRADED = 'degraded'
STATUSES = (YES, DEGRADED, NO)

# Reason kinds: what an operator acts on (doc/source/live-migratable.rst).
NO_HOST_FITS = 'no-host-fits'
CPU_MODEL = 'cpu-model'
ONLY_MAINTENANCE = 'only-maintenance'
DEVICES = 'devices'
POLICY = 'policy'
GUARD = 'guard'
REASON_KINDS = (NO_HOST_FITS, CPU_MODEL, ONLY_MAINTENANCE, DEVICES, POLICY,
                GUARD)

# What one host can give a guest, best first: it takes it; it would
# were it not in maintenance; it would were the guest's CPU not refused;
# it would were its migration guard on (a guest whose source cannot take
# part in NUMA-aware migration); nothing.
_RANKS = (YES, DEGRADED, CPU_MODEL, GUARD, None)

# The migration guard's state that places a guest for an old source
# (ComputeNodeReport.migration_guard).
GUARD_ON = 'on'

# How many guests a call re-examines whole unless told otherwise.
DEFAULT_BUDGET = 200


@dataclasses.dataclass(frozen=True)
class Reason:
    """One reason a guest cannot move (or only after an operator acts):
    ``kind`` one of REASON_KINDS, ``detail`` one line for the operator."""

    kind: str
    detail: str

    def __str__(self):
        return f"{self.kind}: {self.detail}"


@dataclasses.dataclass(frozen=True)
class Status:
    """A guest's answer: ``status`` YES / DEGRADED / NO, ``reasons`` (empty
    for YES) and ``witness``, the host the answer rests on: one it fits
    on (for DEGRADED: one in maintenance; for NO by CPU model: one that
    fits it but cannot run its CPU); None when no host is near."""

    status: str
    reasons: tuple = ()
    witness: str = None

    @property
    def rank(self):
        """Where the answer stands, best first (see ``_RANKS``)."""
        if self.status == NO:
            kinds = {r.kind for r in self.reasons}
            for kind in (CPU_MODEL, GUARD):
                if kind in kinds:
                    return _RANKS.index(kind)
            return _RANKS.index(None)
        return _RANKS.index(self.status)

    def same_answer(self, other):
        """Equal status and reason kinds (the witness and the closest
        miss's wording may differ between two equally right answers)."""
        return other is not None and self.status == other.status and \
            tuple(r.kind for r in self.reasons) == \
            tuple(r.kind for r in other.reasons)


@dataclasses.dataclass(frozen=True)
class Guest:
    """What the answer of one guest depends on besides the hosts.

    :param uuid: the instance's UUID.
    :param host: the host it runs on (never its own destination).
    :param request: its unplaced InstanceNUMATopology, or None.
    :param pagesize_kb: the page size it must keep, or None.
    :param guest_cpu: its numamig.cpumodel.GuestCPU, or None (unknown).
    :param guard: None, or one line saying why its source cannot take
        part in NUMA-aware live migration (its release, a cap): the
        destination then claims only when its migration guard is on
        (numamig.compute.migration_dest), and a host whose guard is off
        would copy the XML verbatim, so only hosts whose guard is on
        count as destinations.
    :param blockers: Reasons that forbid a move whatever the hosts (a
        policy, devices that cannot migrate, a guard required and
        unavailable): they make the answer NO without a host search.
    :param kind: a hashable naming everything a host's answer for this
        guest depends on but its host (flavor, image, page size, CPU,
        the source's hypervisor type): guests of one kind that cannot
        move are checked once per report, not once each. None: a kind
        of its own.
    """

    uuid: str
    host: str
    request: object = None
    pagesize_kb: int = None
    guest_cpu: object = None
    blockers: tuple = ()
    kind: object = None
    guard: str = None

    @property
    def kind_key(self):
        # Whether the source needs the guard changes a host's answer,
        # whatever the caller's kind says.
        if self.kind is None:
            return ('guest', self.uuid)
        return (self.kind, self.guard is not None)


def guard_on(state):
    """Whether the host (a HostState) reports its migration guard on."""
    return state.report.get('migration_guard') == GUARD_ON


def _unguarded(scheduler, guest):
    """The hosts ``guest`` must not count as destinations for its
    source's release: none, or for a guest whose source cannot take
    part, those whose guard is not on (excluded from the selection, as
    the CPU is filtered, so that a guarded host past the first
    candidates is found)."""
    if guest.guard is None:
        return frozenset()
    return frozenset(state.host for state in scheduler.cache.host_states()
                     if not guard_on(state))


def _spread(uuid, hosts):
    """The guest's witness among ``hosts``: stable for a guest, spread
    over guests."""
    return hosts[zlib.crc32(uuid.encode()) % len(hosts)]


def assess(scheduler, guest, disabled=None, limits=None):
    """The whole answer for ``guest`` now: a full selection (the
    scheduler's own, with the guest's CPU among its filters).

    :param scheduler: the numamig.scheduler.scheduler.Scheduler.
    :param disabled: {host: reason} of the hosts in maintenance.
    :param limits: the NUMALimits every host cell respects.
    """
    if guest.blockers:
        return Status(NO, tuple(guest.blockers))
    disabled = dict(disabled or {})
    unguarded = _unguarded(scheduler, guest)
    selection = scheduler.select_destinations(
        guest.request, guest.host, limits=limits,
        pagesize_kb=guest.pagesize_kb, disabled=disabled,
        guest_cpu=guest.guest_cpu, exclude=unguarded)
    if selection.candidates:
        return Status(YES, (), _spread(guest.uuid, selection.hosts))
    if disabled:
        # Would it fit were maintenance over?
        anywhere = scheduler.select_destinations(
            guest.request, guest.host, limits=limits,
            pagesize_kb=guest.pagesize_kb, guest_cpu=guest.guest_cpu,
            exclude=unguarded)
        if anywhere.candidates:
            hosts = anywhere.hosts
            return Status(DEGRADED, (Reason(
                ONLY_MAINTENANCE,
                f"fits only on hosts disabled for maintenance: "
                f"{', '.join(sorted(hosts))}"),), _spread(guest.uuid, hosts))
    if guest.guest_cpu is not None:
        # Is the CPU what bars it (hosts fit it but none runs its CPU)?
        no_cpu = scheduler.select_destinations(
            guest.request, guest.host, limits=limits,
            pagesize_kb=guest.pagesize_kb, disabled=disabled,
            exclude=unguarded)
        if no_cpu.candidates:
            kept, refused = scheduler.cpu_filter(no_cpu.hosts,
                                                 guest.guest_cpu)
            why = next(iter(refused.values()), 'refused')
            if not kept:
                return Status(NO, (Reason(
                    CPU_MODEL,
                    f"no enabled host that fits it can run its CPU "
                    f"({', '.join(sorted(refused))}: {why})"),),
                    _spread(guest.uuid, no_cpu.hosts))
    if unguarded:
        # Without the guard's condition: hosts that take it but would
        # copy its XML verbatim, or the true closest miss.
        selection = scheduler.select_destinations(
            guest.request, guest.host, limits=limits,
            pagesize_kb=guest.pagesize_kb, disabled=disabled,
            guest_cpu=guest.guest_cpu)
        if selection.candidates:
            hosts = selection.hosts
            return Status(NO, (Reason(
                GUARD,
                f"{guest.guard}; no enabled host that fits it has its "
                f"migration guard on ({', '.join(sorted(hosts))} fit): "
                f"set [libvirt] migration_guard = true on them and "
                f"restart libvirtd, or upgrade the source's agent"),),
                _spread(guest.uuid, hosts))
    return Status(NO, (Reason(NO_HOST_FITS, _closest_miss(selection)),))


def _closest_miss(selection):
    """One line: the refusal of the host that came closest, or the
    shortage that ruled most hosts out."""
    others = [r for r in selection.rejected if r.filter != 'ExcludedHost']
    rejected = [r for r in others if r.filter == 'NUMATopology'] or others
    if rejected:
        closest = rejected[0]
        more = len(others) + sum(s.hosts for s in selection.skipped) - 1
        tail = f" (and {more} other hosts refused)" if more > 0 else ''
        return f"closest: {closest.host}: {closest.reason}{tail}"
    if selection.skipped:
        return '; '.join(str(s) for s in selection.skipped)
    return selection.reason()


class Tracker:
    """Every guest's standing answer, kept by witness (module docstring).

    :param scheduler: the Scheduler whose cache holds the hosts.
    :param disabled: a callable returning {host: reason} of the hosts in
        maintenance now.
    :param limits: NUMALimits, or None.
    :param budget: guests looked at whole per ``catch_up`` at most.
    """

    def __init__(self, scheduler, disabled=dict, limits=None,
                 budget=DEFAULT_BUDGET):
        self.scheduler = scheduler
        self._disabled = disabled
        self.limits = limits
        self.budget = budget
        self.guests = {}
        self.statuses = {}
        self._by_witness = collections.defaultdict(set)
        # kind -> uuids of the guests that cannot move (NO or DEGRADED),
        # and of those, by a blocker (no host can change their answer).
        self._cannot = collections.defaultdict(set)
        self._queue = collections.OrderedDict()
        # uuid -> (spec with the guest's CPU, spec without, Needs): what
        # a single-host check reads, made once per guest change.
        self._specs = {}
        self._sweep_order = collections.deque()
        self.fits_checked = 0
        self.assessed = 0

    # -- what changed -------------------------------------------------

    def guest_changed(self, guest):
        """A guest was created, changed or moved: looked at whole."""
        old = self.guests.get(guest.uuid)
        if old is not None:
            self._forget_cannot(old)
        self.guests[guest.uuid] = guest
        self._specs.pop(guest.uuid, None)
        if old is None:
            self._sweep_order.append(guest.uuid)
        self._queue[guest.uuid] = None

    def guest_removed(self, uuid):
        """A guest was deleted: forgotten (returns its last Status)."""
        self._specs.pop(uuid, None)
        self._queue.pop(uuid, None)
        guest = self.guests.pop(uuid, None)
        if guest is not None:
            self._forget_cannot(guest)
        status = self.statuses.pop(uuid, None)
        if status is not None and status.witness is not None:
            self._by_witness[status.witness].discard(uuid)
        return status

    def host_changed(self, host):
        """``host`` reported, was disabled or enabled, or went away: the
        guests it may concern are checked against it alone, and those
        whose answer may differ are queued."""
        disabled = self._disabled()
        try:
            state = self.scheduler.cache.get(host)
        except exception.HostNotFound:
            state = None
        for uuid in list(self._by_witness.get(host, ())):
            if uuid in self._queue:
                continue
            if self._rank_on(uuid, state, disabled) != \
                    self.statuses[uuid].rank:
                self._queue[uuid] = None
        for members in list(self._cannot.values()):
            # One check per kind: a host's answer is the kind's, but for
            # the guests it is the source of (never their destination).
            rank = None
            for uuid in members:
                if uuid in self._queue or \
                        self.guests[uuid].host == host:
                    continue
                if rank is None:
                    rank = self._rank_on(uuid, state, disabled)
                    if rank == _RANKS.index(None):
                        break
                if rank < self.statuses[uuid].rank:
                    self._queue[uuid] = None

    def sweep(self, count):
        """Queue the next ``count`` guests, round robin: what no change
        announced (a host down by silence) is found within
        guests / count sweeps."""
        for _ in range(min(count, len(self._sweep_order))):
            uuid = self._sweep_order.popleft()
            if uuid in self.guests:
                self._sweep_order.append(uuid)
                self._queue[uuid] = None

    # -- the work -----------------------------------------------------

    @property
    def pending(self):
        """How many guests wait to be looked at whole."""
        return len(self._queue)

    def catch_up(self, budget=None):
        """Look at up to ``budget`` queued guests whole; return their
        changes as [(uuid, old Status or None, new Status)]."""
        budget = self.budget if budget is None else budget
        disabled = self._disabled()
        changes = []
        while self._queue and budget > 0:
            uuid, _ = self._queue.popitem(last=False)
            budget -= 1
            guest = self.guests.get(uuid)
            if guest is None:
                continue
            new = assess(self.scheduler, guest, disabled, self.limits)
            self.assessed += 1
            old = self._set(uuid, new)
            if not new.same_answer(old):
                changes.append((uuid, old, new))
        return changes

    def counts(self):
        """{(status, reason kind or ''): guests} for the metrics."""
        found = collections.Counter()
        for status in list(self.statuses.values()):
            kinds = [r.kind for r in status.reasons] or ['']
            for kind in kinds:
                found[(status.status, kind)] += 1
        return dict(found)

    # -- internals ----------------------------------------------------

    def _set(self, uuid, new):
        old = self.statuses.get(uuid)
        if old is not None and old.witness is not None:
            self._by_witness[old.witness].discard(uuid)
        self.statuses[uuid] = new
        if new.witness is not None:
            self._by_witness[new.witness].add(uuid)
        guest = self.guests[uuid]
        if new.status == YES or guest.blockers:
            self._forget_cannot(guest)
        else:
            self._cannot[guest.kind_key].add(uuid)
        return old

    def _forget_cannot(self, guest):
        members = self._cannot.get(guest.kind_key)
        if members is not None:
            members.discard(guest.uuid)
            if not members:
                del self._cannot[guest.kind_key]

    def _rank_on(self, uuid, state, disabled):
        """What one host (its HostState; None: gone) alone gives the
        guest, as a _RANKS index: one or two single-host checks, never a
        selection."""
        guest = self.guests[uuid]
        if state is None or guest.blockers or state.host == guest.host:
            return _RANKS.index(None)
        specs = self._specs.get(uuid)
        if specs is None:
            with_cpu, needs = self.scheduler.guest_spec(
                guest.request, guest.host, limits=self.limits,
                pagesize_kb=guest.pagesize_kb, guest_cpu=guest.guest_cpu)
            without_cpu = dataclasses.replace(with_cpu, guest_cpu=None)
            specs = self._specs[uuid] = (with_cpu, without_cpu, needs)
        with_cpu, without_cpu, needs = specs
        # A guest whose source cannot take part: a host without the
        # guard would copy its XML (assess's order: its CPU before this).
        guarded = guest.guard is None or guard_on(state)
        self.fits_checked += 1
        if self.scheduler.judge(state, with_cpu, needs).passed:
            if not guarded:
                return _RANKS.index(None if state.host in disabled
                                    else GUARD)
            return _RANKS.index(DEGRADED if state.host in disabled else YES)
        if guest.guest_cpu is None or state.host in disabled or \
                not guarded:
            return _RANKS.index(None)
        self.fits_checked += 1
        if self.scheduler.judge(state, without_cpu, needs).passed:
            return _RANKS.index(CPU_MODEL)
        return _RANKS.index(None)
