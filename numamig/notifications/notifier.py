"""The conductor's notifier: a bounded queue in front of oslo.messaging's.

Off unless ``[oslo_messaging_notifications] driver`` names one (as in
every OpenStack service). When on, every migration status the conductor
commits becomes a notification ``migration.<status>`` (``migration.
accepted`` for a request, ``migration.running`` for a start or a resume
after ``migration.postcopy-paused``, ``migration.completed``, ...), with
a MigrationPayload, priority INFO (WARNING for failed, ERROR for error),
published as ``numamig-conductor:<host>``.

Recording a change never waits for the broker: the database layer hands
the committed changes over (numamig.db.api.Database.status_listeners)
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

MAX_QUEUED = 10000
STOP_FLUSH_S = 2.0
DROP_SUMMARY_S = 300
PUBLISHER = 'numamig-conductor'
# The priority of each status's notification: info unless it ended badly.
PRIORITIES = collections.defaultdict(lambda: 'info', {
    STATUS.FAILED: 'warn', STATUS.ERROR: 'error'})


def event_type(status):
    """The event type of a migration reaching ``status``."""
    return f'migration.{status}'


class Notifier:
    """Sends what the conductor records, off the recording thread.

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
    def from_conf(cls, conf, transport_factory, host):
        """The notifier ``conf`` asks for, or None when notifications
        are off (no driver)."""
        import oslo_messaging as messaging
        transport = transport_factory(conf)
        # Read once the transport registered the group. (oslo.messaging's
        # Notifier.is_enabled says True for no driver at all.)
        drivers = [d for d in conf.oslo_messaging_notifications.driver
                   if d != 'noop']
        if not drivers:
            return None
        return cls(messaging.Notifier(
            transport, publisher_id=f'{PUBLISHER}:{host}'))

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

    def migration_status_changes(self, changes):
        """A Database status listener: queue one notification per
        committed change; never blocks, never raises."""
        for migration, detail in changes:
            try:
                payload = payloads.MigrationPayload.from_record(
                    migration, detail)
            except Exception:  # noqa: BLE001 - never fail a record
                LOG.exception("No notification for migration %s: its "
                              "payload could not be built",
                              migration.get('uuid'))
                continue
            self._put((PRIORITIES[payload.status],
                       event_type(payload.status), payload))

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
                LOG.warning("Notification %s of %s not sent (%s: %s)", kind,
                            payload.uuid, type(error).__name__, error)
