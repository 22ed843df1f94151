"""A compute agent's metric families, from its own tracker."""

from numamig.compute import metrics
from tests import base
from tests.unit.compute import base as cbase
from tests.unit.conductor import test_metrics as conductor_test


class AgentCollectorTest(base.TestCase):

    def test_cells_guests_claims_and_outgoing(self):
        guest = cbase.instance(host=cbase.HOST, pins={0: 1, 1: 9})
        claimed = cbase.instance(host='elsewhere', pins={0: 3})
        manager = cbase.manager(instances=[guest])
        manager.tracker.add_claim(self._claim(manager, claimed))
        found = conductor_test.Registry(
            metrics.AgentCollector(manager)).samples()
        pinned = cbase.pinned(manager.tracker.usage_topology())

        def pcpus(cell, state):
            return found[('numamig_agent_cell_pcpus',
                          (('cell', str(cell)), ('state', state)))]
        self.assertEqual(len(pinned), pcpus(0, 'pinned') + pcpus(1, 'pinned'))
        # The guest's pCPUs 1 and 9 and the claim's 3 (siblings 1/9
        # and 3/11 are cell 0's).
        self.assertEqual(3.0, pcpus(0, 'pinned'))
        self.assertEqual(16 - len(pinned),
                         pcpus(0, 'free') + pcpus(1, 'free'))
        self.assertEqual(1.0, found[('numamig_agent_guests', ())])
        self.assertEqual(1.0, found[('numamig_agent_move_claims', ())])
        self.assertEqual(0.0, found[
            ('numamig_agent_outgoing_migrations', ())])

    def _claim(self, manager, instance):
        from numamig.compute import resource_tracker
        return resource_tracker.MoveClaim(
            instance.uuid, 'demo', cbase.new_uuid(),
            instance.numa_topology)
