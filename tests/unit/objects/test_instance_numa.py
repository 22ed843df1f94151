"""Tests of the guest-side NUMA objects: validation and helpers."""

import testscenarios

from numamig import exception
from numamig import objects
from tests import base
from tests.unit.objects import samples
from tests.unit.objects import validation

load_tests = testscenarios.load_tests_apply_scenarios


_set = validation.setting


_cell = validation.on_cell


class ValidationErrorTest(validation.RejectsRows, base.TestCase):
    """Each row breaks one invariant; validate() must name it."""

    scenarios = [
        ('cell_negative_id',
         {'build': samples.instance_cell, 'mutate': _set(id=-1),
          'fragment': 'id must not be negative, got -1'}),
        ('cell_negative_host_cell',
         {'build': samples.instance_cell, 'mutate': _set(host_cell=-2),
          'fragment': 'host_cell must not be negative, got -2'}),
        ('cell_zero_memory',
         {'build': samples.instance_cell, 'mutate': _set(memory_mb=0),
          'fragment': 'guest cell 0: memory_mb must be positive, got 0'}),
        ('cell_unknown_page_size',
         {'build': samples.instance_cell, 'mutate': _set(pagesize=1536),
          'fragment': 'guest cell 0: unknown page size 1536 KiB'}),
        ('cell_vcpu_floating_and_pinned',
         {'build': samples.instance_cell, 'mutate': _set(cpuset={1, 2}),
          'fragment': 'vCPUs [1] are both floating and pinned'}),
        ('cell_pin_for_floating_vcpu',
         {'build': samples.instance_cell,
          'mutate': _set(cpu_pinning={0: 10, 1: 11, 2: 12}),
          'fragment': 'pins for vCPUs [2] that are not pinned vCPUs of '
                      'this cell [0, 1]'}),
        ('cell_pinned_vcpu_without_pcpu',
         {'build': samples.instance_cell, 'mutate': _set(cpu_pinning={0: 10}),
          'fragment': 'pinned vCPUs [1] have no pCPU'}),
        ('cell_two_vcpus_one_pcpu',
         {'build': samples.instance_cell,
          'mutate': _set(cpu_pinning={0: 10, 1: 10}),
          'fragment': 'two vCPUs pinned to one pCPU in {0: 10, 1: 10}'}),
        ('cell_negative_pcpu',
         {'build': samples.instance_cell,
          'mutate': _set(cpu_pinning={0: -1, 1: 10}),
          'fragment': 'vCPUs pinned to negative pCPUs [-1]'}),
        ('cell_pin_on_emulator_pcpu',
         {'build': samples.instance_cell, 'mutate': _set(cpuset_reserved={11}),
          'fragment': 'pCPUs [11] are both vCPU pins and emulator thread'}),
        ('cell_realtime_vcpu_elsewhere',
         {'build': samples.instance_cell, 'mutate': _set(realtime_vcpus={9}),
          'fragment': 'realtime vCPUs [9] are not vCPUs of this cell'}),
        ('topology_cell_ids_gap',
         {'build': samples.instance_topology, 'mutate': _cell(1, id=2),
          'fragment': 'guest cell ids must be 0..1, got [0, 2]'}),
        ('topology_vcpu_in_two_cells',
         {'build': samples.instance_topology,
          'mutate': _cell(1, cpuset={2}),
          'fragment': 'vCPUs [2] belong to more than one guest cell'}),
        ('topology_vcpu_numbering_gap',
         {'build': samples.instance_topology,
          'mutate': _cell(1, cpuset={7}),
          'fragment': 'vCPUs must be numbered 0..5, got [0, 1, 2, 3, 4, '
                      '7]'}),
        ('topology_guest_cell_on_two_host_cells',
         {'build': samples.instance_topology,
          'mutate': _cell(1, host_cell=0),
          'fragment': 'two guest cells placed on one host cell: [0, 0]'}),
        ('topology_pcpu_pinned_by_two_cells',
         {'build': samples.instance_topology,
          'mutate': _cell(1, cpu_pinning={3: 10, 4: 13}),
          'fragment': 'one pCPU is pinned by vCPUs of two cells'}),
        ('topology_bad_child',
         {'build': samples.instance_topology,
          'mutate': _cell(0, memory_mb=-1),
          'fragment': 'Invalid InstanceNUMACell: guest cell 0: memory_mb'}),
    ]


class EnumFieldTest(base.TestCase):

    def test_unknown_cpu_policy_refused_at_assignment(self):
        cell = samples.instance_cell()
        self.assertRaises(ValueError, setattr, cell, 'cpu_policy', 'greedy')
        self.assertEqual('mixed', cell.cpu_policy)

    def test_unknown_emulator_policy_refused(self):
        self.assertRaises(ValueError, objects.InstanceNUMATopology,
                          emulator_threads_policy='sometimes')


class InstanceCellTest(base.TestCase):

    def test_vcpus_and_pinning(self):
        cell = samples.instance_cell(0)
        self.assertEqual({0, 1, 2}, cell.vcpus)
        self.assertTrue(cell.is_pinned)

    def test_unplaced_request_is_valid(self):
        cell = objects.InstanceNUMACell(id=0, cpuset={0, 1}, memory_mb=512)
        self.assertIs(cell, cell.validate())
        self.assertFalse(cell.is_pinned)
        self.assertIsNone(cell.host_cell)


class InstanceTopologyTest(base.TestCase):

    def test_aggregates_over_cells(self):
        topology = samples.instance_topology()
        self.assertEqual(set(range(6)), topology.vcpus)
        self.assertEqual({0: 10, 1: 11, 3: 12, 4: 13}, topology.cpu_pinning)
        self.assertEqual({14}, topology.cpuset_reserved)
        self.assertTrue(topology.is_placed)

    def test_request_is_not_placed(self):
        topology = objects.InstanceNUMATopology(cells=[
            objects.InstanceNUMACell(id=0, cpuset={0}, memory_mb=512)])
        self.assertFalse(topology.is_placed)
        self.assertFalse(objects.InstanceNUMATopology().is_placed)


class VirtioMemCellTest(base.TestCase):
    """InstanceNUMACell 1.1: the virtio-mem device of a guest cell."""

    def _cell(self, **kwargs):
        values = {'virtio_mem_size_mb': 1024, 'virtio_mem_block_kb': 2048,
                  'virtio_mem_requested_mb': 512}
        values.update(kwargs)
        return objects.InstanceNUMACell(id=0, cpuset={0}, memory_mb=512,
                                        **values)

    def test_held_is_the_larger_of_requested_and_current(self):
        self.assertEqual((512, 1024), (self._cell().virtio_mem_held_mb,
                                       self._cell().memory_held_mb))
        cell = self._cell(virtio_mem_current_mb=768)
        self.assertEqual(768, cell.virtio_mem_held_mb)
        plain = objects.InstanceNUMACell(id=0, cpuset={0}, memory_mb=512)
        self.assertEqual((0, 512, False), (plain.virtio_mem_held_mb,
                                           plain.memory_held_mb,
                                           plain.has_virtio_mem))

    def test_bad_devices_refused(self):
        for kwargs, fragment in (
                ({'virtio_mem_block_kb': 3000}, 'block size 3000'),
                ({'virtio_mem_size_mb': 3}, 'size 3 MiB'),
                ({'virtio_mem_requested_mb': 1025}, 'requested 1025'),
                ({'virtio_mem_current_mb': 2048}, 'current 2048'),
                ({'virtio_mem_size_mb': None}, 'without virtio_mem_size_mb')):
            exc = self.assertRaises(exception.ObjectValidationError,
                                    self._cell(**kwargs).validate)
            self.assertIn(fragment, str(exc))

    def test_backport_to_1_0_drops_the_device(self):
        topology = objects.InstanceNUMATopology(cells=[self._cell()])
        primitive = topology.obj_to_primitive(target_version='1.0')
        cell = primitive['numamig_object.data']['cells'][0]
        self.assertEqual('1.0', cell['numamig_object.version'])
        self.assertFalse(any(k.startswith('virtio_mem') for k in
                             cell['numamig_object.data']))
        current = topology.obj_to_primitive()['numamig_object.data'][
            'cells'][0]['numamig_object.data']
        self.assertEqual(512, current['virtio_mem_requested_mb'])
