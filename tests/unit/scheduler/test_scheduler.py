"""Tests of destination selection: filtering, ordering, reservations."""

import copy
import threading

import fixtures
from oslo_utils.fixture import uuidsentinel as uuids

from numamig import exception
from numamig.conf import CONF
from numamig.numa import constraints
from numamig.numa import fit
from numamig.numa import usage
from numamig.scheduler import capacity
from numamig.scheduler import host_state
from numamig.scheduler import scheduler
from tests import base
from tests.unit.scheduler import hosts

PINNED = {'hw:cpu_policy': 'dedicated'}


def _request(vcpus=2, memory_mb=1024, specs=PINNED):
    return constraints.get_numa_request(vcpus, memory_mb, specs, {})


def _busy(pinned_guests):
    """A 2-cell x 4-pCPU host already running some 2-vCPU pinned guests."""
    topology = hosts.host_topology()
    for _ in range(pinned_guests):
        topology = usage.apply(topology,
                               fit.fit(topology, _request()).topology)
    return topology


class SchedulerTestCase(base.TestCase):
    """Hosts: src (the source), empty, half (2 guests), full (4 guests)."""

    def setUp(self):
        super().setUp()
        self.flags(service_down_time=60)
        self.clock = hosts.Clock()
        self.cache = host_state.HostStateCache(clock=self.clock)
        for name, guests in (('src', 1), ('empty', 0), ('half', 2),
                             ('full', 4)):
            self.cache.update(hosts.report(name, topology=_busy(guests)))

    def _select(self, strategy='spread', request=None, **kwargs):
        sched = scheduler.Scheduler(self.cache, strategy=strategy)
        return sched.select_destinations(request or _request(), 'src',
                                         **kwargs)


class TestSelect(SchedulerTestCase):

    def test_spread_puts_emptiest_first(self):
        self.assertEqual(['empty', 'half'], self._select('spread').hosts)

    def test_pack_puts_fullest_first(self):
        self.assertEqual(['half', 'empty'], self._select('pack').hosts)

    def test_ties_by_host_name(self):
        self.cache.update(hosts.report('another', topology=_busy(0)))
        self.assertEqual(['another', 'empty', 'half'],
                         self._select('spread').hosts)
        self.assertEqual(['half', 'another', 'empty'],
                         self._select('pack').hosts)

    def test_candidates_carry_their_placement(self):
        selection = self._select()
        for candidate in selection.candidates:
            self.assertTrue(candidate.fit.fits)
            self.assertTrue(candidate.placement.is_placed)
            topology = self.cache.get(candidate.host).topology
            # The placement applies cleanly on the host it was made for.
            usage.apply(topology, candidate.placement)

    def test_rejected_hosts_with_reasons(self):
        # 'full' has no free pCPU: the index skips it, and says why.
        selection = self._select()
        self.assertEqual([('src', 'ExcludedHost', 'it is the source host of '
                           'the guest')],
                         [(r.host, r.filter, r.reason)
                          for r in selection.rejected])
        self.assertEqual(
            [scheduler.Shortage(capacity.PCPUS, 1, 'a guest node pins 2 '
                                                   'pCPUs')],
            list(selection.skipped))

    def test_exhaustive_path_lists_every_refusal(self):
        sched = scheduler.Scheduler(self.cache)
        rejected = sched._select_exhaustive(_request(), 'src').rejected
        self.assertEqual(['full', 'src'], [r.host for r in rejected])
        self.assertEqual('NUMATopology', rejected[0].filter)
        self.assertIn('NUMA topology does not fit', rejected[0].reason)

    def test_refused_by_the_fit_after_the_index(self):
        # Two whole free cores are left on 'half' but they are on two
        # cells: enough pCPUs per cell for the index, not for isolate.
        request = _request(specs=dict(PINNED,
                                      **{'hw:cpu_thread_policy':
                                         'isolate'}))
        selection = self._select(request=request)
        refused = {r.host: r.filter for r in selection.rejected}
        self.assertEqual('NUMATopology', refused.get('half'))

    def test_excluded_and_down_hosts(self):
        self.clock.advance(30)
        self.cache.update(hosts.report('fresh', topology=_busy(0)))
        self.clock.advance(40)
        selection = self._select(exclude=['half'])
        self.assertEqual(['fresh'], selection.hosts)
        reasons = {r.host: r.filter for r in selection.rejected}
        # 'full' lacks pCPUs: the index skips it before asking if it is up.
        self.assertEqual({'empty': 'HostUp', 'half': 'HostUp',
                          'src': 'HostUp'}, reasons)
        self.assertEqual(1, sum(s.hosts for s in selection.skipped))
        self.clock.now = hosts.T0
        reasons = {r.host: r.filter for r in
                   self._select(exclude=['half']).rejected}
        self.assertEqual('ExcludedHost', reasons['half'])

    def test_disabled_hosts_refused_with_the_reason(self):
        selection = self._select(disabled={'empty': 'firmware update'})
        self.assertEqual(['half'], selection.hosts)
        refused = {r.host: (r.filter, r.reason) for r in selection.rejected}
        self.assertEqual(('HostEnabled', 'disabled for maintenance: '
                                         'firmware update'),
                         refused['empty'])
        exhaustive = scheduler.Scheduler(self.cache)._select_exhaustive(
            _request(), 'src', disabled={'empty': 'firmware update'})
        self.assertEqual(selection.hosts, exhaustive.hosts)

    def test_hypervisor_type_defaults_to_the_source(self):
        self.cache.update(hosts.report('kvm1', topology=_busy(0),
                                       hypervisor_type='kvm'))
        selection = self._select()
        self.assertNotIn('kvm1', selection.hosts)
        self.assertIn("hypervisor type is 'kvm', the guest needs 'qemu'",
                      [r.reason for r in selection.rejected])
        self.assertEqual(['kvm1'],
                         self._select(hypervisor_type='kvm').hosts)

    def test_unset_choices_are_the_options(self):
        self.flags(group='scheduler', strategy='pack', max_candidates=2)
        sched = scheduler.Scheduler(self.cache)
        self.assertEqual(('pack', 'pack', 2), (
            sched.strategy, sched.cell_strategy, sched.max_candidates))

    def test_max_candidates(self):
        sched = scheduler.Scheduler(self.cache, max_candidates=1)
        selection = sched.select_destinations(_request(), 'src')
        self.assertEqual(['empty'], selection.hosts)
        # The walk stops at the first candidate: the best weighed host.
        self.assertEqual((), selection.rejected)
        self.assertEqual(3, selection.unexamined)
        self.assertEqual(2, len(sched._select_exhaustive(
            _request(), 'src').rejected))

    def test_reservations_count(self):
        sched = scheduler.Scheduler(self.cache)
        # Two guests reserved on 'empty' make it as full as 'half'; two
        # more and it is full.
        for index in range(2):
            sched.reserve('empty', f'inst-{index}', 'proj', _request())
        self.assertEqual(['empty', 'half'], self._select().hosts)
        for index in range(2, 4):
            sched.reserve('empty', f'inst-{index}', 'proj', _request())
        selection = self._select()
        self.assertEqual(['half'], selection.hosts)
        self.assertEqual(2, sum(s.hosts for s in selection.skipped))
        self.assertIn('empty', [r.host for r in scheduler.Scheduler(
            self.cache)._select_exhaustive(_request(), 'src').rejected])

    def test_non_numa_guest_passes_numa_filter(self):
        sched = scheduler.Scheduler(self.cache)
        selection = sched.select_destinations(None, 'src')
        self.assertEqual(['empty', 'half', 'full'], selection.hosts)
        self.assertEqual([None] * 3,
                         [c.placement for c in selection.candidates])

    def test_request_not_modified(self):
        request = _request()
        before = copy.deepcopy(request)
        self._select(request=request)
        self.assertEqual(before, request)

    def test_exclude_must_not_be_a_string(self):
        self.assertRaisesMessage(exception.Invalid, "the string 'half'",
                                 self._select, exclude='half')

    def test_small_cloud_where_nothing_fits_names_every_host(self):
        selection = self._select(request=_request(vcpus=8))
        self.assertEqual((), selection.skipped)
        error = str(selection.no_valid_host())
        for host in ('empty', 'full', 'half', 'src'):
            self.assertIn(f'{host}: ', error)

    def test_no_valid_host_names_every_refusal(self):
        self.useFixture(fixtures.MockPatch(
            'numamig.scheduler.scheduler.NAMED_REFUSALS', 0))
        request = _request(specs=dict(PINNED, **{'hw:cpu_thread_policy':
                                                 'isolate'}))
        self.cache.update(hosts.report('empty', topology=_busy(3)))
        selection = self._select(request=request)
        self.assertEqual([], selection.hosts)
        error = selection.no_valid_host()
        self.assertIsInstance(error, exception.NoValidHost)
        for host in ('empty', 'half', 'src'):
            self.assertIn(f'{host}: ', str(error))
        self.assertIn('1 host: too few free dedicated pCPUs on one cell '
                      '(a guest node pins 2 pCPUs)', str(error))
        self.assertEqual('too few free dedicated pCPUs on one cell (a guest '
                         'node pins 2 pCPUs)', selection.refusals()['1 host'])

    def test_no_valid_host_summarises_what_the_index_skipped(self):
        # No cell anywhere has 8 pCPUs: nothing is walked (in a cloud
        # too large to name every host).
        self.useFixture(fixtures.MockPatch(
            'numamig.scheduler.scheduler.NAMED_REFUSALS', 3))
        selection = self._select(request=_request(vcpus=8))
        self.assertEqual(((), 0), (selection.rejected, selection.unexamined))
        self.assertEqual('No valid host was found: 4 hosts: too few free '
                         'dedicated pCPUs on one cell (a guest node pins 8 '
                         'pCPUs)', str(selection.no_valid_host()))

    def test_no_valid_host_without_hosts(self):
        empty = scheduler.Scheduler(host_state.HostStateCache())
        error = empty.select_destinations(_request(), 'src').no_valid_host()
        self.assertIn('no compute host has reported', str(error))


class TestReserve(SchedulerTestCase):

    def test_reserve_fits_on_current_free_resources(self):
        sched = scheduler.Scheduler(self.cache)
        first = sched.reserve('half', uuids.a, 'proj', _request())
        second = sched.reserve('half', uuids.b, 'proj', _request())
        self.assertFalse(set(first.topology.cpu_pinning.values()) &
                         set(second.topology.cpu_pinning.values()))

    def test_reserve_when_no_longer_fitting(self):
        sched = scheduler.Scheduler(self.cache)
        sched.reserve('half', uuids.a, 'proj', _request())
        sched.reserve('half', uuids.b, 'proj', _request())
        before = self.cache.get('half')
        self.assertRaisesMessage(exception.ReservationConflict,
                                 'it no longer fits',
                                 sched.reserve, 'half', uuids.c, 'proj',
                                 _request())
        self.assertEqual(before.reservations,
                         self.cache.get('half').reservations)

    def test_reserve_without_request(self):
        sched = scheduler.Scheduler(self.cache)
        self.assertRaisesMessage(exception.Invalid, 'no NUMA request',
                                 sched.reserve, 'half', uuids.a, 'proj',
                                 None)

    def test_concurrent_select_and_reserve_never_overcommit(self):
        """24 conductor threads place 2-pCPU guests on 3 hosts.

        Free room: empty 4 guests, half 2, src excluded, full none: six
        guests fit, whatever the interleaving, and no pCPU is reserved
        twice.
        """
        sched = scheduler.Scheduler(self.cache)
        barrier = threading.Barrier(24)
        won = []

        def migrate(index):
            barrier.wait()
            for candidate in sched.select_destinations(
                    _request(), 'src').candidates:
                try:
                    won.append(sched.reserve(candidate.host, f'i{index}',
                                             'proj', _request()))
                    return
                except exception.ReservationConflict:
                    continue

        threads = [threading.Thread(target=migrate, args=(i,))
                   for i in range(24)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.assertEqual(6, len(won))
        for host in ('empty', 'half'):
            pins = [p for r in won if r.host == host
                    for p in r.topology.cpu_pinning.values()]
            self.assertEqual(len(pins), len(set(pins)))
            state = self.cache.get(host)
            self.assertEqual(0, sum(len(c.free_pcpus)
                                    for c in state.topology.cells))


class TestConstruction(base.TestCase):

    def test_unknown_strategy(self):
        self.assertRaisesMessage(exception.UnknownSchedulingStrategy,
                                 "'random'", scheduler.Scheduler,
                                 host_state.HostStateCache(), 'random')

    def test_unknown_cell_strategy(self):
        self.assertRaises(exception.UnknownSchedulingStrategy,
                          scheduler.Scheduler, host_state.HostStateCache(),
                          cell_strategy='best')

    def test_bad_max_candidates(self):
        for value in (0, -1, '3', True):
            self.assertRaisesMessage(exception.Invalid, 'max_candidates',
                                     scheduler.Scheduler,
                                     host_state.HostStateCache(),
                                     max_candidates=value)

    def test_from_conf(self):
        self.flags(strategy='pack', max_candidates=3,
                   drain_plan_max_steps=500, group='scheduler')
        self.flags(packing_host_numa_cells_allocation_strategy=False,
                   group='compute')
        sched = scheduler.Scheduler.from_conf(host_state.HostStateCache(),
                                              CONF)
        self.assertEqual(('pack', 'spread', 3, 500), (
            sched.strategy, sched.cell_strategy, sched.max_candidates,
            sched.drain_max_steps))



def _socket_host(free):
    """A 4-cell x 4-pCPU host of two sockets (cells 0-1, 2-3): 12 within
    a socket, 21 across; ``free`` pCPUs per cell, the others pinned."""
    topology = hosts.host_topology(cells=4)
    for cell, count in zip(topology.cells, free, strict=True):
        cell.distances = {other: 10 if other == cell.id else
                          12 if other // 2 == cell.id // 2 else 21
                          for other in range(4)}
        cell.pinned_cpus = set(sorted(cell.pcpuset)[count:])
    return topology


class TestDistanceWeigher(base.TestCase):
    """Among candidates, the guest's cells ending nearer come first."""

    def setUp(self):
        super().setUp()
        self.flags(service_down_time=60)
        self.cache = host_state.HostStateCache(clock=hosts.Clock())
        self.cache.update(hosts.report('src'))

    def _select(self, request, exhaustive=False):
        sched = scheduler.Scheduler(self.cache, strategy='spread')
        if exhaustive:
            return sched._select_exhaustive(request, 'src')
        return sched.select_destinations(request, 'src')

    def test_a_near_pair_beats_a_better_weight(self):
        # 'far' is emptier (12 free pCPUs of 16) but takes a guest of two
        # cells of 3 vCPUs only across sockets (cells 0 and 2); 'near'
        # (11 free) keeps both on socket 0.
        self.cache.update(hosts.report('far',
                                       topology=_socket_host((4, 2, 4, 2))))
        self.cache.update(hosts.report('near',
                                       topology=_socket_host((3, 3, 3, 2))))
        request = _request(vcpus=6, specs=dict(PINNED,
                                               **{'hw:numa_nodes': '2'}))
        for exhaustive in (False, True):
            selection = self._select(request, exhaustive)
            self.assertEqual(['near', 'far'], selection.hosts)
            by_host = {c.host: c.fit.distance for c in selection.candidates}
            self.assertEqual((12, 0), by_host['near'][:2])
            self.assertEqual((21, 9), by_host['far'][:2])
        # A guest of one cell has no distance: the weight decides.
        self.assertEqual(['far', 'near'],
                         self._select(_request(vcpus=2)).hosts)

    def test_equal_distance_hosts_keep_the_weight_order(self):
        for name, pinned in (('a', 2), ('b', 0), ('c', 1)):
            topology = hosts.host_topology(cells=4)
            for cell in topology.cells:
                cell.pinned_cpus = set(sorted(cell.pcpuset)[:pinned])
            self.cache.update(hosts.report(name, topology=topology))
        request = _request(vcpus=4, specs=dict(PINNED,
                                               **{'hw:numa_nodes': '2'}))
        self.assertEqual(['b', 'c', 'a'], self._select(request).hosts)
