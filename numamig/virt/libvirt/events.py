"""libvirt's event loop, and the statistics of a migration job that ended.

A source learns how its finished migration went (downtime, bytes sent)
only from the VIR_DOMAIN_EVENT_ID_JOB_COMPLETED event: with
UNDEFINE_SOURCE the domain is gone once ``migrateToURI3`` returns, so its
completed job statistics cannot be read, and after a post-copy migration
the destination keeps none either (both measured on libvirt 9.0).

libvirt delivers events only to connections opened after an event loop
implementation was registered, and only while that loop runs; the driver
therefore starts the loop before it opens a connection.
"""

import threading
import time

import libvirt
from oslo_log import log as logging

LOG = logging.getLogger(__name__)

JOB_COMPLETED = getattr(libvirt, 'VIR_DOMAIN_EVENT_ID_JOB_COMPLETED', 20)
# The job-completed event of an outgoing migration carries this operation.
OPERATION_MIGRATION_OUT = getattr(
    libvirt, 'VIR_DOMAIN_JOB_OPERATION_MIGRATION_OUT', 5)
# A loop iteration that fails (e.g. a poll error) is retried after this
# pause rather than spinning on the CPU.
LOOP_RETRY_S = 0.1

_loop_lock = threading.Lock()
_loop_thread = None


def start_event_loop():
    """Run libvirt's default event loop in a daemon thread, once.

    Connections opened before this call never receive events. A process
    forked after the loop started (a service worker) has no loop thread;
    there the loop is registered and started again.

    :returns: True when the loop runs (started now or earlier), False
        when libvirt refused to register it (logged).
    """
    global _loop_thread
    with _loop_lock:
        if _loop_thread is not None and _loop_thread.is_alive():
            return True
        try:
            libvirt.virEventRegisterDefaultImpl()
        except libvirt.libvirtError as exc:
            LOG.warning("libvirt event loop unavailable, migrations will "
                        "report no downtime: %s", exc)
            return False
        _loop_thread = threading.Thread(target=_run_event_loop,
                                        name='libvirt-event-loop',
                                        daemon=True)
        _loop_thread.start()
        return True


def _run_event_loop():
    while True:
        try:
            libvirt.virEventRunDefaultImpl()
        except libvirt.libvirtError as exc:
            LOG.debug("libvirt event loop iteration failed: %s", exc)
            time.sleep(LOOP_RETRY_S)


class DomainEventSubscription:
    """One domain's subscription to one libvirt event: ``start``
    registers ``_on_event``, ``stop`` releases it (in any case). Where
    the event cannot be had (no event loop, a libvirt without it) the
    subscription stays off and ``_unavailable`` says what follows."""

    # The libvirt event id (VIR_DOMAIN_EVENT_ID_*), and what stopping it
    # is called in a log line.
    EVENT = None
    NAME = 'event'

    def __init__(self, dom):
        self._dom = dom
        self._conn = None
        self._callback_id = None

    def start(self):
        try:
            self._conn = self._dom.connect()
            self._callback_id = self._conn.domainEventRegisterAny(
                self._dom, self.EVENT, self._on_event, None)
        except libvirt.libvirtError as exc:
            self._unavailable(exc)
            self._callback_id = None

    def stop(self):
        if self._callback_id is None:
            return
        try:
            self._conn.domainEventDeregisterAny(self._callback_id)
        except libvirt.libvirtError as exc:
            # The connection may have closed; nothing is left to release.
            LOG.debug("Deregistering the %s of %s: %s", self.NAME,
                      self._dom.UUIDString(), exc)
        self._callback_id = None

    def _on_event(self, *args):
        raise NotImplementedError

    def _unavailable(self, exc):
        raise NotImplementedError


class JobCompletedWatcher(DomainEventSubscription):
    """Catches the statistics of one domain's outgoing migration job.

    ``start`` before the migration, ``wait`` after it succeeded, ``stop``
    in any case. Where events cannot be had (no event loop, a libvirt
    without the event), ``wait`` returns None at once and the migration's
    downtime stays unknown rather than guessed.
    """

    EVENT = JOB_COMPLETED
    NAME = 'job event'

    def __init__(self, dom):
        super().__init__(dom)
        self._stats = None
        self._arrived = threading.Event()

    def _unavailable(self, exc):
        LOG.info("Cannot watch the migration job of %s for its "
                 "statistics, its downtime will be unknown: %s",
                 self._dom.UUIDString(), exc)

    def _on_event(self, _conn, _dom, params, _opaque):
        if params.get('operation', OPERATION_MIGRATION_OUT) != \
                OPERATION_MIGRATION_OUT:
            return
        self._stats = dict(params)
        self._arrived.set()

    def wait(self, timeout):
        """Return the completed job's statistics, or None.

        The event may arrive just before or just after ``migrateToURI3``
        returns; ``timeout`` bounds the wait for a late one.
        """
        if self._callback_id is None:
            return None
        if not self._arrived.wait(timeout):
            LOG.info("No job-completed event for %s within %.1f s, its "
                     "downtime is unknown", self._dom.UUIDString(), timeout)
            return None
        return self._stats
