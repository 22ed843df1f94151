"""Instance records: round trips, revisions and conditional claims."""

import sqlalchemy as sa

from numamig import exception
from numamig.db import instances
from numamig.db import migrations
from numamig.db import models
from tests.unit.db import base


class CreateGetTestCase(base.DBTestCase):

    def test_round_trip_keeps_every_field(self):
        instance = base.make_instance(task_state='spawning')
        record = instances.create(self.db, instance)
        self.assertEqual(1, record.revision)
        self.assertEqual(instance, record.instance)
        self.assertEqual({0: 2, 1: 3},
                         record.instance.numa_topology.cpu_pinning)
        self.assertEqual(record, instances.get(self.db, instance.uuid))

    def test_loaded_instance_has_no_pending_changes(self):
        record = instances.create(self.db, base.make_instance())
        self.assertEqual(set(), record.instance.obj_what_changed())

    def test_duplicate_uuid_is_refused(self):
        instance = base.make_instance()
        instances.create(self.db, instance)
        self.assertRaisesMessage(exception.RecordExists, instance.uuid,
                                 instances.create, self.db, instance)

    def test_invalid_instance_is_not_stored(self):
        instance = base.make_instance(vcpus=3)  # topology has 2 vCPUs
        self.assertRaises(exception.ObjectValidationError,
                          instances.create, self.db, instance)
        self.assertEqual([], instances.get_all(self.db))

    def test_missing_instance(self):
        uuid = base.new_uuid()
        self.assertRaisesMessage(exception.InstanceNotFound, uuid,
                                 instances.get, self.db, uuid)

    def test_get_all_by_host(self):
        on_a = instances.create(self.db, base.make_instance(host='a'))
        instances.create(self.db, base.make_instance(host='b'))
        self.assertEqual([on_a], instances.get_all(self.db, host='a'))
        self.assertEqual(2, len(instances.get_all(self.db)))

    def test_corrupt_row_names_table_key_and_column(self):
        instance = base.make_instance()
        instances.create(self.db, instance)
        with self.db.writer() as session:
            session.execute(sa.update(models.Instance).values(
                numa_topology={'numamig_object.name': 'NoSuchThing'}))
        exc = self.assertRaises(exception.StoredRecordInvalid,
                                instances.get, self.db, instance.uuid)
        self.assertIn('instances', str(exc))
        self.assertIn(instance.uuid, str(exc))
        self.assertIn('numa_topology', str(exc))


class UpdateTestCase(base.DBTestCase):

    def setUp(self):
        super().setUp()
        self.record = instances.create(self.db, base.make_instance())
        self.uuid = self.record.instance.uuid

    def test_update_bumps_revision(self):
        record = instances.update(self.db, self.uuid,
                                  {'task_state': 'migrating'},
                                  expected_revision=1)
        self.assertEqual(2, record.revision)
        self.assertEqual('migrating', record.instance.task_state)

    def test_a_repeated_update_writes_nothing(self):
        # A redelivered request must not bump the revision: a writer that
        # read revision 2 would be refused for a change that changed
        # nothing.
        instances.update(self.db, self.uuid, {'task_state': 'migrating'})
        again = instances.update(self.db, self.uuid,
                                 {'task_state': 'migrating'},
                                 expected_revision=2)
        self.assertEqual(2, again.revision)

    def test_stale_revision_loses_and_changes_nothing(self):
        instances.update(self.db, self.uuid, {'task_state': 'a'}, 1)
        exc = self.assertRaises(exception.ConcurrentUpdate,
                                instances.update, self.db, self.uuid,
                                {'task_state': 'b'}, 1)
        self.assertIn('expected revision 1, found 2', str(exc))
        self.assertEqual('a', instances.get(self.db, self.uuid)
                         .instance.task_state)

    def test_unupdatable_field_is_refused(self):
        self.assertRaisesMessage(
            exception.Invalid, "'migration_context'", instances.update,
            self.db, self.uuid, {'migration_context': None})

    def test_invalid_result_changes_nothing(self):
        self.assertRaises(exception.ObjectValidationError, instances.update,
                          self.db, self.uuid, {'vcpus': 4})
        self.assertEqual(self.record, instances.get(self.db, self.uuid))

    def test_uncoercible_value_is_invalid(self):
        self.assertRaisesMessage(exception.Invalid, 'power_state',
                                 instances.update, self.db, self.uuid,
                                 {'power_state': 'exploded'})

    def test_destroy_with_stale_revision_keeps_the_row(self):
        instances.update(self.db, self.uuid, {'task_state': 'a'})
        self.assertRaises(exception.ConcurrentUpdate, instances.destroy,
                          self.db, self.uuid, expected_revision=1)
        instances.destroy(self.db, self.uuid, expected_revision=2)
        self.assertRaises(exception.InstanceNotFound, instances.get,
                          self.db, self.uuid)

    def test_destroy_cascades_to_migrations(self):
        migration = migrations.create(self.db,
                                      base.make_migration(self.uuid))
        instances.destroy(self.db, self.uuid)
        self.assertRaises(exception.MigrationNotFound, migrations.get,
                          self.db, migration.uuid)


class MigrationContextTestCase(base.DBTestCase):

    def setUp(self):
        super().setUp()
        self.instance = instances.create(
            self.db, base.make_instance(host='src')).instance
        self.uuid = self.instance.uuid
        self.migration = migrations.create(
            self.db, base.make_migration(self.uuid, dest_host='dst'))
        self.context = base.make_context(self.instance, self.migration.uuid)

    def test_set_when_none_is_held(self):
        record = instances.set_migration_context(self.db, self.uuid,
                                                 self.context)
        self.assertEqual(self.context, record.instance.migration_context)
        self.assertEqual(2, record.revision)

    def test_second_claim_loses_and_changes_nothing(self):
        instances.set_migration_context(self.db, self.uuid, self.context)
        other = base.make_context(self.instance, base.new_uuid(),
                                  dest_host='other')
        exc = self.assertRaises(exception.MigrationContextConflict,
                                instances.set_migration_context, self.db,
                                self.uuid, other)
        self.assertIn(f'held by migration {self.migration.uuid}', str(exc))
        self.assertIn('expected none', str(exc))
        held = instances.get(self.db, self.uuid).instance.migration_context
        self.assertEqual(self.context, held)

    def test_replace_names_the_expected_holder(self):
        instances.set_migration_context(self.db, self.uuid, self.context)
        newer = base.make_context(self.instance, self.migration.uuid,
                                  pins={0: 4, 1: 5})
        record = instances.set_migration_context(
            self.db, self.uuid, newer,
            expected_migration_uuid=self.migration.uuid)
        self.assertEqual(newer, record.instance.migration_context)

    def test_context_of_another_instance_is_refused(self):
        other = base.make_instance()
        context = base.make_context(other, self.migration.uuid)
        self.assertRaisesMessage(exception.Invalid, other.uuid,
                                 instances.set_migration_context, self.db,
                                 self.uuid, context)

    def test_drop_is_idempotent(self):
        instances.set_migration_context(self.db, self.uuid, self.context)
        self.assertTrue(instances.drop_migration_context(
            self.db, self.uuid, self.migration.uuid))
        self.assertFalse(instances.drop_migration_context(
            self.db, self.uuid, self.migration.uuid))
        self.assertIsNone(instances.get(self.db, self.uuid)
                          .instance.migration_context)

    def test_drop_leaves_another_migrations_claim(self):
        instances.set_migration_context(self.db, self.uuid, self.context)
        self.assertFalse(instances.drop_migration_context(
            self.db, self.uuid, base.new_uuid()))
        self.assertIsNotNone(instances.get(self.db, self.uuid)
                             .instance.migration_context)

    def test_apply_moves_host_and_topology(self):
        instances.set_migration_context(self.db, self.uuid, self.context)
        record = instances.apply_migration_context(self.db, self.uuid,
                                                   self.migration.uuid)
        self.assertEqual('dst', record.instance.host)
        self.assertEqual(self.context.new_numa_topology,
                         record.instance.numa_topology)
        self.assertIsNone(record.instance.migration_context)
        self.assertEqual([], instances.get_claims_on_host(self.db, 'dst'))

    def test_apply_answers_what_a_read_finds(self):
        # The answer is built from what was written, not read back.
        instances.set_migration_context(self.db, self.uuid, self.context)
        record = instances.apply_migration_context(self.db, self.uuid,
                                                   self.migration.uuid)
        stored = instances.get(self.db, self.uuid)
        self.assertEqual(stored.revision, record.revision)
        self.assertEqual(stored.instance.obj_to_primitive(),
                         record.instance.obj_to_primitive())
        self.assertEqual(set(), record.instance.obj_what_changed())

    def test_apply_without_the_claim_is_refused(self):
        self.assertRaises(exception.MigrationContextConflict,
                          instances.apply_migration_context, self.db,
                          self.uuid, self.migration.uuid)
        self.assertEqual('src', instances.get(self.db, self.uuid)
                         .instance.host)

    def test_claims_on_host_only_while_in_progress(self):
        instances.set_migration_context(self.db, self.uuid, self.context)
        claims = instances.get_claims_on_host(self.db, 'dst')
        self.assertEqual([self.uuid], [r.instance.uuid for r in claims])
        self.assertEqual([], instances.get_claims_on_host(self.db, 'src'))
        self.assertEqual([], instances.get_leaked_claims(self.db))
        migrations.set_status(self.db, self.migration.uuid, 'error')
        self.assertEqual([], instances.get_claims_on_host(self.db, 'dst'))
        leaked = instances.get_leaked_claims(self.db)
        self.assertEqual([self.uuid], [r.instance.uuid for r in leaked])

    def test_claim_of_unknown_migration_is_leaked(self):
        context = base.make_context(self.instance, base.new_uuid())
        instances.set_migration_context(self.db, self.uuid, context)
        leaked = instances.get_leaked_claims(self.db)
        self.assertEqual([self.uuid], [r.instance.uuid for r in leaked])
