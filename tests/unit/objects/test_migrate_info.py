"""Tests of NUMAMigrateInfo validation."""

import testscenarios

from numamig import exception
from numamig import objects
from tests import base
from tests.unit.objects import samples

load_tests = testscenarios.load_tests_apply_scenarios

ROW = "cell_distances must give every guest cell's distance to each of "


class ValidationErrorTest(base.TestCase):
    """Each row breaks one invariant; validate() must name it."""

    scenarios = [
        ('guest_cell_on_two_host_nodes',
         {'values': {'cell_pins': {0: {0, 1}}},
          'fragment': 'guest cell 0 must be pinned to exactly one host '
                      'node, got [0, 1]'}),
        ('guest_cell_on_no_host_node',
         {'values': {'cell_pins': {0: set()}},
          'fragment': 'guest cell 0 must be pinned to exactly one host '
                      'node, got []'}),
        ('vcpu_pinned_to_nothing',
         {'values': {'cpu_pins': {0: {10}, 1: set(), 2: {8}}},
          'fragment': 'vCPU 1 is pinned to no pCPU'}),
        ('realtime_vcpu_without_pin',
         {'values': {'sched_vcpus': {1, 5}},
          'fragment': 'realtime vCPUs [5] have no pins'}),
        ('realtime_without_priority',
         {'values': {'sched_priority': None},
          'fragment': 'realtime vCPUs given without sched_priority'}),
        ('priority_too_high',
         {'values': {'sched_priority': 100},
          'fragment': 'sched_priority must be within 1-99, got 100'}),
        ('priority_zero',
         {'values': {'sched_priority': 0},
          'fragment': 'sched_priority must be within 1-99, got 0'}),
        ('unknown_page_size',
         {'values': {'pagesizes': {0: 3}},
          'fragment': 'guest cell 0: unknown page size 3 KiB'}),
        ('page_size_for_unpinned_cell',
         {'values': {'pagesizes': {0: 2048, 1: 2048}},
          'fragment': 'page size for guest cell 1, which has no host '
                      'node pin'}),
        ('negative_pcpu',
         {'values': {'cpu_pins': {0: {-3}, 1: {11}}},
          'fragment': 'cpu_pins holds negative ids [-3]'}),
        ('negative_host_node',
         {'values': {'cell_pins': {0: {-1}}},
          'fragment': 'cell_pins holds negative ids [-1]'}),
        ('negative_emulator_pcpu',
         {'values': {'emulator_pins': {-1}},
          'fragment': 'emulator_pins holds negative ids [-1]'}),
        ('distances_missing_a_row',
         {'values': {'cell_pins': {0: {1}, 1: {3}},
                     'cell_distances': {0: {0: 10, 1: 21}}},
          'fragment': ROW + "[0, 1]; guest cell 1 has []"}),
        ('distances_missing_an_entry',
         {'values': {'cell_pins': {0: {1}, 1: {3}},
                     'cell_distances': {0: {0: 10, 1: 21}, 1: {1: 10}}},
          'fragment': ROW + "[0, 1]; guest cell 1 has [1]"}),
        ('distances_of_a_cell_not_placed',
         {'values': {'cell_distances': {0: {0: 10}, 2: {0: 20}}},
          'fragment': ROW + "[0]; guest cell 2 has [0]"}),
        ('local_distance_not_10',
         {'values': {'cell_distances': {0: {0: 11}}},
          'fragment': 'distance from guest cell 0 to 0 must be within '
                      '10-10, got 11'}),
        ('remote_distance_10',
         {'values': {'cell_pins': {0: {1}, 1: {3}},
                     'cell_distances': {0: {0: 10, 1: 10},
                                        1: {0: 21, 1: 10}}},
          'fragment': 'distance from guest cell 0 to 1 must be within '
                      '11-255, got 10'}),
        ('remote_distance_too_far',
         {'values': {'cell_pins': {0: {1}, 1: {3}},
                     'cell_distances': {0: {0: 10, 1: 21},
                                        1: {0: 256, 1: 10}}},
          'fragment': 'distance from guest cell 1 to 0 must be within '
                      '11-255, got 256'}),
        ('negative_floating_cpu',
         {'values': {'floating_cpus': {-8}},
          'fragment': 'floating_cpus holds negative ids [-8]'}),
    ]

    def test_rejected_with_reason(self):
        info = samples.migrate_info()
        for name, value in self.values.items():
            setattr(info, name, value)
        exc = self.assertRaises(exception.ObjectValidationError,
                                info.validate)
        self.assertIn('Invalid NUMAMigrateInfo: ' + self.fragment, str(exc))


class MigrateInfoTest(base.TestCase):

    def test_host_nodes(self):
        info = objects.NUMAMigrateInfo(cell_pins={0: {1}, 1: {0}})
        self.assertEqual({0, 1}, info.host_nodes)
        self.assertEqual(set(), objects.NUMAMigrateInfo().host_nodes)

    def test_empty_info_is_valid(self):
        # A guest without NUMA characteristics: nothing to rewrite.
        info = objects.NUMAMigrateInfo()
        self.assertIs(info, info.validate())
        self.assertIsNone(info.floating_cpus)

    def test_distances_round_trip_with_integer_keys(self):
        info = objects.NUMAMigrateInfo(
            cell_pins={0: {1}, 1: {3}},
            cell_distances={0: {0: 10, 1: 12}, 1: {0: 13, 1: 10}})
        info.validate()
        primitive = info.obj_to_primitive()
        self.assertEqual({'0': {'0': 10, '1': 12}, '1': {'0': 13, '1': 10}},
                         primitive['numamig_object.data']['cell_distances'])
        back = objects.NUMAMigrateInfo.obj_from_primitive(primitive)
        self.assertEqual({0: {0: 10, 1: 12}, 1: {0: 13, 1: 10}},
                         back.cell_distances)

    def test_distances_default_empty(self):
        # Not told (one cell, a partial host table): no <distances>.
        self.assertEqual({}, objects.NUMAMigrateInfo().cell_distances)
        samples.migrate_info().validate()

    def test_realtime_without_any_pins_is_valid(self):
        # Floating realtime guests: scheduling only, no pins to check.
        objects.NUMAMigrateInfo(sched_vcpus={0}, sched_priority=1).validate()
