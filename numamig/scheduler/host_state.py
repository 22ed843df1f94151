"""The scheduler's view of compute hosts: last reports plus reservations.

Compute agents report their NUMA topology with usage every
``report_interval`` seconds. Between two reports the conductor may send
several migrations to one host; if the scheduler believed the stale
report, it would place them all on the same free pCPUs. So, as in the
NUMA-aware scheduler reserve plugin (seed 000), every placement the
conductor puts in flight is RESERVED here: the host's free resources
shrink at once, pessimistically, until either

- the conductor releases it (the migration finished or failed), or
- a report arrives whose guest-set fingerprint equals the fingerprint of
  the guests the cache expects there (the guests the conductor's records
  put on the host plus the reserved ones): the host's own accounting now
  includes the placement, so keeping the reservation would count it
  twice, or
- it is older than ``[scheduler] reservation_timeout``: its migration was
  lost without a release, and a host must not look full forever.

The seed reserves a pod on EVERY NUMA zone that could take it, because
the kubelet picks the zone on its own. numamig reserves the placement
itself: the destination's claim runs the same deterministic fit on the
same reported topology, so it picks the same cells and pins unless the
host changed meanwhile, and then the destination's claim, which is
authoritative, refuses or re-places the guest.

Scale: the cache keeps per host an immutable record (index.HostRecord)
with its weight and free-capacity summary, remade only when that host's
topology changes, and keeps the records in weight order (index.py), so
that the scheduler walks hosts best first and stops early instead of
weighing every host per request. Reservations expire from a deadline
heap, not by a pass over every host. The reports' topologies are
compacted when the cache takes them (compact.py): the cache owns a report
once given it, and nobody may edit it any more.

A host is up while its last report is younger than ``service_down_time``,
judged by when the cache received it (the conductor's clock), so that an
agent's clock skew cannot mark it down. The clock is injected, so tests
move time instead of sleeping.
"""

import dataclasses
import datetime
import heapq
import threading

from oslo_log import log as logging
from oslo_utils import timeutils

from numamig import exception
from numamig import fingerprint
from numamig.conf import CONF
from numamig.numa import views as numa_views
from numamig.scheduler import capacity
from numamig.scheduler import compact
from numamig.scheduler import index
from numamig.scheduler import reservations
from numamig.scheduler import weighers

LOG = logging.getLogger(__name__)


def _utcnow():
    return timeutils.utcnow(with_timezone=True)


@dataclasses.dataclass(frozen=True)
class HostState:
    """One host as the scheduler sees it at one instant.

    ``topology`` is the reported topology with every reservation applied:
    what the filters fit against. It is shared with the cache, which
    never edits it (it builds a new one on each change); do not edit it.
    ``numa_view`` is the same topology as the NUMA fit reads it, made
    once per change of the topology and shared by every fit until the
    next (None from ``host_states`` for a host no fit has read yet).
    Its sets are frozen and may be shared with other hosts (compact.py).
    """

    host: str
    hypervisor_type: str
    report: object            # the last ComputeNodeReport
    topology: object          # HostNUMATopology, reservations applied
    reservations: tuple
    received_at: datetime.datetime
    age: datetime.timedelta
    is_up: bool
    service_down_time: int    # seconds, the limit is_up was judged by
    numa_view: object = None  # numa.views.HostView of topology, or None
    capacity: object = None   # capacity.HostCapacity of topology


@dataclasses.dataclass(frozen=True)
class Walk:
    """The hosts at one instant, for the scheduler to read without the
    cache's lock: ``records`` (index.HostRecord) best first for the
    strategy asked, ``best`` the cloud's best cell (HostCapacity)."""

    now: datetime.datetime
    service_down_time: int
    records: list
    best: object

    def state(self, record, with_view=True):
        """Return the HostState of one of the records."""
        return _state(record, self.now, self.service_down_time,
                      record.view() if with_view else None)


def _state(record, now, down_time, view):
    age = now - record.received_at
    return HostState(
        host=record.host, hypervisor_type=record.hypervisor_type,
        report=record.report, topology=record.topology,
        reservations=record.reservations, received_at=record.received_at,
        age=age, is_up=age < datetime.timedelta(seconds=down_time),
        service_down_time=down_time, numa_view=view,
        capacity=record.capacity)


class _Entry:
    """The cache's mutable record of one host, only touched under lock.

    ``record`` is what readers get: an index.HostRecord replaced (never
    edited) by HostStateCache._publish after every change.
    """

    def __init__(self, report, received_at):
        self.report = report
        self.received_at = received_at
        self.guests = frozenset()
        self.reservations = {}    # instance uuid -> Reservation, oldest 1st
        self.topology = report.topology
        self.record = None
        # The stored report's content digest (numamig.db.compute_nodes.
        # content_digest), when the report came with one: a later report
        # with the same digest differs only in its time (refresh).
        self.digest = None


class HostStateCache:
    """Thread-safe cache of host reports with in-flight reservations.

    :param clock: callable returning the current time as an aware UTC
        datetime; defaults to the system clock.
    :param reservation_timeout: seconds; None reads ``[scheduler]
        reservation_timeout`` at each use.
    :param service_down_time: seconds; None reads ``service_down_time``
        at each use.
    """

    def __init__(self, clock=None, reservation_timeout=None,
                 service_down_time=None):
        self._clock = clock or _utcnow
        self._reservation_timeout = reservation_timeout
        self._service_down_time = service_down_time
        self._lock = threading.Lock()
        self._entries = {}
        self._index = index.HostIndex()
        self._interner = compact.Interner()
        self._deadlines = []      # heap of (reserved_at, host, uuid)
        # service version -> hosts reporting it: which hosts are older
        # than a release is asked on every NUMA migration.
        self._by_version = {}

    def now(self):
        """The cache's time: what reservations' ages are measured by."""
        return self._clock()

    @property
    def reservation_timeout(self):
        if self._reservation_timeout is not None:
            return self._reservation_timeout
        return CONF.scheduler.reservation_timeout

    @property
    def service_down_time(self):
        if self._service_down_time is not None:
            return self._service_down_time
        return CONF.service_down_time

    # -- reports ----------------------------------------------------------

    def update(self, report, guests=None, received_at=None, digest=None):
        """Take a host's report; drop the reservations it confirms.

        :param report: a ComputeNodeReport.
        :param guests: (project id, instance uuid) pairs the conductor's
            records place on the host, not counting in-flight
            reservations; None keeps the set given last time.
        :param received_at: when the report arrived (default: now); a
            conductor reloading reports from its database passes their
            stored time, so that a dead host does not look up.
        :param digest: the report's stored content digest, if known (see
            ``refresh``).
        :returns: tuple of the Reservations the report confirmed.
        :raises InvalidHostReport: if the report is invalid; the cache is
            left unchanged.
        """
        self._check_report(report)
        guest_set = None if guests is None else _guest_set(guests)
        now = self._clock()
        with self._lock:
            entry = self._entries.get(report.host)
            if entry is not None and \
                    report.reported_at < entry.report.reported_at:
                LOG.debug("Ignoring report of %s from %s: the cache holds "
                          "a newer one from %s", report.host,
                          report.reported_at, entry.report.reported_at)
                return ()
            if entry is None:
                entry = self._entries[report.host] = _Entry(report, now)
            self._track_version(report.host, entry.report.service_version,
                                report.service_version)
            entry.report = report
            entry.digest = digest
            return self._take(entry, guest_set, received_at, now)

    def refresh(self, host, reported_at, digest, guests=None,
                received_at=None):
        """Take a report of ``host`` whose content is the one the cache
        holds (same ``digest``), made at ``reported_at``: what ``update``
        does, without building and checking the report again.

        Most reports repeat the last one: a host's usage changes only
        when a guest comes or goes. A conductor worker reads the reports
        other workers stored before it schedules (conductor.records.
        sync_reports); rebuilding each one cost it 3-4 ms, so a worker
        that had not looked for a while (1,000 hosts reporting, one
        worker's first migration) spent 2.3-2.9 s before a migration
        could start, and more with more hosts.

        :returns: None when the cache holds no report of ``host`` with
            ``digest`` (read it whole and ``update``); else as ``update``.
        """
        guest_set = None if guests is None else _guest_set(guests)
        now = self._clock()
        with self._lock:
            entry = self._entries.get(host)
            if entry is None or entry.digest is None or \
                    entry.digest != digest:
                return None
            if reported_at < entry.report.reported_at:
                return ()
            # The same content: only its time moves (readers of the
            # record see the newer time, as they would a new report's).
            entry.report.reported_at = reported_at
            entry.report.obj_reset_changes(['reported_at'])
            return self._take(entry, guest_set, received_at, now)

    def _take(self, entry, guest_set, received_at, now):
        entry.received_at = received_at or now
        if guest_set is not None:
            entry.guests = guest_set
        self._expire(entry, now)
        confirmed = self._resync(entry)
        self._publish(entry, self._reserved_topology(entry))
        return confirmed

    def set_guests(self, host, guests):
        """Replace the guests the conductor's records place on ``host``.

        :returns: tuple of the Reservations the last report now confirms.
        :raises HostNotFound: if the host never reported.
        """
        guest_set = _guest_set(guests)
        with self._lock:
            entry = self._entry(host)
            entry.guests = guest_set
            confirmed = self._resync(entry)
            if confirmed:
                self._publish(entry, self._reserved_topology(entry))
            return confirmed

    def remove(self, host):
        """Forget a host and its reservations; True if it was known."""
        with self._lock:
            entry = self._entries.pop(host, None)
            if entry is None:
                return False
            self._track_version(host, entry.report.service_version, None)
            self._index.remove(entry.record)
            return True

    def service_version(self, host):
        """The service version ``host`` last reported (what the compute
        client caps messages to it at); None if it never reported."""
        with self._lock:
            entry = self._entries.get(host)
            return None if entry is None else entry.report.service_version

    def hosts_older_than(self, service_version):
        """Sorted names of the hosts whose last report gives a service
        version below ``service_version``; costs the old hosts only."""
        with self._lock:
            return sorted(host for version, hosts in self._by_version.items()
                          if version < service_version for host in hosts)

    def _track_version(self, host, old, new):
        if old is not None:
            hosts = self._by_version.get(old, set())
            hosts.discard(host)
            if not hosts:
                self._by_version.pop(old, None)
        if new is not None:
            self._by_version.setdefault(new, set()).add(host)

    # -- reservations -----------------------------------------------------

    def reserve(self, host, instance_uuid, project_id, placed_topology):
        """Count a placement already chosen against ``host`` at once.

        Use it for a placement made elsewhere (a destination's claim
        reported back); to choose and reserve in one step, which is what
        concurrent schedulers need, use ``reserve_fitting``.

        :param placed_topology: a placed InstanceNUMATopology (host cells
            and pins set); it is not modified.
        :returns: the new Reservation.
        :raises HostNotFound: if the host never reported.
        :raises ReservationConflict: if the placement takes pCPUs or pages
            that are not free any more, or the instance already holds a
            reservation there; nothing is changed.
        """
        return self.reserve_fitting(host, instance_uuid, project_id,
                                    lambda topology: placed_topology)

    def reserve_fitting(self, host, instance_uuid, project_id, place):
        """Place a guest on the host's current free resources and reserve.

        ``place`` runs under the cache's lock with the host's topology as
        it is now (reservations applied), so concurrent callers can never
        reserve the same pCPUs, pages or memory twice.

        A placement the guest already holds there is replaced: a guest is
        on a host once, so it is one that left before any report counted
        it (a worker that did not record the departure keeps it until
        then). A hold is not replaced.

        :param place: callable(HostNUMATopology) returning the placed
            InstanceNUMATopology, or raising ReservationConflict when the
            guest does not fit.
        :returns: the new Reservation.
        :raises HostNotFound: if the host never reported.
        :raises ReservationConflict: if the guest does not fit any more
            or holds a hold there; nothing is changed.
        """
        now = self._clock()
        with self._lock:
            entry = self._entry(host)
            self._expire(entry, now)
            stale = entry.reservations.get(instance_uuid)
            if stale is not None and stale.held:
                raise exception.ReservationConflict(
                    instance_uuid=instance_uuid, host=host,
                    reason="it already holds room there; release it first")
            current = entry.topology if stale is None else \
                self._reserved_topology(entry, without=instance_uuid)
            placed = place(current)
            topology = reservations.apply_placed(host, instance_uuid,
                                                 current, placed)
            entry.reservations.pop(instance_uuid, None)
            reservation = reservations.Reservation(
                host, instance_uuid, project_id, placed, now)
            entry.reservations[instance_uuid] = reservation
            heapq.heappush(self._deadlines, (now, host, instance_uuid))
            self._publish(entry, topology)
        LOG.debug("Reserved %s on %s", instance_uuid, host)
        return reservation

    def hold(self, host, key, project_id, placed_topology, arrives=True):
        """Reserve a placement that may not be free yet, and renew it.

        A defragmentation plans moves into room that other moves make
        (a guest leaves the host first) and keeps room for a guest on a
        host its guests are still leaving. Such a placement clashes with
        the host's last report until the report shows the room free; it
        is held all the same, not counted while it clashes, and counted
        from the report that leaves room for it, under the same lock that
        takes the report: no request fitted in between can take the
        room. Holding a key held already renews it (its age starts
        again) in one step.

        :param arrives: False for room kept for no guest in flight (the
            key is no instance): no report's fingerprint confirms it;
            it lasts until released or ``reservation_timeout``.
        :returns: the Reservation.
        :raises HostNotFound: if the host never reported.
        :raises ReservationConflict: if the topology is not placed.
        """
        if not placed_topology.is_placed:
            raise exception.ReservationConflict(
                instance_uuid=key, host=host,
                reason="the topology is not placed (a guest cell has no "
                       "host cell)")
        now = self._clock()
        with self._lock:
            entry = self._entry(host)
            self._expire(entry, now)
            entry.reservations.pop(key, None)
            reservation = reservations.Reservation(
                host, key, project_id, placed_topology, now, held=True,
                arrives=arrives)
            entry.reservations[key] = reservation
            heapq.heappush(self._deadlines, (now, host, key))
            self._publish(entry, self._reserved_topology(entry))
        LOG.debug("Holding %s on %s", key, host)
        return reservation

    def release(self, host, instance_uuid, only=None):
        """Drop a reservation; True if there was one (idempotent).

        :param only: a Reservation this cache returned: drop the
            instance's reservation only if it is still that one (a
            holder letting go of its own placement must not drop one
            another flow made since for the same guest).
        """
        with self._lock:
            entry = self._entries.get(host)
            if entry is None:
                return False
            current = entry.reservations.get(instance_uuid)
            if current is None or (only is not None and current is not only):
                return False
            del entry.reservations[instance_uuid]
            self._publish(entry, self._reserved_topology(entry))
        LOG.debug("Released reservation of %s on %s", instance_uuid, host)
        return True

    def expire(self):
        """Drop every reservation older than the timeout; return them."""
        now = self._clock()
        with self._lock:
            return tuple(self._expire_due(now))

    # -- reading ----------------------------------------------------------

    def get(self, host):
        """Return the HostState of one host.

        :raises HostNotFound: if the host never reported.
        """
        now = self._clock()
        with self._lock:
            entry = self._entry(host)
            self._expire(entry, now)
            record = entry.record
        return _state(record, now, self.service_down_time, record.view())

    def host_states(self):
        """Return the HostState of every known host, sorted by name.

        A state's ``numa_view`` is None unless a fit made it already:
        making 10,000 views for a caller that reads versions would cost
        seconds and, kept, as much memory as the reports.
        """
        now = self._clock()
        down_time = self.service_down_time
        with self._lock:
            self._expire_due(now)
            records = [self._entries[name].record
                       for name in sorted(self._entries)]
        return [_state(record, now, down_time, record.view_if_made())
                for record in records]

    def walk(self, strategy):
        """Return a Walk of every host in ``strategy``'s weight order.

        For the scheduler: it reads the records without the lock, and
        builds the HostState of the hosts it examines only.
        """
        now = self._clock()
        down_time = self.service_down_time
        with self._lock:
            self._expire_due(now)
            return Walk(now, down_time, self._index.walk(strategy),
                        self._index.best())

    def __len__(self):
        return len(self._entries)

    def check_up(self, host):
        """Return the HostState of ``host`` if it is up.

        :raises HostNotFound: if the host never reported.
        :raises ComputeHostDown: if its last report is too old.
        """
        state = self.get(host)
        if not state.is_up:
            raise exception.ComputeHostDown(
                host=host, age=round(state.age.total_seconds()),
                limit=state.service_down_time)
        return state

    # -- internals (called with the lock held) ----------------------------

    def _entry(self, host):
        try:
            return self._entries[host]
        except KeyError:
            raise exception.HostNotFound(host=host)

    def _publish(self, entry, topology):
        """Make the entry's new HostRecord and put it in the index.

        Weight, capacity and view follow the topology: they are worked
        out again only when it changed, kept otherwise.
        """
        old = entry.record
        if old is None or topology is not old.topology:
            topology = self._interner.freeze(topology)
            weight = weighers.weigh(topology)
            cap = capacity.HostCapacity(topology)
            view = None
        else:
            weight, cap, view = old.weight, old.capacity, old.view_if_made()
        entry.topology = topology
        entry.record = index.HostRecord(
            entry.report, topology, tuple(entry.reservations.values()),
            entry.received_at, weight, cap, numa_views.HostView, view)
        self._index.put(old, entry.record)

    def _expire_due(self, now):
        """Expire every reservation past the timeout, oldest first, from
        the deadline heap: no pass over every host."""
        limit = datetime.timedelta(seconds=self.reservation_timeout)
        expired = []
        while self._deadlines and now - self._deadlines[0][0] >= limit:
            reserved_at, host, uuid = heapq.heappop(self._deadlines)
            entry = self._entries.get(host)
            reservation = entry and entry.reservations.get(uuid)
            # Released, confirmed or expired already: nothing to do.
            if reservation is not None and \
                    reservation.reserved_at == reserved_at:
                expired.extend(self._expire(entry, now))
        return expired

    def _expire(self, entry, now):
        limit = datetime.timedelta(seconds=self.reservation_timeout)
        expired = [r for r in entry.reservations.values()
                   if now - r.reserved_at >= limit]
        for reservation in expired:
            del entry.reservations[reservation.instance_uuid]
            LOG.warning(
                "Reservation of instance %(uuid)s on host %(host)s expired "
                "after %(age)s: no release and no report of the host "
                "confirmed it within reservation_timeout (%(limit)s s).",
                {'uuid': reservation.instance_uuid, 'host': entry.report.host,
                 'age': now - reservation.reserved_at,
                 'limit': self.reservation_timeout})
        if expired:
            self._publish(entry, self._reserved_topology(entry))
        return expired

    def _resync(self, entry):
        """Drop the oldest reservations the last report already counts.

        Reservations are tried oldest first: claims usually land on the
        host in the order they were sent, so the longest prefix whose
        guests, with the recorded ones, give the reported fingerprint is
        what the host now accounts for itself.
        """
        pending = [r for r in entry.reservations.values() if r.arrives]
        expected = fingerprint.Fingerprint(entry.guests)
        confirmed = 0
        for count, reservation in enumerate(pending, start=1):
            expected.add(*reservation.guest)
            if expected.sign() == entry.report.fingerprint:
                confirmed = count
        for reservation in pending[:confirmed]:
            del entry.reservations[reservation.instance_uuid]
            LOG.info("Report of %s confirms the placement of instance %s; "
                     "its reservation is dropped", entry.report.host,
                     reservation.instance_uuid)
        return tuple(pending[:confirmed])

    @staticmethod
    def _reserved_topology(entry, without=None):
        """The entry's reported topology with its reservations applied
        (but the guest ``without``'s)."""
        return reservations.reserved_topology(
            entry.report, [r for r in entry.reservations.values()
                           if r.instance_uuid != without])

    @staticmethod
    def _check_report(report):
        host = report.get('host') or '<unnamed>'
        for name in ('host', 'topology', 'fingerprint', 'reported_at'):
            if report.get(name) is None:
                raise exception.InvalidHostReport(
                    host=host, reason=f"it has no {name}")
        try:
            report.validate()
        except exception.ObjectValidationError as exc:
            raise exception.InvalidHostReport(host=host, reason=str(exc))
        if not fingerprint.is_valid(report.fingerprint):
            raise exception.InvalidHostReport(
                host=host, reason=f"fingerprint {report.fingerprint!r} is "
                                  f"not a podfingerprint v001 string")


def _guest_set(guests):
    """Return the guests as a frozenset, checked before anything changes."""
    guest_set = frozenset(tuple(pair) for pair in guests)
    for pair in guest_set:
        if len(pair) != 2 or not all(isinstance(v, str) for v in pair):
            raise exception.Invalid(
                reason=f"a guest must be a (project id, instance uuid) "
                       f"pair of strings, got {pair!r}")
    return guest_set
