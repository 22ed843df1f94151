"""Tests of build_migrate_info: a placement + a host -> NUMAMigrateInfo."""

import copy

import testscenarios

from numamig import exception
from numamig.virt.libvirt import host_topology
from numamig.virt.libvirt import numa_info
from tests import base
from tests import libvirt_settings
from tests.fixtures import libvirt_caps
from tests.fixtures import libvirt_guests as guests

load_tests = testscenarios.load_tests_apply_scenarios


def _host(shared=None):
    """2 cells x 4 cores x 2 threads: cell 0 = 0-3,8-11; 1 = 4-7,12-15."""
    cells = host_topology.parse_capabilities(libvirt_caps.caps_xml())
    settings = libvirt_settings.host(
        host='dest', cpu_shared_set=frozenset(shared) if shared else None)
    return host_topology.build_host_topology(cells, settings)


class BuildMigrateInfoTestCase(base.TestCase):

    def test_pinned_floating_realtime_pages(self):
        topo = guests.topology(
            guests.cell(0, host_cell=1, vcpus=[0, 1], pins={0: 5, 1: 13},
                        pagesize=2048, realtime_vcpus={1}),
            guests.cell(1, host_cell=0, vcpus=[2, 3], pagesize=4))
        info = numa_info.build_migrate_info(topo, _host({0, 8, 4}), 7)
        self.assertEqual({0: {5}, 1: {13}, 2: {0, 8}, 3: {0, 8}},
                         info.cpu_pins)
        self.assertEqual({0: {1}, 1: {0}}, info.cell_pins)
        self.assertEqual({1}, info.sched_vcpus)
        self.assertEqual(7, info.sched_priority)
        # Small pages need no explicit backing.
        self.assertEqual({0: 2048}, info.pagesizes)
        self.assertEqual({0, 4, 8}, info.floating_cpus)
        self.assertEqual({0, 4, 8}, info.emulator_pins)

    def test_distances_between_the_cells_host_nodes(self):
        # Each guest cell's row: 10 to itself, its host node's reported
        # distance to the other's host node (each direction as reported).
        host = _host()
        host.cells[0].distances = {0: 10, 1: 32}
        host.cells[1].distances = {0: 31, 1: 10}
        topo = guests.topology(
            guests.cell(0, host_cell=1, vcpus=[0], pins={0: 5}),
            guests.cell(1, host_cell=0, vcpus=[1], pins={1: 1}))
        info = numa_info.build_migrate_info(topo, host)
        self.assertEqual({0: {0: 10, 1: 31}, 1: {0: 32, 1: 10}},
                         info.cell_distances)

    def test_no_distances_where_the_host_table_lacks_an_entry(self):
        # numamig would only be assuming them, as a guest kernel does.
        host = _host()
        host.cells[1].distances = {1: 10}
        topo = guests.topology(
            guests.cell(0, host_cell=1, vcpus=[0], pins={0: 5}),
            guests.cell(1, host_cell=0, vcpus=[1], pins={1: 1}))
        self.assertEqual({}, numa_info.build_migrate_info(
            topo, host).cell_distances)

    def test_no_distances_for_a_guest_of_one_cell(self):
        topo = guests.topology(guests.cell(0, host_cell=1, vcpus=[0],
                                           pins={0: 5}))
        self.assertEqual({}, numa_info.build_migrate_info(
            topo, _host()).cell_distances)

    def test_emulator_isolate_uses_reserved(self):
        topo = guests.topology(
            guests.cell(0, host_cell=0, vcpus=[0], pins={0: 1},
                        cpuset_reserved={2}),
            emulator_threads_policy='isolate')
        info = numa_info.build_migrate_info(topo, _host({0}))
        self.assertEqual({2}, info.emulator_pins)

    def test_emulator_without_shared_set_uses_own_pins(self):
        topo = guests.topology(
            guests.cell(0, host_cell=0, vcpus=[0, 1], pins={0: 1, 1: 9}))
        info = numa_info.build_migrate_info(topo, _host())
        self.assertEqual({1, 9}, info.emulator_pins)
        self.assertIsNone(info.floating_cpus)
        self.assertIsNone(info.sched_priority)

    def test_inputs_unchanged(self):
        topo = guests.topology(
            guests.cell(0, host_cell=0, vcpus=[0, 1], pins={0: 1}))
        host = _host({0, 8})
        before = (guests.canonical(copy.deepcopy(topo)),
                  host.obj_to_primitive()['numamig_object.data'])
        numa_info.build_migrate_info(topo, host)
        self.assertEqual(before, (guests.canonical(topo),
                                  host.obj_to_primitive()[
                                      'numamig_object.data']))


class RefusedTestCase(base.TestCase):

    scenarios = [
        ('not_placed',
         {'topo': guests.topology(guests.cell(0, vcpus=[0])),
          'shared': {0}, 'fragment': 'is not placed'}),
        ('missing_host_cell',
         {'topo': guests.topology(guests.cell(0, host_cell=3, vcpus=[0])),
          'shared': {0}, 'fragment': 'host cell 3, which this host lacks'}),
        ('pin_outside_dedicated',
         {'topo': guests.topology(guests.cell(0, host_cell=0, vcpus=[0],
                                              pins={0: 4})),
          'shared': None,
          'fragment': 'pCPUs 4, outside the dedicated set of host cell 0'}),
        ('pin_on_shared_cpu',
         {'topo': guests.topology(guests.cell(0, host_cell=0, vcpus=[0],
                                              pins={0: 0})),
          'shared': {0}, 'fragment': 'outside the dedicated set'}),
        ('floating_without_shared',
         {'topo': guests.topology(guests.cell(0, host_cell=1, vcpus=[0])),
          'shared': {0}, 'fragment': 'host cell 1 has none'}),
        ('isolate_without_reserved',
         {'topo': guests.topology(
             guests.cell(0, host_cell=0, vcpus=[0], pins={0: 1}),
             emulator_threads_policy='isolate'),
          'shared': None, 'fragment': 'no pCPU is reserved'}),
    ]

    def test_refused(self):
        exc = self.assertRaisesMessage(
            exception.MigrationPreCheckError, self.fragment,
            numa_info.build_migrate_info, self.topo, _host(self.shared),
            host='dest')
        self.assertIn('host dest cannot run instance', str(exc))
