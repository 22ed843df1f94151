"""Tests of numamig.compute.migration_dest: the destination's side."""

import dataclasses
from unittest import mock

from numamig import cpumodel
from numamig import exception
from numamig import objects
from numamig import releases
from numamig.compute import migration_dest
from tests import base
from tests.unit.compute import base as cbase


def _source_answers(src_flag):
    """A check_can_live_migrate_source that sets the source's flag."""
    def answer(ctxt, instance, dest_check_data):
        data = dest_check_data.obj_clone()
        data.src_supports_numa_live_migration = bool(
            src_flag and dest_check_data.dst_supports_numa_live_migration)
        return data
    return answer


class CheckDestinationTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.agent = cbase.agent()
        self.agent.driver.build_migrate_info.return_value = \
            objects.NUMAMigrateInfo(cell_pins={0: {1}})
        self.inst = cbase.instance(pins={0: 2, 1: 10})
        self.migration = cbase.migration(self.inst)

    def _check(self, src_flag=True, migration=True):
        self.agent.compute_api.check_can_live_migrate_source.side_effect = \
            _source_answers(src_flag)
        return migration_dest.check_destination(
            self.agent, None, self.inst, cbase.SOURCE, self.migration.uuid,
            migration=self.migration if migration else None, limits=None)

    def test_both_sides_new_claims_and_sends_numa_info(self):
        data = self._check()
        self.assertTrue(data.dst_supports_numa_live_migration)
        self.assertTrue(data.src_supports_numa_live_migration)
        self.assertIsNotNone(data.dst_numa_info)
        self.assertTrue(data.emulated)
        claim = self.agent.tracker.get_claim(self.migration.uuid)
        self.agent.driver.build_migrate_info.assert_called_once_with(
            claim.topology, self.agent.tracker.usage_topology())

    def test_a_guest_of_the_same_name_here_refuses_before_claiming(self):
        self.agent.driver.list_guests.return_value = {
            cbase.new_uuid(): self.inst.name}
        self.assertRaisesMessage(exception.MigrationPreCheckError,
                                 f"a guest named {self.inst.name!r}",
                                 self._check)
        self.assertEqual([], self.agent.tracker.claims())

    def test_a_repeat_after_the_rollback_claims_nothing(self):
        self._check()
        migration_dest.rollback_at_destination(self.agent, None, self.inst,
                                               self.migration)
        self.assertRaisesMessage(exception.MigrationPreCheckError,
                                 'back already', self._check)
        self.assertEqual([], self.agent.tracker.claims())
        self.assertEqual(set(), cbase.pinned(
            self.agent.tracker.usage_topology()))

    def test_old_conductor_no_offer_no_claim(self):
        data = self._check(migration=False)
        self.assertFalse(data.dst_supports_numa_live_migration)
        self.assertIsNone(data.dst_numa_info)
        self.assertEqual([], self.agent.tracker.claims())

    def test_source_declines_no_claim(self):
        data = self._check(src_flag=False)
        self.assertTrue(data.dst_supports_numa_live_migration)
        self.assertIsNone(data.dst_numa_info)
        self.assertEqual([], self.agent.tracker.claims())

    def test_numa_info_failure_drops_the_claim(self):
        self.agent.driver.build_migrate_info.side_effect = \
            exception.DomainXMLError(domain='d', reason='broken')
        self.assertRaises(exception.DomainXMLError, self._check)
        self.assertEqual([], self.agent.tracker.claims())
        self.agent.conductor_api.migration_context_drop.assert_called_once_with(
            None, self.inst.uuid, self.migration.uuid,
            dest_host=self.agent.host)

    def test_refuses_a_guest_already_here(self):
        self.agent.driver.list_guests.return_value = {self.inst.uuid: 'g'}
        self.assertRaisesMessage(exception.MigrationPreCheckError,
                                 'already has a guest', self._check)
        self.agent.compute_api.check_can_live_migrate_source.\
            assert_not_called()


class DestinationStepsTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.agent = cbase.agent()
        self.agent.driver.build_migrate_info.return_value = \
            objects.NUMAMigrateInfo(cell_pins={0: {1}})
        self.agent.compute_api.check_can_live_migrate_source.side_effect = \
            _source_answers(True)
        self.inst = cbase.instance(pins={0: 2, 1: 10})
        self.migration = cbase.migration(self.inst)
        self.data = migration_dest.check_destination(
            self.agent, None, self.inst, cbase.SOURCE, self.migration.uuid,
            migration=self.migration)
        # The guest has arrived, unless a test says otherwise.
        self.agent.driver.list_guests.return_value = {
            self.inst.uuid: 'guest'}

    def test_post_refuses_a_guest_the_hypervisor_here_lacks(self):
        # The source lost the guest mid-way: recording the claim as its
        # placement would record it completed where it runs nowhere.
        self.agent.driver.list_guests.return_value = {}
        exc = self.assertRaises(
            exception.GuestNotArrived, migration_dest.post_at_destination,
            self.agent, None, self.inst, self.migration)
        self.assertIn(cbase.HOST, str(exc))
        self.assertIsNotNone(self.agent.tracker.get_claim(
            self.migration.uuid))
        self.agent.conductor_api.migration_context_apply.assert_not_called()
        self.agent.conductor_api.instance_set_placement.assert_not_called()

    def test_pre_live_migration_refuses_once_the_claim_is_gone(self):
        self.assertIs(self.data, migration_dest.pre_live_migration(
            self.agent, None, self.inst, self.data))
        self.agent.tracker.drop_move_claim(self.migration.uuid)
        self.assertRaisesMessage(exception.MigrationError,
                                 'no longer holds the claim',
                                 migration_dest.pre_live_migration,
                                 self.agent, None, self.inst, self.data)

    def test_post_applies_the_migration_context(self):
        claim = self.agent.tracker.get_claim(self.migration.uuid)
        arrived = self.inst.obj_clone()
        arrived.host, arrived.numa_topology = cbase.HOST, claim.topology
        self.agent.conductor_api.migration_context_apply.return_value = arrived
        result = migration_dest.post_at_destination(
            self.agent, None, self.inst, self.migration)
        self.assertIs(arrived, result)
        self.assertEqual([], self.agent.tracker.claims())
        self.assertEqual({self.inst.uuid},
                         self.agent.tracker.instance_uuids())
        self.agent.conductor_api.instance_set_placement.assert_not_called()

    def test_post_without_claim_reads_the_placement_back(self):
        self.agent.tracker.drop_move_claim(self.migration.uuid)
        arrived = self.inst.obj_clone()
        arrived.host = cbase.HOST
        self.agent.driver.get_guest_topology.return_value = \
            self.inst.numa_topology
        self.agent.conductor_api.instance_set_placement.return_value = arrived
        migration_dest.post_at_destination(self.agent, None, self.inst,
                                           self.migration)
        self.agent.conductor_api.instance_set_placement.assert_called_once_with(
            None, self.inst.uuid, cbase.HOST, self.inst.numa_topology)
        self.agent.conductor_api.migration_context_apply.assert_not_called()

    def test_rollback_removes_the_copy_and_the_claim(self):
        self.agent.driver.list_guests.return_value = {self.inst.uuid: 'g'}
        migration_dest.rollback_at_destination(self.agent, None, self.inst,
                                               self.migration)
        self.agent.driver.destroy.assert_called_once_with(self.inst.uuid)
        self.assertEqual([], self.agent.tracker.claims())
        self.agent.conductor_api.migration_context_drop.assert_called_with(
            None, self.inst.uuid, self.migration.uuid,
            dest_host=self.agent.host)

    def test_rollback_never_destroys_the_guest_on_its_own_host(self):
        inst = self.inst.obj_clone()
        inst.host = cbase.HOST
        self.agent.driver.list_guests.return_value = {inst.uuid: 'g'}
        migration_dest.rollback_at_destination(self.agent, None, inst,
                                               self.migration)
        self.agent.driver.destroy.assert_not_called()

    def test_rollback_never_destroys_a_guest_that_arrived(self):
        # A repeated rollback request names the instance as it was before
        # the migration (on the source); the guest has arrived here.
        arrived = self.inst.obj_clone()
        arrived.host = cbase.HOST
        self.agent.tracker.track_instance(arrived)
        self.agent.driver.list_guests.return_value = {self.inst.uuid: 'g'}
        migration_dest.rollback_at_destination(self.agent, None, self.inst,
                                               self.migration)
        self.agent.driver.destroy.assert_not_called()

    def test_drop_claim_is_idempotent(self):
        for _ in range(2):
            migration_dest.drop_claim(self.agent, None, self.inst,
                                      self.migration.uuid)
        self.assertEqual([], self.agent.tracker.claims())
        self.assertEqual(
            2, self.agent.conductor_api.migration_context_drop.call_count)

    def test_accept_emulated_defines_the_xml(self):
        self.agent.driver.list_guests.return_value = {}
        migration_dest.accept_emulated(self.agent, None, self.inst,
                                       self.migration, '<domain/>')
        self.agent.driver.accept_emulated_migration.assert_called_once_with(
            self.inst.uuid, '<domain/>')

    def test_accept_emulated_again_leaves_the_arrived_guest(self):
        # Defined again, the running guest would lose its persistent
        # definition (libvirt refuses to start it twice, and the define
        # was undone).
        self.agent.driver.list_guests.return_value = {self.inst.uuid: 'g'}
        self.assertIsNone(migration_dest.accept_emulated(
            self.agent, None, self.inst, self.migration, '<domain/>'))
        self.agent.driver.accept_emulated_migration.assert_not_called()

    def test_accept_emulated_after_the_rollback_is_refused(self):
        self.agent.driver.list_guests.return_value = {}
        migration_dest.rollback_at_destination(self.agent, None, self.inst,
                                               self.migration)
        self.assertRaises(exception.MigrationError,
                          migration_dest.accept_emulated, self.agent, None,
                          self.inst, self.migration, '<domain/>')
        self.agent.driver.accept_emulated_migration.assert_not_called()



class ConductorDrivenCheckTest(base.TestCase):
    """API 1.3: the conductor hands the source's answer over."""

    def setUp(self):
        super().setUp()
        self.agent = cbase.agent()
        self.agent.driver.build_migrate_info.return_value = \
            objects.NUMAMigrateInfo(cell_pins={0: {1}})
        self.inst = cbase.instance(pins={0: 2, 1: 10})
        self.migration = cbase.migration(self.inst)

    def _source_data(self, src_flag=True, version=None):
        data = objects.LiveMigrateData(
            instance_uuid=self.inst.uuid, source_host=cbase.SOURCE,
            dest_host=cbase.HOST, migration_uuid=self.migration.uuid,
            src_supports_numa_live_migration=src_flag)
        if version is not None:
            data = releases.backported(data, version)
        return data

    def _check(self, source_data):
        return migration_dest.check_destination(
            self.agent, None, self.inst, cbase.SOURCE, self.migration.uuid,
            migration=self.migration, limits=None, source_data=source_data)

    def test_calls_no_agent_and_returns_an_unrecorded_claim(self):
        data = self._check(self._source_data())
        self.agent.compute_api.check_can_live_migrate_source.\
            assert_not_called()
        self.agent.conductor_api.migration_context_set.assert_not_called()
        claim = self.agent.tracker.get_claim(self.migration.uuid)
        self.assertFalse(claim.persisted)
        context = data.migration_context
        self.assertEqual(
            (self.migration.uuid, cbase.SOURCE, cbase.HOST),
            (context.migration_uuid, context.source_host, context.dest_host))
        self.assertEqual(claim.topology, context.new_numa_topology)
        self.assertEqual(self.inst.numa_topology, context.old_numa_topology)
        self.assertIsNotNone(data.dst_numa_info)
        self.assertTrue(data.src_supports_numa_live_migration)

    def test_asked_twice_returns_the_same_claim(self):
        first = self._check(self._source_data())
        second = self._check(self._source_data())
        self.assertEqual(1, len(self.agent.tracker.claims()))
        self.assertEqual(first.migration_context.new_numa_topology,
                         second.migration_context.new_numa_topology)

    def test_old_source_no_claim_answer_in_its_version(self):
        data = self._check(self._source_data(version='1.0'))
        self.assertEqual('1.0', data.VERSION)
        self.assertEqual([], self.agent.tracker.claims())
        self.assertIsNone(data.get('migration_context'))

    def test_declining_source_no_claim(self):
        data = self._check(self._source_data(src_flag=False))
        self.assertIsNone(data.dst_numa_info)
        self.assertIsNone(data.get('migration_context'))
        self.assertEqual([], self.agent.tracker.claims())


class PostRecordedBySourceTest(base.TestCase):
    """API 1.3: the source records the claim applied; this host counts."""

    def setUp(self):
        super().setUp()
        self.agent = cbase.agent()
        self.agent = dataclasses.replace(
            self.agent, reporter=mock.Mock(name='reporter'))
        self.inst = cbase.instance(pins={0: 2, 1: 10})
        self.migration = cbase.migration(self.inst)
        self.agent.driver.build_migrate_info.return_value = \
            objects.NUMAMigrateInfo(cell_pins={0: {1}})
        source = objects.LiveMigrateData(
            instance_uuid=self.inst.uuid, source_host=cbase.SOURCE,
            dest_host=cbase.HOST, migration_uuid=self.migration.uuid,
            src_supports_numa_live_migration=True)
        migration_dest.check_destination(
            self.agent, None, self.inst, cbase.SOURCE, self.migration.uuid,
            migration=self.migration, source_data=source)
        self.claim = self.agent.tracker.get_claim(self.migration.uuid)
        self.agent.driver.list_guests.return_value = {
            self.inst.uuid: 'guest'}

    def _post(self):
        return migration_dest.post_at_destination(
            self.agent, None, self.inst, self.migration,
            records_by_source=True)

    def test_counts_the_claim_without_the_records(self):
        arrived = self._post()
        conductor = self.agent.conductor_api
        conductor.migration_context_apply.assert_not_called()
        conductor.instance_set_placement.assert_not_called()
        self.assertEqual((cbase.HOST, self.claim.topology),
                         (arrived.host, arrived.numa_topology))
        self.assertEqual([], self.agent.tracker.claims())
        self.assertIn(self.inst.uuid, self.agent.tracker.instance_uuids())
        self.agent.reporter.request.assert_called_once()

    def test_plugs_the_claimed_devices_before_counting(self):
        # Measured on real QEMU (numamig-ci device-move): the source
        # records the arrival, the destination must still plug its own.
        self.claim.topology.pci_devices = [objects.InstancePCIDevice(
            alias='nic', address='0000:82:00.0', host_node=1,
            guest_cell=0)]
        self.agent.driver.verify_device_affinity.return_value = []
        self._post()
        self.agent.driver.attach_devices.assert_called_once_with(
            self.inst.uuid, [('nic', '0000:82:00.0', 0)])

    def test_records_the_verification_with_the_migration(self):
        self.claim.topology.pci_devices = [objects.InstancePCIDevice(
            alias='nic', address='0000:82:00.0', host_node=1,
            guest_cell=0)]
        self.agent.driver.verify_device_affinity.return_value = [
            {'alias': 'nic', 'address': '0000:82:00.0', 'guest_cell': 0,
             'cell_nodes': [1], 'device_node': 1, 'present': True,
             'local': True}]
        self._post()
        self.agent.conductor_api.migration_record_devices.\
            assert_called_once_with(None, self.migration.uuid, cbase.HOST, [
                {'alias': 'nic', 'address': '0000:82:00.0',
                 'guest_cell': '0', 'cell_nodes': '1', 'device_node': '1',
                 'plugged': 'yes', 'local': 'yes'}])

    def test_no_device_claimed_nothing_plugged(self):
        self._post()
        self.agent.driver.attach_devices.assert_not_called()

    def test_repeated_request_counts_it_once(self):
        usage = None
        for _ in range(2):
            self._post()
            if usage is None:
                usage = self.agent.tracker.usage_topology()
        self.assertEqual(usage, self.agent.tracker.usage_topology())
        self.assertEqual(1, len(self.agent.tracker.instances()))
        # Neither the records nor the guest's XML were asked.
        self.agent.conductor_api.instance_get.assert_not_called()
        self.agent.driver.get_guest_topology.assert_not_called()


class CheckDestinationCPUTest(base.TestCase):
    """The destination refuses a guest whose CPU it cannot run."""

    GUEST = cpumodel.GuestCPU('custom', 'Icelake-Server', frozenset({'pku'}))

    def setUp(self):
        super().setUp()
        self.agent = cbase.agent()
        self.agent.driver.build_migrate_info.return_value = \
            objects.NUMAMigrateInfo(cell_pins={0: {1}})
        self.inst = cbase.instance(pins={0: 2, 1: 10})
        self.migration = cbase.migration(self.inst)

    def _source_data(self, guest):
        data = objects.LiveMigrateData(
            instance_uuid=self.inst.uuid, source_host=cbase.SOURCE,
            dest_host=cbase.HOST, migration_uuid=self.migration.uuid,
            src_supports_numa_live_migration=True)
        data.set_guest_cpu(guest)
        return data

    def _check(self, source_data):
        return migration_dest.check_destination(
            self.agent, None, self.inst, cbase.SOURCE, self.migration.uuid,
            migration=self.migration, limits=None, source_data=source_data)

    def test_refused_with_the_missing_features_and_nothing_claimed(self):
        self.agent.driver.compare_guest_cpu.return_value = \
            cpumodel.Compatibility(False, "CPU model Icelake-Server is not "
                                          "usable here: missing features: "
                                          "avx512vbmi, pku",
                                   ('avx512vbmi', 'pku'))
        exc = self.assertRaises(exception.MigrationPreCheckError,
                                self._check, self._source_data(self.GUEST))
        self.assertIn(f"host {cbase.HOST} cannot run the CPU of instance "
                      f"{self.inst.uuid} (custom Icelake-Server +1 "
                      f"features): CPU model Icelake-Server is not usable "
                      f"here: missing features: avx512vbmi, pku", str(exc))
        self.agent.driver.compare_guest_cpu.assert_called_once_with(
            self.GUEST)
        self.assertIsNone(self.agent.tracker.get_claim(self.migration.uuid))

    def test_runs_claims(self):
        self._check(self._source_data(self.GUEST))
        self.assertIsNotNone(self.agent.tracker.get_claim(
            self.migration.uuid))

    def test_source_that_told_no_cpu_is_not_checked(self):
        self._check(self._source_data(None))
        self.agent.driver.compare_guest_cpu.assert_not_called()

    def test_source_asked_by_this_host_is_checked_too(self):
        self.agent.driver.compare_guest_cpu.return_value = \
            cpumodel.Compatibility(False, "no", ('pku',))
        answer = self._source_data(self.GUEST)
        self.agent.compute_api.check_can_live_migrate_source.return_value = \
            answer
        self.assertRaises(
            exception.MigrationPreCheckError, migration_dest.check_destination,
            self.agent, None, self.inst, cbase.SOURCE, self.migration.uuid,
            migration=self.migration, limits=None)
