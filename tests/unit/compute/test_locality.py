"""The locality watch in a compute agent: records, report and metrics."""

from numamig.compute import metrics
from numamig.compute import report
from numamig.numa import locality
from tests import base
from tests.unit.compute import base as cbase
from tests.unit.conductor import test_metrics as conductor_test


def _sample(uuid, memory, vcpus, excluded=None):
    return locality.GuestSample(uuid, memory, vcpus, excluded)


class AgentLocalityTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.flags(group='locality', policy='act', intervals_above=1)
        self.pinned = cbase.instance(host=cbase.HOST, pins={0: 1, 1: 9})
        self.floating = cbase.instance(host=cbase.HOST, extra_specs={})
        self.manager = cbase.manager(instances=[self.pinned,
                                                self.floating])
        self.manager.driver.locality_samples.return_value = [
            # Remote but pinned by the records only: never moved.
            _sample(self.pinned.uuid, {1: 4096}, {0: 2}),
            _sample(self.floating.uuid, {0: 1024, 1: 3072}, {0: 1}),
        ]

    def test_records_pin_and_floating_guest_moves(self):
        self.manager.look_at_locality()
        shown = {g.instance_uuid: g for g in
                 self.manager.locality.last.guests}
        self.assertEqual(locality.PINNED, shown[self.pinned.uuid].state)
        self.assertEqual(locality.MOVE, shown[self.floating.uuid].state)
        self.manager.driver.move_guest_memory.assert_called_once_with(
            self.floating.uuid, 0, '/proc')
        self.assertEqual({0: 1, 1: 3}, shown[self.floating.uuid].memory_mb)

    def test_the_report_carries_the_last_look(self):
        self.assertEqual('act', report.build(self.manager.agent)
                         .locality.policy)
        self.manager.look_at_locality()
        carried = report.build(self.manager.agent).locality
        self.assertEqual(2, len(carried.guests))
        # Both guests' memory: 4 MiB of the pinned one and 3 MiB of the
        # floating one remote, of 8 MiB.
        self.assertAlmostEqual(7 / 8, carried.remote_share)
        carried.validate()

    def test_metrics_of_the_last_look(self):
        self.manager.look_at_locality()
        found = conductor_test.Registry(
            metrics.LocalityCollector(self.manager)).samples()
        uuid = self.floating.uuid
        self.assertEqual(3 * 2**20, found[(
            'numamig_agent_guest_memory_bytes',
            (('instance_uuid', uuid), ('node', '1')))])
        self.assertEqual(0.75, found[(
            'numamig_agent_guest_remote_memory_share',
            (('instance_uuid', uuid), ('state', locality.MOVE)))])
        self.assertAlmostEqual(7 / 8, found[(
            'numamig_agent_remote_memory_share', ())])
        self.assertEqual(1.0, found[('numamig_agent_locality_moves_total',
                                     (('outcome', 'moved'),))])
        self.assertEqual(768.0, found[(
            'numamig_agent_locality_pages_moved_total', ())])

    def test_no_look_no_host_share(self):
        found = conductor_test.Registry(
            metrics.LocalityCollector(self.manager)).samples()
        self.assertNotIn(('numamig_agent_remote_memory_share', ()), found)
        self.assertEqual(0.0, found[('numamig_agent_locality_moves_total',
                                     (('outcome', 'failed'),))])
