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
import os
import socket
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
# A task that met an unreachable database asks it again after this
# pause, doubled after each refusal up to OUTAGE_PROBE_MAX_S: the first
# answer after an outage is seen within two seconds, and a database that
# stays away is asked at most every two seconds by each waiting task.
OUTAGE_PROBE_FIRST_S = 0.25
OUTAGE_PROBE_MAX_S = 2.0


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
    :param recover: called with the uuid of a migration whose task
        failed because the database was unreachable: puts the migration
        back in the queue (it keeps its place), from where it runs again
        at once. Its task thread calls it as soon as the database
        answers, asking again every 0.25 s to 2 s for up to
        ``outage_wait`` seconds; past that the dispatcher does, at each
        look, while it raises DatabaseError.
    :param give_up: called with the uuid and the seconds waited when the
        database stayed away longer than ``outage_wait``, once it answers
        again: ends the migration with that reason instead (None: it goes
        back to the queue all the same).
    :param outage_wait: seconds a task thread waits for the database
        (``[conductor] database_outage_wait``).
    :param host: the conductor's host name; with this worker process's
        pid it names the holder of the leases taken here
        (``lease_holder``), so that the records say which conductor
        drove each migration and only this worker renews its leases.
    """

    def __init__(self, db, limits, workers, run, recheck=5.0, recover=None,
                 clock=time.monotonic, give_up=None, *, outage_wait,
                 host=None):
        self.db = db
        self.limits = limits
        self.workers = workers
        self._run = run
        self._recover = recover
        self._give_up = give_up
        self._outage_wait = outage_wait
        self._recheck = recheck
        self._clock = clock
        self.lease_s = LEASE_RENEWALS * recheck
        self._host = host or socket.gethostname()
        # Set again at start: the worker process that runs the
        # dispatcher (a forked conductor worker) is the holder.
        self.holder = self._holder()
        self._running = set()     # their task runs now
        self._failed = set()      # their task met an unreachable database
        # Of those, the ones that waited longer than outage_wait: {uuid:
        # when their wait began}.
        self._expired = {}
        # Admissions whose transaction failed without an answer: it may
        # have committed all the same (the connection died with the
        # COMMIT under way). Their admission stamps, looked for at the
        # next look that reaches the database.
        self._unanswered = []
        # The pause before the next look after a failed one (None: the
        # last look reached the database).
        self._failing_pause = None
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

    def _holder(self):
        return f"{self._host}:{os.getpid()}"

    def start(self):
        self.holder = self._holder()
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
        would (the crash emulation of the embedded tests):
        admitted migrations stay admitted."""
        self._stopping.set()
        self._wake.set()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _loop(self):
        while not self._stopping.is_set():
            self._wake.wait(self._recheck if self._failing_pause is None
                            else self._failing_pause)
            self._wake.clear()
            if self._stopping.is_set():
                return
            try:
                self._renew_leases()
                self._adopt_unanswered()
                self._recover_failed()
                self._dispatch()
            except Exception as exc:  # noqa: BLE001 - retried below
                # The database is the usual cause: look again soon, so
                # that leases are renewed and waiting migrations admitted
                # within seconds of its return, not a recheck later.
                self._failing_pause = min(
                    self._recheck, OUTAGE_PROBE_MAX_S,
                    (self._failing_pause or OUTAGE_PROBE_FIRST_S / 2) * 2)
                LOG.warning("Admitting queued migrations failed (%s); "
                            "trying again within %.1f s",
                            exception.brief(exc)
                            if isinstance(exc, exception.NumamigException)
                            else exc, self._failing_pause)
            else:
                self._failing_pause = None

    def _renew_leases(self):
        now = self._clock()
        if self._renewed_at is not None and \
                now - self._renewed_at < self._recheck:
            return
        queue.renew(self.db, self.held(), self.lease_s, holder=self.holder)
        self._renewed_at = now

    def _adopt_unanswered(self):
        """Run what an admission whose answer was lost admitted after all.

        Those migrations carry this worker's lease, and no other worker
        touches them until it runs out; without this look nobody would
        drive them and the stalled-migration sweep would end them as if
        their worker had stopped. Only the dispatcher admits, so no
        admission of this worker is under way meanwhile.
        """
        if not self._unanswered:
            return
        found = queue.admitted_by(self.db, self._unanswered)
        self._unanswered = []
        with self._lock:
            found = [u for u in found if u not in self._pending and
                     u not in self._running and u not in self._failed]
            free = max(self.workers - self._busy, 0)
        adopted, extra = found[:free], found[free:]
        if extra:
            queue.release(self.db, extra)
        for uuid in adopted:
            LOG.warning("Migration %s was admitted by a transaction whose "
                        "answer was lost with the database connection; it "
                        "runs now", uuid)
            self._submit(uuid)

    def _recover_failed(self):
        with self._lock:
            failed = sorted(self._failed)
        if not failed or self._clock() < self._retry_at:
            return
        for uuid in failed:
            try:
                if uuid in self._expired and self._give_up is not None:
                    self._give_up(uuid, self._clock() - self._expired[uuid])
                else:
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
                self._expired.pop(uuid, None)
        self._retry_backoff = self._recheck

    def _dispatch(self):
        with self._lock:
            free = self.workers - self._busy
        if free <= 0:
            self._starved = True
            return
        if self._stopping.is_set():
            return
        stamp = queue.admission_stamp()
        try:
            admitted = queue.admit(self.db, self.limits, free, self.lease_s,
                                   now=stamp, holder=self.holder)
        except exception.DatabaseError:
            self._unanswered.append(stamp)
            raise
        self._starved = len(admitted) >= free
        if admitted and self._stopping.is_set():
            # The stop began while they were admitted: none starts here.
            queue.release(self.db, admitted)
            LOG.info("%d migration(s) admitted as this worker stopped "
                     "went back to the queue", len(admitted))
            return
        for uuid in admitted:
            self._submit(uuid)

    def _submit(self, uuid):
        with self._lock:
            self._busy += 1
            self._pending.add(uuid)
            busy = self._busy
        # Operators follow a queued migration's start by this line; with
        # several conductor workers it also names which one.
        LOG.info("Migration %s admitted (%d of %d migration workers busy)",
                 uuid, busy, self.workers)
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
            # the database answers, held here (its lease renewed) till
            # then.
            requeued = self._recover is not None
            LOG.warning("Migration %s: the database failed while its "
                        "destination was chosen (%s)%s", uuid,
                        exception.brief(exc),
                        f"; waiting up to {self._outage_wait} s for it to "
                        f"answer ([conductor] database_outage_wait)"
                        if requeued else "")
            if requeued:
                self._ride_out(uuid)
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

    def _ride_out(self, uuid):
        """Wait in this task thread for the database to answer, then put
        the migration back in the queue and wake the dispatcher, which
        admits it again at once (it kept its place): it goes on within
        two seconds of the database's return.

        Bounded by ``outage_wait``: past it the migration is handed to
        the dispatcher (still held here, its lease renewed), which ends
        it with that reason once the database answers (``give_up``).
        """
        began = self._clock()
        deadline = began + self._outage_wait
        pause = OUTAGE_PROBE_FIRST_S
        while True:
            try:
                self._recover(uuid)
            except exception.DatabaseError:
                left = deadline - self._clock()
                if left <= 0 or self._stopping.wait(min(pause, left)):
                    break
                pause = min(pause * 2, OUTAGE_PROBE_MAX_S)
                continue
            self.wake()
            return
        expired = self._clock() >= deadline
        with self._lock:
            self._failed.add(uuid)
            if expired:
                self._expired[uuid] = began
        if expired:
            LOG.warning("Migration %s: the database did not answer within "
                        "%s s ([conductor] database_outage_wait); the "
                        "migration ends with that reason when it answers",
                        uuid, self._outage_wait)
