"""Periodic jobs: own intervals, failures logged and retried, stop."""

import logging
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


    def test_stop_does_not_wait_past_its_grace_for_a_stuck_run(self):
        # A run blocked in a call to a conductor that is gone must not
        # hold a stopping daemon for the call's whole timeout.
        logs = self.useFixture(fixtures.FakeLogger(name='numamig.periodic'))
        started, release = threading.Event(), threading.Event()
        self.addCleanup(release.set)

        def stuck():
            started.set()
            release.wait(WAIT)
        jobs = self._jobs().add('reconcile outgoing migrations', 0.01,
                                stuck).add('report', 5, lambda: None)
        jobs.start()
        self.assertTrue(started.wait(WAIT))
        began = time.monotonic()
        still = jobs.stop(wait=True, grace=0.2)
        self.assertLess(time.monotonic() - began, 2)
        self.assertEqual(['reconcile outgoing migrations'], still)
        self.assertIn('host-a: stopping without waiting for periodic job '
                      'reconcile outgoing migrations', logs.output)


class FailureLogTest(base.TestCase):
    """What a failing job writes: one line, summarised, its recovery."""

    def setUp(self):
        super().setUp()
        self.logs = self.useFixture(fixtures.FakeLogger(
            name='numamig.periodic', level=logging.INFO))
        self.now = 1000.0
        self.jobs = periodic.PeriodicJobs('host-a', clock=lambda: self.now)
        self.outcomes = []

        def job():
            outcome = self.outcomes.pop(0)
            if outcome is not None:
                raise outcome
        self.jobs.add('report', 2, job)
        self.run_job = self.jobs._guarded(self.jobs._jobs[0])

    def runs(self, *outcomes, every=2):
        for outcome in outcomes:
            self.outcomes.append(outcome)
            self.run_job()
            self.now += every

    def lines(self):
        return [line for line in self.logs.output.splitlines() if line]

    def test_one_warning_line_without_traceback(self):
        self.runs(TimeoutError('Timed out waiting for a reply\nto msg 1'))
        self.assertEqual(
            ['host-a: periodic job report failed (TimeoutError: Timed out '
             'waiting for a reply); it runs again in 2 s'], self.lines())
        self.assertNotIn('Traceback', self.logs.output)

    def test_the_traceback_is_kept_for_debug(self):
        debug = self.useFixture(fixtures.FakeLogger(
            name='numamig.periodic', level=logging.DEBUG))
        self.runs(RuntimeError('boom'))
        self.assertIn('Traceback', debug.output)

    def test_the_same_failure_is_summarised_not_repeated(self):
        # A timeout's text differs each time (its message id); its type
        # does not.
        self.runs(*[TimeoutError(f'no reply to {i}') for i in range(200)])
        lines = self.lines()
        # 400 s of failures: the first line and one summary at 300 s.
        self.assertEqual(2, len(lines), lines)
        self.assertIn('failed 151 times in 300 s, each with TimeoutError '
                      '(last: no reply to 150); it runs again in 2 s',
                      lines[1])

    def test_another_failure_is_logged_at_once(self):
        self.runs(TimeoutError('no reply'), ConnectionError('reset'))
        self.assertEqual(2, len(self.lines()))
        self.assertIn('(ConnectionError: reset)', self.lines()[1])

    def test_recovery_is_logged_once(self):
        self.runs(TimeoutError('a'), TimeoutError('b'), None, None)
        lines = self.lines()
        self.assertEqual(2, len(lines), lines)
        self.assertEqual('host-a: periodic job report works again after 2 '
                         'failed runs in 4 s', lines[1])
        self.runs(TimeoutError('c'))
        self.assertEqual(3, len(self.lines()))


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
