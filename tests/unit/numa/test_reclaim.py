"""Planning memory changes on a host node (the seed's pnid/nodeexact)."""

from numamig import exception
from numamig import objects
from numamig.numa import reclaim
from tests import base

A = '00000000-0000-4000-8000-00000000000a'
B = '00000000-0000-4000-8000-00000000000b'


def _guest(uuid, cells):
    """Devices from (host cell, size, requested) per guest cell."""
    topology = objects.InstanceNUMATopology(cells=[
        objects.InstanceNUMACell(
            id=i, host_cell=host, cpuset={i}, memory_mb=256,
            virtio_mem_size_mb=size, virtio_mem_block_kb=2048,
            virtio_mem_requested_mb=requested)
        for i, (host, size, requested) in enumerate(cells)])
    return reclaim.devices_of(uuid, topology)


def _changes(plan):
    return [(s.instance_uuid, s.cell, s.before_mb, s.after_mb)
            for s in plan.steps]


class GuestPlanTest(base.TestCase):
    """The seed's examples on a guest whose vnode 0 is on pnode 1, vnodes
    1 and 2 on pnode 3, vnode 3 on pnode 5."""

    def setUp(self):
        super().setUp()
        self.devices = _guest(A, [(1, 512, 512), (3, 512, 256),
                                  (3, 512, 128), (5, 512, 512)])

    def test_exact_shrink_stops_short_on_the_node(self):
        # Total plugged 1408; ask for 800 (-608) from pnode 3 only: the
        # two vnodes it backs hold 384.
        plan = reclaim.plan_guest(self.devices, 3, 800, exact=True)
        self.assertEqual([(A, 1, 256, 0), (A, 2, 128, 0)], _changes(plan))
        self.assertEqual((-384, 0, 224), (plan.on_node_mb,
                                          plan.elsewhere_mb, plan.short_mb))
        self.assertIn('224 MiB short of the target', plan.notes)

    def test_best_effort_continues_on_other_nodes(self):
        plan = reclaim.plan_guest(self.devices, 3, 800, exact=False)
        self.assertEqual((-384, -224, 0), (plan.on_node_mb,
                                           plan.elsewhere_mb, plan.short_mb))
        # Other nodes: the one with most to give first (cell 0 before 3
        # on equal room: cell order).
        self.assertEqual((A, 0, 512, 288), _changes(plan)[2])

    def _room_on_node_1(self):
        return _guest(A, [(1, 512, 256), (3, 512, 256), (3, 512, 128),
                          (5, 512, 512)])

    def test_growth_on_the_node_first(self):
        plan = reclaim.plan_guest(self._room_on_node_1(), 3, 1152 + 700,
                                  exact=False)
        self.assertEqual([(A, 2, 128, 512), (A, 1, 256, 512)],
                         _changes(plan)[:2])
        self.assertEqual((640, 60, 0), (plan.on_node_mb, plan.elsewhere_mb,
                                        plan.short_mb))

    def test_growth_refused_when_the_node_lacks_memory(self):
        exc = self.assertRaises(
            exception.InvalidMemoryChange, reclaim.plan_guest, self.devices,
            3, 1408 + 100, exact=True, free_mb={3: 50, 1: 4096})
        self.assertIn('host node 3 has 50 MiB free', str(exc))

    def test_growth_elsewhere_bounded_by_free_memory(self):
        plan = reclaim.plan_guest(self._room_on_node_1(), 3, 1152 + 700,
                                  exact=False, free_mb={3: 4096, 1: 0, 5: 0})
        self.assertEqual((640, 0, 60), (plan.on_node_mb, plan.elsewhere_mb,
                                        plan.short_mb))

    def test_whole_blocks_and_bound(self):
        plan = reclaim.plan_guest(self.devices, 1, 1408 - 301, exact=True,
                                  max_loss_mb=200)
        # 301 rounds up to 302 (2 MiB blocks) but the bound is 200.
        self.assertEqual([(A, 0, 512, 312)], _changes(plan))
        self.assertIn(f'{A} lost its bound of 200 MiB', plan.notes)
        plan = reclaim.plan_guest(self.devices, 1, 1408 - 301, exact=True)
        self.assertEqual([(A, 0, 512, 210)], _changes(plan))

    def test_refusals(self):
        for devices, target, fragment in (
                ([], 0, 'no virtio-mem device'),
                (self.devices, 2049, '0 to 2048 MiB'),
                (self.devices, -1, '0 to 2048 MiB')):
            exc = self.assertRaises(exception.InvalidMemoryChange,
                                    reclaim.plan_guest, devices, 3, target,
                                    True)
            self.assertIn(fragment, str(exc))

    def test_no_change(self):
        plan = reclaim.plan_guest(self.devices, 3, 1408, exact=True)
        self.assertEqual(((), 0), (plan.steps, plan.short_mb))


class OneToManyTest(base.TestCase):

    def test_reported_as_best_effort(self):
        topology = objects.InstanceNUMATopology(cells=[
            objects.InstanceNUMACell(
                id=0, host_cell=0, cpuset={0}, memory_mb=256,
                virtio_mem_size_mb=512, virtio_mem_block_kb=2048,
                virtio_mem_requested_mb=512)])
        devices = reclaim.devices_of(A, topology, backing={0: {0, 1}})
        plan = reclaim.plan_guest(devices, 1, 256, exact=True)
        self.assertEqual((0, -256, 0), (plan.on_node_mb, plan.best_effort_mb,
                                        plan.short_mb))
        self.assertIn('backed by several host nodes', plan.notes[0])

    def test_one_to_one_before_one_to_many(self):
        devices = reclaim.devices_of(A, objects.InstanceNUMATopology(cells=[
            objects.InstanceNUMACell(
                id=i, host_cell=0, cpuset={i}, memory_mb=256,
                virtio_mem_size_mb=512, virtio_mem_block_kb=2048,
                virtio_mem_requested_mb=512) for i in (0, 1)]),
            backing={0: {0, 1}, 1: {1}})
        plan = reclaim.plan_guest(devices, 1, 1024 - 600, exact=True)
        self.assertEqual([(A, 1, 512, 0), (A, 0, 512, 424)],
                         _changes(plan))


class HostPlanTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.devices = (_guest(B, [(0, 512, 256), (1, 512, 512)]) +
                        _guest(A, [(0, 1024, 1024), (1, 512, 0)]))

    def test_most_slack_first_and_bounded_per_guest(self):
        plan = reclaim.plan_host(self.devices, 0, -900, exact=True,
                                 max_loss_mb=600)
        # A has 1024 on node 0 (bounded to 600), then B's 256 (of which
        # 300 are wanted: all 256), 44 short.
        self.assertEqual([(A, 0, 1024, 424), (B, 0, 256, 0)],
                         _changes(plan))
        self.assertEqual((-856, 44), (plan.on_node_mb, plan.short_mb))

    def test_best_effort_takes_the_rest_elsewhere(self):
        plan = reclaim.plan_host(self.devices, 0, -1400, exact=False,
                                 max_loss_mb=800)
        # A gives its bound (800) on node 0, B its 256 there, then B's
        # other device the remaining 344; A's other device is empty.
        self.assertEqual([(A, 0, 1024, 224), (B, 0, 256, 0),
                          (B, 1, 512, 168)], _changes(plan))
        self.assertEqual((-1056, -344, 0), (plan.on_node_mb,
                                            plan.elsewhere_mb,
                                            plan.short_mb))
        self.assertIn(f'{A} lost its bound of 800 MiB', plan.notes)

    def test_give_back_where_there_is_room(self):
        plan = reclaim.plan_host(self.devices, 1, 300, exact=True,
                                 free_mb={1: 1000})
        self.assertEqual([(A, 1, 0, 300)], _changes(plan))

    def test_zero_refused(self):
        self.assertRaises(exception.InvalidMemoryChange, reclaim.plan_host,
                          self.devices, 0, 0, True)

    def test_inputs_unchanged_and_json(self):
        before = list(self.devices)
        plan = reclaim.plan_host(self.devices, 0, -100, exact=True)
        self.assertEqual(before, self.devices)
        data = plan.as_dict()
        self.assertEqual((-100, [0]), (data['on_node_mb'],
                                       data['steps'][0]['nodes']))
