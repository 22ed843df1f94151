"""A service's periodic jobs, each on its own oslo.service looping call.

A job that raises is logged under its name and runs again at its next
interval: one failed report or recompute must not silence an agent.
Every job waits one interval before its first run; the services do
each job once themselves at start.

Looping calls come from oslo.service's backend; under its eventlet
backend, in a process eventlet never patched, they would never run and
``stop`` would wait forever. Starting jobs therefore insists on the
threading backend, choosing it if nothing has, and refuses otherwise.
"""

from oslo_log import log as logging
from oslo_service import loopingcall

from numamig import _backend

LOG = logging.getLogger(__name__)


class PeriodicJobs:
    """Named jobs with their own intervals, started and stopped together.

    :param owner: who runs them, for the log (e.g. the host).
    """

    def __init__(self, owner):
        self.owner = owner
        self._jobs = []
        self._calls = []

    def add(self, name, interval, func, first=None):
        """Run ``func()`` every ``interval`` seconds once started, the
        first time after ``first`` seconds (default: ``interval``)."""
        self._jobs.append((name, interval, func, first))
        return self

    @property
    def intervals(self):
        """{job name: seconds}, as configured."""
        return {name: interval for name, interval, _, _ in self._jobs}

    def start(self):
        """Start every job; raise if oslo.service runs on eventlet."""
        _backend.select_threading(strict=True)
        for name, interval, func, first in self._jobs:
            call = loopingcall.FixedIntervalLoopingCall(
                self._guarded(name, func))
            call.start(interval, initial_delay=interval if first is None
                       else first, stop_on_exception=False)
            self._calls.append(call)

    def stop(self, wait=True):
        """Stop after the runs in progress; ``wait``: until they ended."""
        calls, self._calls = self._calls, []
        for call in calls:
            call.stop()
        if wait:
            for call in calls:
                call.wait()

    def _guarded(self, name, func):
        def run():
            try:
                func()
            except Exception:
                LOG.exception("%s: periodic job %s failed; it runs again "
                              "at its next interval", self.owner, name)
        return run
