"""Tests of the host weighers and the spread/pack order."""

import fractions

import testscenarios

from numamig import objects
from numamig.scheduler import weighers
from tests import base
from tests.unit.scheduler import hosts

F = fractions.Fraction


def _busy_topology():
    """2 cells x (4 dedicated + 2 shared CPUs), 4096 MiB, 2M pool of 100.

    Used: 3 pCPUs pinned, 3 floating vCPUs, 2048 MiB, 25 2M pages
    (of which 10 reserved by the host, 15 used).
    """
    topology = hosts.host_topology(cells=2, pcpus=4, shared=2,
                                   pages_2m=100)
    cell = topology.cells[0]
    cell.pinned_cpus = {0, 1, 2}
    cell.cpu_usage = 3
    cell.memory_usage_mb = 2048
    cell.mempages = [
        objects.NUMAPagesTopology(size_kb=4, total=1048576),
        objects.NUMAPagesTopology(size_kb=2048, total=100, used=15,
                                  reserved=10),
    ]
    return topology


class TestShares(base.TestCase):

    def test_dedicated_cpu_share(self):
        self.assertEqual(F(5, 8),
                         weighers.dedicated_cpu_share(_busy_topology()))

    def test_shared_cpu_share(self):
        self.assertEqual(F(1, 4), weighers.shared_cpu_share(_busy_topology()))

    def test_shared_cpu_overcommitted_counts_as_full(self):
        topology = _busy_topology()
        topology.cells[0].cpu_usage = 40
        topology.cells[1].cpu_usage = 40
        self.assertEqual(0, weighers.shared_cpu_share(topology))

    def test_memory_share(self):
        self.assertEqual(F(3, 4), weighers.memory_share(_busy_topology()))

    def test_hugepage_share(self):
        # Cell 0: 75 free of 90 allocatable; cell 1: 100 of 100.
        self.assertEqual(F(175, 190),
                         weighers.hugepage_share(_busy_topology()))

    def test_absent_resources_do_not_count(self):
        topology = hosts.host_topology()   # no shared CPUs, no huge pages
        self.assertIsNone(weighers.shared_cpu_share(topology))
        self.assertIsNone(weighers.hugepage_share(topology))
        self.assertEqual(F(1), weighers.weigh(topology))

    def test_weigh_is_the_mean_of_applicable_shares(self):
        expected = (F(5, 8) + F(1, 4) + F(3, 4) + F(175, 190)) / 4
        self.assertEqual(expected, weighers.weigh(_busy_topology()))

    def test_empty_host_weighs_zero(self):
        self.assertEqual(0, weighers.weigh(objects.HostNUMATopology()))


class TestOrder(testscenarios.WithScenarios, base.TestCase):

    weighed = [('c', F(1, 2), 'C'), ('a', F(1, 4), 'A'),
               ('d', F(1, 2), 'D'), ('b', F(3, 4), 'B')]
    scenarios = [
        ('spread', {'strategy': 'spread', 'hosts': ['b', 'c', 'd', 'a']}),
        ('pack', {'strategy': 'pack', 'hosts': ['a', 'c', 'd', 'b']}),
    ]

    def test_order(self):
        ordered = weighers.order(self.weighed, self.strategy)
        self.assertEqual(self.hosts, [host for host, _, _ in ordered])

    def test_input_order_irrelevant(self):
        self.assertEqual(weighers.order(self.weighed, self.strategy),
                         weighers.order(self.weighed[::-1], self.strategy))


class TestUnknownStrategy(base.TestCase):

    def test_refused(self):
        self.assertRaisesMessage(ValueError, "unknown strategy 'random'",
                                 weighers.order, [], 'random')
