"""Tests of numamig.compute.resource_tracker."""

from unittest import mock

import fixtures

from numamig import exception
from numamig import objects
from numamig.compute import resource_tracker
from tests import base
from tests.unit.compute import base as cbase


def _claimed(inst, migration_uuid, pins):
    """``inst`` holding a migration context onto ``pins`` of cell 1."""
    holder = inst.obj_clone()
    holder.migration_context = objects.MigrationContext(
        instance_uuid=inst.uuid, migration_uuid=migration_uuid,
        source_host=inst.host, dest_host=cbase.HOST,
        old_numa_topology=inst.numa_topology,
        new_numa_topology=objects.InstanceNUMATopology(
            instance_uuid=inst.uuid,
            cells=[cbase.pinned_cell(0, 1, pins)]))
    return holder


class ResourceTrackerTest(base.TestCase):

    def test_usage_is_instances_plus_claims(self):
        here = cbase.instance(host=cbase.HOST, pins={0: 0, 1: 8})
        incoming = _claimed(cbase.instance(pins={0: 2, 1: 10}),
                            cbase.new_uuid(), {0: 4, 1: 12})
        agent = cbase.agent(instances=[here], claimed=[incoming])
        usage = agent.tracker.usage_topology()
        self.assertEqual({0, 8, 4, 12}, cbase.pinned(usage))
        self.assertEqual(
            sorted([('demo', here.uuid), ('demo', incoming.uuid)]),
            agent.tracker.guest_pairs())

    def test_a_migration_completing_during_a_recompute_stays_counted(self):
        # The records move the guest from "claim here" to "instance here"
        # in one transaction, committed between the recompute's two reads.
        incoming = cbase.instance(pins={0: 2, 1: 10})
        migration_uuid = cbase.new_uuid()
        before = _claimed(incoming, migration_uuid, {0: 4, 1: 12})
        after = incoming.obj_clone()
        after.host = cbase.HOST
        after.numa_topology = before.migration_context.new_numa_topology
        agent = cbase.agent()
        records = {'applied': False}

        def first_read_then_apply(answer_before, answer_after):
            def read(ctxt, host):
                answer = answer_after if records['applied'] \
                    else answer_before
                records['applied'] = True
                return answer
            return read
        conductor = agent.tracker.conductor_api
        conductor.instance_get_claims_on_host.side_effect = \
            first_read_then_apply([before], [])
        conductor.instance_get_all_by_host.side_effect = \
            first_read_then_apply([], [after])
        log = self.useFixture(fixtures.FakeLogger(
            'numamig.compute.resource_tracker'))
        self.assertTrue(agent.tracker.update_available_resource(None))
        self.assertEqual({4, 12}, cbase.pinned(
            agent.tracker.usage_topology()),
            "whichever read comes first, the guest's pCPUs stay used")
        self.assertNotIn('overlaps', log.output)

    def test_a_deleted_instance_is_not_counted_again_by_a_recompute(self):
        # The agent destroyed the guest; the conductor removes the record
        # only after it answers. A recompute reading the record in
        # between must not count the guest again.
        here = cbase.instance(host=cbase.HOST, pins={0: 2, 1: 10})
        agent = cbase.agent(instances=[here])
        self.assertTrue(agent.tracker.drop_instance(here.uuid, deleted=True))
        agent.conductor_api.instance_get_all_by_host.return_value = [here]
        self.assertTrue(agent.tracker.update_available_resource(None))
        self.assertEqual(set(), agent.tracker.instance_uuids())
        self.assertEqual(set(), cbase.pinned(agent.tracker.usage_topology()))
        # Once the record is gone the agent forgets it; a guest of that
        # uuid placed here again is counted.
        agent.conductor_api.instance_get_all_by_host.return_value = []
        agent.tracker.update_available_resource(None)
        agent.conductor_api.instance_get_all_by_host.return_value = [here]
        agent.tracker.update_available_resource(None)
        self.assertEqual({here.uuid}, agent.tracker.instance_uuids())

    def test_an_instance_that_left_is_counted_when_records_say_so(self):
        here = cbase.instance(host=cbase.HOST, pins={0: 2, 1: 10})
        agent = cbase.agent(instances=[here])
        agent.tracker.drop_instance(here.uuid)
        agent.conductor_api.instance_get_all_by_host.return_value = [here]
        agent.tracker.update_available_resource(None)
        self.assertEqual({here.uuid}, agent.tracker.instance_uuids())

    def _unrecorded_claim(self, agent):
        """A claim on pCPUs 5 and 13 that no record holds yet."""
        inst = cbase.instance(pins={0: 2, 1: 3})
        claim = resource_tracker.MoveClaim(
            inst.uuid, 'demo', cbase.new_uuid(),
            _claimed(inst, cbase.new_uuid(), {0: 5, 1: 13}).migration_context
            .new_numa_topology)
        agent.tracker.add_claim(claim)
        return claim

    def test_recompute_keeps_a_claim_being_persisted(self):
        agent = cbase.agent()
        claim = self._unrecorded_claim(agent)
        self.assertTrue(agent.tracker.update_available_resource(None))
        self.assertIs(claim, agent.tracker.get_claim(claim.migration_uuid))
        self.assertEqual({5, 13}, cbase.pinned(
            agent.tracker.usage_topology()))

    def test_recompute_drops_a_claim_never_recorded_past_the_bound(self):
        # The conductor died between the destination's answer and the
        # record: nothing will ever drop the claim but this bound.
        agent = cbase.agent()
        agent.tracker.unrecorded_claim_timeout = 60
        claim = self._unrecorded_claim(agent)
        claim.taken_at -= 59
        agent.tracker.update_available_resource(None)
        self.assertIs(claim, agent.tracker.get_claim(claim.migration_uuid))
        claim.taken_at -= 2
        self.assertTrue(agent.tracker.update_available_resource(None))
        self.assertIsNone(agent.tracker.get_claim(claim.migration_uuid))
        self.assertEqual(set(), cbase.pinned(agent.tracker.usage_topology()))

    def test_recompute_drops_an_unrecorded_claim_of_an_ended_migration(self):
        # A conductor died after the destination answered; the migration
        # was ended since: its claim goes at once, not after the bound.
        for answer in (mock.Mock(status='error'),
                       exception.MigrationNotFound(migration_uuid='x')):
            agent = cbase.agent()
            claim = self._unrecorded_claim(agent)
            agent.conductor_api.migration_get.side_effect = [answer]
            with self.assertLogs(resource_tracker.__name__, 'WARNING'):
                self.assertTrue(agent.tracker.update_available_resource(
                    None))
            self.assertIsNone(agent.tracker.get_claim(claim.migration_uuid))
            self.assertEqual(set(), cbase.pinned(
                agent.tracker.usage_topology()))
            agent.conductor_api.migration_get.assert_called_once_with(
                None, claim.migration_uuid)

    def test_recompute_keeps_an_unrecorded_claim_it_cannot_judge(self):
        for answer in (mock.Mock(status='accepted'), RuntimeError('down')):
            agent = cbase.agent()
            claim = self._unrecorded_claim(agent)
            agent.conductor_api.migration_get.side_effect = [answer]
            self.assertTrue(agent.tracker.update_available_resource(None))
            self.assertIs(claim,
                          agent.tracker.get_claim(claim.migration_uuid))

    def test_recompute_releases_a_persisted_claim_records_dropped(self):
        inst = cbase.instance(pins={0: 2, 1: 3})
        holder = _claimed(inst, cbase.new_uuid(), {0: 5, 1: 13})
        agent = cbase.agent(claimed=[holder])
        migration_uuid = holder.migration_context.migration_uuid
        self.assertIsNotNone(agent.tracker.get_claim(migration_uuid))
        agent.conductor_api.instance_get_claims_on_host.return_value = []
        with self.assertLogs(resource_tracker.__name__, 'WARNING') as logs:
            agent.tracker.update_available_resource(None)
        self.assertIsNone(agent.tracker.get_claim(migration_uuid))
        self.assertIn(migration_uuid, logs.output[0])
        self.assertEqual(set(), cbase.pinned(agent.tracker.usage_topology()))

    def test_recompute_does_not_recover_a_claim_dropped_here(self):
        # drop_claim drops here, then in the records: a recompute that
        # reads the records in between finds the claim still recorded.
        holder = _claimed(cbase.instance(pins={0: 2, 1: 3}),
                          cbase.new_uuid(), {0: 5, 1: 13})
        agent = cbase.agent(claimed=[holder])
        uuid = holder.migration_context.migration_uuid
        agent.tracker.drop_move_claim(uuid)
        self.assertTrue(agent.tracker.update_available_resource(None))
        self.assertIsNone(agent.tracker.get_claim(uuid))
        self.assertEqual(set(), cbase.pinned(agent.tracker.usage_topology()))
        # Once the records no longer hold it, it is forgotten: the same
        # migration claimed here again and recorded is recovered.
        claims = agent.conductor_api.instance_get_claims_on_host
        claims.return_value = []
        agent.tracker.update_available_resource(None)
        claims.return_value = [holder]
        agent.tracker.update_available_resource(None)
        self.assertIsNotNone(agent.tracker.get_claim(uuid))
        self.assertEqual({5, 13}, cbase.pinned(
            agent.tracker.usage_topology()))

    def test_a_claim_taken_again_after_a_drop_is_kept(self):
        holder = _claimed(cbase.instance(pins={0: 2, 1: 3}),
                          cbase.new_uuid(), {0: 5, 1: 13})
        agent = cbase.agent(claimed=[holder])
        uuid = holder.migration_context.migration_uuid
        claim = agent.tracker.get_claim(uuid)
        agent.tracker.drop_move_claim(uuid)
        agent.tracker.add_claim(claim)
        self.assertTrue(agent.tracker.update_available_resource(None))
        self.assertIsNotNone(agent.tracker.get_claim(uuid))

    def test_recompute_recovers_a_recorded_claim(self):
        agent = cbase.agent()
        holder = _claimed(cbase.instance(pins={0: 2, 1: 3}),
                          cbase.new_uuid(), {0: 6, 1: 14})
        agent.conductor_api.instance_get_claims_on_host.return_value = [holder]
        agent.tracker.update_available_resource(None)
        claim = agent.tracker.get_claim(
            holder.migration_context.migration_uuid)
        self.assertTrue(claim.persisted)
        self.assertEqual({6, 14}, cbase.pinned(
            agent.tracker.usage_topology()))

    def test_recompute_racing_an_explicit_change_changes_nothing(self):
        here = cbase.instance(host=cbase.HOST, pins={0: 0, 1: 8})
        agent = cbase.agent(instances=[here])
        # The records were read before the instance left: applying them
        # would count it again.
        def read_then_race(ctxt, host):
            agent.tracker.drop_instance(here.uuid)
            return [here]
        conductor_api = agent.conductor_api
        conductor_api.instance_get_all_by_host.side_effect = read_then_race
        self.assertFalse(agent.tracker.update_available_resource(None))
        self.assertEqual(set(), agent.tracker.instance_uuids())
        self.assertEqual(set(), cbase.pinned(agent.tracker.usage_topology()))

    def test_drops_are_idempotent(self):
        holder = _claimed(cbase.instance(pins={0: 2, 1: 3}),
                          cbase.new_uuid(), {0: 5, 1: 13})
        agent = cbase.agent(claimed=[holder])
        uuid = holder.migration_context.migration_uuid
        self.assertIsNotNone(agent.tracker.drop_move_claim(uuid))
        self.assertIsNone(agent.tracker.drop_move_claim(uuid))
        self.assertFalse(agent.tracker.drop_instance(holder.uuid))

    def test_apply_move_claim_makes_it_the_instance_usage(self):
        holder = _claimed(cbase.instance(pins={0: 2, 1: 3}),
                          cbase.new_uuid(), {0: 5, 1: 13})
        agent = cbase.agent(claimed=[holder])
        arrived = holder.obj_clone()
        arrived.host = cbase.HOST
        arrived.numa_topology = holder.migration_context.new_numa_topology
        arrived.migration_context = None
        agent.tracker.apply_move_claim(
            holder.migration_context.migration_uuid, arrived)
        self.assertEqual([], agent.tracker.claims())
        self.assertEqual({holder.uuid}, agent.tracker.instance_uuids())
        self.assertEqual({5, 13}, cbase.pinned(
            agent.tracker.usage_topology()))

    def test_overlapping_records_are_logged_not_raised(self):
        first = cbase.instance(host=cbase.HOST, pins={0: 0, 1: 8})
        second = cbase.instance(host=cbase.HOST, pins={0: 0, 1: 8})
        with self.assertLogs(resource_tracker.__name__, 'ERROR') as logs:
            agent = cbase.agent(instances=[first, second])
            usage = agent.tracker.usage_topology()
        self.assertEqual({0, 8}, cbase.pinned(usage))
        self.assertIn('overlaps', logs.output[0])

    def test_add_claim_refuses_a_clash(self):
        here = cbase.instance(host=cbase.HOST, pins={0: 0, 1: 8})
        agent = cbase.agent(instances=[here])
        clash = resource_tracker.MoveClaim(
            'u', 'demo', 'm', here.numa_topology)
        self.assertRaises(base.exception.UsageConflict,
                          agent.tracker.add_claim, clash)
        self.assertEqual([], agent.tracker.claims())

    def test_a_changed_distance_table_is_reported(self):
        here = cbase.instance(host=cbase.HOST, pins={0: 0, 1: 8})
        agent = cbase.agent(instances=[here])
        tracker = agent.tracker
        self.assertEqual([{}, {}], [c.distances for c in
                                    tracker.usage_topology().cells])
        changed = cbase.host_topology()
        changed.cells[0].distances = {0: 10, 1: 32}
        changed.cells[1].distances = {0: 32, 1: 10}
        agent.driver.refresh_distances.return_value = changed
        self.assertTrue(tracker.update_available_resource(None))
        usage = tracker.usage_topology()
        self.assertEqual([{0: 10, 1: 32}, {0: 32, 1: 10}],
                         [c.distances for c in usage.cells])
        # The usage is recomputed on the new base, the guest still counted.
        self.assertEqual({0, 8}, cbase.pinned(usage))
        # A driver that cannot read its capabilities now keeps the table.
        agent.driver.refresh_distances.side_effect = \
            base.exception.HypervisorError(host='h', action='a', reason='r')
        self.assertTrue(tracker.update_available_resource(None))
        self.assertEqual({0: 10, 1: 32},
                         tracker.usage_topology().cells[0].distances)

    def test_not_started(self):
        tracker = resource_tracker.ResourceTracker(
            'h', mock.Mock(), mock.Mock(), strategy='spread',
            unrecorded_claim_timeout=120, pci_alias=())
        self.assertRaisesMessage(base.exception.NumamigException,
                                 'not started', tracker.usage_topology)
