"""A migration's status and its claim: both committed, or neither."""

from numamig import exception
from numamig.db import instances
from numamig.db import migration_claims
from numamig.db import migrations
from tests.unit.db import base


class MigrationClaimsTestCase(base.DBTestCase):

    def setUp(self):
        super().setUp()
        self.instance = instances.create(
            self.db, base.make_instance()).instance
        self.migration = migrations.create(self.db, base.make_migration(
            self.instance.uuid, dest_host='dst'))
        self.context = base.make_context(self.instance, self.migration.uuid,
                                         pins={0: 4, 1: 5})

    def _record(self):
        return instances.get(self.db, self.instance.uuid).instance

    def test_queue_with_claim_commits_both(self):
        migration = migration_claims.queue_with_claim(
            self.db, self.context, None, 'claimed')
        self.assertEqual('queued', migration.status)
        self.assertEqual('claimed', migrations.get(
            self.db, migration.uuid).history[-1].detail)
        self.assertEqual(self.context, self._record().migration_context)

    def test_refused_status_leaves_no_claim(self):
        migrations.set_status(self.db, self.migration.uuid, 'cancelled')
        self.assertRaises(exception.InvalidStatusTransition,
                          migration_claims.queue_with_claim, self.db,
                          self.context, None, 'claimed')
        self.assertIsNone(self._record().migration_context)

    def test_conflicting_claim_leaves_the_status(self):
        other = base.make_context(self.instance, base.new_uuid())
        instances.set_migration_context(self.db, self.instance.uuid, other)
        self.assertRaises(exception.MigrationContextConflict,
                          migration_claims.queue_with_claim, self.db,
                          self.context, None, 'claimed')
        self.assertEqual('accepted', migrations.get(
            self.db, self.migration.uuid).status)

    def _running_with_claim(self):
        migration_claims.queue_with_claim(self.db, self.context, None, 'c')
        migrations.set_status(self.db, self.migration.uuid, 'running')

    def test_complete_applies_the_claim(self):
        self._running_with_claim()
        migration, instance = migration_claims.complete(
            self.db, self.migration.uuid, result={'elapsed_ms': 7})
        self.assertEqual(('completed', 7),
                         (migration.status, migration.elapsed_ms))
        self.assertEqual(('dst', self.context.new_numa_topology, None),
                         (instance.host, instance.numa_topology,
                          instance.get('migration_context')))
        self.assertEqual(instance, self._record())

    def test_refused_completion_applies_nothing(self):
        migration_claims.queue_with_claim(self.db, self.context, None, 'c')
        self.assertRaises(exception.InvalidStatusTransition,
                          migration_claims.complete, self.db,
                          self.migration.uuid)
        self.assertEqual(('src', self.context), (
            self._record().host, self._record().migration_context))

    def test_complete_without_a_claim_changes_only_the_status(self):
        migrations.set_status(self.db, self.migration.uuid, 'queued')
        migrations.set_status(self.db, self.migration.uuid, 'running')
        migration, instance = migration_claims.complete(
            self.db, self.migration.uuid)
        self.assertEqual('completed', migration.status)
        self.assertEqual(self.instance, instance)

    def test_complete_again_changes_nothing(self):
        self._running_with_claim()
        first, _ = migration_claims.complete(self.db, self.migration.uuid,
                                             detail='first')
        again, instance = migration_claims.complete(
            self.db, self.migration.uuid, detail='again')
        self.assertIsNone(instance)
        self.assertEqual(first.updated_at, again.updated_at)
        self.assertEqual(['first'], [
            h.detail for h in migrations.get(
                self.db, self.migration.uuid).history
            if h.status == 'completed'])
