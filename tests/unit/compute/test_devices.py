"""Guests with passed-through devices in a migration: the per-guest
refusal, the source's unplug before the copy and plug back on a
rollback, the destination's plug and verification on arrival."""

from unittest import mock

from numamig import exception
from numamig import objects
from numamig.compute import devices
from numamig.compute import events
from numamig.compute import migration_source
from numamig.compute import resource_tracker
from tests import base
from tests.unit.compute import base as cbase
from tests.unit.compute import test_migration_source as source_tests

_DETACHED = [{'address': '0000:81:00.0', 'alias': 'hostdev0',
              'xml': '<hostdev/>'}]


class ModeTest(base.TestCase):

    def _instance(self, flavor=None, image=None):
        specs = {'hw:cpu_policy': 'dedicated'}
        if flavor:
            specs[devices.FLAVOR_KEY] = flavor
        inst = cbase.instance(extra_specs=specs)
        inst.image_properties = {devices.IMAGE_KEY: image} if image else {}
        return inst

    def test_default_flavor_then_image(self):
        self.assertEqual(('unplug', 'default'),
                         devices.migration_mode(self._instance()))
        self.assertEqual('refuse', devices.migration_mode(
            self._instance(image='refuse'))[0])
        self.assertEqual(('unplug', f'flavor {devices.FLAVOR_KEY}'),
                         devices.migration_mode(
                             self._instance('unplug', 'refuse')))

    def test_bad_value_is_one_line(self):
        exc = self.assertRaises(exception.MigrationPreCheckError,
                                devices.migration_mode,
                                self._instance('sometimes'))
        self.assertNotIn('\n', str(exc))
        self.assertIn("'sometimes' is not one of unplug, refuse", str(exc))

    def test_refuse_only_a_guest_holding_devices(self):
        agent = cbase.agent(host=cbase.SOURCE)
        inst = self._instance('refuse')
        devices.check_source(agent, inst)          # holds none: moves
        agent.driver.assigned_devices.return_value = ['0000:81:00.0']
        exc = self.assertRaises(exception.MigrationPreCheckError,
                                devices.check_source, agent, inst)
        self.assertIn('0000:81:00.0', str(exc))
        self.assertIn(f'flavor {devices.FLAVOR_KEY}', str(exc))
        self.assertNotIn('\n', str(exc))
        agent.driver.detach_devices.assert_not_called()

    def test_source_check_refuses(self):
        agent = cbase.agent(host=cbase.SOURCE)
        inst = self._instance(image='refuse')
        agent.driver.list_guests.return_value = {inst.uuid: inst.name}
        agent.driver.assigned_devices.return_value = ['0000:81:00.0']
        self.assertRaises(exception.MigrationPreCheckError,
                          migration_source.check_source, agent, None, inst,
                          mock.Mock())


class ClaimedPlacementsTest(base.TestCase):

    def test_from_claim_records_or_none(self):
        self.assertEqual([], devices.claimed_placements(None))
        self.assertEqual([], devices.claimed_placements(object()))
        claim = mock.Mock(pci_devices=[
            {'alias': 'nic', 'address': '0000:82:00.0', 'guest_cell': 1},
            mock.Mock(alias='gpu', address='0000:83:00.0', guest_cell='0')])
        self.assertEqual([('nic', '0000:82:00.0', 1),
                          ('gpu', '0000:83:00.0', 0)],
                         devices.claimed_placements(claim))

    def test_from_a_move_claims_placement(self):
        # What the resource tracker's move claim holds: the placed
        # topology, its functions chosen by numa.pci.
        topology = objects.InstanceNUMATopology(
            instance_uuid='7d6b8d2c-2f0a-4a4e-9c38-1c1f0a9e3b21', cells=[],
            pci_devices=[objects.InstancePCIDevice(
                alias='vf', address='0000:82:00.1', host_node=1,
                guest_cell=1)])
        claim = resource_tracker.MoveClaim(
            '7d6b8d2c-2f0a-4a4e-9c38-1c1f0a9e3b21', 'demo', 'm-1',
            topology)
        self.assertEqual([('vf', '0000:82:00.1', 1)],
                         devices.claimed_placements(claim))
        topology.pci_devices = []
        self.assertEqual([], devices.claimed_placements(claim))


class SourceFlowTest(source_tests._SourceMigrationTestCase):

    def setUp(self):
        super().setUp()
        self.agent = cbase.agent(host=cbase.SOURCE, instances=[self.inst])
        self.agent = self.agent.__class__(**{
            **self.agent.__dict__, 'device_detach_timeout': 7.0})
        api = self.agent.conductor_api
        api.migration_set_status.side_effect = self._set_status
        self.agent.compute_api.pre_live_migration.side_effect = \
            lambda ctxt, instance, data, **kwargs: data
        self.agent.driver.get_destination_xml.return_value = '<new/>'
        self.agent.driver.detach_devices.return_value = _DETACHED
        self.order = []
        self.errors = []
        self.agent.driver.detach_devices.side_effect = \
            lambda *a, **k: self.order.append('unplug') or _DETACHED
        self.agent.compute_api.accept_emulated_migration.side_effect = \
            lambda *a, **k: self.order.append('copy')

    def _set_status(self, ctxt, uuid, status, detail=None, error=None,
                    result=None, timeout=None):
        self.statuses.append(status)
        self.errors.append(error)
        migration = self.migration.obj_clone()
        migration.status = status
        return migration

    def test_unplugged_before_the_copy_not_plugged_back(self):
        self._run()
        self.assertEqual('completed', self.statuses[-1])
        self.assertEqual(['unplug', 'copy'], self.order)
        self.agent.driver.detach_devices.assert_called_once_with(
            self.inst.uuid, 7.0, on_late=mock.ANY)
        self.agent.driver.reattach_devices.assert_not_called()

    def test_failed_copy_plugs_the_source_devices_back(self):
        def fail(*a, **k):
            raise exception.HypervisorError(host='dst', action='define',
                                            reason='no')
        self.agent.compute_api.accept_emulated_migration.side_effect = fail
        self._run()
        self.assertEqual('failed', self.statuses[-1])
        self.agent.driver.reattach_devices.assert_called_once_with(
            self.inst.uuid, _DETACHED)
        self.agent.compute_api.drop_move_claim_at_destination.\
            assert_called_once()

    def test_guest_that_keeps_its_device_fails_before_the_copy(self):
        self.agent.driver.detach_devices.side_effect = \
            exception.DeviceDetachFailed(instance='u', host='src',
                                         address='0000:81:00.0',
                                         reason='not released in 7 s')
        job = self._run()
        self.assertEqual('failed', self.statuses[-1])
        # The operator's one line: the device, the host, the deadline.
        self.assertIn('could not unplug PCI device 0000:81:00.0',
                      self.errors[-1])
        self.assertIn('not released in 7 s', self.errors[-1])
        self.assertEqual([], self.order)
        self.assertEqual([], job.devices.detached)
        # Nothing was unplugged for good: nothing to plug back.
        self.agent.driver.reattach_devices.assert_not_called()
        self.agent.compute_api.rollback_live_migration_at_destination.\
            assert_called_once()
        # The destination's claim (its device included) is released.
        self.agent.compute_api.drop_move_claim_at_destination.\
            assert_called_once()

    def test_a_late_release_is_told_to_the_listeners(self):
        # The unplug timed out; the guest releases the device later and
        # the driver plugs it back, telling the callback it was given.
        self.agent.driver.detach_devices.side_effect = \
            exception.DeviceDetachFailed(instance='u', host='src',
                                         address='0000:81:00.0',
                                         reason='not released in 7 s')
        told = []
        self.agent.events.listeners.append(told.extend)
        self._run()
        on_late = self.agent.driver.detach_devices.call_args[1]['on_late']
        on_late('0000:81:00.0', 'hostdev0', 'lost', 'not plugged back')
        (event,) = told
        self.assertEqual(events.DEVICE_LATE_RELEASE, event.kind)
        self.assertEqual(
            (cbase.SOURCE, self.inst.uuid, self.migration.uuid,
             '0000:81:00.0', 'hostdev0', 'lost'),
            (event.record.host, event.record.instance_uuid,
             event.record.migration_uuid, event.record.address,
             event.record.alias, event.record.outcome))

    def test_abort_during_the_unplug_plugs_back(self):
        def unplug_then_abort(*a, **k):
            self.job.abort_requested.set()
            return _DETACHED
        self.agent.driver.detach_devices.side_effect = unplug_then_abort
        self.job = migration_source.SourceMigration(
            self.agent, None, self.inst, self.migration, self._data())
        self.job.run()
        self.assertEqual('cancelled', self.statuses[-1])
        self.agent.driver.reattach_devices.assert_called_once_with(
            self.inst.uuid, _DETACHED)
        self.agent.compute_api.accept_emulated_migration.assert_not_called()


class DestinationTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.agent = cbase.agent(host=cbase.HOST)
        self.inst = cbase.instance()
        self.migration = cbase.migration(self.inst, status='running')
        self.placements = [('nic', '0000:82:00.0', 1)]

    def _checked(self, present=True, local=True):
        return [{'alias': 'nic', 'address': '0000:82:00.0', 'guest_cell': 1,
                 'cell_nodes': [1], 'device_node': 1 if local else 0,
                 'present': present, 'local': local}]

    def test_plugs_then_verifies(self):
        self.agent.driver.verify_device_affinity.return_value = \
            self._checked()
        got = devices.plug_claimed(self.agent, None, self.inst, self.migration,
                                   self.placements)
        self.agent.driver.attach_devices.assert_called_once_with(
            self.inst.uuid, self.placements)
        self.assertEqual([True], [g['ok'] for g in got])

    def test_wrong_node_or_unplugged_is_reported_not_undone(self):
        self.agent.driver.attach_devices.side_effect = \
            exception.DeviceAttachFailed(instance='u', host='h',
                                         address='0000:82:00.0',
                                         reason='in use')
        self.agent.driver.verify_device_affinity.return_value = \
            self._checked(present=False, local=False)
        with self.assertLogs('numamig.compute.devices', 'ERROR') as logs:
            got = devices.plug_claimed(self.agent, None, self.inst,
                                       self.migration, self.placements)
        self.assertEqual([False], [g['ok'] for g in got])
        self.assertTrue(any(line.endswith(': NOT plugged')
                            for line in logs.output), logs.output)
        # Plugged on another node: said as such, not as unplugged.
        self.agent.driver.attach_devices.side_effect = None
        self.agent.driver.verify_device_affinity.return_value = \
            self._checked(present=True, local=False)
        with self.assertLogs('numamig.compute.devices', 'ERROR') as logs:
            devices.plug_claimed(self.agent, None, self.inst,
                                 self.migration, self.placements)
        self.assertTrue(any(line.endswith(
            ': plugged, NOT local to its guest cell') for line in
            logs.output), logs.output)

    def test_the_verification_is_recorded_with_the_migration(self):
        checked = self._checked(local=False)
        checked.append({'alias': 'gpu', 'address': '0000:03:00.0',
                        'guest_cell': 0, 'cell_nodes': [0, 1],
                        'device_node': None, 'present': False,
                        'local': False})
        self.agent.driver.verify_device_affinity.return_value = checked
        with self.assertLogs('numamig.compute.devices', 'ERROR'):
            devices.plug_claimed(self.agent, 'ctxt', self.inst,
                                 self.migration, self.placements)
        self.agent.conductor_api.migration_record_devices.\
            assert_called_once_with('ctxt', self.migration.uuid,
                                    self.agent.host, [
                {'alias': 'nic', 'address': '0000:82:00.0',
                 'guest_cell': '1', 'cell_nodes': '1', 'device_node': '0',
                 'plugged': 'yes', 'local': 'no'},
                {'alias': 'gpu', 'address': '0000:03:00.0',
                 'guest_cell': '0', 'cell_nodes': '0,1',
                 'device_node': None, 'plugged': 'no', 'local': 'no'}])

    def test_a_lost_record_does_not_fail_the_arrival(self):
        import oslo_messaging as messaging
        self.agent.driver.verify_device_affinity.return_value = \
            self._checked()
        self.agent.conductor_api.migration_record_devices.side_effect = \
            messaging.MessageDeliveryFailure('broker away')
        with self.assertLogs('numamig.compute.devices', 'WARNING') as logs:
            got = devices.plug_claimed(self.agent, None, self.inst,
                                       self.migration, self.placements)
        self.assertEqual([True], [g['ok'] for g in got])
        self.assertTrue(any('not recorded' in line for line in logs.output))

    def test_nothing_claimed_nothing_asked(self):
        self.assertEqual([], devices.plug_claimed(
            self.agent, None, self.inst, self.migration, []))
        self.agent.driver.attach_devices.assert_not_called()
