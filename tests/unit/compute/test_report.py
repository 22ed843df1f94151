"""Tests of numamig.compute.report: the background reporter."""

import threading
import time
from unittest import mock

from numamig import cpumodel
from numamig import objects
from numamig.compute import report
from tests import base
from tests.unit.compute import base as cbase

WAIT_S = 10


class BackgroundReporterTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.manager = cbase.manager()
        self.agent = self.manager.agent
        self.addCleanup(self.manager.stop)
        self.sent = threading.Condition()
        self.reports = []
        self.gate = threading.Event()
        self.sending = threading.Event()

        def cast(ctxt, report):
            # Reports are held until the test opens the gate.
            self.sending.set()
            self.gate.wait(WAIT_S)
            with self.sent:
                self.reports.append(report)
                self.sent.notify_all()
        self.agent.conductor_api.report_compute_node_cast.side_effect = cast

    def _wait_reports(self, count):
        with self.sent:
            self.sent.wait_for(lambda: len(self.reports) >= count, WAIT_S)
            return list(self.reports)

    def test_request_returns_at_once_and_a_cast_follows(self):
        self.gate.set()
        self.agent.reporter.request('an arrival')
        (report,) = self._wait_reports(1)
        self.assertEqual(self.agent.host, report.host)
        self.agent.conductor_api.report_compute_node.assert_not_called()

    def test_requests_during_a_report_coalesce_into_one(self):
        self.agent.reporter.request('first')
        self.assertTrue(self.sending.wait(WAIT_S))
        for why in ('second', 'third', 'fourth'):
            self.agent.reporter.request(why)
        self.gate.set()
        self._wait_reports(2)
        self.agent.reporter.stop()
        # The first report, then ONE for the three requests made while
        # it was being sent.
        self.assertEqual(2, len(self.reports))
        self.assertEqual(2, self.agent.reporter.sent)

    def test_a_failed_report_is_logged_and_the_next_is_sent(self):
        calls = []

        def cast(ctxt, report):
            calls.append(report)
            with self.sent:
                self.sent.notify_all()
            if len(calls) == 1:
                raise RuntimeError('broker gone')
        self.agent.conductor_api.report_compute_node_cast.side_effect = cast
        self.agent.reporter.request('first')
        with self.sent:
            self.sent.wait_for(lambda: calls, WAIT_S)
        self.agent.reporter.request('second')
        with self.sent:
            self.sent.wait_for(lambda: len(calls) >= 2, WAIT_S)
        self.assertEqual(2, len(calls))
        self.assertEqual(1, self.agent.reporter.sent)


class PacedReporterTest(base.TestCase):
    """Reports after changes leave at most one per min_interval."""

    def test_a_burst_after_a_report_waits_for_the_interval(self):
        sent = []
        done = threading.Condition()

        def send(ctxt):
            with done:
                sent.append(time.monotonic())
                done.notify_all()
        reporter = report.BackgroundReporter('h1', send, min_interval=0.3)
        self.addCleanup(reporter.stop)
        reporter.request('a quiet spell, then an arrival')
        with done:
            self.assertTrue(done.wait_for(lambda: len(sent) == 1, WAIT_S))
        for why in ('a departure', 'another arrival', 'a dropped claim'):
            reporter.request(why)
        with done:
            self.assertTrue(done.wait_for(lambda: len(sent) == 2, WAIT_S))
        # The three changes went into one report, no sooner than the
        # interval after the first.
        self.assertGreaterEqual(sent[1] - sent[0], 0.3)
        time.sleep(0.4)
        self.assertEqual(2, len(sent))

    def test_no_interval_reports_each_burst_at_once(self):
        sent = threading.Semaphore(0)
        reporter = report.BackgroundReporter(
            'h1', lambda ctxt: sent.release(), min_interval=0)
        self.addCleanup(reporter.stop)
        started = time.monotonic()
        for why in ('first', 'second'):
            reporter.request(why)
            self.assertTrue(sent.acquire(timeout=WAIT_S))
        self.assertLess(time.monotonic() - started, WAIT_S)


class RefreshTest(base.TestCase):
    """report.refresh: recompute from the records, then report."""

    def test_recompute_then_report_what_it_counts(self):
        agent = mock.Mock()
        agent.tracker.update_available_resource.side_effect = [False, True]
        with mock.patch.object(report, 'build') as build:
            fresh = report.refresh(agent, 'ctxt')
        self.assertEqual(2, agent.tracker.update_available_resource
                         .call_count)
        self.assertIs(build.return_value, fresh)
        agent.conductor_api.report_compute_node.assert_called_once_with(
            'ctxt', fresh)


class BuildTest(base.TestCase):

    def test_the_report_carries_the_migration_guard_state(self):
        agent = cbase.agent()
        agent.driver.migration_guard_state.return_value = 'failed'
        built = report.build(agent)
        self.assertEqual('failed', built.migration_guard)
        built.validate()

    def test_the_report_carries_the_host_cpu(self):
        agent = cbase.agent()
        agent.driver.host_cpu.return_value = objects.HostCPU(
            arch='x86_64', model='EPYC', features=['ss'])
        built = report.build(agent)
        self.assertEqual('EPYC', built.cpu.model)
        built.validate()

    def test_a_driver_without_cpu_reports_none(self):
        self.assertIsNone(report.build(cbase.agent()).cpu)

    def test_the_report_carries_the_running_guests_cpus(self):
        guest = cbase.instance(vcpus=1, pins={0: 0})
        agent = cbase.agent(instances=[guest])
        agent.driver.guest_cpu.return_value = cpumodel.GuestCPU(
            'custom', 'Broadwell', frozenset({'ss'}))
        built = report.build(agent)
        self.assertEqual([(guest.uuid, 'custom', 'Broadwell', ['ss'])],
                         [(e.instance_uuid, e.mode, e.model, e.features)
                          for e in built.guest_cpus])
        built.validate()
        # The next report reads no guest again.
        report.build(agent)
        agent.driver.guest_cpu.assert_called_once_with(guest.uuid)
