"""Where a migration's threads may run: numa.migration_cpus.place."""

import copy

from numamig import objects
from numamig.numa import migration_cpus as mc
from tests import base
from tests.fixtures import libvirt_guests as guests


def cell(node, shared, dedicated, pinned=()):
    return objects.HostNUMACell(
        id=node, cpuset=set(shared), pcpuset=set(dedicated),
        pinned_cpus=set(pinned), memory_mb=4096)


def host(*cells):
    return objects.HostNUMATopology(cells=list(cells))


class PlaceTest(base.TestCase):

    def setUp(self):
        super().setUp()
        # Node 0: shared 0-1, dedicated 2-5 (2-3 pinned); node 1: shared
        # 6-7, dedicated 8-11 (8 pinned).
        self.two_nodes = host(cell(0, {0, 1}, {2, 3, 4, 5}, {2, 3}),
                              cell(1, {6, 7}, {8, 9, 10, 11}, {8}))

    def test_one_node_host_takes_its_shared_set(self):
        one = host(cell(0, {0, 1}, {2, 3}, {2}))
        chosen = mc.place(one, {0})
        self.assertEqual(frozenset({0, 1}), chosen.cpus)
        self.assertEqual(mc.GUEST_NODES, chosen.basis)

    def test_two_node_host_takes_the_guest_node_only(self):
        chosen = mc.place(self.two_nodes, {1})
        self.assertEqual(frozenset({6, 7}), chosen.cpus)
        self.assertEqual((mc.GUEST_NODES, (1,)),
                         (chosen.basis, chosen.nodes))

    def test_guest_spanning_two_nodes_takes_both_shared_sets(self):
        chosen = mc.place(self.two_nodes, {0, 1})
        self.assertEqual(frozenset({0, 1, 6, 7}), chosen.cpus)
        self.assertEqual((0, 1), chosen.nodes)

    def test_empty_shared_set_on_the_guest_node_falls_back_to_any(self):
        topo = host(cell(0, set(), {0, 1, 2, 3}, {0}),
                    cell(1, {4, 5}, {6, 7}))
        chosen = mc.place(topo, {0})
        self.assertEqual(frozenset({4, 5}), chosen.cpus)
        self.assertEqual(mc.SHARED, chosen.basis)

    def test_no_shared_cpu_anywhere_leaves_the_threads(self):
        # This machine's real tier: both pCPUs dedicated.
        topo = host(cell(0, set(), {0, 1}, {0, 1}))
        chosen = mc.place(topo, {0})
        self.assertEqual((frozenset(), mc.NONE), (chosen.cpus,
                                                  chosen.basis))
        self.assertIn("left where they start", chosen.describe())

    def test_operator_set_wins_over_the_topology(self):
        chosen = mc.place(self.two_nodes, {1}, housekeeping={0, 4})
        self.assertEqual(frozenset({0, 4}), chosen.cpus)
        self.assertEqual(mc.HOUSEKEEPING, chosen.basis)

    def test_operator_set_never_gives_a_pinned_cpu(self):
        chosen = mc.place(self.two_nodes, {1}, housekeeping={2, 8, 9})
        self.assertEqual(frozenset({9}), chosen.cpus)

    def test_operator_set_all_pinned_falls_back_to_the_topology(self):
        chosen = mc.place(self.two_nodes, {1}, housekeeping={2, 3})
        self.assertEqual((frozenset({6, 7}), mc.GUEST_NODES),
                         (chosen.cpus, chosen.basis))

    def test_dedicated_pins_are_excluded_from_the_shared_set(self):
        # A host whose sets overlap (no cpu_dedicated_set: every CPU
        # both floats and pins) must still avoid what guests pinned.
        topo = host(cell(0, {0, 1, 2, 3}, {0, 1, 2, 3}, {0, 2}))
        chosen = mc.place(topo, {0})
        self.assertEqual(frozenset({1, 3}), chosen.cpus)
        self.assertTrue(chosen.cpus.isdisjoint(mc.pinned(topo)))

    def test_unknown_nodes_mean_any_node(self):
        chosen = mc.place(self.two_nodes, frozenset())
        self.assertEqual(frozenset({0, 1, 6, 7}), chosen.cpus)
        self.assertEqual(mc.SHARED, chosen.basis)

    def test_inputs_are_not_changed(self):
        before = copy.deepcopy(self.two_nodes)
        mc.place(self.two_nodes, {0}, housekeeping={4})
        self.assertEqual(before, self.two_nodes)

    def test_describe_names_the_cpus_and_nodes(self):
        self.assertEqual(
            "CPUs 6,7 from shared CPUs of host node(s) 1",
            mc.place(self.two_nodes, {1}).describe())


class GuestNodesTest(base.TestCase):

    def test_host_cells_of_the_placement(self):
        topo = guests.topology(guests.cell(0, host_cell=1, vcpus=[0]),
                               guests.cell(1, host_cell=0, vcpus=[1]))
        self.assertEqual(frozenset({0, 1}), mc.guest_nodes(topo))

    def test_no_placement_means_no_node(self):
        self.assertEqual(frozenset(), mc.guest_nodes(None))
        unplaced = guests.topology(guests.cell(0, vcpus=[0]))
        self.assertEqual(frozenset(), mc.guest_nodes(unplaced))
