"""Drain plans against one-guest-at-a-time scheduling, on simulated clouds.

    .venv/bin/python benchmarks/bench_drain.py [--clouds 5]
        [--regimes 50:0.6-0.9,10:0.6-0.85,20:0.7-0.88,30:0.8-0.92]
        [--seed 1]
        [--big-hosts 1000] [--repeats 5] [--small-clouds 300]

Part 0, exactness where it is computable: ``--small-clouds`` seeded
clouds of 3-5 hosts of 2 cells x 4 SMT cores (the mix below), every host
of 2-5 guests drained to the others; the plan against the exhaustive
search of tests/unit/scheduler/brute.py (every share of the guests
among the destinations, every order on each; written apart from the
planner), every plan replayed with usage.apply and the claims' fit. A
host the exhaustive search empties and the plan does not, or a plan
that does not replay, is a MISS: the run exits 1.

Part 1, how many hosts can be emptied. A regime HOSTS:LOW-HIGH is
``--clouds`` clouds (seeded) of HOSTS hosts of 2-4 cells (8-12 SMT cores
of 2 threads per cell, 1 shared; 64 GiB per cell with 8 GiB of 2 MiB
pages), filled with guests of a flavor mix (pinned guests of 2-8 vCPUs
on one or two NUMA nodes, some isolate/require, some on 2 MiB pages) to
a pinned utilisation drawn in LOW-HIGH per host (the fill stops at the
first guest past it, so hosts end a little above). The first regime is
the issue's; the others are tighter, where the order of the moves
decides. Then, for every host, with the rest of the cloud as it is:

* one at a time (Nova's way, the baseline): the guests in their order
  of creation, each sent to the scheduler's first candidate
  (``select_destinations``, spread) and reserved there before the next;
* the plan: ``Scheduler.plan_drain``, all guests at once.

The host counts as emptiable when every guest found a destination. A
host the plan cannot empty is PROVEN not emptiable only when the plan
answers "no plan exists" (its search ran out: every destination and
every order was tried); "no plan found within the limit" is counted as
undecided. Target: no host undecided, and every host one-at-a-time
empties the plan empties too.

Part 2, plan time: a cloud of ``--big-hosts`` hosts, one of them with 40
guests (4 cells of 28 cores and 128 GiB), timed over ``--repeats`` plans
(median, wall clock) against the one-at-a-time baseline of the same host
in the same run. Target: under 1 s.
"""

import argparse
import datetime
import importlib.util
import os
import random
import statistics
import sys
import time

from numamig import fingerprint
from numamig import objects
from numamig.numa import constraints
from numamig.numa import fit
from numamig.numa import usage
from numamig.numa import view_usage
from numamig.numa import views
from numamig.scheduler import drain
from numamig.scheduler import host_state
from numamig.scheduler import scheduler

T0 = datetime.datetime(2026, 12, 1, tzinfo=datetime.UTC)
ORACLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..',
                      'tests', 'unit', 'scheduler', 'brute.py')
PLAN_TARGET_S = 1.0
_EMPTY = fingerprint.compute(())

# (weight, vcpus, memory MiB, extra specs): a pinned-heavy flavor mix.
FLAVORS = [
    (4, 2, 4096, {'hw:cpu_policy': 'dedicated'}),
    (4, 4, 8192, {'hw:cpu_policy': 'dedicated'}),
    (2, 8, 16384, {'hw:cpu_policy': 'dedicated'}),
    (2, 8, 16384, {'hw:cpu_policy': 'dedicated', 'hw:numa_nodes': '2'}),
    (1, 4, 4096, {'hw:cpu_policy': 'dedicated',
                  'hw:cpu_thread_policy': 'isolate'}),
    (1, 4, 8192, {'hw:cpu_policy': 'dedicated',
                  'hw:cpu_thread_policy': 'require'}),
    (2, 4, 2048, {'hw:cpu_policy': 'dedicated', 'hw:mem_page_size': '2MB'}),
    (1, 6, 4096, {'hw:cpu_policy': 'dedicated', 'hw:mem_page_size': '2MB',
                  'hw:emulator_threads_policy': 'isolate'}),
]


def host_topology(cells, cores, memory_mb=65536, pages_2m=4096):
    """Cells of ``cores`` SMT cores (2 threads), core 0 shared."""
    total = cells * cores
    result = []
    for cell_id in range(cells):
        siblings = [{cell_id * cores + c, cell_id * cores + c + total}
                    for c in range(cores)]
        shared = set(siblings[0])
        result.append(objects.HostNUMACell(
            id=cell_id, cpuset=shared,
            pcpuset=set().union(*siblings) - shared, pinned_cpus=set(),
            siblings=siblings, memory_mb=memory_mb, memory_usage_mb=0,
            cpu_usage=0,
            distances={o: 10 if o == cell_id else 21 for o in range(cells)},
            mempages=[
                objects.NUMAPagesTopology(
                    size_kb=4, total=(memory_mb - pages_2m * 2) * 256),
                objects.NUMAPagesTopology(size_kb=2048, total=pages_2m)]))
    return objects.HostNUMATopology(cells=result)


class SimHost:
    """A host, its guests (request, placement) and its usage."""

    def __init__(self, name, topology):
        self.name = name
        self.empty = topology
        self.view = views.HostView(topology)
        self.guests = []

    def pinned_share(self):
        free = sum(c.free_count for c in self.view.cells)
        total = sum(len(c.pcpuset) for c in self.view.cells)
        return 1 - free / total

    def try_add(self, name, request):
        result = fit.fit(self.view, request, strategy='spread')
        if not result.fits:
            return False
        self.view = view_usage.apply(self.view, result.placement)
        self.guests.append((name, request, result.placement))
        return True

    def topology(self):
        return usage.host_with_usage(
            self.empty, [p.topology() for _, _, p in self.guests])


def _requests(rng):
    weights = [w for w, *_ in FLAVORS]
    while True:
        _, vcpus, memory, specs = rng.choices(FLAVORS, weights)[0]
        yield constraints.get_numa_request(vcpus, memory, specs, {})


def make_cloud(rng, count, shape=None, util=(0.6, 0.9)):
    """``count`` SimHosts, each filled to a pinned share drawn in
    ``util``."""
    hosts = []
    requests = _requests(rng)
    for index in range(count):
        cells, cores = shape or (rng.choice((2, 3, 4)), rng.choice((8, 12)))
        host = SimHost(f'host{index:04d}', host_topology(cells, cores))
        target, misses = rng.uniform(*util), 0
        while host.pinned_share() < target and misses < 20:
            misses += not host.try_add(f'{host.name}-g{len(host.guests)}',
                                       next(requests))
        hosts.append(host)
    return hosts


def make_cache(hosts):
    cache = host_state.HostStateCache(clock=lambda: T0)
    for host in hosts:
        cache.update(objects.ComputeNodeReport(
            host=host.name, hypervisor_uri='qemu:///system',
            hypervisor_type='qemu', topology=host.topology(),
            service_version=2, fingerprint=_EMPTY, reported_at=T0))
    return cache


def drain_guests(host):
    return [drain.Guest(uuid=f'{name}-uuid', name=name,
                        request=views.RequestView(request),
                        pagesize_kb=_page_size(placement))
            for name, request, placement in host.guests]


def _page_size(placement):
    sizes = {cell.pagesize for cell in placement.cells}
    return sizes.pop() if len(sizes) == 1 else None


def one_at_a_time(sched, host):
    """Nova's way: each guest to the first candidate, reserved; True
    when every guest found one. Reservations are released after."""
    reserved, emptied = [], True
    for name, request, placement in host.guests:
        selection = sched.select_destinations(
            request, host.name, pagesize_kb=_page_size(placement))
        if not selection.candidates:
            emptied = False
            break
        dest = selection.candidates[0].host
        sched.reserve(dest, f'{name}-uuid', 'p', request,
                      pagesize_kb=_page_size(placement))
        reserved.append((dest, f'{name}-uuid'))
    for dest, uuid in reserved:
        sched.cache.release(dest, uuid)
    return emptied


def load_oracle():
    """tests/unit/scheduler/brute.py, the exhaustive searches, loaded
    by path (the tests' package sets up what a benchmark must not)."""
    spec = importlib.util.spec_from_file_location('drain_brute', ORACLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def exactness(args):
    """Part 0: the plan against the exhaustive search on small clouds;
    returns the counts."""
    oracle = load_oracle()
    counts = dict.fromkeys(('hosts', 'emptiable', drain.PLANNED,
                            drain.NO_PLAN, drain.NOT_FOUND, 'missed',
                            'invalid'), 0)
    for cloud in range(args.small_clouds):
        rng = random.Random(args.seed * 7919 + cloud)
        hosts = make_cloud(rng, rng.randint(3, 5), shape=(2, 4),
                           util=(0.3, 0.9))
        for source in hosts:
            guests = drain_guests(source)
            if not 2 <= len(guests) <= 5:
                continue
            others = {h.name: h.topology() for h in hosts if h is not source}
            dests = [drain.Destination(name, views.HostView(topology))
                     for name, topology in others.items()]
            plan = drain.plan(guests, dests)
            truth = oracle.exists(
                {d.host: d.view for d in dests},
                [(g.request, g.pagesize_kb) for g in guests],
                [frozenset()] * len(guests))
            counts['hosts'] += 1
            counts['emptiable'] += truth is not None
            counts[plan.outcome] += 1
            if plan.complete:
                counts['invalid'] += not _replays(others, plan)
            elif truth is not None:
                counts['missed'] += 1
                print(f"  MISS: cloud {cloud} host {source.name}: "
                      f"{plan.outcome}, but {truth}")
    print(f"  {counts['hosts']} hosts of {args.small_clouds} small clouds: "
          f"emptiable (exhaustive search) {counts['emptiable']}; the plan: "
          f"emptied {counts[drain.PLANNED]}, no plan exists (proven) "
          f"{counts[drain.NO_PLAN]}, none found within the limit "
          f"{counts[drain.NOT_FOUND]}; MISSED {counts['missed']}, plans "
          f"that do not replay {counts['invalid']}\n")
    return counts


def _replays(topologies, plan):
    """Whether the plan's moves, run as the claims would, hold."""
    current = dict(topologies)
    for move in plan.moves:
        again = fit.fit(current[move.host], move.guest.request,
                        pagesize_kb=move.guest.pagesize_kb)
        if not again.fits or again.placement != move.placement:
            return False
        current[move.host] = usage.apply(current[move.host],
                                         move.placement.topology())
    return True


def emptiable(args, count, util):
    """Part 1: per cloud of a regime, hosts emptied by each way; returns
    the totals and the plans' times."""
    totals = {'hosts': 0, 'baseline': 0, 'plan': 0, 'proven_not': 0,
              'undecided': 0, 'baseline_only': 0, 'guests': 0}
    plan_s = []
    for cloud in range(args.clouds):
        rng = random.Random(args.seed * 1000 + cloud)
        hosts = make_cloud(rng, count, util=util)
        sched = scheduler.Scheduler(make_cache(hosts))
        row = dict.fromkeys(totals, 0)
        for host in hosts:
            base_ok = one_at_a_time(sched, host)
            start = time.perf_counter()
            plan, _ = sched.plan_drain(host.name, drain_guests(host))
            plan_s.append(time.perf_counter() - start)
            row['hosts'] += 1
            row['guests'] += len(host.guests)
            row['baseline'] += base_ok
            row['plan'] += plan.complete
            row['undecided'] += plan.outcome == drain.NOT_FOUND
            row['proven_not'] += plan.outcome == drain.NO_PLAN
            row['baseline_only'] += base_ok and not plan.complete
        utilisation = statistics.mean(h.pinned_share() for h in hosts)
        print(f"  cloud {cloud}: {row['hosts']} hosts, {row['guests']} "
              f"guests, pinned {utilisation:.0%}: one at a time empties "
              f"{row['baseline']}, the plan {row['plan']} (proven not "
              f"emptiable {row['proven_not']}, undecided "
              f"{row['undecided']})")
        for key in totals:
            totals[key] += row[key]
    return totals, plan_s


def plan_time(args):
    """Part 2: a 40-guest host among ``--big-hosts``; median seconds of
    the plan and of one-at-a-time."""
    rng = random.Random(args.seed)
    hosts = make_cloud(rng, args.big_hosts - 1)
    big = SimHost('big', host_topology(4, 28, memory_mb=131072))
    requests, misses = _requests(rng), 0
    while len(big.guests) < 40 and misses < 100:
        misses += not big.try_add(f'big-g{len(big.guests)}',
                                  next(requests))
    build = time.perf_counter()
    sched = scheduler.Scheduler(make_cache(hosts + [big]))
    print(f"\n{args.big_hosts} hosts cached in "
          f"{time.perf_counter() - build:.1f} s; host 'big' has "
          f"{len(big.guests)} guests, {big.pinned_share():.0%} pinned")
    guests = drain_guests(big)
    plans, bases = [], []
    for _ in range(args.repeats):
        start = time.perf_counter()
        plan, _ = sched.plan_drain('big', guests)
        plans.append(time.perf_counter() - start)
        start = time.perf_counter()
        one_at_a_time(sched, big)
        bases.append(time.perf_counter() - start)
    return statistics.median(plans), statistics.median(bases), plan


def _summary(totals, plan_s):
    share = {k: totals[k] / max(1, totals['hosts'])
             for k in ('baseline', 'plan')}
    print(f"  {totals['hosts']} hosts: emptiable one at a time "
          f"{totals['baseline']} ({share['baseline']:.1%}), by the plan "
          f"{totals['plan']} ({share['plan']:.1%}); proven not emptiable "
          f"{totals['proven_not']}, undecided {totals['undecided']}; "
          f"emptied one at a time but not by the plan "
          f"{totals['baseline_only']}")
    print(f"  plan time per host: median "
          f"{statistics.median(plan_s) * 1000:.1f} ms, max "
          f"{max(plan_s) * 1000:.1f} ms\n")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--clouds', type=int, default=5)
    parser.add_argument('--regimes',
                        default='50:0.6-0.9,10:0.6-0.85,20:0.7-0.88,'
                                '30:0.8-0.92')
    parser.add_argument('--seed', type=int, default=1)
    parser.add_argument('--big-hosts', type=int, default=1000)
    parser.add_argument('--repeats', type=int, default=5)
    parser.add_argument('--small-clouds', type=int, default=300)
    args = parser.parse_args(argv)
    print("== exactness on small clouds")
    counts = exactness(args)
    ok = not counts['missed'] and not counts['invalid']
    for regime in args.regimes.split(','):
        count, _, span = regime.partition(':')
        low, _, high = span.partition('-')
        print(f"== {count} hosts per cloud, pinned {low}-{high}")
        totals, plan_s = emptiable(args, int(count),
                                   (float(low), float(high)))
        ok = ok and not totals['undecided'] and not totals['baseline_only']
        _summary(totals, plan_s)
    median, base, plan = plan_time(args)
    print(f"plan of 40 guests among {args.big_hosts} hosts: median "
          f"{median * 1000:.0f} ms (target {PLAN_TARGET_S * 1000:.0f} ms), "
          f"{plan.steps} placements, complete={plan.complete}; one at a "
          f"time (baseline, same run): {base * 1000:.0f} ms")
    ok = ok and median < PLAN_TARGET_S
    print(f"VERDICT: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
