"""The metrics endpoint: served, guarded collectors, clear refusals."""

import socket
import urllib.request

import fixtures
from oslo_config import cfg
from prometheus_client import core
from prometheus_client import parser

from numamig import exception
from numamig import metrics
from numamig.conf import metrics as metrics_conf
from tests import base


class Fixed(metrics.Collector):
    name = 'fixed'

    def __init__(self, value=1.0):
        self.value = value
        self.fail = None

    def families(self):
        if self.fail:
            raise self.fail
        yield core.GaugeMetricFamily('numamig_test_value', 'A value.',
                                     value=self.value)


def scrape(endpoint):
    with urllib.request.urlopen(
            f'http://127.0.0.1:{endpoint.port}/metrics', timeout=10) as r:
        text = r.read().decode()
    return {s.name + str(sorted(s.labels.items())): s.value
            for f in parser.text_string_to_metric_families(text)
            for s in f.samples}


class EndpointTest(base.TestCase):

    def endpoint(self, *collectors):
        found = metrics.Endpoint('127.0.0.1', 0, collectors, 'host-a')
        found.start()
        self.addCleanup(found.stop)
        return found

    def test_serves_what_its_collectors_build_at_each_scrape(self):
        fixed = Fixed(3.0)
        endpoint = self.endpoint(fixed)
        self.assertEqual(3.0, scrape(endpoint)['numamig_test_value[]'])
        fixed.value = 4.0
        samples = scrape(endpoint)
        self.assertEqual(4.0, samples['numamig_test_value[]'])
        self.assertEqual(1.0, samples[
            "numamig_metrics_collector_up[('collector', 'fixed')]"])

    def test_a_failing_collector_is_left_out_and_logged_once(self):
        logs = self.useFixture(fixtures.FakeLogger(name='numamig.metrics'))
        fixed = Fixed()
        fixed.fail = ConnectionError('database away')
        endpoint = self.endpoint(fixed)
        for _ in range(3):
            samples = scrape(endpoint)
            self.assertNotIn('numamig_test_value[]', samples)
            self.assertEqual(0.0, samples[
                "numamig_metrics_collector_up[('collector', 'fixed')]"])
        self.assertEqual(1, logs.output.count('metrics collector fixed '
                                              'failed (ConnectionError: '
                                              'database away)'))
        self.assertNotIn('Traceback', logs.output)
        fixed.fail = None
        self.assertEqual(1.0, scrape(endpoint)['numamig_test_value[]'])
        self.assertIn('metrics collector fixed answers again', logs.output)

    def test_a_taken_port_is_one_clear_refusal(self):
        taken = socket.socket()
        self.addCleanup(taken.close)
        taken.bind(('127.0.0.1', 0))
        taken.listen()
        endpoint = metrics.Endpoint('127.0.0.1', taken.getsockname()[1],
                                    [], 'host-a')
        error = self.assertRaises(exception.InvalidConfiguration,
                                  endpoint.start)
        self.assertEqual(
            f"Invalid configuration option [metrics] port: cannot listen "
            f"on 127.0.0.1:{taken.getsockname()[1]} for the metrics "
            f"endpoint: Address already in use", str(error))

    def test_workers_share_the_port(self):
        # A conductor's workers each listen on it (SO_REUSEPORT).
        first = self.endpoint(Fixed(1.0))
        second = metrics.Endpoint('127.0.0.1', first.port, [Fixed(1.0)],
                                  'host-a')
        second.start()
        self.addCleanup(second.stop)
        self.assertEqual(1.0, scrape(second)['numamig_test_value[]'])

    def test_off_by_default(self):
        conf = cfg.ConfigOpts()
        metrics_conf.register_opts(conf)
        conf([])
        self.assertIsNone(metrics.Endpoint.from_conf(conf, [], 'h'))
        metrics.check_can_listen(conf)

    def test_check_can_listen_refuses_before_workers_fork(self):
        taken = socket.socket()
        self.addCleanup(taken.close)
        taken.bind(('127.0.0.1', 0))
        taken.listen()
        conf = cfg.ConfigOpts()
        metrics_conf.register_opts(conf)
        conf([])
        conf.set_override('port', taken.getsockname()[1], group='metrics')
        self.assertRaises(exception.InvalidConfiguration,
                          metrics.check_can_listen, conf)


class CallTimesTest(base.TestCase):

    def test_buckets_against_counting(self):
        import random
        rng = random.Random(7)
        times = metrics.CallTimes((0.01, 0.1, 1))
        seen = {}
        for _ in range(500):
            method = rng.choice(['report_compute_node', 'migration_get'])
            outcome = rng.choice(['answered', 'timeout'])
            seconds = rng.choice([0.005, 0.01, 0.05, 0.5, 3.0])
            times.observe(method, outcome, seconds)
            seen.setdefault((method, outcome), []).append(seconds)
        family = times.family('numamig_test_seconds', 'Test.')
        samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
                   for s in family.samples}
        for (method, outcome), values in seen.items():
            labels = {'method': method, 'outcome': outcome}
            for bound in ('0.01', '0.1', '1.0'):
                key = tuple(sorted(dict(labels, le=bound).items()))
                self.assertEqual(
                    sum(v <= float(bound) for v in values),
                    samples[('numamig_test_seconds_bucket', key)])
            key = tuple(sorted(labels.items()))
            self.assertEqual(len(values),
                             samples[('numamig_test_seconds_count', key)])
            self.assertAlmostEqual(sum(values), samples[
                ('numamig_test_seconds_sum', key)])


class SharedCallTimesTest(base.TestCase):
    """A conductor's workers add up their call histories through files."""

    BOUNDS = (0.01, 0.1, 1)

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).join('calls')
        metrics.SharedCallTimes.clear(self.dir)

    def worker(self, name):
        return metrics.SharedCallTimes(
            self.dir, metrics.CallTimes(self.BOUNDS), worker=name)

    def test_any_worker_answers_the_sum_of_all(self):
        import random
        rng = random.Random(11)
        workers = [self.worker(n) for n in (101, 102, 103)]
        alone = metrics.CallTimes(self.BOUNDS)
        for _ in range(300):
            worker = rng.choice(workers)
            call = (rng.choice(['check_can_live_migrate_source',
                                'live_migration']),
                    rng.choice(['answered', 'timeout']),
                    rng.choice([0.005, 0.05, 0.5, 5.0]))
            worker.times.observe(*call)
            alone.observe(*call)
        for worker in workers:
            worker.flush()
        expected = alone.snapshot()
        for worker in workers:
            found = worker.series()
            self.assertEqual(set(expected), set(found))
            for key, values in expected.items():
                self.assertEqual(values[:-1], found[key][:-1])
                self.assertAlmostEqual(values[-1], found[key][-1])

    def test_a_dead_workers_calls_still_count_until_the_daemon_restarts(self):
        dead, alive = self.worker(201), self.worker(202)
        dead.times.observe('live_migration', 'answered', 0.05)
        dead.flush()
        alive.times.observe('live_migration', 'answered', 0.5)
        self.assertEqual(2, alive.series()[('live_migration',
                                            'answered')][-2])
        metrics.SharedCallTimes.clear(self.dir)
        self.assertEqual(1, alive.series()[('live_migration',
                                            'answered')][-2])

    def test_unreadable_or_foreign_files_are_skipped(self):
        import json
        import os
        mine = self.worker(301)
        with open(os.path.join(self.dir, '302' + mine.SUFFIX), 'w') as f:
            f.write('{half a file')
        with open(os.path.join(self.dir, '303' + mine.SUFFIX), 'w') as f:
            json.dump({'bounds_s': [1, 2], 'series': [
                ['live_migration', 'answered', [1, 1, 1, 1.5]]]}, f)
        mine.times.observe('live_migration', 'answered', 0.05)
        self.assertEqual({('live_migration', 'answered'): [0, 1, 1, 1, 0.05]},
                         mine.series())

    def test_an_unwritable_directory_is_one_clear_refusal(self):
        import os
        blocker = os.path.join(self.dir, 'file')
        open(blocker, 'w').close()
        error = self.assertRaises(exception.InvalidConfiguration,
                                  metrics.SharedCallTimes.clear,
                                  os.path.join(blocker, 'sub'))
        self.assertIn('[DEFAULT] state_path', str(error))
        self.assertIn('Not a directory', str(error))


class RPCCallsRecordedTest(base.TestCase):

    def test_a_call_and_a_timeout_are_recorded(self):
        from unittest import mock

        import oslo_messaging as messaging

        from numamig import rpc
        self.patch(metrics, 'RPC_CALLS', metrics.CallTimes((1,)))
        # No call monitor: one try each (rpc.SilenceTest has the resends).
        context = mock.Mock(timeout=30)
        context.conf.rpc_call_silence_timeout = 0
        call = rpc._PreparedCall(context)
        call.call({}, 'ping')
        context.call.side_effect = messaging.MessagingTimeout('late')
        self.assertRaises(messaging.MessagingTimeout, call.call, {},
                          'report_compute_node')
        family = metrics.RPC_CALLS.family('numamig_x_seconds', 'X.')
        counts = {tuple(sorted(s.labels.items())): s.value
                  for s in family.samples
                  if s.name == 'numamig_x_seconds_count'}
        self.assertEqual(
            {(('method', 'ping'), ('outcome', 'answered')): 1.0,
             (('method', 'report_compute_node'),
              ('outcome', 'timeout')): 1.0}, counts)
