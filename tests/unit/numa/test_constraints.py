"""Flavor extra specs and image properties -> NUMA request."""

import copy

import testscenarios

from numamig import exception
from numamig.numa import constraints
from numamig.objects import instance_numa
from tests import base

load_tests = testscenarios.load_tests_apply_scenarios

DEDICATED = {'hw:cpu_policy': 'dedicated'}


def _cells(request):
    return [(sorted(c.pcpuset), sorted(c.cpuset), c.memory_mb, c.pagesize,
             c.cpu_thread_policy, sorted(c.realtime_vcpus))
            for c in request.cells]


class NoNUMARequestTest(testscenarios.WithScenarios, base.TestCase):
    scenarios = [
        ('nothing', {'specs': {}, 'image': {}}),
        ('explicit_shared', {'specs': {'hw:cpu_policy': 'shared'},
                                 'image': {}}),
        ('share_emulator_unpinned',
         {'specs': {'hw:emulator_threads_policy': 'share'}, 'image': {}}),
        ('unrelated_keys', {'specs': {'hw:cpu_sockets': '2',
                                       'quota:cpu_shares': '10'},
                                'image': {'hw_disk_bus': 'scsi'}}),
    ]

    def test_none(self):
        self.assertIsNone(constraints.get_numa_request(
            4, 4096, self.specs, self.image))


class RequestTest(testscenarios.WithScenarios, base.TestCase):
    # expected: per cell (pinned, floating, MiB, page size, threads, rt)
    scenarios = [
        ('dedicated_one_cell', {
            'vcpus': 2, 'specs': DEDICATED, 'image': {},
            'expected': [([0, 1], [], 2048, None, None, [])]}),
        ('symmetric_two_nodes', {
            'vcpus': 4, 'specs': {'hw:numa_nodes': '2'}, 'image': {},
            'expected': [([], [0, 1], 1024, None, None, []),
                      ([], [2, 3], 1024, None, None, [])]}),
        ('asymmetric_split', {
            'vcpus': 4, 'specs': {'hw:numa_nodes': '2', 'hw:numa_cpus.0': '0',
                            'hw:numa_cpus.1': '1-3', 'hw:numa_mem.0': '512',
                            'hw:numa_mem.1': '1536'}, 'image': {},
            'expected': [([], [0], 512, None, None, []),
                      ([], [1, 2, 3], 1536, None, None, [])]}),
        ('page_size_units', {
            'vcpus': 2, 'specs': {'hw:mem_page_size': '2MB'}, 'image': {},
            'expected': [([], [0, 1], 2048, 2048, None, [])]}),
        ('page_size_bare_kib', {
            'vcpus': 2, 'specs': {'hw:mem_page_size': '1048576'}, 'image': {},
            'expected': [([], [0, 1], 2048, 1048576, None, [])]}),
        ('page_size_large', {
            'vcpus': 2, 'specs': {'hw:mem_page_size': 'large'}, 'image': {},
            'expected': [([], [0, 1], 2048, instance_numa.PAGESIZE_LARGE,
                       None, [])]}),
        ('image_narrows_any_to_1g', {
            'vcpus': 2, 'specs': {'hw:mem_page_size': 'any'},
            'image': {'hw_mem_page_size': '1GB'},
            'expected': [([], [0, 1], 2048, 1048576, None, [])]}),
        ('image_narrows_prefer_to_isolate', {
            'vcpus': 2,
            'specs': {**DEDICATED, 'hw:cpu_thread_policy': 'prefer'},
            'image': {'hw_cpu_thread_policy': 'isolate'},
            'expected': [([0, 1], [], 2048, None, 'isolate', [])]}),
        ('image_sets_policy_flavor_left_open', {
            'vcpus': 2, 'specs': {}, 'image': {'hw_cpu_policy': 'dedicated'},
            'expected': [([0, 1], [], 2048, None, None, [])]}),
        ('mixed_with_dedicated_mask', {
            'vcpus': 4, 'specs': {'hw:cpu_policy': 'mixed',
                            'hw:cpu_dedicated_mask': '^0-1'}, 'image': {},
            'expected': [([2, 3], [0, 1], 2048, None, None, [])]}),
        ('mixed_caret_mask_relisting_a_vcpu', {
            'vcpus': 4, 'specs': {'hw:cpu_policy': 'mixed',
                                  'hw:cpu_dedicated_mask': '^0,2'},
            'image': {},
            'expected': [([1, 2, 3], [0], 2048, None, None, [])]}),
        ('mixed_caret_mask_over_two_nodes', {
            'vcpus': 8, 'specs': {'hw:cpu_policy': 'mixed',
                                  'hw:numa_nodes': '2',
                                  'hw:cpu_dedicated_mask': '^0,4'},
            'image': {},
            'expected': [([1, 2, 3], [0], 1024, None, None, []),
                         ([4, 5, 6, 7], [], 1024, None, None, [])]}),
        ('mixed_caret_mask_tokens_and_ranges', {
            'vcpus': 8, 'specs': {'hw:cpu_policy': 'mixed',
                                  'hw:cpu_dedicated_mask': '^0-3,1,^6,2-3'},
            'image': {},
            'expected': [([4, 5, 7], [0, 1, 2, 3, 6], 2048, None, None,
                          [])]}),
        ('realtime_caret_mask_relisting_a_vcpu', {
            'vcpus': 4, 'specs': {**DEDICATED, 'hw:cpu_realtime': 'yes',
                                  'hw:cpu_realtime_mask': '^0-1,1'},
            'image': {},
            'expected': [([0, 1, 2, 3], [], 2048, None, None, [2, 3])]}),
        ('mixed_from_caret_realtime_mask', {
            'vcpus': 4,
            'specs': {'hw:cpu_policy': 'mixed', 'hw:cpu_realtime': 'yes',
                      'hw:cpu_realtime_mask': '^1,3'}, 'image': {},
            'expected': [([0, 2, 3], [1], 2048, None, None, [0, 2, 3])]}),
        ('split_list_starting_with_caret_is_a_list', {
            'vcpus': 4, 'specs': {'hw:numa_nodes': '2',
                                  'hw:numa_cpus.0': '^1,0',
                                  'hw:numa_cpus.1': '1-3',
                                  'hw:numa_mem.0': '1024',
                                  'hw:numa_mem.1': '1024'}, 'image': {},
            'expected': [([], [0], 1024, None, None, []),
                         ([], [1, 2, 3], 1024, None, None, [])]}),
        ('mixed_from_realtime_mask', {
            'vcpus': 4,
            'specs': {'hw:cpu_policy': 'mixed', 'hw:cpu_realtime': 'yes',
                            'hw:cpu_realtime_mask': '^0'}, 'image': {},
            'expected': [([1, 2, 3], [0], 2048, None, None, [1, 2, 3])]}),
        ('realtime_over_two_nodes', {
            'vcpus': 4, 'specs': {**DEDICATED, 'hw:cpu_realtime': 'true',
                            'hw:numa_nodes': 2,
                            'hw:cpu_realtime_mask': '^0'}, 'image': {},
            'expected': [([0, 1], [], 1024, None, None, [1]),
                      ([2, 3], [], 1024, None, None, [2, 3])]}),
        ('realtime_mask_from_image', {
            'vcpus': 2, 'specs': {**DEDICATED, 'hw:cpu_realtime': 'yes'},
            'image': {'hw_cpu_realtime_mask': '1'},
            'expected': [([0, 1], [], 2048, None, None, [1])]}),
        ('all_realtime_with_isolated_emulator', {
            'vcpus': 2, 'specs': {**DEDICATED, 'hw:cpu_realtime': 'yes',
                            'hw:emulator_threads_policy': 'isolate',
                            'hw:cpu_realtime_mask': '0-1'}, 'image': {},
            'expected': [([0, 1], [], 2048, None, None, [0, 1])]}),
    ]

    def test_request(self):
        specs, image = copy.deepcopy(self.specs), copy.deepcopy(self.image)
        request = constraints.get_numa_request(self.vcpus, 2048, self.specs,
                                               self.image)
        self.assertEqual(self.expected, _cells(request))
        self.assertFalse(request.is_placed)
        request.validate()
        self.assertEqual((specs, image), (self.specs, self.image))


class EmulatorPolicyTest(base.TestCase):

    def test_isolate_kept_on_topology(self):
        request = constraints.get_numa_request(
            2, 1024, {**DEDICATED, 'hw:emulator_threads_policy': 'isolate'},
            {})
        self.assertEqual('isolate', request.emulator_threads_policy)


class InvalidRequestTest(testscenarios.WithScenarios, base.TestCase):
    scenarios = [
        ('unknown_policy', {
            'specs': {'hw:cpu_policy': 'pinned'}, 'image': {},
            'exc': exception.InvalidNUMASpec,
            'fragment': "hw:cpu_policy='pinned': must be one of shared, "
                     "dedicated, mixed"}),
        ('bad_node_count', {
            'specs': {'hw:numa_nodes': 'two'}, 'image': {},
            'exc': exception.InvalidNUMASpec,
            'fragment': "hw:numa_nodes='two'"}),
        ('more_nodes_than_vcpus', {
            'specs': {'hw:numa_nodes': '8'}, 'image': {},
            'exc': exception.InvalidNUMASpec,
            'fragment': "more guest nodes than the guest's 4 vCPUs"}),
        ('uneven_split', {
            'specs': {'hw:numa_nodes': '3'}, 'image': {},
            'exc': exception.InvalidNUMASplit,
            'fragment': "cannot be split evenly over 3 nodes"}),
        ('cpu_assigned_twice', {
            'specs': {'hw:numa_nodes': '2', 'hw:numa_cpus.0': '0-2',
                   'hw:numa_cpus.1': '2-3', 'hw:numa_mem.0': '1024',
                   'hw:numa_mem.1': '1024'}, 'image': {},
            'exc': exception.InvalidNUMASplit,
            'fragment': "hw:numa_cpus.0, hw:numa_cpus.1: vCPU 2 is assigned "
                     "to two nodes"}),
        ('cpu_not_assigned', {
            'specs': {'hw:numa_nodes': '2', 'hw:numa_cpus.0': '0',
                   'hw:numa_cpus.1': '1-2', 'hw:numa_mem.0': '1024',
                   'hw:numa_mem.1': '1024'}, 'image': {},
            'exc': exception.InvalidNUMASplit,
            'fragment': "vCPUs [3] are assigned to no node"}),
        ('memory_not_adding_up', {
            'specs': {'hw:numa_nodes': '2', 'hw:numa_cpus.0': '0-1',
                   'hw:numa_cpus.1': '2-3', 'hw:numa_mem.0': '1024',
                   'hw:numa_mem.1': '512'}, 'image': {},
            'exc': exception.InvalidNUMASplit,
            'fragment': "adds up to 1536 MiB, the guest has 2048 MiB"}),
        ('node_missing_in_split', {
            'specs': {'hw:numa_nodes': '2', 'hw:numa_cpus.0': '0-3',
                   'hw:numa_mem.0': '2048'}, 'image': {},
            'exc': exception.InvalidNUMASplit, 'fragment': "missing [1]"}),
        ('split_without_node_count', {
            'specs': {'hw:numa_cpus.0': '0-3', 'hw:numa_mem.0': '2048'},
            'image': {}, 'exc': exception.InvalidNUMASplit,
            'fragment': "an explicit split needs hw:numa_nodes"}),
        ('bad_node_index', {
            'specs': {'hw:numa_cpus.x': '0'}, 'image': {},
            'exc': exception.InvalidNUMASpec,
            'fragment': "hw:numa_cpus.x='0'"}),
        ('cpu_beyond_guest', {
            'specs': {'hw:numa_nodes': '1', 'hw:numa_cpus.0': '0-5',
                   'hw:numa_mem.0': '2048'}, 'image': {},
            'exc': exception.InvalidNUMASpec,
            'fragment': "names vCPUs [4, 5]"}),
        ('realtime_without_pinning', {
            'specs': {'hw:cpu_realtime': 'yes', 'hw:cpu_realtime_mask': '^0'},
            'image': {}, 'exc': exception.NUMASpecConflict,
            'fragment': "hw:cpu_realtime='yes' conflicts with "
                     "hw:cpu_policy=None: realtime vCPUs must be pinned"}),
        ('realtime_without_mask', {
            'specs': {**DEDICATED, 'hw:cpu_realtime': 'yes'}, 'image': {},
            'exc': exception.InvalidNUMASpec,
            'fragment': "realtime needs hw:cpu_realtime_mask"}),
        ('realtime_mask_without_realtime', {
            'specs': {**DEDICATED, 'hw:cpu_realtime_mask': '^0'}, 'image': {},
            'exc': exception.NUMASpecConflict,
            'fragment': "a realtime mask needs hw:cpu_realtime=yes"}),
        ('every_vcpu_realtime', {
            'specs': {**DEDICATED, 'hw:cpu_realtime': 'yes',
                   'hw:cpu_realtime_mask': '0-3'}, 'image': {},
            'exc': exception.InvalidNUMASpec,
            'fragment': "every vCPU would be realtime"}),
        ('isolate_emulator_without_pinning', {
            'specs': {'hw:emulator_threads_policy': 'isolate'}, 'image': {},
            'exc': exception.NUMASpecConflict,
            'fragment': "isolated emulator threads need a dedicated pCPU"}),
        ('thread_policy_without_pinning', {
            'specs': {'hw:cpu_thread_policy': 'require'}, 'image': {},
            'exc': exception.NUMASpecConflict,
            'fragment': "a thread policy applies to pinned vCPUs only"}),
        ('dedicated_mask_without_mixed', {
            'specs': {**DEDICATED, 'hw:cpu_dedicated_mask': '^0'}, 'image': {},
            'exc': exception.NUMASpecConflict,
            'fragment': "a dedicated mask needs hw:cpu_policy=mixed"}),
        ('mixed_without_mask', {
            'specs': {'hw:cpu_policy': 'mixed'}, 'image': {},
            'exc': exception.InvalidNUMASpec,
            'fragment': "mixed needs hw:cpu_dedicated_mask"}),
        ('mixed_all_dedicated', {
            'specs': {'hw:cpu_policy': 'mixed',
                   'hw:cpu_dedicated_mask': '0-3'}, 'image': {},
            'exc': exception.InvalidNUMASpec,
            'fragment': "at least one pinned and one shared vCPU"}),
        ('mixed_caret_mask_leaves_no_dedicated', {
            'specs': {'hw:cpu_policy': 'mixed',
                      'hw:cpu_dedicated_mask': '^0-3'}, 'image': {},
            'exc': exception.InvalidNUMASpec,
            'fragment': "hw:cpu_dedicated_mask='^0-3': leaves no dedicated "
                        "vCPU of the 4"}),
        ('mixed_caret_mask_excludes_only_absent_vcpus', {
            'specs': {'hw:cpu_policy': 'mixed',
                      'hw:cpu_dedicated_mask': '^4-5'}, 'image': {},
            'exc': exception.InvalidNUMASpec,
            'fragment': "hw:cpu_dedicated_mask='^4-5': leaves no shared "
                        "vCPU of the 4"}),
        ('mixed_caret_mask_several_exclusions_leave_none', {
            'specs': {'hw:cpu_policy': 'mixed',
                      'hw:cpu_dedicated_mask': '^0-1,^2-3,1,^1'},
            'image': {}, 'exc': exception.InvalidNUMASpec,
            'fragment': "leaves no dedicated vCPU of the 4"}),
        ('mixed_caret_mask_beyond_guest', {
            'specs': {'hw:cpu_policy': 'mixed',
                      'hw:cpu_dedicated_mask': '^0,4'}, 'image': {},
            'exc': exception.InvalidNUMASpec,
            'fragment': "names vCPUs [4] but the guest has vCPUs 0-3"}),
        ('realtime_caret_mask_names_none', {
            'specs': {**DEDICATED, 'hw:cpu_realtime': 'yes',
                      'hw:cpu_realtime_mask': '^0-3,2,^2'}, 'image': {},
            'exc': exception.InvalidNUMASpec,
            'fragment': "names no realtime vCPU"}),
        ('page_size_not_power_of_two', {
            'specs': {'hw:mem_page_size': '3MB'}, 'image': {},
            'exc': exception.InvalidNUMASpec,
            'fragment': "hw:mem_page_size='3MB': must be small, large, any"}),
        ('memory_not_multiple_of_page', {
            'specs': {'hw:mem_page_size': '1GB', 'hw:numa_nodes': '4'},
            'image': {}, 'exc': exception.PageSizeMemoryMismatch,
            'fragment': "guest cell 0 has 512 MiB, not a multiple of the "
                     "1048576 KiB page size"}),
        ('image_page_size_not_allowed', {
            'specs': {}, 'image': {'hw_mem_page_size': 'large'},
            'exc': exception.ImageSpecForbidden,
            'fragment': "image property hw_mem_page_size='large' is not "
                     "allowed by flavor hw:mem_page_size=None"}),
        ('image_small_under_large', {
            'specs': {'hw:mem_page_size': 'large'},
            'image': {'hw_mem_page_size': 'small'},
            'exc': exception.ImageSpecForbidden,
            'fragment': "flavor hw:mem_page_size='large'"}),
        ('image_policy_contradicts_flavor', {
            'specs': {'hw:cpu_policy': 'shared'},
            'image': {'hw_cpu_policy': 'dedicated'},
            'exc': exception.ImageSpecForbidden,
            'fragment': "hw_cpu_policy='dedicated' is not allowed by flavor "
                     "hw:cpu_policy='shared'"}),
        ('image_thread_policy_contradicts', {
            'specs': {**DEDICATED, 'hw:cpu_thread_policy': 'isolate'},
            'image': {'hw_cpu_thread_policy': 'require'},
            'exc': exception.ImageSpecForbidden,
            'fragment': "hw_cpu_thread_policy='require'"}),
        ('image_nodes_contradict', {
            'specs': {'hw:numa_nodes': '2'}, 'image': {'hw_numa_nodes': '1'},
            'exc': exception.ImageSpecForbidden,
            'fragment': "hw_numa_nodes='1'"}),
        ('image_split_over_flavor_split', {
            'specs': {'hw:numa_nodes': '2', 'hw:numa_cpus.0': '0-1',
                   'hw:numa_cpus.1': '2-3', 'hw:numa_mem.0': '1024',
                   'hw:numa_mem.1': '1024'},
            'image': {'hw_numa_cpus.0': '0'},
            'exc': exception.ImageSpecForbidden,
            'fragment': "the flavor already splits"}),
        ('bad_boolean', {
            'specs': {**DEDICATED, 'hw:cpu_realtime': 'maybe'}, 'image': {},
            'exc': exception.InvalidNUMASpec,
            'fragment': "hw:cpu_realtime='maybe': must be a boolean"}),
    ]

    def test_invalid(self):
        specs, image = copy.deepcopy(self.specs), copy.deepcopy(self.image)
        self.assertRaisesMessage(self.exc, self.fragment,
                                 constraints.get_numa_request, 4, 2048,
                                 self.specs, self.image)
        self.assertEqual((specs, image), (self.specs, self.image))


class SizeTest(base.TestCase):

    def test_vcpus_must_be_positive(self):
        self.assertRaisesMessage(exception.InvalidNUMASpec, "vcpus=0",
                                 constraints.get_numa_request, 0, 1024, {},
                                 {})

    def test_sizes_are_bounded_before_any_work(self):
        for vcpus, memory_mb, fragment in (
                (constraints.MAX_VCPUS + 1, 1024, 'must be at most 4096'),
                (10 ** 8, 1024, 'vcpus=100000000'),
                (2, constraints.MAX_MEMORY_MB + 1, 'memory_mb=')):
            self.assertRaisesMessage(
                exception.InvalidNUMASpec, fragment,
                constraints.get_numa_request, vcpus, memory_mb,
                {'hw:cpu_policy': 'dedicated'}, {})

    def test_the_bounds_themselves_are_accepted(self):
        request = constraints.get_numa_request(
            constraints.MAX_VCPUS, constraints.MAX_MEMORY_MB, {}, {})
        self.assertIsNone(request)
