"""The run's result a source reports: checked, worded, recorded."""

import testscenarios

from numamig import exception
from numamig.conductor import results
from numamig.db import migrations
from tests import base as test_base
from tests.unit.compute import base as cbase
from tests.unit.conductor import base

load_tests = testscenarios.load_tests_apply_scenarios

NATIVE = {'emulated': False, 'elapsed_ms': 412, 'downtime_ms': 18,
          'memory_total': 100, 'memory_processed': 120, 'post_copy': True,
          'paused': False}
EMULATED = {'emulated': True, 'elapsed_ms': 3, 'downtime_ms': None,
            'memory_total': None, 'memory_processed': None,
            'post_copy': None, 'paused': None}


class DescribeTest(test_base.TestCase):

    scenarios = [
        ('native-post-copy', {
            'result': NATIVE,
            'line': 'native run of 412 ms, downtime 18 ms, converged by '
                    'post-copy'}),
        ('native-paused', {
            'result': dict(NATIVE, post_copy=False, paused=True,
                           downtime_ms=None),
            'line': 'native run of 412 ms, converged by pausing the '
                    'guest'}),
        ('emulated', {
            'result': EMULATED,
            'line': 'emulated run of 3 ms, numamig defined the guest on '
                    'the destination itself (the hypervisor cannot '
                    'migrate)'}),
        ('unknown-length', {
            'result': {'emulated': False},
            'line': 'native run of unknown length'}),
    ]

    def test_line(self):
        self.assertEqual(self.line, results.describe(self.result))


class DescribeByStatusTest(test_base.TestCase):
    """An emulated run is worded by how it ended: one stopped before the
    destination defined the guest carried nothing over."""

    scenarios = [
        (status, {'status': status, 'carried': status in (
            'post-migrating', 'completed')})
        for status in ('post-migrating', 'completed', 'failed',
                       'cancelled')]

    def test_emulated_line(self):
        line = results.describe(EMULATED, self.status)
        self.assertEqual(self.carried, 'numamig defined the guest on the '
                         'destination itself' in line, line)
        self.assertEqual(not self.carried, 'the guest stayed on its source'
                         in line, line)


class RecordValuesTest(test_base.TestCase):

    def test_completed_run_leaves_nothing_remaining(self):
        values = results.record_values('m', NATIVE, 'post-migrating')
        self.assertEqual(
            {'emulated': False, 'elapsed_ms': 412, 'downtime_ms': 18,
             'post_copy': True, 'paused': False, 'memory_total': 100,
             'memory_processed': 120, 'memory_remaining': 0}, values)

    def test_partial_run_keeps_remaining_and_unknowns(self):
        values = results.record_values(
            'm', {'emulated': False, 'elapsed_ms': 50}, 'failed')
        self.assertEqual(
            {'emulated': False, 'elapsed_ms': 50, 'downtime_ms': None,
             'post_copy': None, 'paused': None}, values)

    def test_unknown_field_named(self):
        self.assertRaisesMessage(
            exception.InvalidMigrationResult,
            'Result of migration m not recorded: unknown fields speed',
            results.record_values, 'm', dict(NATIVE, speed=3), 'failed')

    def test_not_a_dict(self):
        self.assertRaisesMessage(
            exception.InvalidMigrationResult, "got [1]",
            results.record_values, 'm', [1], 'failed')


class RecordedThroughTheConductorTest(base.ConductorTestCase):

    def setUp(self):
        super().setUp()
        inst = self.create_instance()
        self.migration = migrations.create(self.db, cbase.migration(
            inst, dest_host='dst1', status='running'))

    def test_emulated_result_labelled_in_record_and_history(self):
        recorded = self.call('migration_set_status', self.migration.uuid,
                             'post-migrating', result=EMULATED)
        self.assertEqual((True, 3, None, 0),
                         (recorded.emulated, recorded.elapsed_ms,
                          recorded.downtime_ms, recorded.memory_remaining))
        self.assertIn('emulated run of 3 ms', migrations.get(
            self.db, recorded.uuid).history[-1].detail)
        self.assertEqual(recorded,
                         migrations.get(self.db, self.migration.uuid,
                                        with_history=False))

    def test_failed_run_result_with_the_error(self):
        recorded = self.call('migration_set_status', self.migration.uuid,
                             'failed', error='link down',
                             result={'emulated': False, 'elapsed_ms': 50,
                                     'memory_total': 100,
                                     'memory_processed': 40})
        self.assertEqual(('failed', 'link down', 50, 40),
                         (recorded.status, recorded.error,
                          recorded.elapsed_ms, recorded.memory_processed))

    def test_bad_result_changes_nothing(self):
        self.assertRaises(exception.InvalidMigrationResult, self.call,
                          'migration_set_status', self.migration.uuid,
                          'post-migrating',
                          result=dict(NATIVE, downtime_ms=-4))
        self.assertEqual(self.migration,
                         migrations.get(self.db, self.migration.uuid))

    def test_status_without_result_records_none(self):
        recorded = self.call('migration_set_status', self.migration.uuid,
                             'post-migrating')
        self.assertFalse(recorded.has_result)
