"""The daemons' notifier: a bounded queue in front of oslo.messaging's.

Off unless ``[oslo_messaging_notifications] driver`` names one (as in
every OpenStack service). When on, the conductor publishes, as
``numamig-conductor:<host>``, what its database committed (EVENT_TYPES):

* every migration status: ``migration.<status>`` (``migration.accepted``
  for a request, ``migration.running`` for a start or a resume after
  ``migration.postcopy-paused``, ``migration.completed`` ...), with a
  MigrationPayload;
* drains and defragmentations: ``<kind>.started``, ``.aborting`` and
  their end (``.completed``, ``.failed``, ``.aborted``), with a
  DrainPayload; each move: ``<kind>.move.migrating``, ``.completed``,
  ``.failed``, ``.cancelled`` and ``.replanned`` (sent back to pending
  towards another host), with a DrainMovePayload;
* host maintenance: ``host.disabled`` and ``host.enabled``, with a
  HostMaintenancePayload;
* virtio-mem memory changes (a guest's memory set, a host node's or a
  placement's reclaim): ``memory-change.started`` and its end
  (``.done``, ``.partial``, ``.failed``), with a MemoryChangePayload;
* a guest's standing live-migratable answer:
  ``instance.live-migratable.changed``, with a LiveMigratablePayload;
* a destination's verification, after an arrival, of the guest's
  passed-through devices: ``instance.devices.verified`` (WARN when one
  is not plugged or not on its guest cell's host node), with a
  DevicesVerifiedPayload.

A compute agent publishes, as ``numamig-compute:<host>``, what happens
on its host and is not recorded as it happens (numamig.compute.events):

* each convergence policy action on a migration it sends, while the
  copy runs: ``migration.policy-action``, with a PolicyActionPayload;
* each migration guard decision that changed something:
  ``guard.rewritten`` and ``guard.refused``, with a GuardDecisionPayload;
* what its locality watch did to a floating guest's memory:
  ``locality.moved``, ``locality.failed`` (libvirt refused) and
  ``locality.flapping`` (left alone from now on), with a
  LocalityMovePayload;
* a passed-through device a guest released after its migration's unplug
  had timed out: ``device.replugged`` (plugged back) or ``device.lost``
  (it could not be), with a DeviceLateReleasePayload.

Priority INFO, WARN for what failed or was refused, ERROR for a
migration in error.

Recording a change never waits for the broker: the database layer hands
the committed changes over (numamig.db.api.Database.change_listeners)
and they wait in a queue of MAX_QUEUED for one sending thread. When the
broker is away long enough to fill it, new notifications are dropped
and counted, one WARNING line says so (then one per summary interval),
and sending resumes by itself. A stopping conductor gives the queue
STOP_FLUSH_S to drain.
"""

import collections
import queue
import threading
import time

from oslo_log import log as logging

from numamig import context as nm_context
from numamig.notifications import payloads
from numamig.objects import fields_enums

LOG = logging.getLogger(__name__)
STATUS = fields_enums.MigrationStatus
# The kinds of change numamig.db hands over (numamig.db._rows), named
# here: the database layer is below this one.
MIGRATION = 'migration'
DRAIN = 'drain'
DRAIN_MOVE = 'drain-move'
HOST = 'host'
MEMORY_CHANGE = 'memory-change'
# And the kinds a compute agent hands over (numamig.compute.events).
POLICY_ACTION = 'policy-action'
GUARD_DECISION = 'guard-decision'
LOCALITY_MOVE = 'locality-move'
DEVICE_LATE_RELEASE = 'device-late-release'
LIVE_MIGRATABLE = 'live-migratable'
DEVICES_VERIFIED = 'devices-verified'

MAX_QUEUED = 10000
STOP_FLUSH_S = 2.0
DROP_SUMMARY_S = 300
PUBLISHER = 'numamig-conductor'
AGENT_PUBLISHER = 'numamig-compute'
# The priority of each status's notification: info unless it ended badly.
PRIORITIES = collections.defaultdict(lambda: 'info', {
    STATUS.FAILED: 'warn', STATUS.ERROR: 'error'})


def event_type(status):
    """The event type of a migration reaching ``status``."""
    return f'migration.{status}'


DRAIN_KINDS = ('drain', 'defragment')
EVENT_TYPES = (
    tuple(event_type(s) for s in STATUS.ALL) +
    tuple(f'{kind}.{event}' for kind in DRAIN_KINDS for event in (
        'started', 'aborting', 'completed', 'failed', 'aborted')) +
    tuple(f'{kind}.move.{event}' for kind in DRAIN_KINDS for event in (
        'migrating', 'completed', 'failed', 'cancelled', 'replanned')) +
    ('host.disabled', 'host.enabled') +
    tuple(f'memory-change.{status}' for status in (
        'started', 'done', 'partial', 'failed')) +
    ('migration.policy-action', 'guard.rewritten', 'guard.refused') +
    ('locality.moved', 'locality.failed', 'locality.flapping') +
    ('device.replugged', 'device.lost') +
    ('instance.live-migratable.changed', 'instance.devices.verified'))


def notification_of(change):
    """(priority, event type, payload) of a numamig.db._rows.Change."""
    kind, record, detail = change[:3]
    if kind == MIGRATION:
        payload = payloads.MigrationPayload.from_record(
            record, detail, getattr(change, 'satellites', None))
        return PRIORITIES[payload.status], event_type(payload.status), \
            payload
    if kind == DRAIN:
        payload = payloads.DrainPayload.from_record(record, detail)
        event = 'started' if payload.status == 'running' else \
            payload.status
        return ('warn' if payload.status == 'failed' else 'info',
                f'{payload.kind}.{event}', payload)
    if kind == DRAIN_MOVE:
        payload = payloads.DrainMovePayload.from_record(record, detail)
        event = 'replanned' if detail == 'replanned' else payload.status
        return ('warn' if payload.status == 'failed' else 'info',
                f'{payload.drain_kind}.move.{event}', payload)
    if kind == HOST:
        payload = payloads.HostMaintenancePayload.from_record(record)
        return ('info', 'host.disabled' if payload.disabled else
                'host.enabled', payload)
    if kind == MEMORY_CHANGE:
        payload = payloads.MemoryChangePayload.from_record(record)
        event = 'started' if payload.status == 'running' else \
            payload.status
        return ('warn' if payload.status in ('partial', 'failed') else
                'info', f'memory-change.{event}', payload)
    if kind == POLICY_ACTION:
        payload = payloads.PolicyActionPayload.from_record(record)
        return ('warn' if payload.outcome == 'failed' else 'info',
                'migration.policy-action', payload)
    if kind == GUARD_DECISION:
        payload = payloads.GuardDecisionPayload.from_record(record)
        return ('warn' if payload.decision == 'refused' else 'info',
                f'guard.{payload.decision}', payload)
    if kind == LOCALITY_MOVE:
        payload = payloads.LocalityMovePayload.from_record(record)
        return ('info' if payload.outcome == 'moved' else 'warn',
                f'locality.{payload.outcome}', payload)
    if kind == DEVICE_LATE_RELEASE:
        payload = payloads.DeviceLateReleasePayload.from_record(record)
        return ('info' if payload.outcome == 'replugged' else 'error',
                f'device.{payload.outcome}', payload)
    if kind == LIVE_MIGRATABLE:
        payload = payloads.LiveMigratablePayload.from_record(record)
        return ('warn' if payload.status == 'no' else 'info',
                'instance.live-migratable.changed', payload)
    if kind == DEVICES_VERIFIED:
        payload = payloads.DevicesVerifiedPayload.from_record(record)
        return ('info' if payload.all_local else 'warn',
                'instance.devices.verified', payload)
    raise ValueError(f"no notification of a {kind} change")


class Notifier:
    """Sends what a daemon records or tells, off the recording thread.

    :param notifier: an oslo_messaging.Notifier, or anything with
        ``info``/``warn``/``error(ctxt, event_type, payload)`` methods.
    """

    def __init__(self, notifier, clock=time.monotonic):
        self._notifier = notifier
        self._clock = clock
        self._queue = queue.Queue(maxsize=MAX_QUEUED)
        self._thread = None
        self._stopping = threading.Event()
        self._dropped = 0
        self._warned_at = None
        self._lock = threading.Lock()

    @classmethod
    def from_conf(cls, conf, transport_factory, host, publisher=PUBLISHER):
        """The notifier ``conf`` asks for, or None when notifications
        are off (no driver).

        :param publisher: who publishes: PUBLISHER (a conductor) or
            AGENT_PUBLISHER; the host is added.
        """
        import oslo_messaging as messaging
        transport = transport_factory(conf)
        # Read once the transport registered the group. (oslo.messaging's
        # Notifier.is_enabled says True for no driver at all.)
        drivers = [d for d in conf.oslo_messaging_notifications.driver
                   if d != 'noop']
        if not drivers:
            return None
        return cls(messaging.Notifier(
            transport, publisher_id=f'{publisher}:{host}'))

    def start(self):
        self._thread = threading.Thread(target=self._send_all,
                                        name='notifications', daemon=True)
        self._thread.start()

    def stop(self, flush_s=STOP_FLUSH_S):
        """Stop sending once the queue drained, or after ``flush_s``."""
        deadline = self._clock() + flush_s
        while not self._queue.empty() and self._clock() < deadline:
            time.sleep(0.05)
        self._stopping.set()
        left = self._queue.qsize()
        if left:
            LOG.warning("Stopping with %d notifications not sent (the "
                        "message broker may be away)", left)

    def changes(self, changes):
        """A Database change listener: queue one notification per
        committed change; never blocks, never raises."""
        for change in changes:
            try:
                item = notification_of(change)
            except Exception:  # noqa: BLE001 - never fail a record
                LOG.exception("No notification for a %s change: its "
                              "payload could not be built", change.kind)
                continue
            self._put(item)

    def _put(self, item):
        try:
            self._queue.put_nowait(item)
        except queue.Full:
            with self._lock:
                self._dropped += 1
                now = self._clock()
                if self._warned_at is None or \
                        now - self._warned_at >= DROP_SUMMARY_S:
                    self._warned_at = now
                    LOG.warning("%d notifications dropped so far: %d wait "
                                "to be sent (is the message broker "
                                "reachable?)", self._dropped, MAX_QUEUED)

    def _send_all(self):
        ctxt = nm_context.get_admin_context()
        while not self._stopping.is_set():
            try:
                priority, kind, payload = self._queue.get(timeout=0.5)
            except queue.Empty:
                continue
            try:
                getattr(self._notifier, priority)(
                    ctxt, kind, payload.obj_to_primitive())
            except Exception as error:  # noqa: BLE001 - logged, goes on
                LOG.warning("Notification %s not sent (%s: %s)", kind,
                            type(error).__name__, error)
