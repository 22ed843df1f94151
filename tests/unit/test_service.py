"""Daemons read transport_url and control_exchange before a transport
exists, from oslo.messaging's public option list."""

import logging as std_logging
import threading
import time

import fixtures
from oslo_config import cfg
import oslo_messaging as messaging
from oslo_service import service as os_service

from numamig import library_notices
from numamig import rpc
from numamig import service
from tests import base


class TransportOptsTest(base.TestCase):

    def test_the_two_options_and_no_others(self):
        self.assertEqual(['transport_url', 'control_exchange'],
                         [opt.name for opt in service.transport_opts()])

    def test_values_read_then_a_transport_built_without_clash(self):
        conf = cfg.ConfigOpts()
        messaging.set_transport_defaults(rpc.CONTROL_EXCHANGE)
        conf.register_opts(service.transport_opts())
        conf([], project='numamig', default_config_files=[])
        conf.set_override('transport_url', 'fake://')
        self.assertEqual(rpc.CONTROL_EXCHANGE, conf.control_exchange)
        # oslo.messaging registers its own option objects now: equal ones
        # were registered first, so nothing clashes.
        transport = messaging.get_rpc_transport(conf)
        self.addCleanup(transport.cleanup)
        self.assertEqual('fake://', conf.transport_url)


class ComputeIntervalsTest(base.TestCase):

    def _service(self, **options):
        """An agent built from CONF with the [compute] ``options``."""
        from unittest import mock

        from numamig.conf import CONF
        self.flags(report_interval=10)
        self.flags(group='compute', **options)
        transport = rpc.get_transport(CONF, url='fake://')
        return service.ComputeService(
            'host-a', mock.Mock(), transport,
            service.compute_settings_from_conf(CONF))

    def test_unset_intervals_follow_the_report_interval(self):
        svc = self._service()
        self.assertEqual((10, 10), (svc.reconcile_interval,
                                    svc.update_resources_interval))

    def test_each_interval_set_on_its_own(self):
        svc = self._service(reconcile_interval=30,
                            update_resources_interval=5)
        self.assertEqual((30, 5), (svc.reconcile_interval,
                                   svc.update_resources_interval))


class PeriodicReportTest(ComputeIntervalsTest):

    def test_a_periodic_report_waits_at_most_an_interval(self):
        # A stopping agent waits for the run in progress: with the
        # conductor down, an unbounded report held it for the RPC timeout.
        from unittest import mock
        svc = self._service()
        svc.manager = mock.Mock(name='manager')
        self.patch(svc, '_start_server', lambda: None)
        jobs = {}
        self.patch(service.periodic.PeriodicJobs, 'start',
                   lambda periodic: jobs.update(
                       {job.name: job.func for job in periodic._jobs}))
        svc.start()
        svc.manager.report.reset_mock()
        jobs['report']()
        svc.manager.report.assert_called_once_with(mock.ANY, timeout=10)

    def _jobs(self, **options):
        from unittest import mock
        svc = self._service(**options)
        svc.manager = mock.Mock(name='manager')
        self.patch(svc, '_start_server', lambda: None)
        jobs = {}
        self.patch(service.periodic.PeriodicJobs, 'start',
                   lambda periodic: jobs.update(
                       {job.name: job for job in periodic._jobs}))
        svc.start()
        return svc, jobs

    def test_dirty_rates_are_sampled_in_the_background(self):
        svc, jobs = self._jobs(dirty_rate_sample_interval=120)
        job = jobs["sample the guests' dirty rates"]
        # The first soon after the start, then every interval.
        self.assertEqual((120, 30), (job.interval, job.first))
        job.func()
        svc.manager.sample_dirty_rates_now.assert_called_once_with()

    def test_no_background_dirty_rate_samples_when_off(self):
        _svc, jobs = self._jobs(dirty_rate_sample_interval=0)
        self.assertNotIn("sample the guests' dirty rates", jobs)


class QuietLauncherTest(base.TestCase):
    """oslo.service's no_fork warning is dropped, nothing else of its."""

    class Trivial(os_service.ServiceBase):
        def start(self):
            pass

        def wait(self):
            pass

        def stop(self, graceful=False):
            pass

        def reset(self):
            pass

    def test_only_the_no_fork_notice_is_dropped(self):
        log = self.useFixture(fixtures.FakeLogger(level=std_logging.INFO))
        conf = cfg.ConfigOpts()
        conf([])
        service.run(conf, self.Trivial())
        std_logging.getLogger(library_notices.NO_FORK_LOGGER).warning(
            "another warning of the launcher")
        self.assertNotIn('no_fork', log.output)
        self.assertIn('another warning of the launcher', log.output)


class ConductorSettingsTest(base.TestCase):

    def test_the_database_outage_wait_reaches_the_settings(self):
        from numamig.conf import CONF
        self.flags(group='conductor', database_outage_wait=7)
        settings = service.conductor_settings_from_conf(CONF)
        self.assertEqual(7, settings.database_outage_wait)


class PeerVersionsWiringTest(ComputeIntervalsTest):
    """Each compute client caps messages to a host at what its reported
    service version serves; who knows the reports differs."""

    def test_an_agent_reads_them_from_the_conductor(self):
        from numamig.compute import peers
        svc = self._service()
        self.assertIsInstance(svc.manager.compute_api.peer_versions,
                              peers.PeerVersions)

    def test_the_conductor_reads_its_host_cache(self):
        from numamig.conf import CONF
        from tests.fixtures import database
        from tests.unit.db import base as db_base
        transport = rpc.get_transport(CONF, url='fake://')
        db = self.useFixture(database.SQLiteDatabase()).db
        svc = service.ConductorService(
            db, transport, service.conductor_settings_from_conf(CONF),
            'conductor-a')
        compute_api = svc.manager.compute_api
        report = db_base.make_report(host='old-host')
        report.service_version = 1
        svc.manager.cache.update(report)
        self.assertEqual(('1.0', compute_api.VERSION),
                         (compute_api.cap_for('old-host'),
                          compute_api.cap_for('unknown-host')))


class ConductorPeriodicJobsTest(base.TestCase):
    """The conductor's periodic jobs follow their options."""

    def jobs(self, **flags):
        from numamig import context as nm_context
        from numamig.conf import CONF
        from tests.fixtures import database
        self.flags(group='conductor', **flags)
        transport = rpc.get_transport(CONF, url='fake://')
        db = self.useFixture(database.SQLiteDatabase()).db
        svc = service.ConductorService(
            db, transport, service.conductor_settings_from_conf(CONF),
            'conductor-a')
        return svc._periodic_jobs(nm_context.get_admin_context()).intervals

    def test_reports_are_read_every_interval(self):
        self.assertEqual({'end stalled migrations': 15,
                          'read the reports other workers stored': 3},
                         self.jobs(stalled_migration_interval=15,
                                   report_sync_interval=3))

    def test_zero_reads_them_only_when_a_request_needs_them(self):
        self.assertEqual(['end stalled migrations'],
                         list(self.jobs(report_sync_interval=0)))


class StopRPCServerTest(base.TestCase):
    """A stopping service waits for its RPC servers only until a deadline."""

    class Server:
        def __init__(self, stop=None, wait=None, error=None):
            self.block_stop, self.block_wait = stop, wait
            self.error = error
            self.waited = False

        def stop(self):
            if self.error:
                raise self.error
            if self.block_stop:
                self.block_stop.wait(10)

        def wait(self):
            if self.block_wait:
                self.block_wait.wait(10)
            self.waited = True

    def setUp(self):
        super().setUp()
        self.logs = self.useFixture(fixtures.FakeLogger(
            name='numamig.service'))
        self.release = threading.Event()
        self.addCleanup(self.release.set)

    def stop(self, server, within=0.2):
        began = time.monotonic()
        stopped = service.stop_rpc_server(server, 'topic t',
                                          time.monotonic() + within)
        self.assertLess(time.monotonic() - began, within + 2)
        return stopped

    def test_a_server_that_stops_is_waited_for(self):
        server = self.Server()
        self.assertTrue(self.stop(server, within=5))
        self.assertTrue(server.waited)
        self.assertEqual('', self.logs.output)

    def test_a_listener_that_cannot_stop_is_left(self):
        # oslo.messaging's listener, its broker away, sees the stop only
        # between reconnection attempts.
        self.assertFalse(self.stop(self.Server(stop=self.release)))
        self.assertIn('The RPC server of topic t did not stop taking '
                      'requests within 3 s (is the message broker '
                      'reachable?); stopping without it', self.logs.output)

    def test_requests_in_flight_past_the_deadline_are_left(self):
        self.assertFalse(self.stop(self.Server(wait=self.release)))
        self.assertIn('The RPC server of topic t still runs requests',
                      self.logs.output)

    def test_a_failing_stop_is_one_line(self):
        self.assertFalse(self.stop(self.Server(
            error=RuntimeError('channel closed')), within=5))
        self.assertEqual('The RPC server of topic t failed to stop cleanly '
                         '(RuntimeError: channel closed); stopping without '
                         'it\n', self.logs.output)
