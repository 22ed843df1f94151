"""Operators waiting on a migration inside the conductor (API 1.5).

Why: ``numamig-manage migration start --wait`` used to poll
``migration_get``: dozens of RPC round trips and database reads per
migration on the operators' and the conductor's CPUs, and the end seen up
to a tenth of the wait after it happened. A waiter now sits in the
conductor until the migration changes, and is answered the moment this
worker records its end.

A stopping conductor worker answers every wait it holds at once, with
the migration as it is (``stop``): its RPC server waits for the requests
in flight before the worker can stop, and a wait held for its whole
timeout kept a SIGTERM'd worker up for 30 s.

Bounded: at most ``max_waiters`` waits hold an RPC thread of the
operators' topic at once (agents have a topic and threads of their own);
one more is answered at once with the migration as it is, and its caller
falls back to polling. Every wait ends within its timeout, itself capped
at MAX_WAIT_S. Nothing here waits on an RPC, so no pool waits on itself:
a waiter waits on an Event that the thread recording the end sets (ends
recorded by this worker) or on its own re-reads of the database, which
back off from FIRST_RECHECK_S to RECHECK_S (changes recorded by another
worker, and progress).
"""

import threading
import time

# Longest single wait a caller may ask for; it asks again after.
MAX_WAIT_S = 30.0
# Re-reads of the migration while waiting: from this, doubling, ...
FIRST_RECHECK_S = 0.05
# ... up to this (progress is recorded about once a second).
RECHECK_S = 1.0


class MigrationWatch:
    """Waits of callers on migrations, woken by their ends.

    :param max_waiters: waits held at once; 0 answers every wait at once.
    """

    def __init__(self, max_waiters, clock=time.monotonic):
        self._slots = threading.BoundedSemaphore(max_waiters) \
            if max_waiters > 0 else None
        self._clock = clock
        self._lock = threading.Lock()
        self._events = {}
        self._stopping = threading.Event()

    def stop(self):
        """Answer every wait held now, and every later one at once (the
        worker stops: its callers ask again, of another worker)."""
        self._stopping.set()
        with self._lock:
            events = [e for waiting in self._events.values()
                      for e in waiting]
        for event in events:
            event.set()

    def heard(self, migration):
        """A migration ended here: wake whoever waits on it."""
        with self._lock:
            events = list(self._events.get(migration.uuid, ()))
        for event in events:
            event.set()

    def wait(self, read, uuid, changed, timeout):
        """``read()`` once ``changed`` holds of it, or after ``timeout`` s.

        :param read: returns the migration as recorded now.
        :param changed: tells whether the caller has not seen it so.
        """
        current = read()
        if changed(current) or timeout <= 0 or self._slots is None or \
                self._stopping.is_set() or \
                not self._slots.acquire(blocking=False):
            return current
        event = threading.Event()
        self._add(uuid, event)
        try:
            deadline = self._clock() + min(timeout, MAX_WAIT_S)
            delay = FIRST_RECHECK_S
            while True:
                remaining = deadline - self._clock()
                if remaining <= 0:
                    return current
                event.wait(min(delay, remaining))
                event.clear()
                current = read()
                if changed(current) or self._stopping.is_set():
                    return current
                delay = min(delay * 2, RECHECK_S)
        finally:
            self._remove(uuid, event)
            self._slots.release()

    def _add(self, uuid, event):
        with self._lock:
            self._events.setdefault(uuid, set()).add(event)

    def _remove(self, uuid, event):
        with self._lock:
            waiting = self._events.get(uuid, set())
            waiting.discard(event)
            if not waiting:
                self._events.pop(uuid, None)
