"""Defragmentation plans: the fewest moves that make room for a guest."""

from numamig import objects
from numamig.numa import fit
from numamig.numa import usage
from numamig.numa import views
from numamig.scheduler import defragment as defrag
from numamig.scheduler import drain
from tests import base
from tests.unit.numa import hosts as numa_hosts


def _host(cells=2, cores=4):
    """Cells of ``cores`` dedicated pCPUs (no SMT), 8 GiB each."""
    return objects.HostNUMATopology(cells=[numa_hosts.make_cell(
        i, cores=cores, threads=1, memory_mb=8192) for i in range(cells)])


def _request(pinned, memory_mb=512):
    return numa_hosts.request([(pinned, 0, memory_mb, None, None)])


def _filled(topology, *sizes, prefix=''):
    """(topology with the guests, their Residents), each guest placed by
    the fit in turn (pack: the first cell with room); uuids and names
    start with ``prefix``; a size is pinned vCPUs, or (pinned vCPUs,
    memory MiB)."""
    residents = []
    for index, size in enumerate(sizes):
        size, memory_mb = size if isinstance(size, tuple) else (size, 512)
        request = _request(size, memory_mb)
        result = fit.fit(topology, request, strategy='pack')
        assert result.fits, result.reason
        topology = usage.apply(topology, result.topology)
        residents.append(defrag.Resident(f'{prefix}u{index}',
                                         f'{prefix}g{index}-{size}',
                                         result.topology, request))
    return topology, tuple(residents)


def _candidate(name, topology, residents):
    return defrag.Candidate(name, topology, residents)


def _dest(name, topology):
    return drain.Destination(name, views.HostView(topology))


class DefragPlanTest(base.TestCase):

    def test_room_already_means_no_move(self):
        topology, residents = _filled(_host(), 2)
        found = defrag.plan(_request(4), [_candidate('h1', topology,
                                                     residents)], [])
        self.assertEqual(('h1', ()), (found.host, found.moves))

    def test_the_fewest_moves_not_the_largest_guests(self):
        # h1: cell 0 holds g0-3 and g1-1, cell 1 g2-2 and g3-2. A whole
        # cell takes two moves either way; the spare host has two cells
        # of 2 pCPUs, where the 3 fits nowhere: only the 2s can leave (a
        # greedy eviction of the largest guest first finds nothing).
        topology, residents = _filled(_host(), 3, 1, 2, 2)
        spare = _dest('spare', _host(cells=2, cores=2))
        found = defrag.plan(_request(4), [_candidate('h1', topology,
                                                     residents)], [spare])
        self.assertTrue(found.found, found.reason)
        self.assertEqual(2, len(found.moves))
        self.assertEqual({'g2-2', 'g3-2'},
                         {m.guest.name for m in found.moves})
        self.assertEqual({'spare'}, {m.host for m in found.moves})

    def test_one_move_on_another_host_beats_two_here(self):
        h1, r1 = _filled(_host(), 2, 2, 2, 2)      # two moves free a cell
        h2, r2 = _filled(_host(), 4, 3)             # one move frees a cell
        spare = _dest('spare', _host(1))
        found = defrag.plan(_request(4), [_candidate('h1', h1, r1),
                                          _candidate('h2', h2, r2)],
                            [spare])
        self.assertEqual(('h2', 1), (found.host, len(found.moves)))

    def test_a_guest_that_fits_nowhere_else_is_not_moved(self):
        # The only destination has 1 free pCPU: the 2s cannot leave.
        topology, residents = _filled(_host(), 2, 2, 2, 2)
        tight = _dest('tight', _filled(_host(1), 3)[0])
        found = defrag.plan(_request(4), [_candidate('h1', topology,
                                                     residents)], [tight],
                            max_moves=2)
        self.assertFalse(found.found)
        self.assertFalse(found.stopped)
        self.assertIn('no set of up to 2 guest(s) on 1 host(s)',
                      found.reason)

    def test_the_candidate_is_no_destination_of_its_own_guests(self):
        topology, residents = _filled(_host(), 2, 2, 2, 2)
        found = defrag.plan(_request(4), [_candidate('h1', topology,
                                                     residents)],
                            [_dest('h1', _host())], max_moves=2)
        self.assertFalse(found.found)

    def test_the_step_limit_is_said(self):
        topology, residents = _filled(_host(), 1, 1, 1, 1, 1, 1, 1, 1)
        found = defrag.plan(_request(4), [_candidate('h1', topology,
                                                     residents)],
                            [_dest('spare', _host())], max_steps=5)
        self.assertEqual((False, True, 5), (found.found, found.stopped,
                                            found.steps))
        self.assertIn('stopped after 5 sets (the limit, [scheduler] '
                      'drain_plan_max_steps) at 1 move(s)', found.reason)
        self.assertEqual(drain.NOT_FOUND, found.outcome)

    def test_inputs_are_not_changed(self):
        topology, residents = _filled(_host(), 3, 1, 2, 2)
        before = topology.obj_to_primitive()
        defrag.plan(_request(4), [_candidate('h1', topology, residents)],
                    [_dest('spare', _host(1))])
        self.assertEqual(before, topology.obj_to_primitive())


def _movable(name, topology, residents):
    return defrag.Candidate(name, topology, residents)


def _replay(hosts, found, request):
    """Run the plan's moves in their order on {host: (topology,
    residents)}: each placement must be free on its destination when
    its turn comes; then the new guest must fit on the target."""
    topologies = {name: topology for name, (topology, _) in hosts.items()}
    placed = {r.uuid: r.placed for _, residents in hosts.values()
              for r in residents}
    for move in found.moves:
        topologies[move.host] = usage.apply(topologies[move.host],
                                            move.placement.topology())
        topologies[move.source] = usage.release(topologies[move.source],
                                                placed[move.guest.uuid])
    return fit.fit(topologies[found.host], request).fits


class DefragChainTest(base.TestCase):
    """A guest of the target fits elsewhere only once a guest of that
    third host moved to a fourth."""

    def setUp(self):
        super().setUp()
        # T: two cells of 3 used + 1 free; a 4 needs one 3 gone.
        # X: cell 0 full (2+2), cell 1 2 used: a 3 fits once that 2 left.
        # Y: one cell, 2 free: takes a 2, never a 3.
        self.hosts = {'T': _filled(_host(), 3, 3, prefix='T'),
                      'X': _filled(_host(), 2, 2, 2, prefix='X'),
                      'Y': _filled(_host(1), 2, prefix='Y')}

    def _plan(self, **kwargs):
        target = self.hosts['T']
        movable = [_movable(name, *self.hosts[name]) for name in ('X', 'Y')]
        dests = [_dest(name, self.hosts[name][0]) for name in ('X', 'Y')]
        return defrag.plan(_request(4), [_candidate('T', *target)], dests,
                           movable=movable, **kwargs)

    def test_a_chain_via_a_third_host_is_found(self):
        found = self._plan(max_moves=2)
        self.assertTrue(found.found, found.reason)
        self.assertEqual('T', found.host)
        self.assertEqual([('X', 'Y', 'Xg2-2'), ('T', 'X', 'Tg0-3')],
                         [(m.source, m.host, m.guest.name)
                          for m in found.moves])
        self.assertEqual(1, found.chained)
        self.assertTrue(_replay(self.hosts, found, _request(4)))

    def test_without_movable_hosts_there_is_no_chain(self):
        target = self.hosts['T']
        dests = [_dest(name, self.hosts[name][0]) for name in ('X', 'Y')]
        found = defrag.plan(_request(4), [_candidate('T', *target)], dests,
                            max_moves=2)
        self.assertFalse(found.found)

    def test_a_chain_longer_than_max_moves_is_not_taken(self):
        found = self._plan(max_moves=1)
        self.assertFalse(found.found)
        self.assertIn('no set of up to 1 guest(s)', found.reason)

    def test_a_direct_move_beats_a_chain(self):
        # Z has 3 free: it takes a 3.
        self.hosts['Z'] = _filled(_host(1), 1, prefix='Z')
        target = self.hosts['T']
        names = ('X', 'Y', 'Z')
        found = defrag.plan(
            _request(4), [_candidate('T', *target)],
            [_dest(n, self.hosts[n][0]) for n in names], max_moves=2,
            movable=[_movable(n, *self.hosts[n]) for n in names])
        self.assertEqual([('T', 'Z')], [(m.source, m.host)
                                        for m in found.moves])
        self.assertEqual(0, found.chained)

    def test_a_chain_two_hosts_deep(self):
        # X's 2 holds 4 GiB. Y is full of two 2s of 512 MiB: X's 2 fits
        # there once one of them left for W, which has 2 free pCPUs but
        # 1 GiB of memory: it takes Y's 2s, not X's.
        self.hosts['X'] = _filled(_host(), 2, 2, (2, 4096), prefix='X')
        self.hosts['Y'] = _filled(_host(1), 2, 2, prefix='Y')
        self.hosts['W'] = _filled(_host(1), (2, 7168), prefix='W')
        target = self.hosts['T']
        names = ('X', 'Y', 'W')
        args = ([_candidate('T', *target)],
                [_dest(n, self.hosts[n][0]) for n in names])
        movable = [_movable(n, *self.hosts[n]) for n in names]
        self.assertFalse(defrag.plan(_request(4), *args, max_moves=2,
                                     movable=movable).found)
        found = defrag.plan(_request(4), *args, max_moves=3,
                            movable=movable)
        self.assertTrue(found.found, found.reason)
        self.assertEqual(['Y', 'X', 'T'], [m.source for m in found.moves])
        self.assertEqual(['W', 'Y', 'X'], [m.host for m in found.moves])
        self.assertTrue(_replay(self.hosts, found, _request(4)))

    def test_the_step_limit_bounds_the_chain_search(self):
        found = self._plan(max_moves=2, max_steps=3)
        self.assertEqual((False, True, 3), (found.found, found.stopped,
                                            found.steps))

    def test_moves_waiting_in_a_circle_are_no_plan(self):
        guest = drain.Guest('u', 'g')
        self.assertIsNone(defrag._ordered([
            defrag.Move(guest, 'X', 'Y', None),
            defrag.Move(guest, 'Y', 'X', None)]))

    def test_a_move_into_a_host_runs_after_the_moves_off_it(self):
        guest = drain.Guest('u', 'g')
        ordered = defrag._ordered([defrag.Move(guest, 'T', 'X', None),
                                   defrag.Move(guest, 'X', 'Y', None),
                                   defrag.Move(guest, 'T', 'Z', None)])
        self.assertEqual([('X', 'Y'), ('T', 'X'), ('T', 'Z')],
                         [(m.source, m.host) for m in ordered])

    def test_inputs_are_not_changed(self):
        before = {n: t.obj_to_primitive() for n, (t, _) in self.hosts.items()}
        self._plan(max_moves=2)
        self.assertEqual(before, {n: t.obj_to_primitive()
                                  for n, (t, _) in self.hosts.items()})


class DefragOutcomeTest(base.TestCase):
    """A plan; no plan exists (proven); none found within the limits."""

    def _cloud(self, unreachable=False):
        # t: one cell of 4 pCPUs, a 2-pCPU guest; x: one cell of 2, full.
        # The new guest needs 4: a must leave t, and the only room for
        # it is t itself. z (if any): a cell of 1 pCPU, too small for
        # a even emptied, so its guest is no chain's.
        hosts = {'t': _filled(_host(cells=1, cores=4), 2, prefix='t'),
                 'x': _filled(_host(cells=1, cores=2), 2, prefix='x')}
        if unreachable:
            hosts['z'] = _filled(_host(cells=1, cores=1), 1, prefix='z')
        candidates = [_candidate(h, t, r) for h, (t, r) in hosts.items()]
        dests = [_dest(h, t) for h, (t, _) in hosts.items()]
        return candidates, dests

    def test_no_plan_exists_when_every_set_was_tried(self):
        candidates, dests = self._cloud()
        found = defrag.plan(_request(4), candidates[:1], dests,
                            movable=candidates)
        self.assertEqual(drain.NO_PLAN, found.outcome)
        self.assertTrue(found.reason.startswith('no plan exists'),
                        found.reason)

    def test_chains_that_left_guests_out_prove_nothing(self):
        candidates, dests = self._cloud(unreachable=True)
        found = defrag.plan(_request(4), candidates[:1], dests,
                            movable=candidates)
        self.assertEqual(drain.NOT_FOUND, found.outcome)
        self.assertIn('chains considered 1 of the 2 guests of other hosts',
                      found.reason)
