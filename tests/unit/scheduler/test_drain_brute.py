"""The drain planner held against an exhaustive search (brute.py) on
thousands of small generated clouds.

Each cloud: 2-4 destinations of 2 cells x 2-4 SMT cores with pCPUs
pinned already, some with 2 MiB pages or a shared core, and 2-5 guests:
dedicated 1-4 pCPUs, ``isolate`` or ``require`` threads, isolated
emulator threads, two guest cells, 2 MiB pages, mixed and shared CPU
policies, some with barred destinations as defragmentation chains make
them. Every plan is replayed with numamig's own accounting
(numa.usage.apply on the host objects, each guest fitted as its claim
would); "no plan exists" must never be said where the brute force finds
one, and a plan must be found wherever one exists within the default
step limit on clouds this small.

``NUMAMIG_DRAIN_SEED`` (an integer) runs another series of clouds.
"""

import os
import random

from numamig import objects
from numamig.numa import fit
from numamig.numa import usage
from numamig.numa import views
from numamig.scheduler import drain
from tests import base
from tests.unit.numa import hosts as numa_hosts
from tests.unit.scheduler import brute

CLOUDS = 2500
SEED = int(os.environ.get('NUMAMIG_DRAIN_SEED', '0'))


def _cell(rng, index, cores, huge, shared):
    memory = rng.choice((4096, 8192))
    pages = (numa_hosts.hugepage_pools(memory, pages_2m=1024,
                                       used_2m=rng.choice((0, 256, 768)))
             if huge else None)
    cell = numa_hosts.make_cell(index, cores=cores, threads=2, cells=2,
                                memory_mb=memory, pages=pages,
                                shared=shared)
    free = sorted(cell.pcpuset)
    cell.pinned_cpus = set(rng.sample(free, rng.randint(0, len(free) // 2)))
    cell.memory_usage_mb = rng.choice((0, 1024, 2048))
    return cell


def _host(rng):
    cores = rng.randint(2, 4)
    huge = rng.random() < 0.3
    shared = int(rng.random() < 0.2)
    return objects.HostNUMATopology(cells=[
        _cell(rng, i, cores, huge, shared) for i in range(2)])


def _request(rng):
    shape = rng.random()
    threads = rng.choice((None, None, 'prefer', 'isolate', 'require'))
    emulator = 'isolate' if rng.random() < 0.2 else None
    pagesize = 2048 if rng.random() < 0.2 else None
    memory = rng.choice((512, 1024, 2048))
    if shape < 0.2:
        cells = [(rng.randint(1, 2), 0, memory, pagesize, threads)
                 for _ in range(2)]
    elif shape < 0.3:
        cells = [(rng.randint(1, 2), 1, memory, pagesize, threads)]
    elif shape < 0.35:
        cells, emulator = [(0, rng.randint(1, 2), memory, None, None)], None
    else:
        cells = [(rng.randint(1, 4), 0, memory, pagesize, threads)]
    return numa_hosts.request(cells, emulator=emulator), pagesize


def cloud(rng):
    """(destinations, guests, limits, strategy) of one small cloud."""
    names = [f'h{i}' for i in range(rng.randint(2, 4))]
    topologies = {name: _host(rng) for name in names}
    guests = []
    for index in range(rng.randint(2, 5)):
        request, pagesize = _request(rng)
        barred = (frozenset(rng.sample(names, rng.randint(1, 2)))
                  if rng.random() < 0.25 else frozenset())
        guests.append(drain.Guest(f'uuid-{index}', f'g{index}',
                                  views.RequestView(request),
                                  pagesize if rng.random() < 0.5 else None,
                                  exclude=barred))
    limits = (objects.NUMALimits(cpu_allocation_ratio=2.0,
                                 ram_allocation_ratio=1.5)
              if rng.random() < 0.3 else None)
    strategy = rng.choice(('spread', 'pack'))
    return topologies, guests, limits, strategy


def replay(topologies, plan, limits, strategy):
    """Run the moves on the host objects as the claims would; return
    what is wrong, or None."""
    current = dict(topologies)
    for move in plan.moves:
        if move.host in move.guest.exclude:
            return f"{move.guest.name} went to {move.host}, barred"
        again = fit.fit(current[move.host], move.guest.request,
                        limits=limits, strategy=strategy,
                        pagesize_kb=move.guest.pagesize_kb)
        if not again.fits:
            return f"{move.guest.name} does not fit on {move.host}"
        if again.placement != move.placement:
            return f"{move.guest.name} is placed otherwise by its claim"
        current[move.host] = usage.apply(current[move.host],
                                         move.placement.topology())
    return None


class BruteForceTest(base.TestCase):

    def test_never_no_plan_where_one_exists(self):
        rng = random.Random(SEED)
        answers, wrong = [], []
        for number in range(CLOUDS):
            topologies, guests, limits, strategy = cloud(rng)
            hosts = {h: views.HostView(t) for h, t in topologies.items()}
            found = drain.plan(guests, [drain.Destination(h, v) for h, v
                                        in hosts.items()],
                               limits=limits, strategy=strategy)
            answers.append(found)
            truth = brute.exists(
                hosts, [(g.request, g.pagesize_kb) for g in guests],
                [g.exclude for g in guests], limits, strategy)
            if found.complete:
                problem = replay(topologies, found, limits, strategy)
                if problem:
                    wrong.append((number, problem))
            elif truth is not None:
                wrong.append((number, f"refused: "
                                      f"{found.unplaced[0].reason}; but "
                                      f"{truth}"))
        self.assertEqual([], wrong)
        counts = {drain.PLANNED: 0, drain.NO_PLAN: 0, drain.NOT_FOUND: 0}
        for found in answers:
            counts[found.outcome] += 1
        # The series covers both answers.
        self.assertGreater(counts[drain.PLANNED], CLOUDS // 4)
        self.assertGreater(counts[drain.NO_PLAN], CLOUDS // 10)
