"""How migration show and the dry run word convergence."""

from numamig import objects
from numamig.cmd.manage_commands import convergence_view as cv
from tests import base
from tests.unit.objects import samples


class ViewTestCase(base.TestCase):

    def test_completed_post_copy_next_to_its_prediction(self):
        migration = samples.migration()
        migration.status = 'completed'
        migration.post_copy, migration.paused = True, False
        prediction = samples.migration_prediction()
        prediction.prediction = 'needs-post-copy'
        prediction.predicted_elapsed_ms = None
        data = cv.view(migration, prediction,
                       samples.migration_convergence())
        self.assertEqual('post-copy', data['outcome'])
        self.assertEqual(
            ['convergence policy: nfv',
             '  allow 50 ms of downtime (the job starts)',
             'prediction: needs-post-copy (downtime 40 ms, dirty rate 1.0 '
             'MiB/s); outcome: post-copy'], cv.lines(data))

    def test_running_has_no_outcome_and_nothing_recorded_prints_nothing(self):
        migration = samples.migration()
        self.assertIsNone(cv.outcome(migration))
        # Nothing read, or nothing recorded.
        self.assertEqual([], cv.lines(cv.view(migration)))
        self.assertEqual([], cv.lines(cv.view(
            migration, convergence=objects.MigrationConvergence(
                migration_uuid=migration.uuid))))
        # A mapping of its fields (numamig.db.direct's record).
        self.assertEqual(['convergence policy: nfv'], cv.lines(cv.view(
            migration, convergence={'policy': 'nfv', 'actions': None})))

    def test_failed_outcome_is_the_status(self):
        migration = samples.migration()
        migration.status = 'failed'
        self.assertEqual('failed', cv.outcome(migration))

    def test_dry_run_lines(self):
        self.assertEqual([], cv.prediction_lines(None))
        self.assertEqual(
            ['convergence: unknown under policy timer',
             '  the source is older than compute API 1.6'],
            cv.prediction_lines({'prediction': 'unknown', 'policy': 'timer',
                                 'reason': 'the source is older than '
                                           'compute API 1.6',
                                 'sampled': False}))
        self.assertEqual(
            ['convergence: converges under policy nfv (in 1.3 s, downtime '
             '0 ms, dirty rate 0.0 MiB/s)',
             '  2 passes', '  dirty rate measured by page-sampling'],
            cv.prediction_lines({
                'prediction': 'converges', 'policy': 'nfv',
                'reason': '2 passes', 'predicted_elapsed_ms': 1280,
                'predicted_downtime_ms': 0, 'sampled_dirty_rate': 0,
                'dirty_rate_method': 'page-sampling'}))


class RecoveryViewTestCase(base.TestCase):

    def test_history_lines_and_json(self):
        data = cv.recovery_view(samples.migration_recovery().events)
        self.assertEqual(
            [{'event': 'link-lost', 'at': '2026-11-03T12:00:01.000+00:00',
              'attempt': None, 'detail': 'stream broke'},
             {'event': 'resumed', 'at': '2026-11-03T12:00:04.000+00:00',
              'attempt': 2, 'detail': None}], data)
        self.assertEqual(
            ['post-copy recovery: link lost 1 time, resumed',
             '  2026-11-03T12:00:01.000+00:00  link-lost: stream broke',
             '  2026-11-03T12:00:04.000+00:00  resumed 2'],
            cv.recovery_lines(data))

    def test_no_history_shows_nothing(self):
        self.assertIsNone(cv.recovery_view(None))
        self.assertIsNone(cv.recovery_view([]))
        self.assertEqual([], cv.recovery_lines(None))
