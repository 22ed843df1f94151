"""Choosing what to reclaim from whom so that a guest fits one node."""

import copy

from numamig import exception
from numamig import objects
from numamig.numa import constraints
from numamig.numa import fit
from numamig.numa import placement_reclaim
from numamig.numa import usage
from numamig.numa import vmem
from tests import base
from tests.unit.numa import hosts

A = 'aaaaaaaa-0000-4000-8000-000000000001'
B = 'bbbbbbbb-0000-4000-8000-000000000002'
C = 'cccccccc-0000-4000-8000-000000000003'
LIMITS = objects.NUMALimits(cpu_allocation_ratio=4.0,
                            ram_allocation_ratio=1.0)


def _guest(uuid, specs, vcpus=1, memory_mb=1024):
    request = constraints.get_numa_request(vcpus, memory_mb, specs, {})
    request.instance_uuid = uuid
    return request


def _vmem_guest(uuid, size=1024, requested=1024, floor=None, extra=None):
    specs = {'hw:virtio_mem_size': str(size),
             'hw:virtio_mem_requested': str(requested)}
    if floor is not None:
        specs['hw:virtio_mem_min'] = str(floor)
    specs.update(extra or {})
    return _guest(uuid, specs), specs


class _Host:
    """A host with guests placed in turn, and what each can give."""

    def __init__(self, memory_mb=4096, pages=None):
        self.topology = hosts.make_host(cells=2, cores=4, threads=1,
                                        shared=2, memory_mb=memory_mb,
                                        pages=pages)
        self.placed = {}
        self.specs = {}

    def place(self, uuid, request, specs=None, node=None):
        host = self.topology
        if node is not None:
            # Only the wanted node has room for the fit's choice.
            other = usage.apply(host, self._filler(1 - node))
            placed = fit.fit(other, request, limits=LIMITS).topology
        else:
            placed = fit.fit(host, request, limits=LIMITS).topology
        placed.instance_uuid = uuid
        self.topology = usage.apply(host, placed)
        self.placed[uuid] = placed
        self.specs[uuid] = specs or {}
        return placed

    def _filler(self, node):
        cell = self.topology.cells[node]
        return objects.InstanceNUMATopology(
            instance_uuid='ffffffff-0000-4000-8000-00000000ffff',
            cells=[objects.InstanceNUMACell(
                id=0, cpuset=set(), pcpuset=set(),
                memory_mb=cell.memory_mb - cell.memory_usage_mb,
                host_cell=node)])

    def slack(self):
        result = []
        for uuid, placed in sorted(self.placed.items()):
            floors = {cell.id: vmem.placement_floor_mb(self.specs[uuid],
                                                       cell)
                      for cell in placed.cells if cell.has_virtio_mem}
            result.extend(placement_reclaim.slack_of(uuid, placed, floors))
        return result

    def after(self, plan):
        """The host once every guest of ``plan`` reached its size."""
        topology = self.topology
        for uuid in {s.instance_uuid for s in plan.steps}:
            old = self.placed[uuid]
            new = copy.deepcopy(old)
            for step in plan.steps:
                if step.instance_uuid == uuid:
                    cell = next(c for c in new.cells if c.id == step.cell)
                    cell.virtio_mem_requested_mb = step.after_mb
                    cell.virtio_mem_current_mb = step.after_mb
            topology = usage.apply(usage.release(topology, old), new)
        return topology


def _steps(plan):
    return [(s.instance_uuid, s.cell, s.before_mb, s.after_mb)
            for s in plan.steps]


class TwoNodeHostTestCase(base.TestCase):
    """A host whose two nodes each have 512 MiB free; guest A has a
    virtio-mem device on node 0 with slack above its 256 MiB floor."""

    def setUp(self):
        super().setUp()
        self.host = _Host()
        # Node 0: 1024 boot + 1024 device of A (floor 256) + 1536 of B:
        # 512 MiB free. Node 1: full but for 512 MiB as well.
        request, specs = _vmem_guest(A, floor=256)
        self.host.place(A, request, specs, node=0)
        self.host.place(B, _guest(B, {'hw:numa_nodes': '1'},
                                  memory_mb=1536), node=0)
        self.host.place(C, _guest(C, {'hw:numa_nodes': '1'},
                                  memory_mb=3584), node=1)
        self.new = _guest('dddddddd-0000-4000-8000-000000000004',
                          {'hw:numa_nodes': '1'}, memory_mb=1100)


class ChooseTest(TwoNodeHostTestCase):

    def _choose(self, request=None, max_total=4096, max_loss=None,
                **kwargs):
        return placement_reclaim.choose(
            self.host.topology, request or self.new, self.host.slack(),
            max_total, max_loss_mb=max_loss, limits=LIMITS, **kwargs)

    def test_refused_for_memory_on_one_node_fits_after_the_least(self):
        self.assertFalse(fit.fit(self.host.topology, self.new,
                                 limits=LIMITS).fits)
        decision = self._choose()
        choice = decision.choice
        # 588 MiB missing on node 0: whole 2 MiB blocks, the least.
        self.assertEqual((False, 0, 588), (decision.fits, choice.node,
                                           choice.freed_mb))
        self.assertEqual([(A, 0, 1024, 436)], _steps(choice.plan))
        self.assertEqual((-588, -588, 0), (choice.plan.wanted_mb,
                                           choice.plan.on_node_mb,
                                           choice.plan.short_mb))
        self.assertIn('needs 1100 MiB', choice.refusal)
        # The real accounting agrees: it fits once A gave that back, and
        # not one block earlier.
        self.assertTrue(fit.fit(self.host.after(choice.plan), self.new,
                                limits=LIMITS).fits)
        short = placement_reclaim.choose(
            self.host.topology, _guest(C, {'hw:numa_nodes': '1'},
                                       memory_mb=1102),
            self.host.slack(), 4096, limits=LIMITS)
        self.assertEqual(590, short.choice.freed_mb)

    def test_fits_without_reclaim(self):
        small = _guest(C, {'hw:numa_nodes': '1'}, memory_mb=256)
        decision = self._choose(small)
        self.assertEqual((True, None), (decision.fits, decision.choice))

    def test_never_below_the_floor(self):
        # 768 MiB of slack above the floor of 256: 1300 cannot be freed.
        big = _guest(C, {'hw:numa_nodes': '1'}, memory_mb=1300)
        decision = self._choose(big)
        self.assertIsNone(decision.choice)
        self.assertIn('node 0: its 768 MiB of slack', decision.why)
        fits = self._choose(_guest(C, {'hw:numa_nodes': '1'},
                                   memory_mb=1280))
        self.assertEqual([(A, 0, 1024, 256)], _steps(fits.choice.plan))

    def test_bounded_per_placement_and_per_guest(self):
        for kwargs in ({'max_total': 586}, {'max_loss': 586},
                       {'max_total': 0}):
            decision = self._choose(**kwargs)
            self.assertIsNone(decision.choice, kwargs)
        self.assertEqual(588, self._choose(max_total=588,
                                           max_loss=588).choice.freed_mb)

    def test_not_for_pcpus(self):
        pinned = _guest(C, {'hw:numa_nodes': '1', 'hw:cpu_policy':
                            'dedicated'}, vcpus=3, memory_mb=256)
        decision = self._choose(pinned)
        self.assertIsNone(decision.choice)
        self.assertIn('would not do', decision.why)

    def test_no_slack(self):
        host = _Host()
        request, specs = _vmem_guest(A)    # floor: its starting 1024
        host.place(A, request, specs, node=0)
        host.place(C, _guest(C, {'hw:numa_nodes': '1'}, memory_mb=4096),
                   node=1)
        host.place(B, _guest(B, {'hw:numa_nodes': '1'}, memory_mb=1536),
                   node=0)
        self.assertEqual([], host.slack())
        decision = placement_reclaim.choose(host.topology, self.new, [],
                                            4096, limits=LIMITS)
        self.assertIn('no guest on the host has virtio-mem slack',
                      decision.why)

    def test_spread_over_guests_by_the_guest_bound(self):
        host = _Host()
        for uuid in (A, B):
            request, specs = _vmem_guest(uuid, size=512, requested=512,
                                         floor=0)
            host.place(uuid, request, specs, node=0)
        host.place(C, _guest(C, {'hw:numa_nodes': '1'}, memory_mb=4096),
                   node=1)
        # Node 0: 3072 used, 1024 free; a guest of 1536 needs 512 more.
        new = _guest(C, {'hw:numa_nodes': '1'}, memory_mb=1536)
        decision = placement_reclaim.choose(host.topology, new,
                                            host.slack(), 4096,
                                            max_loss_mb=300, limits=LIMITS)
        self.assertEqual([(A, 0, 512, 212), (B, 0, 512, 300)],
                         _steps(decision.choice.plan))
        self.assertTrue(fit.fit(host.after(decision.choice.plan), new,
                                limits=LIMITS).fits)

    def test_node_asking_least_is_chosen(self):
        host = _Host()
        for uuid, node in ((A, 0), (B, 1)):
            request, specs = _vmem_guest(uuid, floor=0)
            host.place(uuid, request, specs, node=node)
        host.place(C, _guest(C, {'hw:numa_nodes': '1'}, memory_mb=2048),
                   node=0)
        filler = _guest('eeeeeeee-0000-4000-8000-000000000005',
                        {'hw:numa_nodes': '1'}, memory_mb=1536)
        host.place(filler.instance_uuid, filler, node=1)
        # Free: node 0 0 MiB, node 1 512 MiB; 1000 needs 488 on node 1.
        new = _guest(C, {'hw:numa_nodes': '1'}, memory_mb=1000)
        choice = placement_reclaim.choose(host.topology, new, host.slack(),
                                          4096, limits=LIMITS).choice
        self.assertEqual((1, 488), (choice.node, choice.freed_mb))
        self.assertEqual([(B, 0, 1024, 536)], _steps(choice.plan))

    def test_huge_pages_of_the_device_are_freed(self):
        pools = hosts.hugepage_pools(4096, pages_2m=1536)
        host = _Host(pages=pools)
        request, specs = _vmem_guest(A, floor=0,
                                     extra={'hw:mem_page_size': '2MB'})
        host.place(A, request, specs, node=0)
        filler = _guest(C, {'hw:numa_nodes': '1',
                            'hw:mem_page_size': '2MB'}, memory_mb=3072)
        host.place(C, filler, node=1)
        # Node 0: 2048 of its 3072 MiB of 2M pages used by A.
        new = _guest(B, {'hw:numa_nodes': '1', 'hw:mem_page_size': '2MB'},
                     memory_mb=1536)
        self.assertFalse(fit.fit(host.topology, new, limits=LIMITS).fits)
        choice = placement_reclaim.choose(host.topology, new, host.slack(),
                                          4096, limits=LIMITS).choice
        self.assertEqual((0, 512), (choice.node, choice.freed_mb))
        self.assertTrue(fit.fit(host.after(choice.plan), new,
                                limits=LIMITS).fits)

    def test_inputs_unchanged_and_answer_repeatable(self):
        before = copy.deepcopy(self.host.topology)
        slack = self.host.slack()
        first = placement_reclaim.choose(self.host.topology, self.new,
                                         slack, 4096, limits=LIMITS)
        again = placement_reclaim.choose(self.host.topology, self.new,
                                         list(reversed(slack)), 4096,
                                         limits=LIMITS)
        self.assertEqual(first, again)
        self.assertEqual(before, self.host.topology)


class SlackTest(base.TestCase):

    def test_floor_is_the_flavor_minimum_else_the_start(self):
        request, _ = _vmem_guest(A, size=1024, requested=512)
        cell = request.cells[0]
        for specs, floor in (
                ({'hw:virtio_mem_min': '101'}, 102),
                ({'hw:virtio_mem_requested': '512'}, 512),
                ({}, 1024),
                ({'hw:virtio_mem_min': 'lots'}, 1024)):
            self.assertEqual(floor, vmem.placement_floor_mb(specs, cell),
                             specs)

    def test_no_room_left_out(self):
        host = _Host()
        request, specs = _vmem_guest(A, floor=0)
        placed = host.place(A, request, specs, node=0)
        full = {0: 1024}
        self.assertEqual([], placement_reclaim.slack_of(A, placed, full))
        (entry,) = placement_reclaim.slack_of(A, placed, {0: 0})
        self.assertEqual((0, 1024, 1024), (entry.node, entry.room_mb,
                                           entry.held_mb))

    def test_floor_key_checked_at_creation(self):
        for value in ('2048', '3', '-1'):
            exc = self.assertRaises(exception.InvalidNUMASpec, _vmem_guest,
                                    A, floor=value)
            self.assertIn(f"hw:virtio_mem_min='{value}'", str(exc))
        exc = self.assertRaises(
            exception.InvalidNUMASpec, constraints.get_numa_request, 1,
            1024, {'hw:virtio_mem_min': '0'}, {})
        self.assertIn('needs hw:virtio_mem_size', str(exc))


class EstimateTest(TwoNodeHostTestCase):
    """The host's own fit: how little freed on one node would do."""

    def test_least_on_the_lowest_node_and_below_the_chooser(self):
        before = copy.deepcopy(self.host.topology)
        found = placement_reclaim.estimate(self.host.topology, self.new,
                                           4096, limits=LIMITS)
        # 512 MiB free on each node: 588 missing on both, node 0 first.
        self.assertEqual(placement_reclaim.Estimate(0, 588), found)
        self.assertEqual(before.obj_to_primitive(),
                         self.host.topology.obj_to_primitive())
        choice = placement_reclaim.choose(
            self.host.topology, self.new, self.host.slack(), 4096,
            limits=LIMITS).choice
        self.assertLessEqual(found.need_mb, choice.freed_mb)

    def test_bounded_by_max_mb(self):
        self.assertIsNone(placement_reclaim.estimate(
            self.host.topology, self.new, 587, limits=LIMITS))
        self.assertEqual(588, placement_reclaim.estimate(
            self.host.topology, self.new, 588, limits=LIMITS).need_mb)

    def test_fits_as_it_is(self):
        small = _guest(C, {'hw:numa_nodes': '1'}, memory_mb=256)
        self.assertEqual(placement_reclaim.Estimate(None, 0),
                         placement_reclaim.estimate(
                             self.host.topology, small, 4096,
                             limits=LIMITS))

    def test_not_for_pcpus(self):
        pinned = _guest(C, {'hw:numa_nodes': '1', 'hw:cpu_policy':
                            'dedicated'}, vcpus=5, memory_mb=256)
        self.assertIsNone(placement_reclaim.estimate(
            self.host.topology, pinned, 4096, limits=LIMITS))
