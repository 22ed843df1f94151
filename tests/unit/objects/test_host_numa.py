"""Tests of the host-side NUMA objects: validation and helpers."""

import testscenarios

from numamig import exception
from numamig import objects
from tests import base
from tests.unit.objects import samples
from tests.unit.objects import validation

load_tests = testscenarios.load_tests_apply_scenarios


_set = validation.setting


def _cell0(**values):
    return validation.on_cell(0, **values)


class ValidationErrorTest(validation.RejectsRows, base.TestCase):
    """Each row breaks one invariant; validate() must name it."""

    scenarios = [
        ('pages_negative_total',
         {'build': samples.pages, 'mutate': _set(total=-1, used=0, reserved=0),
          'fragment': 'total must not be negative, got -1'}),
        ('pages_negative_used',
         {'build': samples.pages, 'mutate': _set(used=-2),
          'fragment': 'used must not be negative, got -2'}),
        ('pages_negative_reserved',
         {'build': samples.pages, 'mutate': _set(reserved=-3),
          'fragment': 'reserved must not be negative, got -3'}),
        ('pages_unknown_size',
         {'build': samples.pages, 'mutate': _set(size_kb=3000),
          'fragment': 'unknown page size 3000 KiB'}),
        ('pages_too_small',
         {'build': samples.pages, 'mutate': _set(size_kb=2),
          'fragment': 'unknown page size 2 KiB'}),
        ('pages_overcommitted',
         {'build': samples.pages, 'mutate': _set(used=510),
          'fragment': 'used (510) + reserved (8) exceed total (512)'}),
        ('cell_negative_id',
         {'build': samples.host_cell, 'mutate': _set(id=-1),
          'fragment': 'id must not be negative, got -1'}),
        ('cell_negative_memory',
         {'build': samples.host_cell, 'mutate': _set(memory_mb=-5),
          'fragment': 'memory_mb must not be negative, got -5'}),
        ('cell_negative_memory_usage',
         {'build': samples.host_cell, 'mutate': _set(memory_usage_mb=-5),
          'fragment': 'memory_usage_mb must not be negative'}),
        ('cell_negative_cpu_usage',
         {'build': samples.host_cell, 'mutate': _set(cpu_usage=-1),
          'fragment': 'cpu_usage must not be negative'}),
        ('cell_negative_cpu',
         {'build': samples.host_cell, 'mutate': _set(cpuset={-1, 0, 1}),
          'fragment': 'cell 0: negative CPU id'}),
        ('cell_cpu_shared_and_dedicated',
         {'build': samples.host_cell, 'mutate': _set(cpuset={0, 1, 2}),
          'fragment': 'CPUs [2] are both shared (cpuset) and dedicated'}),
        ('cell_pinned_outside_dedicated',
         {'build': samples.host_cell, 'mutate': _set(pinned_cpus={1, 2}),
          'fragment': 'pinned CPUs [1] are not in its dedicated set'}),
        ('cell_cpu_in_two_sibling_groups',
         {'build': samples.host_cell,
          'mutate': _set(siblings=[{0, 1}, {1, 2}]),
          'fragment': 'CPUs [1] appear in two sibling groups'}),
        ('cell_sibling_of_other_cell',
         {'build': samples.host_cell, 'mutate': _set(siblings=[{0, 40}]),
          'fragment': 'sibling CPUs [40] are not CPUs of this cell'}),
        ('cell_duplicate_page_sizes',
         {'build': samples.host_cell,
          'mutate': _set(mempages=[samples.pages(), samples.pages()]),
          'fragment': 'duplicate page pool sizes [2048, 2048]'}),
        ('cell_bad_child_pool',
         {'build': samples.host_cell,
          'mutate': _set(mempages=[samples.pages(size_kb=1000)]),
          'fragment': 'Invalid NUMAPagesTopology: unknown page size 1000'}),
        ('topology_duplicate_cell_ids',
         {'build': samples.host_topology, 'mutate': _cell0(id=1),
          'fragment': 'duplicate cell ids [1, 1]'}),
        ('topology_cpu_in_two_cells',
         {'build': samples.host_topology,
          'mutate': _cell0(cpuset={0, 1, 8}),
          'fragment': 'CPUs [8] belong to more than one cell'}),
        ('limits_zero_cpu_ratio',
         {'build': samples.limits, 'mutate': _set(cpu_allocation_ratio=0.0),
          'fragment': 'cpu_allocation_ratio must be positive, got 0.0'}),
        ('limits_negative_ram_ratio',
         {'build': samples.limits, 'mutate': _set(ram_allocation_ratio=-1.0),
          'fragment': 'ram_allocation_ratio must be positive, got -1.0'}),
    ]


class PagesTest(base.TestCase):

    def test_free_excludes_used_and_reserved(self):
        pool = samples.pages(size_kb=2048, total=512, used=10, reserved=8)
        self.assertEqual(494, pool.free)
        self.assertEqual(494 * 2048, pool.free_kb)

    def test_every_power_of_two_from_4k_is_a_page_size(self):
        for size in (4, 16, 64, 2048, 16384, 1048576, 16777216):
            samples.pages(size_kb=size, total=1, used=0,
                          reserved=0).validate()

    def test_full_pool_is_valid(self):
        samples.pages(total=18, used=10, reserved=8).validate()


class HostCellTest(base.TestCase):

    def test_free_and_all_cpus(self):
        cell = samples.host_cell(0)
        self.assertEqual({4, 5, 6, 7}, cell.free_pcpus)
        self.assertEqual(set(range(8)), cell.all_cpus)

    def test_pages_of(self):
        cell = samples.host_cell(0)
        self.assertEqual(512, cell.pages_of(2048).total)
        self.assertIsNone(cell.pages_of(1048576))

    def test_minimal_cell_defaults(self):
        cell = objects.HostNUMACell(id=3, memory_mb=1024).validate()
        self.assertEqual((set(), set(), set(), [], [], {}),
                         (cell.cpuset, cell.pcpuset, cell.pinned_cpus,
                          cell.siblings, cell.mempages, cell.distances))


class HostTopologyTest(base.TestCase):

    def test_cell_lookup(self):
        topology = samples.host_topology()
        self.assertEqual(1, topology.cell(1).id)
        self.assertRaises(KeyError, topology.cell, 7)

    def test_validate_visits_cells(self):
        topology = samples.host_topology()
        topology.cells[1].pinned_cpus = {0}
        self.assertRaisesMessage(exception.ObjectValidationError,
                                 'Invalid HostNUMACell: cell 1: pinned CPUs '
                                 '[0]', topology.validate)
