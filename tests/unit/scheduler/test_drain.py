"""Drain plans: every guest of a host placed at once, or why not."""

import copy

from numamig import objects
from numamig.numa import fit
from numamig.numa import view_usage
from numamig.numa import views
from numamig.scheduler import drain
from numamig.scheduler import host_state
from numamig.scheduler import scheduler
from tests import base
from tests.unit.numa import hosts as numa_hosts
from tests.unit.scheduler import hosts


def _one_cell(free_pcpus, memory_mb=8192):
    """A host of one cell with ``free_pcpus`` dedicated pCPUs (no SMT)."""
    return objects.HostNUMATopology(cells=[numa_hosts.make_cell(
        0, cores=free_pcpus, threads=1, memory_mb=memory_mb)])


def _guest(name, pinned, memory_mb=512, threads=None):
    request = numa_hosts.request([(pinned, 0, memory_mb, None, threads)])
    return drain.Guest(uuid=f'uuid-{name}', name=name,
                       request=views.RequestView(request))


def _destinations(**topologies):
    return [drain.Destination(host, views.HostView(topology))
            for host, topology in topologies.items()]


def _placed(plan):
    return {move.guest.name: move.host for move in plan.moves}


class OrderTest(base.TestCase):
    """Drains that succeed only when guests are placed in the right
    order, and the hosts' usage the moves leave."""

    def test_the_large_guest_first(self):
        # small-1 (2 pCPUs) sent alone to the emptiest host takes big's
        # only room: one at a time, in name order, big finds none.
        guests = [_guest('big', 4), _guest('small-1', 2)]
        dests = _destinations(roomy=_one_cell(4), snug=_one_cell(2))
        small_first = [guests[1], guests[0]]
        self.assertEqual({'small-1': 'roomy', 'big': None},
                         _one_at_a_time(small_first, dests))
        plan = drain.plan(guests, dests)
        self.assertTrue(plan.complete)
        self.assertEqual({'big': 'roomy', 'small-1': 'snug'}, _placed(plan))

    def test_backtracking_finds_the_one_packing(self):
        # Two hosts of 10 pCPUs, guests of 5, 4, 4, 3, 2, 2 pCPUs (20 in
        # all): largest first into the fullest host that fits ends with a
        # guest of 2 and two hosts of 1 free pCPU each. Only 5+3+2 and
        # 4+4+2 empty the source.
        sizes = {'g5': 5, 'g4a': 4, 'g4b': 4, 'g3': 3, 'g2a': 2, 'g2b': 2}
        guests = [_guest(name, size) for name, size in sizes.items()]
        dests = _destinations(d1=_one_cell(10), d2=_one_cell(10))
        plan = drain.plan(guests, dests)
        self.assertTrue(plan.complete, plan.unplaced)
        self.assertGreater(plan.steps, len(guests))   # it backtracked
        load = {}
        for move in plan.moves:
            load[move.host] = load.get(move.host, 0) + sizes[move.guest.name]
        self.assertEqual({'d1': 10, 'd2': 10}, load)
        self.assertEqual({frozenset({'g5', 'g3'}), frozenset({'g4a',
                                                             'g4b'})},
                         {frozenset(name for name, host in
                                    _placed(plan).items()
                                    if host == h and sizes[name] > 2)
                          for h in ('d1', 'd2')})

    def test_moves_replay_on_their_destinations_in_order(self):
        sizes = {'g5': 5, 'g4a': 4, 'g4b': 4, 'g3': 3, 'g2a': 2, 'g2b': 2}
        guests = [_guest(name, size) for name, size in sizes.items()]
        dests = _destinations(d1=_one_cell(10), d2=_one_cell(10))
        current = {d.host: d.view for d in dests}
        for move in drain.plan(guests, dests).moves:
            # Each placement is the fit on what the moves before it left.
            again = fit.fit(current[move.host], move.guest.request)
            self.assertEqual(move.placement, again.placement)
            current[move.host] = view_usage.apply(current[move.host],
                                                  move.placement)
        self.assertEqual([0, 0], [v.cells[0].free_count
                                  for v in current.values()])


class RefusalTest(base.TestCase):

    def test_a_guest_that_fits_nowhere_says_why_per_host(self):
        guests = [_guest('huge', 16), _guest('fine', 2)]
        plan = drain.plan(guests, _destinations(a=_one_cell(4),
                                                b=_one_cell(8)))
        self.assertFalse(plan.complete)
        (unplaced,) = plan.unplaced
        self.assertEqual('huge', unplaced.guest.name)
        self.assertIn('fits on none of the 2 destination(s): a: ',
                      unplaced.reason)
        self.assertIn('needs 16 free dedicated pCPUs, has 8',
                      unplaced.reason)
        self.assertEqual({'fine': 'a'}, _placed(plan))

    def test_guests_that_fit_alone_but_not_together(self):
        guests = [_guest('one', 3), _guest('two', 3)]
        plan = drain.plan(guests, _destinations(only=_one_cell(4)))
        self.assertFalse(plan.complete)
        (unplaced,) = plan.unplaced
        self.assertEqual('it fits alone on 1 destination(s) (only), but '
                         'not together with the other guests: no plan '
                         'exists (every destination and every order of '
                         'the guests on each was tried)', unplaced.reason)
        self.assertFalse(plan.stopped)
        self.assertEqual(drain.NO_PLAN, plan.outcome)

    def test_identical_guests_are_not_permuted_to_prove_no_room(self):
        # Seven guests of 3 pCPUs, six hosts (all different) each with
        # room for one: no arrangement exists, and trying the guests'
        # permutations over the hosts would take 6! steps and more.
        guests = [_guest(f'g{i}', 3) for i in range(7)]
        dests = _destinations(**{f'h{i}': _one_cell(4, 4096 + 512 * i)
                                 for i in range(6)})
        plan = drain.plan(guests, dests, max_steps=500)
        self.assertFalse(plan.stopped)
        self.assertEqual(1, len(plan.unplaced))
        self.assertLess(plan.steps, 100)

    def test_the_step_limit_stops_and_says_so(self):
        guests = [_guest(f'g{i}', 1) for i in range(6)] + [_guest('x', 3)]
        dests = _destinations(a=_one_cell(4), b=_one_cell(4))
        plan = drain.plan(guests, dests, max_steps=3)
        self.assertTrue(plan.stopped)
        self.assertFalse(plan.complete)
        self.assertEqual(drain.NOT_FOUND, plan.outcome)
        self.assertIn('no plan placing it with the other guests was found '
                      'within 3 placements', plan.unplaced[0].reason)

    def test_a_guest_with_a_problem_is_not_placed(self):
        stuck = drain.Guest('uuid-s', 's', problem='a migration of it is '
                                                   'in progress')
        plan = drain.plan([stuck], _destinations(a=_one_cell(4)))
        self.assertEqual(['a migration of it is in progress'],
                         [u.reason for u in plan.unplaced])

    def test_no_destination(self):
        plan = drain.plan([_guest('g', 1), drain.Guest('u', 'plain')], [])
        self.assertEqual(['no destination is left'] * 2,
                         sorted(u.reason for u in plan.unplaced))


class OptionsTest(base.TestCase):

    def test_guest_without_numa_request_takes_the_first_destination(self):
        plain = drain.Guest('uuid-p', 'plain')
        plan = drain.plan([plain], _destinations(a=_one_cell(1),
                                                 b=_one_cell(8)))
        self.assertEqual([('plain', 'a', None)],
                         [(m.guest.name, m.host, m.placement)
                          for m in plan.moves])

    def test_keep_free_nodes_leaves_the_highest_idle_cells(self):
        # Four idle cells of 4 pCPUs: two kept whole, the guests of 4
        # pCPUs each fill cells 0 and 1 only.
        host = numa_hosts.make_host(cells=4, cores=4, threads=1)
        guests = [_guest('a', 4), _guest('b', 4)]
        plan = drain.plan(guests, _destinations(d=host), keep_free_nodes=2)
        self.assertTrue(plan.complete)
        self.assertEqual({'d': (2, 3)}, plan.kept_free)
        self.assertEqual({0, 1}, {m.placement.cells[0].host_cell
                                  for m in plan.moves})
        third = drain.plan(guests + [_guest('c', 4)], _destinations(d=host),
                           keep_free_nodes=2)
        self.assertEqual(['c'], [u.guest.name for u in third.unplaced])

    def test_a_floating_guest_skips_hosts_whose_cells_are_all_kept(self):
        # Issue 44: a guest without a NUMA request went to the first
        # destination although every one of its cells was kept free.
        plain = drain.Guest('uuid-p', 'plain')
        dests = _destinations(a=_one_cell(4), b=numa_hosts.make_host(
            cells=2, cores=4, threads=1))
        plan = drain.plan([plain], dests, keep_free_nodes=1)
        self.assertEqual({'a': (0,), 'b': (1,)}, plan.kept_free)
        self.assertEqual({'plain': 'b'}, _placed(plan))
        nowhere = drain.plan([plain], dests, keep_free_nodes=2)
        self.assertEqual([('plain', 'no destination is left')],
                         [(u.guest.name, u.reason) for u in nowhere.unplaced])

    def test_inputs_are_not_modified(self):
        guests = [_guest('a', 2), _guest('b', 3)]
        dests = _destinations(a=_one_cell(4), b=_one_cell(4))
        kept = [copy.deepcopy([(c.id, c.pinned_cpus) for c in d.view.cells])
                for d in dests]
        drain.plan(guests, dests)
        self.assertEqual(kept, [[(c.id, c.pinned_cpus) for c in d.view.cells]
                                for d in dests])


class PlanDrainFromCacheTest(base.TestCase):
    """Scheduler.plan_drain: which cached hosts are destinations."""

    def setUp(self):
        super().setUp()
        self.clock = hosts.Clock()
        self.cache = host_state.HostStateCache(
            clock=self.clock, reservation_timeout=600, service_down_time=60)
        self.scheduler = scheduler.Scheduler(self.cache)
        for name in ('src', 'a', 'b', 'kvm', 'off'):
            self.cache.update(hosts.report(
                name, hypervisor_type='kvm' if name == 'kvm' else 'qemu'))

    def test_destinations_left_out_and_why(self):
        guests = [_guest('g', 2)]
        plan, left_out = self.scheduler.plan_drain(
            'src', guests, disabled={'off': 'new DIMMs'})
        self.assertTrue(plan.complete)
        self.assertEqual({'kvm', 'off'}, set(left_out))
        self.assertEqual('disabled for maintenance: new DIMMs',
                         left_out['off'])
        self.assertIn("hypervisor type is 'kvm'", left_out['kvm'])
        self.assertIn(plan.moves[0].host, ('a', 'b'))

    def test_to_restricts_the_destinations(self):
        plan, _ = self.scheduler.plan_drain('src', [_guest('g', 2)],
                                            to={'b'})
        self.assertEqual(['b'], [m.host for m in plan.moves])

    def test_reservations_count(self):
        # 'a' and 'b' have 8 pCPUs; 6 reserved on each leave room for no
        # guest of 4.
        for host in ('a', 'b'):
            placed = fit.fit(self.cache.get(host).topology, numa_hosts.request(
                [(3, 0, 512, None, None), (3, 0, 512, None, None)])).topology
            self.cache.reserve(host, f'other-{host}', 'p', placed)
        plan, _ = self.scheduler.plan_drain('src', [_guest('g', 4)],
                                            disabled={'off': 'x'},
                                            to={'a', 'b'})
        self.assertFalse(plan.complete)


def _one_at_a_time(guests, destinations):
    """Each guest in turn to the emptiest destination it fits, as a
    scheduler placing one guest at a time does: {name: host or None}."""
    current = {d.host: d.view for d in destinations}
    chosen = {}
    for guest in guests:
        fitting = [(host, fit.fit(view, guest.request))
                   for host, view in current.items()]
        fitting = [(h, r) for h, r in fitting if r.fits]
        if not fitting:
            chosen[guest.name] = None
            continue
        host, result = max(fitting, key=lambda hr: (
            sum(c.free_count for c in current[hr[0]].cells), hr[0]))
        current[host] = view_usage.apply(current[host], result.placement)
        chosen[guest.name] = host
    return chosen


class NearestFirstTest(base.TestCase):
    """A drain places with the engine's fit, so nearest first: and the
    views its moves leave keep the host's distance table."""

    def test_guests_of_two_cells_land_on_close_pairs(self):
        # Four cells of 2 pCPUs; 0-2 and 1-3 are 12 apart, the rest 21.
        host = numa_hosts.make_host(cells=4, cores=2, threads=1)
        for cell in host.cells:
            cell.distances = {other: 10 if other == cell.id else
                              12 if other % 2 == cell.id % 2 else 21
                              for other in range(4)}
        two_cells = numa_hosts.request([(2, 0, 512, None, None)] * 2)
        guests = [drain.Guest(uuid=f'uuid-{name}', name=name,
                              request=views.RequestView(two_cells))
                  for name in ('first', 'second')]
        plan = drain.plan(guests, _destinations(dst=host))
        self.assertTrue(plan.complete, plan.unplaced)
        self.assertEqual(
            [[0, 2], [1, 3]],
            sorted(sorted(cell.host_cell for cell in move.placement.cells)
                   for move in plan.moves))
