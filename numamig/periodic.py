"""A service's periodic jobs, each on its own oslo.service looping call.

A job that raises runs again at its next interval: one failed report or
recompute must not silence an agent. What it logs is written for the
operator reading the log while a peer is away (the conductor stopped,
the broker or the database cut): one WARNING line naming the job, what
failed and when it runs again, the traceback only at DEBUG; the same
failure again is not repeated at every interval but summarised every
FAILURE_SUMMARY_S, and the job's recovery is logged once.

Every job waits one interval before its first run; the services do
each job once themselves at start.

Stopping waits for the runs in progress only up to a grace: a run may
be blocked in an RPC call to a conductor that is gone, for as long as
the call's timeout, and a daemon told to stop must exit within seconds
whatever its peers do. A run still going at the deadline is named in
the log and left to its (daemon) thread, which ends with the process.

Looping calls come from oslo.service's backend; under its eventlet
backend, in a process eventlet never patched, they would never run and
``stop`` would wait forever. Starting jobs therefore insists on the
threading backend, choosing it if nothing has, and refuses otherwise.
"""

import dataclasses
import threading
import time

from oslo_log import log as logging
from oslo_service import loopingcall

from numamig import _backend
from numamig import library_notices

LOG = logging.getLogger(__name__)

# Seconds between two WARNING lines of a job failing the same way.
FAILURE_SUMMARY_S = 300
# Seconds ``stop`` waits for the runs in progress, all jobs together.
STOP_GRACE_S = 2.0


@dataclasses.dataclass
class _Job:
    """One job and what its failures have been since it last worked."""

    name: str
    interval: float
    func: object
    first: float | None
    # Set while no run is in progress.
    idle: threading.Event = dataclasses.field(
        default_factory=threading.Event)
    started_at: float = 0.0
    # The failure being repeated: (exception type, its text), when it
    # was first and last logged at WARNING, and how often it happened.
    failure: tuple | None = None
    failing_since: float = 0.0
    warned_at: float = 0.0
    failures: int = 0


class PeriodicJobs:
    """Named jobs with their own intervals, started and stopped together.

    :param owner: who runs them, for the log (e.g. the host).
    """

    def __init__(self, owner, clock=time.monotonic):
        self.owner = owner
        self._clock = clock
        self._jobs = []
        self._calls = []

    def add(self, name, interval, func, first=None):
        """Run ``func()`` every ``interval`` seconds once started, the
        first time after ``first`` seconds (default: ``interval``)."""
        job = _Job(name, interval, func, first)
        job.idle.set()
        self._jobs.append(job)
        return self

    @property
    def intervals(self):
        """{job name: seconds}, as configured."""
        return {job.name: job.interval for job in self._jobs}

    def start(self):
        """Start every job; raise if oslo.service runs on eventlet."""
        _backend.select_threading(strict=True)
        library_notices.quiet_outlasted_notice()
        for job in self._jobs:
            call = loopingcall.FixedIntervalLoopingCall(self._guarded(job))
            call.start(job.interval, initial_delay=job.interval
                       if job.first is None else job.first,
                       stop_on_exception=False)
            self._calls.append(call)

    def stop(self, wait=True, grace=STOP_GRACE_S):
        """Stop every job; ``wait``: for the runs in progress, at most
        ``grace`` seconds for all of them together.

        :returns: the names of the jobs still running when it returned.
        """
        calls, self._calls = self._calls, []
        for call in calls:
            call.stop()
        if not wait:
            return []
        return self.wait_stopped(self._clock() + grace)

    def wait_stopped(self, deadline):
        """After ``stop(wait=False)``: wait for the runs in progress
        until ``deadline`` (on this object's clock), then name the ones
        still running in the log.

        :returns: the names of the jobs still running.
        """
        running = [job for job in self._jobs if not job.idle.wait(
            max(0.0, deadline - self._clock()))]
        for job in running:
            LOG.warning("%s: stopping without waiting for periodic job %s, "
                        "running for %.0f s (a peer it waits for may be "
                        "away); it ends with the process", self.owner,
                        job.name, self._clock() - job.started_at)
        return [job.name for job in running]

    def deadline(self, grace=STOP_GRACE_S):
        """``grace`` seconds from now, on this object's clock."""
        return self._clock() + grace

    def _guarded(self, job):
        def run():
            job.idle.clear()
            job.started_at = self._clock()
            failed = None
            try:
                job.func()
            except Exception as error:  # noqa: BLE001 - logged, retried
                LOG.debug("%s: periodic job %s failed", self.owner,
                          job.name, exc_info=True)
                failed = error
            finally:
                job.idle.set()
            # Logged outside the handler: oslo.log appends the exception
            # being handled to a WARNING line made inside one.
            if failed is None:
                self._worked(job)
            else:
                self._failed(job, failed)
        return run

    def _failed(self, job, error):
        now = self._clock()
        what = (type(error).__name__, _first_line(error))
        # Only the type decides "the same failure": messages such as a
        # timeout's carry a new message id each time.
        same = job.failure is not None and job.failure[0] == what[0]
        if not same:
            job.failure, job.failing_since, job.failures = what, now, 0
        job.failures += 1
        if not same:
            job.warned_at = now
            LOG.warning("%s: periodic job %s failed (%s: %s); it runs again "
                        "in %s s", self.owner, job.name, what[0], what[1],
                        _seconds(job.interval))
        elif now - job.warned_at >= FAILURE_SUMMARY_S:
            job.warned_at = now
            LOG.warning("%s: periodic job %s failed %d times in %.0f s, "
                        "each with %s (last: %s); it runs again in %s s",
                        self.owner, job.name, job.failures,
                        now - job.failing_since, what[0], what[1],
                        _seconds(job.interval))

    def _worked(self, job):
        if job.failure is None:
            return
        LOG.info("%s: periodic job %s works again after %d failed runs in "
                 "%.0f s", self.owner, job.name, job.failures,
                 self._clock() - job.failing_since)
        job.failure, job.failures = None, 0


def _first_line(error):
    text = str(error).strip()
    return text.splitlines()[0] if text else '(no message)'


def _seconds(value):
    return f'{value:g}'
