"""The conductor's upgrade rules: who is refused, what is dropped.

A conductor of the current release refuses NUMA guests while a compute
host reports an older service version (unless the workaround is set); a
conductor running as the release before (the testing aid) has no such
check, as that release had none. A claim is dropped on cancellation only
when the destination took one.
"""

import fixtures
import testscenarios

from numamig import exception
from numamig import objects
from numamig.conductor import manager
from numamig.db import instances
from numamig.objects import fields
from tests.unit.compute import base as cbase
from tests.unit.conductor import base
from tests.unit.objects import samples

load_tests = testscenarios.load_tests_apply_scenarios


class OldHostsTest(base.ConductorTestCase):

    def setUp(self):
        super().setUp()
        self.report('dst3', service_version=1)
        self.report('src', service_version=1)

    def _migrate(self, inst):
        return self.migrate(inst.uuid, 'dst1')

    def test_new_conductor_names_every_old_host(self):
        inst = self.create_instance()
        exc = self.assertRaises(exception.NUMALiveMigrationUnsupported,
                                self._migrate, inst)
        self.assertIn('dst3, src', str(exc))
        self.compute_api.check_can_live_migrate_destination.\
            assert_not_called()

    def test_guest_without_numa_topology_is_not_refused(self):
        unpinned = cbase.instance(host='src', extra_specs={})
        instances.create(self.db, unpinned)
        self.answer_with(True)
        self.assertEqual('queued', self._migrate(unpinned).status)

    def test_old_conductor_has_no_check(self):
        old = manager.ConductorManager(
            self.db, self.conductor.cache, self.conductor.worker.scheduler,
            self.compute_api, self.worker.settings, service_version=1)
        self.conductor = old
        inst = self.create_instance()
        self.answer_with(True)
        self.assertEqual('queued', self._migrate(inst).status)

    def test_ping_names_the_service_version_release_1_did_not(self):
        # Clients cap themselves at what it serves (conductor.rpcapi).
        self.assertEqual({'service_version': 2},
                         self.conductor.ping(None))
        old = manager.ConductorManager(
            self.db, self.conductor.cache, self.conductor.worker.scheduler,
            self.compute_api, self.worker.settings, service_version=1)
        self.assertEqual('pong', old.ping(None))

    def test_unknown_conductor_release(self):
        self.assertRaisesMessage(
            exception.InvalidConfiguration, 'service version 9',
            manager.ConductorManager, self.db, self.conductor.cache,
            self.conductor.worker.scheduler, self.compute_api,
            self.worker.settings, service_version=9)


class CancelledBeforeQueuedTest(base.ConductorTestCase):
    """A cancellation between claim and cast drops only a taken claim."""

    scenarios = [
        ('claimed', {'numa_info': samples.migrate_info, 'offered': True,
                     'dropped': True}),
        # An old source: the destination's migration guard claimed on its
        # own and sends no NUMA objects (issue 17).
        ('guarded', {'numa_info': lambda: None, 'offered': True,
                     'dropped': True}),
        ('old-path', {'numa_info': lambda: None, 'offered': False,
                      'dropped': False}),
    ]

    def test_drop(self):
        inst = self.create_instance()

        def check(ctxt, instance, host, migration, limits, timeout=None,
                  source_data=None):
            return objects.LiveMigrateData(
                instance_uuid=instance.uuid, source_host=instance.host,
                dest_host=host, migration_uuid=migration.uuid,
                dst_numa_info=self.numa_info(),
                dst_supports_numa_live_migration=self.offered)
        self.compute_api.check_can_live_migrate_destination.side_effect = \
            check
        real = manager.live_migrate.records.set_status

        def cancelled_meanwhile(conductor, uuid, status, **kwargs):
            if status == fields.MigrationStatus.QUEUED:
                raise exception.InvalidStatusTransition(
                    migration_uuid=uuid, current='cancelled',
                    requested=status, allowed='nothing')
            return real(conductor, uuid, status, **kwargs)
        self.useFixture(fixtures.MonkeyPatch(
            'numamig.conductor.tasks.live_migrate.records.set_status',
            cancelled_meanwhile))
        self.assertRaises(exception.InvalidStatusTransition, self.migrate,
                          inst.uuid, 'dst1')
        self.assertEqual(
            self.dropped,
            self.compute_api.drop_move_claim_at_destination.called)
        self.compute_api.live_migration.assert_not_called()
