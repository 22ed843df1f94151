"""A migration's convergence columns (release 2) on PostgreSQL,
MariaDB and SQLite: the policy, its actions (MigrationConvergence), the
prediction (MigrationPrediction): satellite records in the row."""

from numamig import exception
from numamig.db import instances
from numamig.db import migration_satellites
from numamig.db import migrations
from tests.functional.db import base
from tests.unit.db import base as unit_base

ACTIONS = ['allow 50 ms of downtime (the job starts)',
           'post-copy (pass 3: ' + 'x' * 250 + ')']


class ConvergenceColumnsTestCase(base.ServerDBTestCase):

    def setUp(self):
        super().setUp()
        instance = unit_base.make_instance()
        instances.create(self.db, instance)
        self.migration = migrations.create(self.db, unit_base.make_migration(
            instance.uuid), policy='nfv')

    def converged(self):
        return migration_satellites.get(
            self.db, self.migration.uuid, ['convergence'])['convergence']

    def test_policy_prediction_and_actions_round_trip(self):
        uuid = self.migration.uuid
        self.assertEqual('nfv', self.converged().policy)
        migration_satellites.set_prediction(self.db, uuid, {
            'prediction': 'needs-post-copy', 'predicted_elapsed_ms': None,
            'predicted_downtime_ms': None,
            'sampled_dirty_rate': 150 * 2 ** 20, 'reason': 'ignored'})
        self.assertEqual('never_pause', migration_satellites.set_policy(
            self.db, uuid, 'never_pause').policy)
        for status in ('queued', 'running'):
            migrations.set_status(self.db, uuid, status)
        migrations.set_status(self.db, uuid, 'completed', result={
            'emulated': False, 'elapsed_ms': 10032, 'downtime_ms': 6,
            'post_copy': True, 'paused': False,
            'convergence_policy': 'never_pause',
            'convergence_actions': ACTIONS})
        stored = migrations.get(self.db, uuid)
        # The prediction is a satellite record (MigrationPrediction), in
        # the same row.
        predicted = migration_satellites.get(
            self.db, uuid, ['prediction'])['prediction']
        self.assertEqual(('needs-post-copy', None, 150 * 2 ** 20,
                          'never_pause', ACTIONS, True),
                         (predicted.prediction,
                          predicted.predicted_elapsed_ms,
                          predicted.sampled_dirty_rate,
                          self.converged().policy,
                          self.converged().actions, stored.post_copy))

    def test_unusable_values_change_nothing(self):
        uuid = self.migration.uuid
        self.assertRaises(exception.Invalid,
                          migration_satellites.set_prediction,
                          self.db, uuid, {'prediction': 'x' * 33})
        self.assertRaises(exception.Invalid,
                          migration_satellites.set_prediction,
                          self.db, uuid, {'sampled_dirty_rate': -1})
        self.assertRaises(exception.InvalidMigrationResult,
                          migrations.set_status, self.db, uuid, 'queued',
                          result={'convergence_actions': ['a' * 301]})
        stored = migrations.get(self.db, uuid)
        predicted = migration_satellites.get(
            self.db, uuid, ['prediction'])['prediction']
        self.assertEqual(('accepted', None, None),
                         (stored.status, predicted.prediction,
                          self.converged().actions))
