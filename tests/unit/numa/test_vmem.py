"""virtio-mem devices: the flavor keys, and the memory the host holds."""

import copy

import testscenarios

from numamig import exception
from numamig import objects
from numamig.numa import constraints
from numamig.numa import fit
from numamig.numa import instance_request
from numamig.numa import specs
from numamig.numa import usage
from numamig.numa import view_usage
from numamig.numa import views
from numamig.numa import vmem
from tests import base
from tests.unit.numa import hosts

load_tests = testscenarios.load_tests_apply_scenarios

_TWO_NODES = {'hw:numa_nodes': '2', 'hw:virtio_mem_size': '1024'}


def _request(extra=None, vcpus=4, memory_mb=2048):
    return constraints.get_numa_request(vcpus, memory_mb,
                                        dict(_TWO_NODES, **(extra or {})), {})


class RequestTest(base.TestCase):

    def test_one_device_per_guest_cell_with_defaults(self):
        request = _request()
        self.assertEqual(
            [(0, 1024, 1024, 2048, 1024, None)] * 1 +
            [(1, 1024, 1024, 2048, 1024, None)],
            [(c.id, c.memory_mb, c.virtio_mem_size_mb, c.virtio_mem_block_kb,
              c.virtio_mem_requested_mb, c.virtio_mem_current_mb)
             for c in request.cells])
        self.assertEqual([2048, 2048],
                         [c.memory_held_mb for c in request.cells])

    def test_requested_and_block_given(self):
        cell = _request({'hw:virtio_mem_requested': '256',
                         'hw:virtio_mem_block': '4MB'}).cells[1]
        self.assertEqual((4096, 256, 1280),
                         (cell.virtio_mem_block_kb,
                          cell.virtio_mem_requested_mb, cell.memory_held_mb))

    def test_device_alone_makes_one_guest_cell(self):
        request = constraints.get_numa_request(
            2, 512, {'hw:virtio_mem_size': '512'}, {})
        self.assertEqual([(0, 512)], [(c.id, c.virtio_mem_size_mb)
                                      for c in request.cells])

    def test_without_device_nothing_changes(self):
        request = constraints.get_numa_request(4, 2048,
                                               {'hw:numa_nodes': '2'}, {})
        self.assertEqual([False, False],
                         [c.has_virtio_mem for c in request.cells])
        self.assertEqual([1024, 1024], [vmem.held_mb(c)
                                        for c in request.cells])

    def test_image_cannot_set_a_device(self):
        specs.check_known({'hw:virtio_mem_size': '512'}, {})
        self.assertRaises(exception.UnknownNUMASpec, specs.check_known,
                          {}, {'hw_virtio_mem_size': '512'})


class RefusalTest(base.TestCase):
    """Each bad setting is refused naming its key."""

    scenarios = [
        ('size_not_blocks', {'extra': {'hw:virtio_mem_size': '3'},
                             'key': "hw:virtio_mem_size='3'",
                             'error': exception.InvalidNUMASpec}),
        ('requested_over_size', {
            'extra': {'hw:virtio_mem_requested': '2048'},
            'key': "hw:virtio_mem_requested='2048'",
            'error': exception.InvalidNUMASpec}),
        ('requested_not_blocks', {
            'extra': {'hw:virtio_mem_requested': '3'},
            'key': "hw:virtio_mem_requested='3'",
            'error': exception.InvalidNUMASpec}),
        ('block_too_small', {'extra': {'hw:virtio_mem_block': '512K'},
                             'key': "hw:virtio_mem_block='512K'",
                             'error': exception.InvalidNUMASpec}),
        ('block_not_a_size', {'extra': {'hw:virtio_mem_block': 'big'},
                              'key': "hw:virtio_mem_block='big'",
                              'error': exception.InvalidNUMASpec}),
        ('requested_negative', {
            'extra': {'hw:virtio_mem_requested': '-2'},
            'key': "hw:virtio_mem_requested='-2'",
            'error': exception.InvalidNUMASpec}),
        ('page_larger_than_block', {
            'extra': {'hw:mem_page_size': '1GB'},
            'key': "hw:mem_page_size='1GB'",
            'error': exception.NUMASpecConflict}),
        ('page_chosen_by_host', {
            'extra': {'hw:mem_page_size': 'large'},
            'key': "hw:mem_page_size='large'",
            'error': exception.NUMASpecConflict}),
    ]

    def test_refused_naming_the_key(self):
        exc = self.assertRaises(self.error, _request, self.extra)
        self.assertIn(self.key, str(exc))

    def test_block_without_size(self):
        exc = self.assertRaises(
            exception.InvalidNUMASpec, constraints.get_numa_request, 2, 512,
            {'hw:virtio_mem_block': '2MB'}, {})
        self.assertIn('needs hw:virtio_mem_size', str(exc))


class AccountingTest(base.TestCase):
    """Fit, apply, release and the view path all count held memory."""

    def setUp(self):
        super().setUp()
        self.host = hosts.make_host(cells=2, cores=4, threads=1, shared=2,
                                    memory_mb=4096)

    def test_fit_and_usage_count_requested(self):
        placed = fit.fit(self.host, _request(
            {'hw:virtio_mem_requested': '512'})).topology
        after = usage.apply(self.host, placed)
        self.assertEqual([1536, 1536],
                         [c.memory_usage_mb for c in after.cells])
        self.assertEqual(self.host, usage.release(after, placed))

    def test_fit_refuses_when_device_memory_does_not_fit(self):
        # 1024 boot + 1024 device per cell; each host cell has 1500 free.
        busy = usage.apply(self.host, fit.fit(
            self.host, constraints.get_numa_request(
                2, 5192, {'hw:numa_nodes': '2', 'hw:numa_cpus.0': '0',
                          'hw:numa_cpus.1': '1', 'hw:numa_mem.0': '2596',
                          'hw:numa_mem.1': '2596'}, {})).topology)
        limits = objects.NUMALimits(cpu_allocation_ratio=4.0,
                                    ram_allocation_ratio=1.0)
        refused = fit.fit(busy, _request(), limits=limits)
        self.assertFalse(refused.fits)
        self.assertIn('2048', refused.reason)
        self.assertTrue(fit.fit(busy, _request(
            {'hw:virtio_mem_requested': '256'}), limits=limits).fits)

    def test_current_above_requested_is_still_held(self):
        # A shrink asked for (requested 0) that the guest has not done
        # (current 1024): the host still holds what the guest has.
        placed = fit.fit(self.host, _request()).topology
        shrinking = copy.deepcopy(placed)
        for cell in shrinking.cells:
            cell.virtio_mem_requested_mb = 0
            cell.virtio_mem_current_mb = 1024
        self.assertEqual(
            [c.memory_usage_mb for c in usage.apply(self.host,
                                                     placed).cells],
            [c.memory_usage_mb for c in usage.apply(self.host,
                                                     shrinking).cells])
        for cell in shrinking.cells:
            cell.virtio_mem_current_mb = 256
        self.assertEqual([1280, 1280],
                         [c.memory_usage_mb for c in usage.apply(
                             self.host, shrinking).cells])

    def test_huge_pages_counted_for_the_device(self):
        host = hosts.make_host(cells=2, cores=4, threads=1, shared=2,
                               memory_mb=4096,
                               pages=hosts.hugepage_pools(4096,
                                                          pages_2m=1536))
        placed = fit.fit(host, _request(
            {'hw:mem_page_size': '2MB',
             'hw:virtio_mem_requested': '512'})).topology
        after = usage.apply(host, placed)
        # (1024 boot + 512 device) / 2 MiB pages per cell.
        self.assertEqual([768, 768],
                         [c.pages_of(2048).used for c in after.cells])

    def test_view_path_agrees_with_apply(self):
        request = _request({'hw:virtio_mem_requested': '512'})
        result = fit.fit(self.host, request)
        view = view_usage.apply(views.HostView.of(self.host),
                                result.placement)
        self.assertEqual(
            [c.memory_usage_mb for c in usage.apply(
                self.host, result.topology).cells],
            [c.memory_usage_mb for c in view.cells])
        self.assertEqual([512, 512], [c.virtio_mem_requested_mb
                                      for c in result.topology.cells])


class DeviceStateTest(base.TestCase):
    """A migrating guest is claimed with its devices as they are now."""

    def _instance(self):
        specs = dict(_TWO_NODES, **{'hw:virtio_mem_requested': '512'})
        host = hosts.make_host(cells=2, cores=4, threads=1, shared=2,
                               memory_mb=8192)
        placed = fit.fit(host, constraints.get_numa_request(
            4, 2048, specs, {})).topology
        placed.cells[1].virtio_mem_requested_mb = 128
        placed.cells[1].virtio_mem_current_mb = 256
        return objects.Instance(uuid='5a1e0000-aaaa-4bbb-8ccc-000000000002',
                                name='g', vcpus=4, memory_mb=2048,
                                extra_specs=specs, numa_topology=placed)

    def test_request_takes_the_placed_sizes(self):
        instance = self._instance()
        before = copy.deepcopy(instance)
        request = instance_request.numa_request(instance)
        self.assertEqual(
            [(512, None, 1536), (128, 256, 1280)],
            [(c.virtio_mem_requested_mb, c.virtio_mem_current_mb,
              c.memory_held_mb) for c in request.cells])
        self.assertEqual(before, instance)
        self.assertIsNone(request.cells[0].host_cell)

    def test_unplaced_guest_takes_the_flavor_sizes(self):
        instance = self._instance()
        instance.numa_topology = None
        self.assertEqual([512, 512], [
            c.virtio_mem_requested_mb
            for c in instance_request.numa_request(instance).cells])


class ByHostNodeTest(base.TestCase):

    def test_sums_per_host_node(self):
        host = hosts.make_host(cells=2, cores=4, threads=1, shared=2,
                               memory_mb=8192)
        one = fit.fit(host, _request(
            {'hw:virtio_mem_requested': '256'})).topology
        two = fit.fit(host, _request()).topology
        two.cells[0].virtio_mem_current_mb = 1024
        two.cells[0].virtio_mem_requested_mb = 512
        plain = fit.fit(host, constraints.get_numa_request(
            2, 512, {'hw:numa_nodes': '2'}, {})).topology
        found = vmem.by_host_node([one, two, plain, None])
        node_of_two_0 = two.cells[0].host_cell
        self.assertEqual({0, 1}, set(found))
        self.assertEqual(2, found[node_of_two_0]['devices'])
        # 256 (one) + 1024 (two: current above requested is still held).
        self.assertEqual(256 + 1024,
                         found[node_of_two_0]['reclaimable_mb'])
        self.assertEqual((1024 - 256) + (1024 - 512),
                         found[node_of_two_0]['growable_mb'])
