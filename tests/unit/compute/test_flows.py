"""Tests of numamig.compute.flows: one seam between the releases."""

import ast
import dataclasses
import inspect
import os

from numamig import releases
from numamig.compute import flows
from tests import base
from tests.unit.compute import base as cbase

# The flows that must read as the current release only.
_CURRENT_ONLY = ('migration_dest', 'migration_source', 'reconcile',
                 'build', 'domains', 'report')


class ForReleaseTest(base.TestCase):

    def test_each_release_gets_its_flows(self):
        self.assertIs(flows.CURRENT, flows.for_release(
            releases.RELEASES[max(releases.RELEASES)]))
        self.assertIs(flows.PREVIOUS, flows.for_release(releases.RELEASES[1]))

    def test_the_manager_gives_the_agent_its_release_flows(self):
        self.assertIs(flows.CURRENT, cbase.agent().flows)
        old = cbase.manager()
        old_agent = cbase.as_release(old.agent, new=False)
        self.assertIs(flows.PREVIOUS, old_agent.flows)


class SignaturesTest(base.TestCase):
    """A previous-release step must accept whatever the current one is
    called with: the endpoints and flows call either the same way."""

    def test_same_parameters(self):
        for field in dataclasses.fields(flows.ReleaseFlows):
            current = inspect.signature(getattr(flows.CURRENT, field.name))
            previous = inspect.signature(getattr(flows.PREVIOUS, field.name))
            self.assertEqual(list(current.parameters),
                             list(previous.parameters), field.name)


class NoReleaseBranchTest(base.TestCase):
    """The current flows never ask which release the agent runs as."""

    def test_flows_read_no_release(self):
        root = os.path.dirname(inspect.getfile(flows))
        for name in _CURRENT_ONLY:
            path = os.path.join(root, name + '.py')
            with open(path, encoding='utf-8') as source:
                tree = ast.parse(source.read(), path)
            read = {node.attr for node in ast.walk(tree)
                    if isinstance(node, ast.Attribute)}
            self.assertFalse(read & {'release', 'numa_live_migration'},
                             f"{name} branches on the agent's release")
