"""Periodic jobs: own intervals, failures logged and retried, stop."""

import subprocess
import sys
import threading
import time

import fixtures

from numamig import periodic
from tests import base

WAIT = 10


class PeriodicJobsTest(base.TestCase):

    def _jobs(self):
        jobs = periodic.PeriodicJobs('host-a')
        self.addCleanup(jobs.stop)
        return jobs

    def test_each_job_keeps_its_own_interval(self):
        runs = {'fast': 0, 'slow': 0}
        enough = threading.Event()

        def count(name):
            runs[name] += 1
            if runs['fast'] >= 6:
                enough.set()
        jobs = self._jobs().add('fast', 0.02, lambda: count('fast')).add(
            'slow', 5, lambda: count('slow'))
        jobs.start()
        self.assertTrue(enough.wait(WAIT))
        jobs.stop()
        # The slow job waits a whole interval before its first run.
        self.assertEqual(0, runs['slow'])
        self.assertEqual({'fast': 0.02, 'slow': 5}, jobs.intervals)

    def test_a_job_may_run_first_sooner_than_its_interval(self):
        ran = threading.Event()
        jobs = self._jobs().add('sweep', 60, ran.set, first=0.02)
        jobs.start()
        self.assertTrue(ran.wait(WAIT))
        self.assertEqual({'sweep': 60}, jobs.intervals)

    def test_a_failing_job_is_logged_and_runs_again(self):
        logs = self.useFixture(fixtures.FakeLogger(name='numamig.periodic'))
        calls = []
        again = threading.Event()

        def flaky():
            calls.append(1)
            if len(calls) == 1:
                raise RuntimeError('conductor unreachable')
            again.set()
        self._jobs().add('report', 0.02, flaky).start()
        self.assertTrue(again.wait(WAIT))
        self.assertIn('host-a: periodic job report failed', logs.output)
        self.assertIn('conductor unreachable', logs.output)

    def test_stop_waits_for_the_run_in_progress(self):
        started, finished = threading.Event(), threading.Event()

        def slow():
            started.set()
            time.sleep(0.2)
            finished.set()
        jobs = self._jobs().add('recompute', 0.01, slow)
        jobs.start()
        self.assertTrue(started.wait(WAIT))
        jobs.stop(wait=True)
        self.assertTrue(finished.is_set())


class BackendTest(base.TestCase):

    def test_refuses_to_start_on_the_eventlet_backend(self):
        # Looping calls on an unpatched eventlet hub never run and stop()
        # never returns: a process that let oslo_messaging pick eventlet
        # gets an error at start instead.
        code = ("import oslo_messaging\n"
                "from numamig import periodic\n"
                "periodic.PeriodicJobs('h').add('r', 1, print).start()\n")
        done = subprocess.run([sys.executable, '-c', code],
                              capture_output=True, text=True, timeout=60)
        self.assertNotEqual(0, done.returncode)
        self.assertIn("Backend already set to 'eventlet'", done.stderr)
