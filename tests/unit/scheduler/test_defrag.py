"""Defragmentation plans: the fewest moves that make room for a guest."""

from numamig import objects
from numamig.numa import fit
from numamig.numa import usage
from numamig.numa import views
from numamig.scheduler import defrag
from numamig.scheduler import drain
from tests import base
from tests.unit.numa import hosts as numa_hosts


def _host(cells=2, cores=4):
    """Cells of ``cores`` dedicated pCPUs (no SMT), 8 GiB each."""
    return objects.HostNUMATopology(cells=[numa_hosts.make_cell(
        i, cores=cores, threads=1, memory_mb=8192) for i in range(cells)])


def _request(pinned, memory_mb=512):
    return numa_hosts.request([(pinned, 0, memory_mb, None, None)])


def _filled(topology, *sizes):
    """(topology with the guests, their Residents), each guest placed by
    the fit in turn (pack: the first cell with room)."""
    residents = []
    for index, size in enumerate(sizes):
        request = _request(size)
        result = fit.fit(topology, request, strategy='pack')
        assert result.fits, result.reason
        topology = usage.apply(topology, result.topology)
        residents.append(defrag.Resident(f'u{index}', f'g{index}-{size}',
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
        self.assertIn('stopped after 5 sets (the limit) at 1 move(s)',
                      found.reason)

    def test_inputs_are_not_changed(self):
        topology, residents = _filled(_host(), 3, 1, 2, 2)
        before = topology.obj_to_primitive()
        defrag.plan(_request(4), [_candidate('h1', topology, residents)],
                    [_dest('spare', _host(1))])
        self.assertEqual(before, topology.obj_to_primitive())
