"""How the huge-page scenarios pick their page size and their hosts."""

import types

from numamig import objects
from numamig_ci.nested import deployment
from numamig_ci.nested import vm
from numamig_ci.results import ScenarioSkipped
from numamig_ci.scenarios import memory
from numamig_ci.scenarios import registry
from tests import base

GIB = memory.GIB_KB


def cell(node, **pools):
    """A reported host cell: pools as size_kb=(total, reserved)."""
    return types.SimpleNamespace(id=node, mempages=[
        objects.NUMAPagesTopology(size_kb=int(size[1:]), total=total,
                                  reserved=reserved)
        for size, (total, reserved) in pools.items()])


# The default nested layout's split: 1 GiB pages 4 on node 0, 1 on node
# 1; the first host may use two of node 0's, the second two of node 0's
# and node 1's.
NESTED = {
    'nested-0': [cell(0, s4=(1, 0), s2048=(128, 64), s1048576=(4, 2)),
                 cell(1, s4=(1, 0), s2048=(128, 64), s1048576=(1, 1))],
    'nested-1': [cell(0, s4=(1, 0), s2048=(128, 64), s1048576=(4, 2)),
                 cell(1, s4=(1, 0), s2048=(128, 64), s1048576=(1, 0))],
}


class FakeSession:
    """What the scenarios' choices read: hosts in order, topologies."""

    def __init__(self, cells):
        self.backend = types.SimpleNamespace(hosts=dict.fromkeys(cells))
        self.cells = cells
        self.moved = []

    def topology(self, host):
        return types.SimpleNamespace(cells=self.cells[host])

    def require(self, condition, reason):
        if not condition:
            raise ScenarioSkipped(reason)

    def pair(self):
        names = list(self.backend.hosts)
        return names[0], names[1]


class PageSizeTest(base.TestCase):

    def test_huge_pages_takes_the_smallest_size_the_node_has(self):
        s = FakeSession(NESTED)
        self.assertEqual(2048, memory.smallest_huge_size(s, 'nested-1'))
        only_1g = {'h': [cell(0, s2048=(0, 0), s1048576=(4, 0))]}
        self.assertEqual(GIB, memory.smallest_huge_size(
            FakeSession(only_1g), 'h'))
        self.assertIsNone(memory.smallest_huge_size(
            FakeSession({'h': [cell(0, s4=(10, 0))]}), 'h'))

    def test_usable_pages_leave_out_other_hosts_share(self):
        s = FakeSession(NESTED)
        self.assertEqual({0: 2}, memory.usable_pages(s, 'nested-0', GIB))
        self.assertEqual({0: 2, 1: 1},
                         memory.usable_pages(s, 'nested-1', GIB))


class PastFullNodePairTest(base.TestCase):

    def test_destination_has_node_0_and_another_node(self):
        pages = {'a': {0: 1}, 'b': {0: 1, 1: 1}}
        self.assertEqual(('a', 'b'),
                         memory.past_full_node_pair(pages, ['a', 'b']))

    def test_backend_order_decides_between_equal_pairs(self):
        pages = {'a': {0: 1, 1: 1}, 'b': {0: 1, 1: 1}, 'c': {0: 1, 2: 1}}
        self.assertEqual(('a', 'b'),
                         memory.past_full_node_pair(pages, ['a', 'b', 'c']))
        self.assertEqual(('c', 'b'),
                         memory.past_full_node_pair(pages, ['c', 'b', 'a']))

    def test_node_0_only_the_filling_guest_fits_is_preferred(self):
        # b's node 0 has more pages than its node 1: a guest taking them
        # all cannot land on node 1 instead.
        pages = {'a': {0: 1, 1: 1}, 'b': {0: 2, 1: 1}}
        self.assertEqual(('a', 'b'),
                         memory.past_full_node_pair(pages, ['b', 'a']))

    def test_source_on_node_0_only_is_preferred_next(self):
        pages = {'a': {0: 1, 1: 1}, 'b': {0: 2, 1: 1}, 'c': {0: 2}}
        self.assertEqual(('c', 'b'), memory.past_full_node_pair(
            pages, ['a', 'b', 'c']))

    def test_none_without_a_second_destination_node_or_a_source(self):
        # The kernel put node 0's pages on node 1: no node 0 to fill.
        self.assertIsNone(memory.past_full_node_pair(
            {'a': {1: 1}, 'b': {1: 2}}, ['a', 'b']))
        self.assertIsNone(memory.past_full_node_pair(
            {'a': {}, 'b': {0: 1, 1: 1}}, ['a', 'b']))
        self.assertIsNone(memory.past_full_node_pair(
            {'a': {0: 1}, 'b': {0: 1}}, ['a', 'b']))


    def test_default_nested_layout_gives_the_preferred_pair(self):
        # The kernel as the default layout asks; the hosts' split of it.
        layout = vm.Layout()
        kernel = {str(node): {str(GIB): [count, count]}
                  for node, count in enumerate(layout.pages_1g)}
        pools = deployment.split_pools(kernel, ['first', 'second'])
        pages = {host: {node: mine for (node, _size), (_total, mine)
                        in pools[host].items() if mine}
                 for host in pools}
        self.assertEqual({'first': {0: 2}, 'second': {0: 2, 1: 1}}, pages)
        self.assertEqual(('first', 'second'), memory.past_full_node_pair(
            pages, ['first', 'second']))

    def test_default_nested_2m_pools_fit_the_filling_guest_on_node_0(self):
        # huge-pages fills the destination's node 0 with as many 2 MiB
        # pages as it has there: node 1 has fewer, so it cannot go there.
        layout = vm.Layout()
        kernel = {str(node): {'2048': [count, count]}
                  for node, count in enumerate(layout.pages_2m)}
        pools = deployment.split_pools(kernel, ['first', 'second'])
        for host in pools:
            self.assertGreater(pools[host][(0, 2048)][1],
                               pools[host][(1, 2048)][1])


class ScenarioChoiceTest(base.TestCase):

    def run_scenario(self, name, cells):
        """The (source, destination, page size, pages to fill) the
        scenario chose (the move itself needs a deployment)."""
        s = FakeSession(cells)
        self.patch(memory, 'move_past_full_node',
                   lambda _s, *args: s.moved.append(args))
        registry.SCENARIOS[name].func(s)
        return s.moved

    def test_1g_variant_moves_one_gib_pages_between_the_fitting_hosts(self):
        self.assertEqual([('nested-0', 'nested-1', GIB, 2)],
                         self.run_scenario('huge-pages-1g', NESTED))

    def test_huge_pages_moves_2m_pages_when_1g_are_there_too(self):
        self.assertEqual([('nested-0', 'nested-1', 2048, 64)],
                         self.run_scenario('huge-pages', NESTED))

    def test_1g_variant_skips_naming_what_the_kernel_gave(self):
        misplaced = {
            'nested-0': [cell(0, s1048576=(0, 0)), cell(1, s1048576=(3, 2))],
            'nested-1': [cell(0, s1048576=(0, 0)), cell(1, s1048576=(3, 1))],
        }
        exc = self.assertRaises(ScenarioSkipped, self.run_scenario,
                                'huge-pages-1g', misplaced)
        self.assertEqual(
            "needs a destination with 1 GiB pages on node 0 and on another "
            "node and a source with one; 1 GiB pages per node here: "
            "nested-0 {1: 1}; nested-1 {1: 2}", str(exc))

    def test_1g_variant_needs_hosts_with_huge_pages_and_nodes(self):
        self.assertEqual(('huge_pages', 'multi_node'),
                         registry.SCENARIOS['huge-pages-1g'].requires)
