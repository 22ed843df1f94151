"""The result of a run lands in the Migration record (embedded tier).

A real conductor (SQLite) and real agents on libvirt test-driver hosts,
over fake:// and RabbitMQ. The test driver cannot migrate, so numamig
carries the guest over itself: the record must say so (emulated), and
carry how long the destination took to define and start it::

    host-a  cell 0 [1-3,9-11]  cell 1 [5-7,13-15]   (dedicated)
    host-b  the same
"""

import fixtures
import testscenarios

from numamig import exception
from numamig.db import migrations
from tests.functional import test_live_migration as lm

load_tests = testscenarios.load_tests_apply_scenarios


class MigrationResultTest(lm.LiveMigrationTestCase):

    HOSTS = (lm.host('host-a'), lm.host('host-b'))

    def stored(self, migration):
        """The record as the conductor's database holds it."""
        return migrations.get(self.dep.conductor.db, migration.uuid)

    def test_completed_emulated_run_is_recorded(self):
        mover = self.create('host-a')
        migration = self.migrate(mover, 'host-b')
        self.assertEqual('completed', migration.status, migration.error)
        for record in (migration, self.stored(migration)):
            self.assertIsNotNone(record.elapsed_ms)
            self.assertGreaterEqual(record.elapsed_ms, 0)
            self.assertIs(True, record.emulated)
            self.assertIsNone(record.downtime_ms)
            self.assertEqual((False, False),
                             (bool(record.post_copy), bool(record.paused)))
        details = {h.status: h.detail for h in migration.history}
        # Recorded with 'completed' (the records API), in one call.
        self.assertNotIn('post-migrating', details)
        self.assertIn(f"emulated run of {migration.elapsed_ms} ms",
                      details['completed'])

    def test_failed_run_records_what_the_source_measured(self):
        mover = self.create('host-a')
        dest = self.dep.agent('host-b').driver
        real = type(dest).accept_emulated_migration

        def refuse(driver, instance_uuid, dest_xml):
            if driver is dest:
                raise exception.HypervisorError(
                    host='host-b', action='define the guest',
                    reason='injected by the test')
            return real(driver, instance_uuid, dest_xml)
        self.useFixture(fixtures.MonkeyPatch(
            'numamig.virt.libvirt.driver.LibvirtDriver.'
            'accept_emulated_migration', refuse))
        migration = self.migrate(mover, 'host-b')
        self.assertEqual('failed', migration.status)
        stored = self.stored(migration)
        self.assertIs(True, stored.emulated)
        self.assertGreaterEqual(stored.elapsed_ms, 0)
        self.assertIsNone(stored.downtime_ms)
        self.assertIn('injected by the test', stored.error)
