"""A migration's post-copy recovery history (MigrationRecovery, release 2) on
PostgreSQL, MariaDB and SQLite: recorded while the source recovers
(repeats and overtaken reports change nothing), then with the result."""

from numamig import exception
from numamig.db import migration_satellites
from numamig.db import migrations
from tests.functional.db import base

LOST = {'event': 'link-lost', 'at': '2026-11-27T10:00:00.000+00:00',
        'attempt': None, 'detail': 'job failed in post-copy phase'}
FAILED = {'event': 'resume-failed', 'at': '2026-11-27T10:00:01.000+00:00',
          'attempt': 1, 'detail': 'Connection refused ' + 'x' * 250}
RESUMED = {'event': 'resumed', 'at': '2026-11-27T10:00:03.000+00:00',
           'attempt': 2, 'detail': None}
record = migration_satellites.record_recovery


class RecoveryColumnTestCase(base.RunningMigrationTestCase):

    def _history(self):
        # MigrationRecovery, a satellite record in the row.
        return migration_satellites.get(
            self.db, self.uuid, ['recovery'])['recovery'].events

    def test_recorded_as_it_grows_repeats_and_late_reports_ignored(self):
        self.assertIsNone(self._history())
        self.assertTrue(record(self.db, self.uuid, [LOST, FAILED]))
        self.assertFalse(record(self.db, self.uuid, [LOST, FAILED]))
        self.assertFalse(record(self.db, self.uuid, [LOST]))
        stored = self._history()
        self.assertEqual(['link-lost', 'resume-failed'],
                         [e['event'] for e in stored])
        # The object holds strings: the attempt number reads back as one.
        self.assertEqual('1', stored[1]['attempt'])
        self.assertEqual(FAILED['detail'], stored[1]['detail'])

    def test_result_carries_the_final_history_and_ends_recording(self):
        record(self.db, self.uuid, [LOST])
        migrations.set_status(self.db, self.uuid, 'completed', result={
            'post_copy': True, 'postcopy_recovery': [LOST, FAILED,
                                                     RESUMED]})
        self.assertEqual('resumed', self._history()[-1]['event'])
        self.assertFalse(record(self.db, self.uuid,
                                [LOST, FAILED, RESUMED, LOST]))
        self.assertEqual(3, len(self._history()))

    def test_unusable_history_changes_nothing(self):
        for bad in ('x', [LOST] * 41, [{'event': 'x' * 301}], [[1]]):
            self.assertRaises(exception.InvalidMigrationResult,
                              record, self.db, self.uuid, bad)
            self.assertRaises(exception.InvalidMigrationResult,
                              migrations.set_status, self.db, self.uuid,
                              'completed',
                              result={'postcopy_recovery': bad})
        stored = migrations.get(self.db, self.uuid)
        self.assertEqual(('running', None),
                         (stored.status, self._history()))
