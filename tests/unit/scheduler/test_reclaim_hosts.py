"""Which refused hosts a placement reclaim could open, and in what order.

The pure ranking (reclaim_hosts) and the scheduler's prospects: the
capacity gap rules hosts out at no fit, ``max_hosts`` bounds the fits,
and the host's own fit says how little would do.
"""

import dataclasses

from numamig import objects
from numamig.numa import constraints
from numamig.numa import fit
from numamig.numa import placement_reclaim
from numamig.numa import usage
from numamig.numa import views
from numamig.scheduler import capacity
from numamig.scheduler import host_state
from numamig.scheduler import reclaim_hosts
from numamig.scheduler import scheduler
from tests import base
from tests.unit.scheduler import hosts

PINNED = {'hw:cpu_policy': 'dedicated'}
LIMITS = objects.NUMALimits(cpu_allocation_ratio=1.0,
                            ram_allocation_ratio=1.0)


def _request(vcpus=2, memory_mb=1024):
    return constraints.get_numa_request(vcpus, memory_mb, PINNED, {})


def _with_free(free_mb, pinned=0):
    """A 2-cell host (4 pCPUs, 4096 MiB each) with ``free_mb`` MiB free
    on each node and ``pinned`` pCPUs of each cell pinned."""
    topology = hosts.host_topology()
    for node, cell in enumerate(topology.cells):
        filler = objects.InstanceNUMATopology(
            instance_uuid=f'ffffffff-0000-4000-8000-00000000000{node}',
            cells=[objects.InstanceNUMACell(
                id=0, cpuset=set(), pcpuset=set(),
                memory_mb=cell.memory_mb - free_mb, host_cell=node)])
        topology = usage.apply(topology, filler)
    for cell in topology.cells:
        cell.pinned_cpus = set(sorted(cell.pcpuset)[:pinned])
    return topology


@dataclasses.dataclass(frozen=True)
class _Choice:
    freed_mb: int


class RankingTest(base.TestCase):

    def test_shortlist_least_gap_then_order_capped(self):
        gaps = [(300, 0, 'a'), (100, 3, 'b'), (100, 1, 'c'), (0, 9, 'd')]
        self.assertEqual(['d', 'c', 'b'], [entry[2] for entry in
                                           reclaim_hosts.shortlist(gaps, 3)])
        self.assertEqual([(300, 0, 'a'), (100, 3, 'b'), (100, 1, 'c'),
                          (0, 9, 'd')], gaps)

    def test_by_need_then_scheduler_order(self):
        a = reclaim_hosts.Prospect('a', 2, 0, 512)
        b = reclaim_hosts.Prospect('b', 5, 1, 256)
        c = reclaim_hosts.Prospect('c', 1, 0, 512)
        self.assertEqual((b, c, a), reclaim_hosts.by_need([a, b, c]))

    def test_rank_least_reclaimed_then_scheduler_order(self):
        # The chooser's amount (whole blocks, floors) decides, not the
        # host's estimate.
        a = reclaim_hosts.Prospect('a', 0, 0, 100)
        b = reclaim_hosts.Prospect('b', 1, 0, 200)
        c = reclaim_hosts.Prospect('c', 2, 0, 200)
        ranked = placement_reclaim.rank([(a, _Choice(1024)), (c, _Choice(256)),
                                     (b, _Choice(256))])
        self.assertEqual(['b', 'c', 'a'], [p.host for p, _ in ranked])

    def test_describe(self):
        none = reclaim_hosts.Prospects((), 0, 0)
        self.assertEqual('no host is short only of memory within '
                         'placement_reclaim_max_mb (2048 MiB)',
                         none.describe(2048, 8))
        capped = reclaim_hosts.Prospects((), 20, 8)
        self.assertEqual('20 host(s) short only of memory within 2048 MiB, '
                         '8 looked at (12 more not: '
                         'placement_reclaim_max_hosts is 8)',
                         capped.describe(2048, 8))


class GapTest(base.TestCase):

    def _gap(self, topology, request=None):
        needs = capacity.Needs.of(views.RequestView(request or _request()),
                                  views.limits_view(LIMITS), None)
        return needs.reclaim_gap_mb(capacity.HostCapacity(topology))

    def test_memory_gap_is_a_lower_bound_of_the_estimate(self):
        for free in (0, 100, 512, 1023, 1024, 2048):
            topology = _with_free(free)
            gap = self._gap(topology)
            self.assertEqual(max(0, 1024 - free), gap, free)
            found = placement_reclaim.estimate(topology, _request(), 4096,
                                               limits=LIMITS)
            self.assertLessEqual(gap, found.need_mb, free)

    def test_no_gap_for_what_reclaim_cannot_give(self):
        self.assertIsNone(self._gap(_with_free(0, pinned=3)))
        three_cells = constraints.get_numa_request(
            3, 1536, dict(PINNED, **{'hw:numa_nodes': '3'}), {})
        self.assertIsNone(self._gap(_with_free(0), three_cells))


class ProspectsTest(base.TestCase):
    """Hosts: src; lacks-100 and lacks-600 (memory on each node);
    pcpus (memory too, and no free pCPU for the guest); down; disabled;
    roomy (fits as it is)."""

    def setUp(self):
        super().setUp()
        self.flags(service_down_time=60)
        self.clock = hosts.Clock()
        self.cache = host_state.HostStateCache(clock=self.clock)
        self.cache.update(hosts.report('down', topology=_with_free(900)))
        self.clock.advance(120)
        for name, topology in (('src', _with_free(4096)),
                               ('lacks-100', _with_free(924)),
                               ('lacks-600', _with_free(424)),
                               ('pcpus', _with_free(0, pinned=3)),
                               ('disabled', _with_free(924)),
                               ('roomy', _with_free(4096))):
            self.cache.update(hosts.report(name, topology=topology,
                                           reported_at=self.clock.now))
        self.scheduler = scheduler.Scheduler(self.cache)

    def _prospects(self, max_mb=2048, max_hosts=8, **kwargs):
        return self.scheduler.reclaim_prospects(
            _request(), 'src', max_mb, max_hosts, limits=LIMITS,
            disabled={'disabled': 'maintenance'}, **kwargs)

    def test_memory_only_hosts_least_need_first(self):
        found = self._prospects()
        self.assertEqual([('lacks-100', 100), ('lacks-600', 600)],
                         [(p.host, p.need_mb) for p in found.prospects])
        # roomy fits as it is: looked at, no reclaim is for it.
        self.assertEqual((3, 3), (found.qualified, found.looked_at))
        for prospect in found.prospects:
            # The estimate is the least: one MiB less does not fit.
            topology = self.cache.get(prospect.host).topology
            self.assertFalse(fit.fit(topology, _request(),
                                     limits=LIMITS).fits)

    def test_max_hosts_bounds_the_fits(self):
        # The least gap first: roomy (0), then lacks-100; only the first
        # is fitted, and it needs no reclaim.
        found = self._prospects(max_hosts=1)
        self.assertEqual(((), 3, 1), (found.prospects, found.qualified,
                                      found.looked_at))
        found = self._prospects(max_hosts=2)
        self.assertEqual(['lacks-100'], [p.host for p in found.prospects])

    def test_max_mb_rules_out_larger_gaps(self):
        found = self._prospects(max_mb=500)
        self.assertEqual(['lacks-100'], [p.host for p in found.prospects])
        self.assertEqual(2, found.qualified)

    def test_excluded_hosts_left_out(self):
        found = self._prospects(exclude={'lacks-100'})
        self.assertEqual(['lacks-600'], [p.host for p in found.prospects])

    def test_no_request_no_prospects(self):
        found = self.scheduler.reclaim_prospects(None, 'src', 2048, 8)
        self.assertEqual(((), 0), (found.prospects, found.qualified))
