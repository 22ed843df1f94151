"""Drain plans the fit reaches only in some order: the issue's minimal
cases (one order and one cell choice per guest and host were tried, and
interchangeable hosts were not interchangeable under ``exclude``)."""

from numamig import objects
from numamig.numa import fit
from numamig.numa import view_usage
from numamig.numa import views
from numamig.scheduler import drain
from tests import base
from tests.unit.numa import hosts as numa_hosts


def _host(cores, memory_mb=8192, pinned=(), cells=2, threads=2):
    """A host of ``cells`` cells of ``cores`` cores; pCPUs ``pinned``
    pinned already (siblings {c, c + cells * cores})."""
    return objects.HostNUMATopology(cells=[
        numa_hosts.make_cell(i, cores=cores, threads=threads, cells=cells,
                             memory_mb=memory_mb,
                             pinned=[p for p in pinned
                                     if p % (cells * cores) // cores == i])
        for i in range(cells)])


def _guest(name, pinned, memory_mb=512, threads=None, emulator=None,
           exclude=()):
    request = numa_hosts.request([(pinned, 0, memory_mb, None, threads)],
                                 emulator=emulator)
    return drain.Guest(uuid=f'uuid-{name}', name=name,
                       request=views.RequestView(request),
                       exclude=frozenset(exclude))


def _destinations(**topologies):
    return [drain.Destination(host, views.HostView(topology))
            for host, topology in topologies.items()]


def replay(test, plan, destinations):
    """Run the plan's moves as the destinations' claims would: each
    guest fitted on what the moves before it left there, and its usage
    applied; the placements must be the plan's."""
    current = {d.host: d.view for d in destinations}
    for move in plan.moves:
        again = fit.fit(current[move.host], move.guest.request,
                        pagesize_kb=move.guest.pagesize_kb)
        test.assertTrue(again.fits, move)
        test.assertEqual(move.placement, again.placement)
        test.assertNotIn(move.host, move.guest.exclude)
        current[move.host] = view_usage.apply(current[move.host],
                                              move.placement)


class OrderOnOneHostTest(base.TestCase):
    """One destination where the guests fit only in one order."""

    def _check(self, guests, destinations):
        plan = drain.plan(guests, destinations)
        self.assertTrue(plan.complete, plan.unplaced)
        self.assertEqual(drain.PLANNED, plan.outcome, plan.unplaced)
        self.assertEqual(len(guests), len(plan.moves))
        replay(self, plan, destinations)
        return plan

    def test_the_isolated_guest_first(self):
        # Cell 0: cores {1,7} {2,8} whole, 6 free: 5 free pCPUs. Cell 1:
        # {5,11} whole, 9 and 10 free: 4. The 4-pCPU guest first goes to
        # cell 0 (the emptiest), and the isolated one finds no cell;
        # the isolated one first takes cell 0, the other cell 1.
        dests = _destinations(d=_host(3, pinned=(0, 3, 4)))
        plan = self._check([_guest('g1', 2, threads='isolate'),
                            _guest('g2', 4)], dests)
        self.assertEqual(['g1', 'g2'], [m.guest.name for m in plan.moves])

    def test_an_isolated_emulator_thread_instead(self):
        dests = _destinations(d=_host(3, pinned=(0, 3, 4)))
        self._check([_guest('g1', 2, threads='isolate'),
                     _guest('g2', 3, emulator='isolate')], dests)

    def test_two_identical_destinations(self):
        # Each destination takes one isolated guest in cell 0; the
        # 4-pCPU guest must come after it on one of them.
        topology = _host(3, pinned=(0, 3, 4))
        dests = _destinations(a=topology, b=topology)
        self._check([_guest('i1', 2, threads='isolate'),
                     _guest('i2', 2, threads='isolate'),
                     _guest('big', 4)], dests)


class ExcludeTest(base.TestCase):

    def test_identical_hosts_are_not_interchangeable_under_exclude(self):
        small = _host(4, memory_mb=4096, cells=1, threads=1)
        large = _host(3, memory_mb=8192, cells=1, threads=1)
        dests = _destinations(a=small, b=small, d1=large, d2=large,
                              d3=large)
        guests = [_guest('g', 4), _guest('h', 3, exclude={'b'})] + [
            _guest(f'k{i}', 3, memory_mb=6144) for i in range(3)]
        plan = drain.plan(guests, dests)
        self.assertTrue(plan.complete, plan.unplaced)
        self.assertEqual(drain.PLANNED, plan.outcome)
        replay(self, plan, dests)
        placed = {m.guest.name: m.host for m in plan.moves}
        self.assertEqual(('b', 'a'), (placed['g'], placed['h']))


class OutcomeTest(base.TestCase):
    """The three answers are kept apart."""

    def test_proven_none(self):
        dests = _destinations(d=_host(3, pinned=(0, 3, 4)))
        plan = drain.plan([_guest('g1', 2, threads='isolate'),
                           _guest('g2', 5)], dests)
        self.assertEqual(drain.NO_PLAN, plan.outcome)
        self.assertFalse(plan.stopped)
        self.assertTrue(plan.proven)

    def test_not_found_within_the_limit(self):
        dests = _destinations(d=_host(3, pinned=(0, 3, 4)))
        plan = drain.plan([_guest('g1', 2, threads='isolate'),
                           _guest('g2', 4)], dests, max_steps=1)
        self.assertEqual(drain.NOT_FOUND, plan.outcome)
        self.assertEqual(1, plan.max_steps)
        self.assertIn('within 1 placements', plan.unplaced[0].reason)

    def test_a_guest_that_cannot_move_proves_it_whatever_the_limit(self):
        dests = _destinations(d=_host(3, pinned=(0, 3, 4)))
        stuck = drain.Guest('uuid-s', 's', problem='it is leaving already')
        plan = drain.plan([stuck, _guest('g1', 2, threads='isolate'),
                           _guest('g2', 4)], dests, max_steps=1)
        self.assertTrue(plan.stopped)
        self.assertEqual(drain.NO_PLAN, plan.outcome)

    def test_accept_refuses_and_the_search_goes_on(self):
        dests = _destinations(a=_host(4, cells=1, threads=1),
                              b=_host(4, cells=1, threads=1))
        guests = [_guest('x', 2), _guest('y', 2)]
        plan = drain.plan(guests, dests, accept=lambda moves: len(
            {m.host for m in moves}) == 2)
        self.assertEqual(drain.PLANNED, plan.outcome)
        self.assertEqual(2, len({m.host for m in plan.moves}))
        plan = drain.plan(guests, dests, accept=lambda moves: False)
        self.assertEqual(drain.NO_PLAN, plan.outcome)
