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
its tasks ends, and when a migration ends on this worker (a slot of the
limits was freed); and, for slots freed on other workers or a database
that was unreachable, after ``recheck`` seconds at the latest.
"""

import concurrent.futures
import threading

from oslo_log import log as logging

from numamig.db import queue

LOG = logging.getLogger(__name__)


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
    :param recheck: longest seconds between two looks at the queue.
    """

    def __init__(self, db, limits, workers, run, recheck=5.0):
        self.db = db
        self.limits = limits
        self.workers = workers
        self._run = run
        self._recheck = recheck
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=workers, thread_name_prefix='numamig-migration')
        self._lock = threading.Lock()
        self._busy = 0
        self._pending = set()     # admitted here, task not started yet
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

    @property
    def busy(self):
        """How many task threads run a migration now."""
        with self._lock:
            return self._busy

    def stop(self, graceful=True):
        """Admit nothing more; with ``graceful`` let running tasks end.

        Migrations admitted here whose task had not started go back to
        the queue, where another worker (or this one's next start)
        takes them.
        """
        self._stopping.set()
        self._wake.set()
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
                self._dispatch()
            except Exception as exc:  # noqa: BLE001 - retried at recheck
                LOG.warning("Admitting queued migrations failed (%s); "
                            "trying again within %s s", exc, self._recheck)

    def _dispatch(self):
        with self._lock:
            free = self.workers - self._busy
        for uuid in queue.admit(self.db, self.limits, free):
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
            self._pending.discard(uuid)
        requeued = False
        try:
            requeued = self._run(uuid) is False
        except Exception:
            LOG.exception("Migration %s: its conductor task failed", uuid)
        finally:
            with self._lock:
                self._busy -= 1
            if not requeued:
                self.wake()
