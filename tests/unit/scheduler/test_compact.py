"""Tests of the compaction of cached topologies: equal, shared, frozen."""

import copy

from numamig import objects
from numamig.numa import fit
from numamig.numa import usage
from numamig.scheduler import compact
from tests import base
from tests.unit.numa import hosts


def _host(pinned=(), used_2m=0):
    pools = hosts.hugepage_pools(8192, pages_2m=512, used_2m=used_2m)
    return hosts.make_host(cells=2, cores=2, memory_mb=8192, pages=pools,
                           pinned=pinned)


class FreezeTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.interner = compact.Interner()

    def test_equal_to_what_it_was(self):
        topology = _host()
        before = copy.deepcopy(topology)
        self.assertIs(topology, self.interner.freeze(topology))
        self.assertEqual(before, topology)
        primitive = topology.obj_to_primitive()
        self.assertEqual(before.obj_to_primitive(), primitive)
        self.assertEqual(
            before, objects.HostNUMATopology.obj_from_primitive(primitive))

    def test_hardware_shared_usage_not(self):
        one = self.interner.freeze(_host())
        two = self.interner.freeze(_host(used_2m=4))
        for first, second in zip(one.cells, two.cells, strict=True):
            self.assertIs(first.pcpuset, second.pcpuset)
            self.assertIs(first.siblings, second.siblings)
            self.assertIs(first.pages_of(4), second.pages_of(4))
            self.assertIsNot(first.pinned_cpus, second.pinned_cpus)
            self.assertIsNot(first.pages_of(2048), second.pages_of(2048))
            self.assertEqual(4, second.pages_of(2048).used)

    def test_edits_refused(self):
        cell = self.interner.freeze(_host()).cells[0]
        self.assertRaises(TypeError, cell.pinned_cpus.add, 0)
        self.assertRaises(TypeError, cell.pcpuset.discard, 0)
        with self.assertRaises(TypeError):
            cell.siblings[0] |= {99}
        self.assertRaises(TypeError, setattr, cell, 'cpu_usage', 3)

    def test_copies_and_derived_topologies_are_ordinary(self):
        topology = self.interner.freeze(_host())
        clone = topology.obj_clone()
        clone.cells[0].pinned_cpus.add(0)
        self.assertEqual(set(), topology.cells[0].pinned_cpus)
        request = hosts.request([(2, 0, 1024, None, None)])
        applied = usage.apply(topology, fit.fit(topology, request).topology)
        self.assertEqual(2, len(applied.cells[0].pinned_cpus))
        self.assertEqual(set(), topology.cells[0].pinned_cpus)
        # Set operators give plain sets.
        self.assertIs(set, type(topology.cells[0].pcpuset - {0}))

    def test_freeze_twice_is_harmless(self):
        topology = self.interner.freeze(_host(pinned={0}))
        pinned = topology.cells[0].pinned_cpus
        self.interner.freeze(topology)
        self.assertEqual({0}, topology.cells[0].pinned_cpus)
        self.assertEqual(pinned, topology.cells[0].pinned_cpus)
