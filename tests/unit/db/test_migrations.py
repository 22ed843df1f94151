"""Migration records: creation, enforced status transitions, progress."""

import itertools

import testscenarios

from numamig import exception
from numamig.db import instances
from numamig.db import migrations
from numamig.objects import fields as nm_fields
from numamig.objects import migration as migration_obj
from tests.unit.db import base

STATUS = nm_fields.MigrationStatus


class _MigrationTestCase(base.DBTestCase):

    def setUp(self):
        super().setUp()
        self.instance_uuid = instances.create(
            self.db, base.make_instance()).instance.uuid

    def _create(self, **overrides):
        return migrations.create(
            self.db, base.make_migration(self.instance_uuid, **overrides))


class CreateGetTestCase(_MigrationTestCase):

    def test_round_trip_with_first_history_entry(self):
        migration = self._create(requested_host='dst',
                                 refused_hosts={'x': 'full'})
        self.assertEqual(STATUS.ACCEPTED, migration.status)
        self.assertEqual('dst', migration.requested_host)
        self.assertEqual({'x': 'full'}, migration.refused_hosts)
        self.assertEqual([STATUS.ACCEPTED],
                         [h.status for h in migration.history])
        self.assertIsNotNone(migration.created_at.tzinfo)
        self.assertEqual(migration, migrations.get(self.db, migration.uuid))

    def test_queued_round_trip_with_its_position(self):
        # create() answers with what it wrote, not a read-back: it must
        # equal what a read finds, whatever the columns' types do.
        first = migrations.create(
            self.db, base.make_migration(self.instance_uuid, priority=5),
            max_queued=10)
        other = instances.create(self.db, base.make_instance()).instance
        second = migrations.create(
            self.db, base.make_migration(other.uuid, priority=7,
                                         refused_hosts={'x': 'full'}),
            max_queued=10)
        self.assertEqual((1, 1), (first.queue_position,
                                  second.queue_position))
        for created in (first, second):
            stored = migrations.get(self.db, created.uuid)
            stored.queue_position = created.queue_position
            self.assertEqual(stored, created)

    def test_unknown_instance(self):
        migration = base.make_migration(base.new_uuid())
        self.assertRaisesMessage(exception.InstanceNotFound,
                                 migration.instance_uuid, migrations.create,
                                 self.db, migration)

    def test_duplicate_uuid(self):
        migration = self._create()
        self.assertRaises(exception.RecordExists, self._create,
                          uuid=migration.uuid)

    def test_invalid_migration_is_not_stored(self):
        self.assertRaises(exception.ObjectValidationError, self._create,
                          dest_host='src')
        self.assertEqual([], migrations.get_all(self.db))

    def test_in_progress_by_host_as_source_or_destination(self):
        outgoing = self._create(source_host='a', dest_host='b')
        incoming = self._create(source_host='c', dest_host='a')
        done = self._create(source_host='a', dest_host='b',
                            status=STATUS.COMPLETED)
        self._create(source_host='c', dest_host='d')
        found = migrations.get_in_progress_by_host(self.db, 'a')
        self.assertEqual([outgoing.uuid, incoming.uuid],
                         [m.uuid for m in found])
        self.assertNotIn(done.uuid, [m.uuid for m in found])

    def test_get_all_filters(self):
        queued = self._create(status=STATUS.QUEUED)
        self._create()
        self.assertEqual([queued], migrations.get_all(
            self.db, status=STATUS.QUEUED))
        self.assertEqual(2, len(migrations.get_all(
            self.db, instance_uuid=self.instance_uuid)))


class TransitionTestCase(_MigrationTestCase):
    """Every (current, requested) pair: allowed ones apply, others fail."""

    scenarios = [
        (f'{old}_to_{new}', {'old': old, 'new': new})
        for old, new in itertools.product(STATUS.ALL, STATUS.ALL)]

    def test_transition(self):
        migration = self._create(status=self.old)
        if migration_obj.can_transition(self.old, self.new):
            changed = migrations.set_status(self.db, migration.uuid,
                                            self.new, detail='why')
            self.assertEqual(self.new, changed.status)
            history = migrations.get(self.db, migration.uuid).history
            self.assertEqual((self.new, 'why'),
                             (history[-1].status, history[-1].detail))
        else:
            exc = self.assertRaises(exception.InvalidStatusTransition,
                                    migrations.set_status, self.db,
                                    migration.uuid, self.new)
            self.assertIn(f'from status {self.old} to {self.new}',
                          str(exc))
            self.assertEqual(migration,
                             migrations.get(self.db, migration.uuid))


class SetStatusTestCase(_MigrationTestCase):

    def test_expected_status_narrows_the_allowed_ones(self):
        migration = self._create(status=STATUS.PREPARING)
        exc = self.assertRaises(
            exception.InvalidStatusTransition, migrations.set_status,
            self.db, migration.uuid, STATUS.CANCELLED,
            expected=[STATUS.QUEUED])
        self.assertIn('required it to be in queued', str(exc))
        self.assertEqual(STATUS.PREPARING,
                         migrations.get(self.db, migration.uuid).status)

    def test_error_text_is_recorded(self):
        migration = self._create()
        changed = migrations.set_status(self.db, migration.uuid,
                                        STATUS.ERROR, error='no host fits')
        self.assertEqual('no host fits', changed.error)

    def test_unknown_status(self):
        migration = self._create()
        self.assertRaisesMessage(exception.Invalid, "'paused'",
                                 migrations.set_status, self.db,
                                 migration.uuid, 'paused')

    def test_unknown_migration(self):
        self.assertRaises(exception.MigrationNotFound, migrations.set_status,
                          self.db, base.new_uuid(), STATUS.QUEUED)

    def test_history_keeps_order(self):
        migration = self._create()
        for status in (STATUS.QUEUED, STATUS.PREPARING, STATUS.RUNNING):
            migrations.set_status(self.db, migration.uuid, status)
        self.assertEqual(
            [STATUS.ACCEPTED, STATUS.QUEUED, STATUS.PREPARING,
             STATUS.RUNNING], [h.status for h in migrations.get(
                 self.db, migration.uuid).history])

    def test_history_only_where_operators_look(self):
        # A flow's own reads and the answer to a status change skip the
        # history query; get() and get_all() show it.
        migration = self._create()
        changed = migrations.set_status(self.db, migration.uuid,
                                        STATUS.QUEUED)
        brief = migrations.get(self.db, migration.uuid, with_history=False)
        self.assertFalse(changed.obj_attr_is_set('history'))
        self.assertFalse(brief.obj_attr_is_set('history'))
        self.assertEqual(2, len(migrations.get(self.db,
                                               migration.uuid).history))
        self.assertEqual(2, len(migrations.get_all(self.db)[0].history))
        self.assertEqual(changed, brief)


class ResultTestCase(_MigrationTestCase):
    """The run's result, recorded with the status change reporting it."""

    RESULT = {'elapsed_ms': 412, 'downtime_ms': 18, 'emulated': False,
              'post_copy': False, 'paused': True, 'memory_total': 1 << 30,
              'memory_processed': 1 << 30, 'memory_remaining': 0}

    def test_result_recorded_with_the_status(self):
        migration = self._create(status=STATUS.RUNNING)
        changed = migrations.set_status(self.db, migration.uuid,
                                        STATUS.POST_MIGRATING,
                                        result=self.RESULT)
        stored = migrations.get(self.db, migration.uuid, with_history=False)
        self.assertEqual(changed, stored)
        self.assertEqual(self.RESULT,
                         {name: getattr(stored, name) for name in self.RESULT})
        self.assertTrue(stored.has_result)

    def test_no_result_reads_back_as_none(self):
        migration = self._create()
        stored = migrations.set_status(self.db, migration.uuid,
                                       STATUS.QUEUED)
        self.assertFalse(stored.has_result)
        self.assertIsNone(stored.emulated)

    def test_created_with_a_result(self):
        migration = self._create(status=STATUS.COMPLETED, elapsed_ms=3,
                                 emulated=True)
        stored = migrations.get(self.db, migration.uuid)
        self.assertEqual((3, True, None),
                         (stored.elapsed_ms, stored.emulated,
                          stored.downtime_ms))

    def test_unknowns_in_a_result_are_none(self):
        migration = self._create(status=STATUS.RUNNING)
        stored = migrations.set_status(
            self.db, migration.uuid, STATUS.FAILED,
            result={'elapsed_ms': 5, 'downtime_ms': None, 'paused': None})
        self.assertEqual((5, None, None),
                         (stored.elapsed_ms, stored.downtime_ms,
                          stored.paused))

    def test_bad_result_changes_nothing(self):
        migration = self._create(status=STATUS.RUNNING)
        for bad in ({'elapsed_ms': -1}, {'emulated': 'yes'},
                    {'downtime_ms': 1.5}, {'memory_total': None},
                    {'elapsed_ms': True}, {'speed': 3}):
            exc = self.assertRaises(exception.InvalidMigrationResult,
                                    migrations.set_status, self.db,
                                    migration.uuid, STATUS.POST_MIGRATING,
                                    result=bad)
            self.assertIn(f'not recorded: {list(bad)[0]} unusable',
                          str(exc))
        self.assertEqual(migration, migrations.get(self.db, migration.uuid))


class InProgressUpdateTestCase(_MigrationTestCase):

    def test_progress_recorded_while_in_progress(self):
        migration = self._create(status=STATUS.RUNNING)
        self.assertTrue(migrations.update_progress(
            self.db, migration.uuid, memory_total=100, memory_remaining=40))
        stored = migrations.get(self.db, migration.uuid)
        self.assertEqual((100, 40), (stored.memory_total,
                                     stored.memory_remaining))

    def test_late_progress_is_ignored(self):
        migration = self._create(status=STATUS.COMPLETED)
        self.assertFalse(migrations.update_progress(
            self.db, migration.uuid, memory_total=100))
        self.assertEqual(0, migrations.get(self.db,
                                           migration.uuid).memory_total)

    def test_an_older_sample_is_ignored(self):
        # Samples are casts: a redelivered one can come after a later one.
        migration = self._create(status=STATUS.RUNNING)
        migrations.update_progress(self.db, migration.uuid,
                                   memory_processed=70)
        self.assertFalse(migrations.update_progress(
            self.db, migration.uuid, memory_processed=40))
        self.assertTrue(migrations.update_progress(
            self.db, migration.uuid, memory_processed=70))
        self.assertEqual(70, migrations.get(self.db,
                                            migration.uuid).memory_processed)

    def test_bad_progress_is_refused(self):
        migration = self._create()
        self.assertRaises(exception.Invalid, migrations.update_progress,
                          self.db, migration.uuid, memory_total=-1)
        self.assertRaises(exception.Invalid, migrations.update_progress,
                          self.db, migration.uuid, cpu=1)

    def test_refused_hosts_keep_order(self):
        migration = self._create()
        for host in ('h2', 'h1', 'h3'):
            migration = migrations.add_refused_host(
                self.db, migration.uuid, host, f'{host} is full')
        self.assertEqual(['h2', 'h1', 'h3'], list(migration.refused_hosts))
        self.assertEqual('h1 is full', migration.refused_hosts['h1'])

    def test_dest_host(self):
        migration = self._create()
        self.assertEqual('dst', migrations.set_dest_host(
            self.db, migration.uuid, 'dst').dest_host)
        self.assertRaisesMessage(exception.Invalid, 'source host',
                                 migrations.set_dest_host, self.db,
                                 migration.uuid, 'src')

    def test_final_migration_refuses_updates(self):
        migration = self._create(status=STATUS.FAILED)
        self.assertRaisesMessage(
            exception.MigrationNotInProgress, 'is failed',
            migrations.add_refused_host, self.db, migration.uuid, 'h',
            'full')
        self.assertEqual({}, migrations.get(self.db,
                                            migration.uuid).refused_hosts)


def load_tests(loader, standard_tests, pattern):
    return testscenarios.load_tests_apply_scenarios(loader, standard_tests,
                                                    pattern)
