"""Tests of numamig.compute.agent: what the flows of an agent get."""

import dataclasses

from numamig import releases
from numamig.compute import flows
from numamig.objects import service as service_obj
from tests import base
from tests.unit.compute import base as cbase


class AgentTest(base.TestCase):

    def test_the_manager_hands_its_own_parts(self):
        manager = cbase.manager(host='cmp1')
        agent = manager.agent
        self.assertEqual('cmp1', agent.host)
        self.assertIs(manager.tracker, agent.tracker)
        self.assertIs(manager.driver, agent.driver)
        self.assertIs(manager.conductor_api, agent.conductor_api)
        self.assertIs(manager.compute_api, agent.compute_api)
        self.assertIs(manager.reporter, agent.reporter)
        self.assertIs(manager.outgoing, agent.outgoing)

    def test_flows_cannot_change_it(self):
        agent = cbase.agent()
        self.assertRaises(dataclasses.FrozenInstanceError, setattr, agent,
                          'host', 'elsewhere')

    def test_release_decides_flows_and_version(self):
        agent = cbase.agent()
        self.assertIs(flows.CURRENT, agent.flows)
        self.assertEqual(service_obj.SERVICE_VERSION, agent.service_version)
        old = cbase.as_release(agent, new=False)
        self.assertIs(flows.PREVIOUS, old.flows)
        self.assertEqual(releases.RELEASES[1].service_version,
                         old.service_version)

    def test_no_endpoint_reaches_a_flow(self):
        # The Agent carries parts, never the manager's RPC endpoints.
        agent = cbase.agent()
        for endpoint in ('post_live_migration_at_destination',
                         'live_migration', 'report', 'init_host'):
            self.assertFalse(hasattr(agent, endpoint), endpoint)
