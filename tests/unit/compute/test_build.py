"""Tests of numamig.compute.build: creating a guest on this host."""

from numamig.compute import build
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
