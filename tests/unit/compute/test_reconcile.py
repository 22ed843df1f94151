"""Tests of numamig.compute.reconcile: what an agent fixes at start."""

import dataclasses
from unittest import mock

import oslo_messaging as messaging

from numamig import exception
from numamig.compute import reconcile
from tests import base
from tests.unit.compute import base as cbase


class SourceAgentTestCase(base.TestCase):
    """A source agent whose records hold one guest."""

    def setUp(self):
        super().setUp()
        self.inst = cbase.instance(host=cbase.SOURCE, pins={0: 2, 1: 10})
        self.agent = cbase.agent(host=cbase.SOURCE, instances=[self.inst])
        self.agent.conductor_api.instance_get.return_value = self.inst

    def _interrupted(self, status):
        migration = cbase.migration(self.inst, status=status)
        self.agent.conductor_api.migration_get_in_progress_by_host.\
            return_value = [migration]
        return migration


class ReconcileTest(SourceAgentTestCase):

    def test_guest_still_here_rolls_back(self):
        migration = self._interrupted('running')
        fixed = reconcile.reconcile_host(self.agent, None)
        self.assertIn('rolled back', fixed[0])
        api = self.agent.compute_api
        api.rollback_live_migration_at_destination.assert_called_once()
        api.drop_move_claim_at_destination.assert_called_once()
        self.agent.conductor_api.migration_set_status.assert_called_once()
        args = self.agent.conductor_api.migration_set_status.call_args
        self.assertEqual((migration.uuid, 'failed'), args[0][1:3])

    def test_guest_paused_in_a_broken_postcopy_is_not_rolled_back(self):
        # Its CPU state and the pages sent are on the destination: a
        # rollback would destroy that half of the guest, and releasing
        # the destination's claim would give its pCPUs away.
        migration = self._interrupted('running')
        self.agent.driver.postcopy_paused.return_value = True
        fixed = reconcile.reconcile_host(self.agent, None)
        self.assertIn('postcopy-paused', fixed[0])
        self.assertIn('both claims kept', fixed[0])
        api = self.agent.compute_api
        api.rollback_live_migration_at_destination.assert_not_called()
        api.drop_move_claim_at_destination.assert_not_called()
        args = self.agent.conductor_api.migration_set_status.call_args
        self.assertEqual((migration.uuid, 'postcopy-paused'), args[0][1:3])
        self.assertIn('PAUSED', args[1]['error'])
        self.agent.driver.postcopy_paused.assert_called_once_with(
            self.inst.uuid)
        self.assertEqual({self.inst.uuid},
                         self.agent.tracker.instance_uuids())

    def test_broken_postcopy_with_an_older_conductor_ends_error(self):
        migration = self._interrupted('running')
        self.agent.driver.postcopy_paused.return_value = True

        def older(ctxt, uuid, status, **kwargs):
            if status == 'postcopy-paused':
                raise messaging.UnsupportedVersion('1.17')
        self.agent.conductor_api.migration_set_status.side_effect = older
        fixed = reconcile.reconcile_host(self.agent, None)
        self.assertIn('ended error', fixed[0])
        args = self.agent.conductor_api.migration_set_status.call_args
        self.assertEqual((migration.uuid, 'error'), args[0][1:3])
        self.agent.compute_api.drop_move_claim_at_destination.\
            assert_not_called()

    def test_guest_gone_completes(self):
        self._interrupted('running')
        self.agent.driver.list_guests.return_value = {}
        fixed = reconcile.reconcile_host(self.agent, None)
        self.assertIn('completed', fixed[0])
        self.agent.compute_api.post_live_migration_at_destination.\
            assert_called_once()
        statuses = [c[0][2] for c in
                    self.agent.conductor_api.migration_set_status.call_args_list]
        self.assertEqual(['post-migrating', 'completed'], statuses)
        self.assertEqual(set(), self.agent.tracker.instance_uuids())

    def test_guest_gone_completes_in_one_call_with_a_1_3_conductor(self):
        migration = self._interrupted('running')
        conductor = self.agent.conductor_api
        conductor.supports_short_path.return_value = True
        self.agent.driver.list_guests.return_value = {}
        fixed = reconcile.reconcile_host(self.agent, None)
        self.assertIn('completed', fixed[0])
        post = self.agent.compute_api.post_live_migration_at_destination
        self.assertEqual({'records_by_source': True}, post.call_args[1])
        self.assertEqual(migration.uuid,
                         conductor.migration_complete.call_args[0][1])
        conductor.migration_set_status.assert_not_called()
        self.assertEqual(set(), self.agent.tracker.instance_uuids())

    def test_guest_on_neither_host_is_lost_not_completed(self):
        for short_path in (True, False):
            self.agent.conductor_api.reset_mock()
            self.agent.compute_api.reset_mock()
            migration = self._interrupted('running')
            conductor = self.agent.conductor_api
            conductor.supports_short_path.return_value = short_path
            self.agent.driver.list_guests.return_value = {}
            post = self.agent.compute_api.post_live_migration_at_destination
            post.side_effect = exception.GuestNotArrived(
                instance_uuid=self.inst.uuid, host=migration.dest_host,
                migration_uuid=migration.uuid)
            fixed = reconcile.reconcile_host(self.agent, None)
            self.assertIn('lost', fixed[0])
            conductor.migration_complete.assert_not_called()
            self.agent.compute_api.drop_move_claim_at_destination.\
                assert_called_once()
            final = conductor.migration_set_status.call_args
            self.assertEqual((migration.uuid, 'error'), final[0][1:3])
            self.assertIn('guest lost', final[1]['error'])

    def test_queued_migrations_are_left_to_the_conductor(self):
        self._interrupted('queued')
        self.assertEqual([], reconcile.reconcile_host(self.agent, None))
        self.agent.compute_api.rollback_live_migration_at_destination.\
            assert_not_called()

    def test_recorded_guest_missing_from_the_hypervisor(self):
        self.agent.driver.list_guests.return_value = {}
        fixed = reconcile.reconcile_host(self.agent, None)
        self.assertIn('power state set to shutdown', fixed[0])
        self.agent.conductor_api.instance_update.assert_called_once_with(
            None, self.inst.uuid, {'power_state': 'shutdown'})

    def test_records_and_hypervisor_agree(self):
        self.assertEqual([], reconcile.reconcile_host(self.agent, None))


class DestinationReconcileTest(base.TestCase):
    """A destination restarting completes what its source left."""

    def setUp(self):
        super().setUp()
        self.inst = cbase.instance(host=cbase.SOURCE, pins={0: 2, 1: 10})
        self.agent = cbase.agent(host=cbase.HOST, guests={
            self.inst.uuid: 'guest'})
        self.agent.conductor_api.instance_get.return_value = self.inst
        self.migration = cbase.migration(self.inst, status='post-migrating')
        self.agent.conductor_api.migration_get_in_progress_by_host.\
            return_value = [self.migration]
        self.arrived = mock.Mock()
        self.agent = dataclasses.replace(self.agent, flows=dataclasses.replace(
            self.agent.flows, post_at_destination=self.arrived))

    def test_post_migrating_guest_here_is_completed(self):
        fixed = reconcile.reconcile_host(self.agent, None)
        self.assertIn('completed by the destination', fixed[0])
        self.arrived.assert_called_once()
        args = self.agent.conductor_api.migration_set_status.call_args[0]
        self.assertEqual((self.migration.uuid, 'completed'), args[1:3])

    def test_running_is_left_to_the_source(self):
        self.migration.status = 'running'
        self.assertEqual([], reconcile.reconcile_host(self.agent, None))
        self.arrived.assert_not_called()


class PostcopyPausedReconcileTest(SourceAgentTestCase):
    """A postcopy-paused migration waits for its operator, at start and
    periodically, while its guest waits paused here."""

    def setUp(self):
        super().setUp()
        self.migration = self._interrupted('postcopy-paused')
        self.agent.driver.postcopy_paused.return_value = True

    def test_paused_guest_is_left_alone(self):
        for reconcile_pass in (reconcile.reconcile_host,
                               reconcile.reconcile_outgoing):
            self.assertEqual([], reconcile_pass(self.agent, None))
        self.agent.conductor_api.migration_set_status.assert_not_called()
        self.agent.conductor_api.migration_complete.assert_not_called()
        api = self.agent.compute_api
        api.rollback_live_migration_at_destination.assert_not_called()
        api.drop_move_claim_at_destination.assert_not_called()

    def test_guest_that_left_is_completed(self):
        # Its resume completed in libvirt, the agent died before it was
        # recorded.
        self.agent.conductor_api.supports_short_path.return_value = True
        self.agent.driver.list_guests.return_value = {}
        fixed = reconcile.reconcile_outgoing(self.agent, None)
        self.assertIn('completed', fixed[0])
        self.assertEqual(
            self.migration.uuid,
            self.agent.conductor_api.migration_complete.call_args[0][1])
        self.assertEqual(set(), self.agent.tracker.instance_uuids())

    def test_guest_on_neither_host_is_lost(self):
        self.agent.driver.list_guests.return_value = {}
        self.agent.compute_api.post_live_migration_at_destination.\
            side_effect = exception.GuestNotArrived(
                instance_uuid=self.inst.uuid, host=self.migration.dest_host,
                migration_uuid=self.migration.uuid)
        fixed = reconcile.reconcile_host(self.agent, None)
        self.assertIn('lost', fixed[0])
        self.agent.compute_api.drop_move_claim_at_destination.\
            assert_called_once()
        final = self.agent.conductor_api.migration_set_status.call_args
        self.assertEqual((self.migration.uuid, 'error'), final[0][1:3])

    def test_resume_driven_here_is_left_alone(self):
        self.agent.driver.list_guests.return_value = {}
        self.agent.outgoing.register(mock.Mock(migration=self.migration))
        self.assertEqual([], reconcile.reconcile_outgoing(self.agent, None))
        self.agent.conductor_api.migration_complete.assert_not_called()


class OutgoingReconcileTest(SourceAgentTestCase):
    """The periodic pass ends only migrations no thread here drives."""

    def test_abandoned_running_migration_is_rolled_back(self):
        migration = self._interrupted('running')
        self.agent.conductor_api.migration_get.return_value = migration
        fixed = reconcile.reconcile_outgoing(self.agent, None)
        self.assertIn('rolled back', fixed[0])

    def test_migration_driven_here_is_left_alone(self):
        migration = self._interrupted('running')
        self.agent.conductor_api.migration_get.return_value = migration
        self.agent.outgoing.register(mock.Mock(migration=migration))
        self.assertEqual([], reconcile.reconcile_outgoing(self.agent, None))
        self.agent.compute_api.rollback_live_migration_at_destination.\
            assert_not_called()

    def test_migration_that_ended_meanwhile_is_left_alone(self):
        migration = self._interrupted('running')
        ended = migration.obj_clone()
        ended.status = 'completed'
        self.agent.conductor_api.migration_get.return_value = ended
        self.assertEqual([], reconcile.reconcile_outgoing(self.agent, None))
