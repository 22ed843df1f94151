"""Where a migration's threads ran (release 2) on PostgreSQL,
MariaDB and SQLite: each host's side merged into the row, repeats
changing nothing, a report after completion still kept, anything out of
shape or bounds refused with nothing written."""

import threading

from numamig import exception
from numamig.db import migration_satellites
from numamig.db import migration_threads
from numamig.db import migrations
from tests.functional.db import base
from tests.unit.db import base as unit_base
from tests.unit.objects import samples


class ThreadsColumnTestCase(base.RunningMigrationTestCase):

    def _stored(self):
        return migration_satellites.get(self.db, self.uuid,
                                        ['threads'])['threads'].sides

    def test_each_side_merged_and_repeats_change_nothing(self):
        self.assertEqual({}, self._stored())
        record = migration_threads.record_threads
        self.assertTrue(record(self.db, self.uuid, 'source',
                               samples.THREADS['source']))
        self.assertFalse(record(self.db, self.uuid, 'source',
                                samples.THREADS['source']))
        migrations.set_status(self.db, self.uuid, 'completed')
        # The destination's report may come after the completion.
        self.assertTrue(record(self.db, self.uuid, 'dest',
                               samples.THREADS['dest']))
        self.assertEqual(samples.THREADS, self._stored())

    def test_both_sides_at_once_both_kept(self):
        errors = []

        def report(side):
            try:
                migration_threads.record_threads(
                    self.db, self.uuid, side, samples.THREADS[side])
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(exc)
        workers = [threading.Thread(target=report, args=(side,))
                   for side in ('source', 'dest')]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(30)
        self.assertEqual([], errors)
        self.assertEqual(samples.THREADS, self._stored())

    def test_out_of_shape_changes_nothing(self):
        source = samples.THREADS['source']
        for side, bad in (
                ('elsewhere', source),
                ('source', dict(source, cpus=list(range(1025)))),
                ('source', dict(source, threads={
                    f't{i}': [1] for i in range(65)})),
                ('source', 'x')):
            self.assertRaises(exception.InvalidMigrationResult,
                              migration_threads.record_threads, self.db,
                              self.uuid, side, bad)
        self.assertEqual({}, self._stored())

    def test_unknown_migration(self):
        self.assertRaises(exception.MigrationNotFound,
                          migration_threads.record_threads, self.db,
                          unit_base.new_uuid(), 'source',
                          samples.THREADS['source'])
