"""Defragmentation plans held against an exhaustive search on hundreds
of small generated clouds (chains through third hosts included).

The plans searched are the defragmentation's (doc/source/drain.rst): a
set of guests of any hosts moves, each to another host; a move into a
host runs after every move off it (so the hosts' moves may not wait on
each other in a circle); the guests arriving on a host are fitted in
some order on what the departures left; the new guest must then fit on
one host. The brute force (brute.optimum) tries every set of up to
MAX_MOVES guests, every destination of each and every order of the
arrivals on each host, apart from the planner. "No plan exists" must
never be said where it finds one, a plan must have the fewest moves,
and every plan is replayed with numamig's own accounting.
"""

import os
import random

from numamig.numa import fit
from numamig.numa import usage
from numamig.numa import views
from numamig.scheduler import defragment as defrag
from numamig.scheduler import drain
from tests import base
from tests.unit.numa import hosts as numa_hosts
from tests.unit.scheduler import brute

CLOUDS = 300
MAX_MOVES = 2
SEED = int(os.environ.get('NUMAMIG_DEFRAG_SEED', '1'))


def _request(rng, cores):
    threads = rng.choice((None, None, 'isolate', 'require'))
    pinned = rng.randint(1, min(3, cores))
    return numa_hosts.request(
        [(pinned, 0, rng.choice((512, 1024)), None, threads)],
        emulator='isolate' if rng.random() < 0.15 else None)


def cloud(rng):
    """({host: (topology, [(uuid, request, placed)])}, new guest)."""
    cores = rng.randint(2, 3)
    state = {}
    for index in range(3):
        topology = numa_hosts.make_host(cells=2, cores=cores, threads=2)
        guests = []
        for number in range(rng.randint(2, 5)):
            request = _request(rng, cores)
            result = fit.fit(topology, request, strategy='pack')
            if not result.fits:
                continue
            placed = result.topology
            topology = usage.apply(topology, placed)
            guests.append((f'h{index}-g{number}', request, placed))
        state[f'h{index}'] = (topology, guests)
    wanted = numa_hosts.request([(cores * 2 - rng.randint(0, 2), 0, 512,
                                  None, None)])
    return state, wanted


def replay(state, plan, wanted):
    """Run the plan's moves as the claims would; return what is wrong."""
    current = {h: t for h, (t, _) in state.items()}
    placed = {uuid: p for _, (_, listed) in state.items()
              for uuid, _, p in listed}
    left = {}
    for move in plan.moves:
        left.setdefault(move.source, []).append(move)
    for move in plan.moves:
        if any(m is not move and m.source == move.host
               for m in left.get(move.host, ())):
            return f"{move.guest.name} moves in before {move.host} is left"
        again = fit.fit(current[move.host], move.guest.request)
        if not again.fits or again.placement != move.placement:
            return f"{move.guest.name}: its claim on {move.host} differs"
        current[move.host] = usage.apply(current[move.host],
                                         move.placement.topology())
        current[move.source] = usage.release(current[move.source],
                                             placed[move.guest.uuid])
        left[move.source].remove(move)
    if not fit.fit(current[plan.host], wanted).fits:
        return f"the guest does not fit on {plan.host} after the moves"
    return None


def by_plan(state, wanted, max_moves):
    candidates = [defrag.Candidate(host, topology, tuple(
        defrag.Resident(uuid, uuid, placed, request)
        for uuid, request, placed in guests))
        for host, (topology, guests) in state.items()]
    destinations = [drain.Destination(host, views.HostView(topology))
                    for host, (topology, _) in state.items()]
    return defrag.plan(wanted, candidates, destinations,
                       max_moves=max_moves, movable=candidates)


class BruteForceTest(base.TestCase):

    def test_never_no_plan_where_one_exists(self):
        rng = random.Random(SEED)
        wrong, counts = [], {}
        for number in range(CLOUDS):
            state, wanted = cloud(rng)
            if any(fit.fit(t, wanted).fits for t, _ in state.values()):
                continue
            found = by_plan(state, wanted, MAX_MOVES)
            best = brute.optimum(state, wanted, MAX_MOVES)
            counts[found.outcome] = counts.get(found.outcome, 0) + 1
            if found.found:
                problem = replay(state, found, wanted)
                if problem:
                    wrong.append((number, problem))
                elif best is None or len(found.moves) > best:
                    wrong.append((number, f"{len(found.moves)} moves, "
                                          f"optimum {best}"))
            elif best is not None and found.outcome == drain.NO_PLAN:
                wrong.append((number, f"no plan, optimum {best}"))
        self.assertEqual([], wrong)
        self.assertGreater(counts.get(drain.PLANNED, 0), 20)
        self.assertGreater(counts.get(drain.NO_PLAN, 0), 5)
