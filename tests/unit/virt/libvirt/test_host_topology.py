"""Tests of capabilities parsing and host topology construction."""

import os

import testscenarios

from numamig import exception
from numamig.virt.libvirt import host_topology
from numamig.virt.libvirt import settings as lv_settings
from tests import base
from tests import libvirt_settings
from tests.fixtures import libvirt_caps

load_tests = testscenarios.load_tests_apply_scenarios

HOSTS_DIR = os.path.join(os.path.dirname(__file__), '..', '..', '..', '..',
                         'etc', 'numamig', 'hosts')


def _settings(**kwargs):
    kwargs.setdefault('host', 'hostA')
    for name in ('cpu_dedicated_set', 'cpu_shared_set'):
        if kwargs.get(name) is not None:
            kwargs[name] = frozenset(kwargs[name])
    return libvirt_settings.host(**kwargs)


def _topology(spec=None, **kwargs):
    cells = host_topology.parse_capabilities(
        libvirt_caps.caps_xml(spec or libvirt_caps.HostSpec()))
    return host_topology.build_host_topology(cells, _settings(**kwargs))


class ParseCapabilitiesTestCase(base.TestCase):

    def test_cells_cpus_siblings_pages_distances(self):
        cells = host_topology.parse_capabilities(libvirt_caps.caps_xml(
            cells=2, cores=2, threads=2, mem_gib=4, pages_2m=8, pages_1g=1))
        self.assertEqual([0, 1], [c.id for c in cells])
        self.assertEqual({0, 1, 4, 5}, cells[0].cpus)
        self.assertEqual(({0, 4}, {1, 5}),
                         tuple(set(g) for g in cells[0].siblings))
        self.assertEqual(4 * 1024 * 1024, cells[0].memory_kb)
        self.assertEqual({4: (4 * 1024 * 1024 - 8 * 2048 - 1048576) // 4,
                          2048: 8, 1048576: 1}, cells[1].pages)
        self.assertEqual({0: 21, 1: 10}, cells[1].distances)

    def test_offline_cpu_is_left_out(self):
        xml = libvirt_caps.caps_xml(cells=1, cores=2, threads=1).replace(
            "<cpu id='1' socket_id='0' die_id='0' core_id='1' "
            "siblings='1'/>", "<cpu id='1'/>")
        cells = host_topology.parse_capabilities(xml)
        self.assertEqual({0}, cells[0].cpus)
        self.assertEqual(({0},), tuple(set(g) for g in cells[0].siblings))

    def test_no_cells_names_capabilities_file(self):
        xml = "<capabilities><host><topology><cells num='0'/></topology>" \
              "</host></capabilities>"
        self.assertRaisesMessage(
            exception.CapabilitiesError, 'capabilities_file',
            host_topology.parse_capabilities, xml, host='hostA')

    def test_not_xml(self):
        self.assertRaisesMessage(
            exception.CapabilitiesError, 'not XML',
            host_topology.parse_capabilities, '<capabilities>')

    def test_malformed_cell(self):
        xml = libvirt_caps.caps_xml(cells=1).replace(
            "<memory unit='KiB'>", "<memory unit='KiB'>x")
        self.assertRaisesMessage(
            exception.CapabilitiesError, "malformed cell '0'",
            host_topology.parse_capabilities, xml)


class CPUSetsTestCase(base.TestCase):
    """Host: 2 cells x 4 cores x 2 threads; cell 0 = 0-3,8-11."""

    scenarios = [
        ('both_unset_all_dedicated',
         {'opts': {}, 'pcpus0': {0, 1, 2, 3, 8, 9, 10, 11}, 'shared0': set()}),
        ('shared_only_rest_dedicated',
         {'opts': {'cpu_shared_set': {0, 8}},
          'pcpus0': {1, 2, 3, 9, 10, 11}, 'shared0': {0, 8}}),
        ('dedicated_only_no_shared',
         {'opts': {'cpu_dedicated_set': {2, 3, 10, 11}},
          'pcpus0': {2, 3, 10, 11}, 'shared0': set()}),
        ('both_set_rest_unused',
         {'opts': {'cpu_dedicated_set': {2, 3}, 'cpu_shared_set': {0}},
          'pcpus0': {2, 3}, 'shared0': {0}}),
    ]

    def test_sets(self):
        topo = _topology(**self.opts)
        self.assertEqual(self.pcpus0, topo.cells[0].pcpuset)
        self.assertEqual(self.shared0, topo.cells[0].cpuset)
        used = self.pcpus0 | self.shared0
        self.assertEqual(
            sorted(sorted(g & used) for g in [{0, 8}, {1, 9}, {2, 10},
                                               {3, 11}] if g & used),
            sorted(sorted(g) for g in topo.cells[0].siblings))


class InvalidConfigurationTestCase(base.TestCase):

    scenarios = [
        ('dedicated_cpu_missing',
         {'opts': {'cpu_dedicated_set': {0, 99}},
          'fragment': 'cpu_dedicated_set: CPUs 99 are not online'}),
        ('shared_cpu_missing',
         {'opts': {'cpu_shared_set': {16, 17}},
          'fragment': 'cpu_shared_set: CPUs 16'}),
        ('reserved_memory_over_small_pages',
         {'opts': {'reserved_host_memory_mb': 12 * 1024},
          'fragment': 'reserved_host_memory_mb'}),
        ('reserved_memory_over_cell',
         {'opts': {'reserved_host_memory_mb': 17 * 1024},
          'fragment': 'exceeds the 16384 MiB of NUMA node 0'}),
        ('reserved_pages_unknown_node',
         {'opts': {'reserved_huge_pages': (
             lv_settings.ReservedPages(node=5, size_kb=2048, count=1),)},
          'fragment': 'host has no NUMA node 5'}),
        ('reserved_pages_unknown_size',
         {'opts': {'reserved_huge_pages': (
             lv_settings.ReservedPages(node=0, size_kb=16, count=1),)},
          'fragment': 'node 0 has no 16 KiB pages'}),
        ('reserved_pages_too_many',
         {'opts': {'reserved_huge_pages': (
             lv_settings.ReservedPages(node=1, size_kb=1048576,
                                       count=5),)},
          'fragment': 'has 4 pages of 1048576 KiB, fewer than the 5'}),
    ]

    def test_rejected(self):
        self.assertRaisesMessage(exception.InvalidConfiguration,
                                 self.fragment, _topology, **self.opts)


class MemoryTestCase(base.TestCase):

    def test_reserved_memory_from_cell0_small_pages(self):
        topo = _topology(reserved_host_memory_mb=1024)
        self.assertEqual(16 * 1024 - 1024, topo.cells[0].memory_mb)
        self.assertEqual(16 * 1024, topo.cells[1].memory_mb)
        self.assertEqual(1024 * 256, topo.cells[0].pages_of(4).reserved)
        self.assertEqual(0, topo.cells[1].pages_of(4).reserved)

    def test_reserved_huge_pages(self):
        topo = _topology(reserved_huge_pages=(
            lv_settings.ReservedPages(node=1, size_kb=2048, count=64),))
        self.assertEqual(64, topo.cells[1].pages_of(2048).reserved)
        self.assertEqual(1024 - 64, topo.cells[1].pages_of(2048).free)
        self.assertEqual(0, topo.cells[0].pages_of(2048).reserved)
        self.assertEqual(4, topo.cells[1].pages_of(1048576).free)


class ShippedHostsTestCase(base.TestCase):
    """The capabilities files the embedded tier runs on stay usable."""

    scenarios = [
        ('2cell_a', {'name': 'numa-2cell-a.xml', 'cells': 2, 'cpus': 16}),
        ('2cell_b', {'name': 'numa-2cell-b.xml', 'cells': 2, 'cpus': 16}),
        ('4cell', {'name': 'numa-4cell.xml', 'cells': 4, 'cpus': 32}),
    ]

    def test_parses_with_smt_and_pools(self):
        with open(os.path.join(HOSTS_DIR, self.name)) as f:
            cells = host_topology.parse_capabilities(f.read())
        topo = host_topology.build_host_topology(cells, _settings())
        self.assertEqual(self.cells, len(topo.cells))
        self.assertEqual(self.cpus, sum(len(c.pcpuset) for c in topo.cells))
        for cell in topo.cells:
            self.assertTrue(all(len(g) == 2 for g in cell.siblings))
            self.assertEqual({4, 2048, 1048576},
                             {p.size_kb for p in cell.mempages})
