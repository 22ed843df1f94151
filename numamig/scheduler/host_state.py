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

A host is up while its last report is younger than ``service_down_time``,
judged by when the cache received it (the conductor's clock), so that an
agent's clock skew cannot mark it down. The clock is injected, so tests
move time instead of sleeping.
"""

import dataclasses
import datetime
import threading

from oslo_log import log as logging
from oslo_utils import timeutils

from numamig import exception
from numamig.conf import CONF
from numamig.numa import usage
from numamig.numa import views as numa_views
from numamig.scheduler import fingerprint

LOG = logging.getLogger(__name__)


def _utcnow():
    return timeutils.utcnow(with_timezone=True)


@dataclasses.dataclass(frozen=True)
class Reservation:
    """A placement in flight to ``host`` that its reports may not show."""

    host: str
    instance_uuid: str
    project_id: str
    topology: object          # the placed InstanceNUMATopology
    reserved_at: datetime.datetime

    @property
    def guest(self):
        """The (project id, instance uuid) pair the fingerprint counts."""
        return (self.project_id, self.instance_uuid)


@dataclasses.dataclass(frozen=True)
class HostState:
    """One host as the scheduler sees it at one instant.

    ``topology`` is the reported topology with every reservation applied:
    what the filters fit against. It is shared with the cache, which
    never edits it (it builds a new one on each change); do not edit it.
    ``numa_view`` is the same topology as the NUMA fit reads it, made
    once per change of the topology and shared by every fit until the
    next (None for a host without a NUMA topology).
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


class _Entry:
    """The cache's mutable record of one host, only touched under lock."""

    def __init__(self, report, received_at):
        self.report = report
        self.received_at = received_at
        self.guests = frozenset()
        self.reservations = {}    # instance uuid -> Reservation, oldest 1st
        self.topology = report.topology

    @property
    def topology(self):
        return self._topology

    @topology.setter
    def topology(self, topology):
        self._topology = topology
        self._numa_view = None

    def numa_view(self):
        """Return the fit's view of the topology, made on first need
        after each change of the topology (None without a topology)."""
        if self._numa_view is None and self._topology is not None:
            self._numa_view = numa_views.HostView(self._topology)
        return self._numa_view


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

    def update(self, report, guests=None, received_at=None):
        """Take a host's report; drop the reservations it confirms.

        :param report: a ComputeNodeReport.
        :param guests: (project id, instance uuid) pairs the conductor's
            records place on the host, not counting in-flight
            reservations; None keeps the set given last time.
        :param received_at: when the report arrived (default: now); a
            conductor reloading reports from its database passes their
            stored time, so that a dead host does not look up.
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
            entry.report = report
            entry.received_at = received_at or now
            if guest_set is not None:
                entry.guests = guest_set
            self._expire(entry, now)
            confirmed = self._resync(entry)
            entry.topology = self._reserved_topology(entry)
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
                entry.topology = self._reserved_topology(entry)
            return confirmed

    def remove(self, host):
        """Forget a host and its reservations; True if it was known."""
        with self._lock:
            return self._entries.pop(host, None) is not None

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

        :param place: callable(HostNUMATopology) returning the placed
            InstanceNUMATopology, or raising ReservationConflict when the
            guest does not fit.
        :returns: the new Reservation.
        :raises HostNotFound: if the host never reported.
        :raises ReservationConflict: if the guest does not fit any more
            or already holds a reservation there; nothing is changed.
        """
        now = self._clock()
        with self._lock:
            entry = self._entry(host)
            self._expire(entry, now)
            if instance_uuid in entry.reservations:
                raise exception.ReservationConflict(
                    instance_uuid=instance_uuid, host=host,
                    reason="it already holds a reservation there; release "
                           "it first")
            placed = place(entry.topology)
            topology = _apply(host, instance_uuid, entry.topology, placed)
            reservation = Reservation(host, instance_uuid, project_id,
                                      placed, now)
            entry.reservations[instance_uuid] = reservation
            entry.topology = topology
        LOG.debug("Reserved %s on %s", instance_uuid, host)
        return reservation

    def release(self, host, instance_uuid):
        """Drop a reservation; True if there was one (idempotent)."""
        with self._lock:
            entry = self._entries.get(host)
            if entry is None or \
                    entry.reservations.pop(instance_uuid, None) is None:
                return False
            entry.topology = self._reserved_topology(entry)
        LOG.debug("Released reservation of %s on %s", instance_uuid, host)
        return True

    def expire(self):
        """Drop every reservation older than the timeout; return them."""
        now = self._clock()
        expired = []
        with self._lock:
            for entry in self._entries.values():
                expired.extend(self._expire(entry, now))
        return tuple(expired)

    # -- reading ----------------------------------------------------------

    def get(self, host):
        """Return the HostState of one host.

        :raises HostNotFound: if the host never reported.
        """
        now = self._clock()
        with self._lock:
            entry = self._entry(host)
            self._expire(entry, now)
            return self._snapshot(entry, now)

    def host_states(self):
        """Return the HostState of every known host, sorted by name."""
        now = self._clock()
        with self._lock:
            states = []
            for name in sorted(self._entries):
                entry = self._entries[name]
                self._expire(entry, now)
                states.append(self._snapshot(entry, now))
            return states

    def check_up(self, host):
        """Return the HostState of ``host`` if it is up.

        :raises HostNotFound: if the host never reported.
        :raises ComputeHostDown: if its last report is too old.
        """
        state = self.get(host)
        if not state.is_up:
            raise exception.ComputeHostDown(
                host=host, age=state.age, limit=state.service_down_time)
        return state

    # -- internals (called with the lock held) ----------------------------

    def _entry(self, host):
        try:
            return self._entries[host]
        except KeyError:
            raise exception.HostNotFound(host=host)

    def _snapshot(self, entry, now):
        age = now - entry.received_at
        down_time = self.service_down_time
        return HostState(
            host=entry.report.host,
            hypervisor_type=entry.report.hypervisor_type,
            report=entry.report, topology=entry.topology,
            reservations=tuple(entry.reservations.values()),
            received_at=entry.received_at, age=age,
            is_up=age < datetime.timedelta(seconds=down_time),
            service_down_time=down_time, numa_view=entry.numa_view())

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
            entry.topology = self._reserved_topology(entry)
        return expired

    def _resync(self, entry):
        """Drop the oldest reservations the last report already counts.

        Reservations are tried oldest first: claims usually land on the
        host in the order they were sent, so the longest prefix whose
        guests, with the recorded ones, give the reported fingerprint is
        what the host now accounts for itself.
        """
        pending = list(entry.reservations.values())
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

    def _reserved_topology(self, entry):
        """The reported topology with every reservation applied.

        A reservation that clashes with a newer report is not applied:
        either the host already counts it (its claim landed but the
        guest sets still differ) or something else took those resources,
        in which case the destination's own claim will refuse it.
        """
        topology = entry.report.topology
        for reservation in entry.reservations.values():
            try:
                topology = usage.apply(topology, reservation.topology)
            except exception.UsageConflict as exc:
                LOG.info("Reservation of %s on %s clashes with the host's "
                         "last report and is not counted: %s",
                         reservation.instance_uuid, entry.report.host, exc)
        return topology

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


def _apply(host, instance_uuid, topology, placed):
    """Return ``topology`` with ``placed`` applied, or raise the conflict."""
    if not placed.is_placed:
        raise exception.ReservationConflict(
            instance_uuid=instance_uuid, host=host,
            reason="the topology is not placed (a guest cell has no host "
                   "cell)")
    try:
        return usage.apply(topology, placed)
    except exception.UsageConflict as exc:
        raise exception.ReservationConflict(
            instance_uuid=instance_uuid, host=host, reason=str(exc))
