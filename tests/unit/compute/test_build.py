"""Tests of numamig.compute.build: creating a guest on this host."""

import fixtures

from numamig import exception
from numamig import objects
from numamig.compute import build
from numamig.numa import constraints
from tests import base
from tests.unit.compute import base as cbase


class BuildInstanceTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.agent = cbase.agent()
        self.guest = cbase.instance(host=None)
        self.guest.power_state = 'unknown'
        self.agent.conductor_api.instance_set_placement.side_effect = \
            self._placed

    def _placed(self, ctxt, uuid, host, topology):
        placed = self.guest.obj_clone()
        placed.host, placed.numa_topology = host, topology
        return placed

    def test_a_built_guest_is_recorded_running(self):
        running = self.guest.obj_clone()
        running.power_state = 'running'
        self.agent.conductor_api.instance_update.return_value = running
        built = build.build_instance(self.agent, None, self.guest, None)
        self.agent.conductor_api.instance_update.assert_called_once_with(
            None, self.guest.uuid, {'power_state': 'running'})
        self.assertEqual('running', built.power_state)
        self.agent.driver.spawn.assert_called_once()

    def test_an_unrecorded_power_state_does_not_fail_the_build(self):
        self.agent.conductor_api.instance_update.side_effect = \
            RuntimeError('conductor gone')
        built = build.build_instance(self.agent, None, self.guest, None)
        self.assertEqual(cbase.HOST, built.host)
        self.assertIn(self.guest.uuid, self.agent.tracker.instance_uuids())

    def test_a_failed_spawn_raises_its_own_error(self):
        # Before: clearing the placement was refused by the conductor's
        # declared arguments (host None), and that refusal was what the
        # operator read instead of libvirt's reason.
        self.agent.driver.spawn.side_effect = exception.HypervisorError(
            host=cbase.HOST, action='spawn', reason="domain 'g' exists")
        placements = []

        def placed(ctxt, uuid, host, topology):
            placements.append(host)
            if host is None:
                raise exception.InvalidRPCArgument(
                    method='instance_set_placement', argument='host',
                    reason='must be a host name, not null')
            return self._placed(ctxt, uuid, host, topology)
        self.agent.conductor_api.instance_set_placement.side_effect = placed
        log = self.useFixture(fixtures.FakeLogger('numamig.compute.build'))
        self.assertRaisesMessage(exception.HypervisorError,
                                 "domain 'g' exists", build.build_instance,
                                 self.agent, None, self.guest, None)
        self.assertEqual([cbase.HOST, None], placements)
        self.assertIn('was not cleared', log.output)
        self.assertEqual(set(), self.agent.tracker.instance_uuids())
        self.assertEqual(set(), cbase.pinned(
            self.agent.tracker.usage_topology()))

    def test_a_name_another_guest_here_has_is_refused(self):
        self.guest.name = 'dup'
        self.agent.driver.list_guests.return_value = {cbase.new_uuid(): 'dup'}
        self.assertRaisesMessage(exception.MigrationPreCheckError,
                                 "a guest named 'dup' runs on",
                                 build.build_instance, self.agent, None,
                                 self.guest, None)
        self.agent.conductor_api.instance_set_placement.assert_not_called()
        self.agent.driver.spawn.assert_not_called()
        self.assertEqual(set(), cbase.pinned(
            self.agent.tracker.usage_topology()))


class RepeatedBuildTest(BuildInstanceTest):
    """The same build delivered twice (issue 15, F6)."""

    def test_a_repeated_build_changes_nothing(self):
        # The first build's record, as the conductor keeps it.
        self.agent.conductor_api.instance_update.side_effect = \
            lambda ctxt, uuid, values: self._placed(
                ctxt, uuid, cbase.HOST, self.placed_topology)
        self.placed_topology = None
        built = build.build_instance(self.agent, None, self.guest, None)
        self.agent.conductor_api.instance_get.return_value = built
        self.agent.driver.list_guests.return_value = {self.guest.uuid: 'g'}
        self.agent.conductor_api.instance_set_placement.reset_mock()
        self.agent.driver.spawn.reset_mock()
        usage_before = self.agent.tracker.usage_topology()
        again = build.build_instance(self.agent, None, self.guest, None)
        self.assertIs(built, again)
        self.agent.driver.spawn.assert_not_called()
        self.agent.conductor_api.instance_set_placement.assert_not_called()
        self.assertEqual(usage_before, self.agent.tracker.usage_topology())
        self.assertIn(self.guest.uuid, self.agent.tracker.instance_uuids())

    def test_a_stranger_of_the_same_uuid_is_refused_untouched(self):
        elsewhere = self.guest.obj_clone()
        elsewhere.host = 'other-host'
        self.agent.conductor_api.instance_get.return_value = elsewhere
        self.agent.driver.list_guests.return_value = {self.guest.uuid: 'g'}
        self.assertRaises(exception.MigrationPreCheckError,
                          build.build_instance, self.agent, None,
                          self.guest, None)
        self.agent.conductor_api.instance_set_placement.assert_not_called()
        self.agent.driver.destroy.assert_not_called()


class AdoptedSpecsTest(base.TestCase):
    """An adopted guest's specs ask for its virtio-mem devices again."""

    def _topology(self, sizes=(512, 512)):
        return objects.InstanceNUMATopology(cells=[
            objects.InstanceNUMACell(
                id=i, host_cell=i, cpuset={i}, memory_mb=256,
                **({} if size is None else {
                    'virtio_mem_size_mb': size, 'virtio_mem_block_kb': 2048,
                    'virtio_mem_requested_mb': 128,
                    'virtio_mem_current_mb': 128}))
            for i, size in enumerate(sizes)])

    def test_specs_rebuild_the_devices(self):
        specs = build.specs_of(self._topology())
        self.assertEqual(('512', '2048'), (specs['hw:virtio_mem_size'],
                                           specs['hw:virtio_mem_block']))
        request = constraints.get_numa_request(2, 512, specs, {})
        self.assertEqual([(512, 2048)] * 2, [
            (c.virtio_mem_size_mb, c.virtio_mem_block_kb)
            for c in request.cells])

    def test_no_device_no_key(self):
        specs = build.specs_of(self._topology(sizes=(None, None)))
        self.assertFalse([k for k in specs if 'virtio_mem' in k])

    def test_devices_the_keys_cannot_describe_are_refused(self):
        for sizes in ((512, 1024), (512, None)):
            exc = self.assertRaises(exception.InvalidNUMASpec, build.specs_of,
                                    self._topology(sizes=sizes))
            self.assertIn('one virtio-mem device of one size', str(exc))
