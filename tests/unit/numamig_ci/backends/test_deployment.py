"""--deployment: the file's CPU sets must be the ones each host reports.

Host under test: two nodes, pCPUs 0-3 and 4-7, shared 0 and 4.
"""

import types

import testscenarios

from numamig import objects
from numamig_ci import deployment_file
from numamig_ci import exception as ci_exception
from numamig_ci.backends import deployment
from tests import base

load_tests = testscenarios.load_tests_apply_scenarios


def report(shared=frozenset({0, 4})):
    cells = [objects.HostNUMACell(
        id=node, cpuset=set(cpus) & shared, pcpuset=set(cpus) - shared,
        memory_mb=1024) for node, cpus in ((0, range(4)), (1, range(4, 8)))]
    return types.SimpleNamespace(
        topology=objects.HostNUMATopology(cells=cells))


def host(dedicated, shared):
    return deployment_file.HostSpec('compute-1', 'qemu:///system',
                                    frozenset(dedicated), frozenset(shared))


class CheckSetsTest(base.TestCase):

    scenarios = [
        ('dedicated-differs', {
            'spec': host({1, 2, 3, 5, 6}, {0, 4}),
            'message': "hosts.compute-1.cpu_dedicated_set is 1-3,5-6 but "
                       "the host reports 1-3,5-7: give the value of "
                       "[compute] cpu_dedicated_set in its numamig.conf"}),
        ('shared-left-out', {
            'spec': host({1, 2, 3, 5, 6, 7}, ()),
            'message': "hosts.compute-1.cpu_shared_set is none but the "
                       "host reports 0,4"}),
        ('same-sets', {'spec': host({1, 2, 3, 5, 6, 7}, {0, 4}),
                       'message': None}),
    ]

    def test_check(self):
        if self.message is None:
            deployment._check_sets('d.json', self.spec, report())
            return
        self.assertRaisesMessage(
            ci_exception.CIDeploymentFileInvalid,
            f"deployment file d.json: {self.message}",
            deployment._check_sets, 'd.json', self.spec, report())


class FeaturesTest(base.TestCase):

    def test_multi_node_only_when_every_host_has_two_nodes(self):
        one_node = types.SimpleNamespace(topology=objects.HostNUMATopology(
            cells=[objects.HostNUMACell(id=0, cpuset=set(),
                                        pcpuset={0, 1}, memory_mb=512)]))
        self.assertEqual({'multi_node'}, deployment._features(
            {'a': report(), 'b': report()}))
        self.assertEqual(set(), deployment._features(
            {'a': report(), 'b': one_node}))
