"""Run admitted live migrations on a bounded pool of conductor threads.

Why a pool of its own: a conductor RPC handler that waited for a
migration's destination would hold an RPC thread while that destination
calls back into the conductor (to record its claim, its status, its
report). With every RPC thread held so, the callbacks find no thread and
only timeouts break the knot: 100 migrations requested at once used to
deadlock the conductor. RPC handlers now only record a request and wake
this executor; the executor's threads, which no RPC handler ever waits
for, choose destinations and take claims.

One dispatcher thread per conductor worker admits waiting migrations
(numamig.db.queue.admit) while it has free task threads and hands each to
the pool. It wakes when a request is queued on this worker, when one of
its tasks ends while migrations waited for a free thread, and when a
migration ends on this worker (a slot of the limits was freed); and, for
slots freed on other workers or a database that was unreachable, after
``recheck`` seconds at the latest.
"""

import concurrent.futures
import threading
import time

from oslo_log import log as logging

from numamig import exception
from numamig.db import queue

LOG = logging.getLogger(__name__)

# A lease lasts this many renewal intervals (the recheck), so that one
# late renewal never makes a live worker's migrations look abandoned.
LEASE_RENEWALS = 3
# Retries of migrations whose task met an unreachable database back off
# from the recheck interval up to this many of them.
MAX_RETRY_BACKOFF = 4


class MigrationExecutor:
    """Admit waiting migrations and run each with ``run(uuid)``.

    :param db: the numamig.db.api.Database.
    :param limits: numamig.db.queue.Limits.
    :param workers: task threads of this conductor worker.
    :param run: called in a task thread with an admitted migration's
        uuid; its exceptions are logged. When it returns False the
        migration went back to the queue for want of a free destination,
        and its end is no reason to look at the queue again (that would
        take it straight back): a migration ending, a request or the
        recheck interval will.
    :param recheck: longest seconds between two looks at the queue, and
        between two renewals of the leases on the migrations held here.
    :param recover: called in the dispatcher thread with the uuid of a
        migration whose task failed because the database was
        unreachable, once it may be back: puts the migration back in the
        queue. Retried, backing off, while it raises DatabaseError.
    """

    def __init__(self, db, limits, workers, run, recheck=5.0, recover=None,
                 clock=time.monotonic):
        self.db = db
        self.limits = limits
        self.workers = workers
        self._run = run
        self._recover = recover
        self._recheck = recheck
        self._clock = clock
        self.lease_s = LEASE_RENEWALS * recheck
        self._running = set()     # their task runs now
        self._failed = set()      # their task met an unreachable database
        self._retry_at = 0.0
        self._retry_backoff = recheck
        self._renewed_at = None
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=workers, thread_name_prefix='numamig-migration')
        self._lock = threading.Lock()
        self._busy = 0
        self._pending = set()     # admitted here, task not started yet
        # The last look at the queue found no free thread for every
        # migration it could admit: a task that ends frees one for them.
        self._starved = False
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread = threading.Thread(
            target=self._loop, name='numamig-migration-dispatcher',
            daemon=True)

    def start(self):
        self._thread.start()
        self.wake()

    def wake(self):
        """Look at the queue again soon (a request or a free slot)."""
        self._wake.set()

    def held(self):
        """uuids of the migrations this worker drives (its leases)."""
        with self._lock:
            return frozenset(self._pending | self._running | self._failed)

    @property
    def busy(self):
        """How many task threads run a migration now."""
        with self._lock:
            return self._busy

    def stop_admitting(self):
        """Admit and start nothing from now on (the worker stops);
        returns at once. Tasks running go on; ``stop`` waits for them."""
        self._stopping.set()
        self._wake.set()

    def stop(self, graceful=True):
        """Admit nothing more; with ``graceful`` let running tasks end.

        Migrations admitted here whose task had not started go back to
        the queue, where another worker (or this one's next start)
        takes them.
        """
        self.stop_admitting()
        if self._thread.is_alive() and \
                self._thread is not threading.current_thread():
            self._thread.join()
        self._pool.shutdown(wait=graceful, cancel_futures=True)
        with self._lock:
            pending, self._pending = self._pending, set()
        if pending:
            released = queue.release(self.db, pending)
            LOG.info("%d admitted migration(s) back in the queue at stop",
                     released)

    def abandon(self):
        """Stop admitting at once and clean nothing up, as a crash
        would (numamig.crash): admitted migrations stay admitted."""
        self._stopping.set()
        self._wake.set()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _loop(self):
        while not self._stopping.is_set():
            self._wake.wait(self._recheck)
            self._wake.clear()
            if self._stopping.is_set():
                return
            try:
                self._renew_leases()
                self._recover_failed()
                self._dispatch()
            except Exception as exc:  # noqa: BLE001 - retried at recheck
                LOG.warning("Admitting queued migrations failed (%s); "
                            "trying again within %s s", exc, self._recheck)

    def _renew_leases(self):
        now = self._clock()
        if self._renewed_at is not None and \
                now - self._renewed_at < self._recheck:
            return
        queue.renew(self.db, self.held(), self.lease_s)
        self._renewed_at = now

    def _recover_failed(self):
        with self._lock:
            failed = sorted(self._failed)
        if not failed or self._clock() < self._retry_at:
            return
        for uuid in failed:
            try:
                self._recover(uuid)
            except exception.DatabaseError as exc:
                self._retry_backoff = min(self._retry_backoff * 2,
                                          MAX_RETRY_BACKOFF * self._recheck)
                self._retry_at = self._clock() + self._retry_backoff
                LOG.warning("%d migration(s) wait for the database to put "
                            "them back in the queue (%s); next try in %.0f "
                            "s", len(failed), exception.brief(exc),
                            self._retry_backoff)
                return
            with self._lock:
                self._failed.discard(uuid)
        self._retry_backoff = self._recheck

    def _dispatch(self):
        with self._lock:
            free = self.workers - self._busy
        if self._stopping.is_set():
            return
        admitted = queue.admit(self.db, self.limits, free, self.lease_s)
        self._starved = len(admitted) >= free
        if admitted and self._stopping.is_set():
            # The stop began while they were admitted: none starts here.
            queue.release(self.db, admitted)
            LOG.info("%d migration(s) admitted as this worker stopped "
                     "went back to the queue", len(admitted))
            return
        for uuid in admitted:
            with self._lock:
                self._busy += 1
                self._pending.add(uuid)
                busy = self._busy
            # Operators follow a queued migration's start by this line;
            # with several conductor workers it also names which one.
            LOG.info("Migration %s admitted (%d of %d migration workers "
                     "busy)", uuid, busy, self.workers)
            self._pool.submit(self._task, uuid)

    def _task(self, uuid):
        with self._lock:
            if self._stopping.is_set():
                # Admitted, not started: ``stop`` puts it back in the
                # queue with the others still pending.
                self._busy -= 1
                return
            self._pending.discard(uuid)
            self._running.add(uuid)
        requeued = False
        try:
            requeued = self._run(uuid) is False
        except exception.DatabaseError as exc:
            # Not the migration's fault: it goes back to the queue once
            # the database answers (_recover_failed), held here till then.
            requeued = self._recover is not None
            if requeued:
                with self._lock:
                    self._failed.add(uuid)
            LOG.warning("Migration %s: the database failed while its "
                        "destination was chosen (%s)%s", uuid,
                        exception.brief(exc),
                        "; it goes back to the queue when the database "
                        "answers" if requeued else "")
        except Exception:
            LOG.exception("Migration %s: its conductor task failed", uuid)
        finally:
            with self._lock:
                self._busy -= 1
                self._running.discard(uuid)
            # A task that ends frees a thread, not a slot of the limits
            # (the migration is in flight until it ends, which wakes the
            # dispatcher then): look again only if a thread was missing.
            if not requeued and self._starved:
                self.wake()
