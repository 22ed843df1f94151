"""Tests of numamig.conductor.records: the rules around move claims."""

from numamig import exception
from numamig import objects
from numamig.conductor import records
from numamig.db import instances
from numamig.db import migrations
from tests.unit.compute import base as cbase
from tests.unit.conductor import base


class MigrationContextRulesTest(base.ConductorTestCase):

    def setUp(self):
        super().setUp()
        self.inst = self.create_instance()
        self.migration = migrations.create(self.db, cbase.migration(
            self.inst, dest_host='dst1'))

    def _context(self, migration, dest_host='dst1'):
        return objects.MigrationContext(
            instance_uuid=self.inst.uuid, migration_uuid=migration.uuid,
            source_host='src', dest_host=dest_host,
            old_numa_topology=self.inst.numa_topology,
            new_numa_topology=self.inst.numa_topology)

    def _held(self):
        held = instances.get(self.db, self.inst.uuid).instance\
            .migration_context
        return held and held.migration_uuid

    def test_records_the_claim_of_the_destination_being_tried(self):
        records.set_migration_context(self.conductor,
                                      self._context(self.migration))
        self.assertEqual(self.migration.uuid, self._held())

    def test_refuses_a_destination_the_migration_moved_away_from(self):
        migrations.set_dest_host(self.db, self.migration.uuid, 'dst2')
        self.assertRaisesMessage(
            exception.MigrationPreCheckError, 'was not recorded',
            records.set_migration_context, self.conductor,
            self._context(self.migration, dest_host='dst1'))
        self.assertIsNone(self._held())

    def test_refuses_while_another_migration_holds_a_claim(self):
        records.set_migration_context(self.conductor,
                                      self._context(self.migration))
        other = migrations.create(self.db, cbase.migration(
            self.inst, dest_host='dst1'))
        self.assertRaisesMessage(
            exception.MigrationPreCheckError, 'already being migrated',
            records.set_migration_context, self.conductor,
            self._context(other))
        self.assertEqual(self.migration.uuid, self._held())

    def test_heals_a_claim_left_by_an_ended_migration(self):
        records.set_migration_context(self.conductor,
                                      self._context(self.migration))
        # An ended migration whose claim was never dropped.
        migrations.set_status(self.db, self.migration.uuid, 'error')
        other = migrations.create(self.db, cbase.migration(
            self.inst, dest_host='dst1'))
        records.set_migration_context(self.conductor, self._context(other))
        self.assertEqual(other.uuid, self._held())

    def test_ending_badly_drops_the_claim_and_the_reservation(self):
        records.set_migration_context(self.conductor,
                                      self._context(self.migration))
        self.conductor.cache.reserve('dst1', self.inst.uuid, 'demo',
                                     self.inst.numa_topology)
        records.set_status(self.conductor, self.migration.uuid, 'error')
        self.assertIsNone(self._held())
        self.assertEqual((), self.conductor.cache.get('dst1').reservations)

    def test_agents_may_update_only_power_and_task_state(self):
        self.assertRaisesMessage(
            exception.Invalid, "not ['host']", records.update_instance,
            self.conductor, self.inst.uuid, {'host': 'elsewhere'})
        updated = records.update_instance(self.conductor, self.inst.uuid,
                                          {'power_state': 'shutdown'})
        self.assertEqual('shutdown', updated.power_state)
