"""Tests of the destination's guarded claims: a source that cannot take
part copies its XML, and this host's migration guard places the guest
(numamig.compute.migration_dest, numamig.virt.libvirt.guard)."""

import fixtures
import testscenarios

from numamig import objects
from numamig import releases
from numamig.compute import migration_dest
from tests import base
from tests.unit.compute import base as cbase
from tests.unit.compute import test_migration_dest as tmd

load_tests = testscenarios.load_tests_apply_scenarios


def _agent_and_guest(test):
    """An agent (mocks around a real tracker) and a guest of 2 pinned
    vCPUs with its migration; logs captured in ``test.logs``."""
    test.logs = test.useFixture(fixtures.FakeLogger(name='numamig'))
    test.agent = cbase.agent()
    test.agent.driver.build_migrate_info.return_value = \
        objects.NUMAMigrateInfo(cell_pins={0: {1}})
    test.inst = cbase.instance(pins={0: 2, 1: 10})
    test.migration = cbase.migration(test.inst)


class GuardedClaimTest(base.TestCase):
    """An old source, asked by the destination (API 1.1) or by the
    conductor (the conductor-asks flow, LiveMigrateData 1.0 handed
    over)."""

    scenarios = [('api-1.1', {'conductor_asks': False}),
                 ('api-1.3', {'conductor_asks': True})]

    def setUp(self):
        super().setUp()
        _agent_and_guest(self)
        self.agent.driver.check_arrival.return_value = None

    def _check(self, guard='on', migration=True):
        self.agent.driver.migration_guard_state.return_value = guard
        self.agent.compute_api.check_can_live_migrate_source.side_effect = \
            tmd._source_answers(False)
        source_data = None
        if self.conductor_asks:
            source_data = releases.backported(objects.LiveMigrateData(
                instance_uuid=self.inst.uuid, source_host=cbase.SOURCE,
                dest_host=cbase.HOST, migration_uuid=self.migration.uuid),
                '1.0')
        return migration_dest.check_destination(
            self.agent, None, self.inst, cbase.SOURCE, self.migration.uuid,
            migration=self.migration if migration else None, limits=None,
            source_data=source_data if migration else None)

    def test_guard_on_claims_and_records_it_itself(self):
        data = self._check()
        claim = self.agent.tracker.get_claim(self.migration.uuid)
        self.assertTrue(claim.guarded)
        self.assertTrue(claim.persisted)
        recorded = self.agent.conductor_api.migration_context_set
        context = recorded.call_args[0][1]
        self.assertEqual(claim.topology, context.new_numa_topology)
        # What the old source reads: no NUMA objects, no claim to record.
        self.assertIsNone(data.get('dst_numa_info'))
        self.assertIsNone(data.get('migration_context'))
        self.assertIn(f"old path for the {releases.OLD_PATH_NUMA_OBJECTS}",
                      self.logs.output)
        self.assertNotIn(f"old path for the {releases.OLD_PATH_NUMA_INFO}",
                         self.logs.output)

    def test_the_claim_is_published_to_the_guard_before_the_answer(self):
        self._check()
        published = self.agent.driver.publish_move_claims.call_args[0][0]
        claim = self.agent.tracker.get_claim(self.migration.uuid)
        self.assertEqual({self.inst.uuid: (self.migration.uuid,
                                           claim.topology)}, published)

    def test_guard_off_or_failed_keeps_the_old_path(self):
        for state in ('off', 'failed'):
            self._check(guard=state)
            self.assertEqual([], self.agent.tracker.claims())
        self.assertIn(f"old path for the {releases.OLD_PATH_NUMA_INFO}",
                      self.logs.output)

    def test_old_conductor_no_claim_even_with_the_guard(self):
        self._check(migration=False)
        self.assertEqual([], self.agent.tracker.claims())


class GuardedArrivalTest(base.TestCase):

    def setUp(self):
        super().setUp()
        _agent_and_guest(self)
        self.agent.driver.migration_guard_state.return_value = 'on'
        self.agent.compute_api.check_can_live_migrate_source.side_effect = \
            tmd._source_answers(False)
        migration_dest.check_destination(
            self.agent, None, self.inst, cbase.SOURCE, self.migration.uuid,
            migration=self.migration)
        self.claim = self.agent.tracker.get_claim(self.migration.uuid)
        self.agent.driver.list_guests.return_value = {
            self.inst.uuid: 'guest'}

    def test_arrival_placed_by_the_guard_applies_the_claim(self):
        self.agent.driver.check_arrival.return_value = None
        arrived = self.inst.obj_clone()
        arrived.host, arrived.numa_topology = cbase.HOST, self.claim.topology
        self.agent.conductor_api.migration_context_apply.return_value = arrived
        migration_dest.post_at_destination(self.agent, None, self.inst,
                                           self.migration)
        self.agent.driver.check_arrival.assert_called_once_with(
            self.inst.uuid, self.migration.uuid, self.claim.topology)
        self.agent.conductor_api.instance_set_placement.assert_not_called()

    def test_arrival_the_guard_missed_reads_the_placement_back(self):
        self.agent.driver.check_arrival.return_value = 'vcpupin 0: 2 -> 5'
        self.agent.conductor_api.instance_set_placement.return_value = \
            self.inst
        migration_dest.post_at_destination(self.agent, None, self.inst,
                                           self.migration)
        self.agent.conductor_api.migration_context_apply.assert_not_called()
        self.agent.conductor_api.migration_context_drop.assert_called_once()
        self.agent.conductor_api.instance_set_placement.assert_called_once()
        self.assertEqual([], self.agent.tracker.claims())
        self.assertIn('WITHOUT the placement of its guarded claim',
                      self.logs.output)

    def test_rollback_drops_the_guarded_claim_and_logs_the_old_path(self):
        migration_dest.rollback_at_destination(self.agent, None, self.inst,
                                               self.migration)
        self.assertEqual([], self.agent.tracker.claims())
        self.assertIn(f"old path for the {releases.OLD_PATH_DEST_DROP}: the "
                      f"claim was taken for the migration guard",
                      self.logs.output)

    def test_a_recompute_keeps_the_claim_guarded(self):
        instance = self.inst.obj_clone()
        instance.migration_context = objects.MigrationContext(
            instance_uuid=self.inst.uuid, migration_uuid=self.migration.uuid,
            source_host=cbase.SOURCE, dest_host=cbase.HOST,
            new_numa_topology=self.claim.topology)
        conductor = self.agent.conductor_api
        conductor.instance_get_claims_on_host.return_value = [instance]
        conductor.instance_get_all_by_host.return_value = []
        self.assertTrue(self.agent.tracker.update_available_resource(None))
        self.assertTrue(self.agent.tracker.get_claim(
            self.migration.uuid).guarded)
