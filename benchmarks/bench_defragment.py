"""Defragmentation plans against the optimum, on small simulated clouds.

    .venv/bin/python benchmarks/bench_defragment.py [--clouds 100] [--seed 1]
        [--hosts 3] [--max-moves 3] [--util 0.6-0.95] [--any-order]

Each cloud: ``--hosts`` hosts of 2 cells of 4 cores x 2 threads (core 0
shared; 6 dedicated pCPUs and 64 GiB per cell), filled with a pinned
flavor mix (bench_drain's) to ``--util`` of their pCPUs, seeded. The new
guest needs a whole NUMA node: 6 pinned vCPUs, ``hw:numa_nodes=1``.
For every cloud where it fits nowhere as it is:

* the plan (numamig.scheduler.defrag.plan): the fewest moves, guests
  of the target and, in chains, of third hosts, each placed elsewhere
  at once by the drain search;
* the optimum, solved exhaustively here (the exhaustive search of
  tests/unit/scheduler/brute.py, written apart from the
  planner): every set of up to ``--max-moves`` guests of ANY hosts,
  every destination of each, every order of the arrivals on each host,
  the moves into a host after every move off it (the plans a
  defragmentation carries out), then the new guest on any host: chains
  (a guest moved so that another can take its place) count;
* with ``--any-order``, also the optimum over every order of the moves
  (a move into a host before one off it included: plans a
  defragmentation does not carry out), for information;
* the baseline: greedy eviction, on each host its largest guests first
  (one that fits nowhere else skipped), each to the first host that fits
  it, until the new guest fits; the best host's count (what an
  operator moving guests by hand tends to do).

Printed: clouds where room was needed, how many each method solved,
moves per solved cloud, the plan's answers (a plan, no plan exists:
proven, none found within the limits), the clouds the plan missed (the
optimum solved them and the plan did not, or with fewer moves; target:
0, else the exit code is 1), and time per cloud of each, measured in
this run.

Then a family of clouds where chains are needed (``--chain-clouds``,
seeded from ``--seed``; make_chain_cloud): a target T whose guest A
would free a whole node, a host X where A fits only once its guest B
left, a host Y with room for B but not for A, and up to two hosts with
room for neither; B's size, Y's room, the guests' memory, the number of
other hosts and the hosts' order are drawn. Among them, the clouds
where the plan without chains (the target's guests only) does worse
than the optimum are counted as needing chains; on those the plan with
chains is compared with the optimum (target: every one solved, none
with more moves) and with the plan without chains, with their times.
"""

import argparse
import itertools
import random
import statistics
import sys
import time

from numamig import exception
from numamig.numa import constraints
from numamig.numa import fit
from numamig.numa import usage
from numamig.numa import views
from numamig.scheduler import defragment as defrag
from numamig.scheduler import drain

sys.path.insert(0, __file__.rsplit('/', 1)[0])
import bench_drain  # noqa: E402 - the sibling benchmark's cloud

oracle = bench_drain.load_oracle()

WHOLE_NODE = constraints.get_numa_request(
    6, 8192, {'hw:cpu_policy': 'dedicated', 'hw:numa_nodes': '1'}, {})


def make_cloud(rng, count, util=(0.6, 0.95)):
    return bench_drain.make_cloud(rng, count, shape=(2, 4), util=util)


def _state(hosts):
    """{host: (topology with usage, [(name, request, placed)])}."""
    return {h.name: (h.topology(), [(n, r, p.topology())
                                    for n, r, p in h.guests])
            for h in hosts}


def fits_somewhere(state):
    return any(fit.fit(t, WHOLE_NODE).fits for t, _ in state.values())


def by_plan(state, max_moves=3, chains=True):
    """The plan's move count, or None; ``chains``: guests of third hosts
    may move too (every host's guests are movable)."""
    return plan_of(state, max_moves, chains)[0]


def plan_of(state, max_moves=3, chains=True):
    """(the plan's move count or None, its outcome)."""
    candidates = [defrag.Candidate(host, topology, tuple(
        defrag.Resident(name, name, placed, request)
        for name, request, placed in guests))
        for host, (topology, guests) in state.items()]
    destinations = [drain.Destination(host, views.HostView(topology))
                    for host, (topology, _) in state.items()]
    found = defrag.plan(WHOLE_NODE, candidates, destinations,
                        max_moves=max_moves,
                        movable=candidates if chains else ())
    return (len(found.moves) if found.found else None), found.outcome


def make_chain_cloud(rng):
    """One cloud of the chain family: {host: (topology, guests)}.

    Node 0 of every host is full (one 6-pCPU guest); node 1 holds:
    on T, A (4 pCPUs); on X, B (``b``), ``d`` >= 2 one-pCPU guests and
    ``f`` free, A fitting once B left (f < 4 <= f + b); on Y, one-pCPU
    guests and ``r`` free, b <= r <= 3 (B fits, A does not, and freeing
    the node takes 3 moves or more); on up to two others, one-pCPU
    guests and less than ``b`` free. So no move of T's guests alone
    makes room, nor do two moves anywhere but B to Y, then A to X.
    """
    b = rng.randint(1, 3)
    f = 4 - b
    r = rng.randint(b, 3)
    shapes = {'T': [4], 'X': [b] + [1] * (6 - b - f), 'Y': [1] * (6 - r)}
    for index in range(rng.randint(0, 2)):
        shapes[f'N{index}'] = [1] * (6 - rng.randint(0, b - 1))
    hosts = []
    for name in sorted(shapes, key=lambda _: rng.random()):
        host = bench_drain.SimHost(name, bench_drain.host_topology(2, 4))
        for index, size in enumerate([6] + shapes[name]):
            host.try_add(f'{name}-g{index}', _pinned(size, rng))
        assert len(host.guests) == 1 + len(shapes[name]), name
        hosts.append(host)
    return _state(hosts)


def _pinned(vcpus, rng):
    return constraints.get_numa_request(
        vcpus, rng.choice((2048, 4096, 8192)),
        {'hw:cpu_policy': 'dedicated', 'hw:numa_nodes': '1'}, {})


def chain_family(args):
    """Run the chain family; returns how many clouds the plan with
    chains solved worse than the optimum (target: 0)."""
    rng = random.Random(args.seed)
    needing, worse = 0, 0
    answers = {'chains': [], 'direct': [], 'optimum': []}
    times = {name: [] for name in answers}
    for _ in range(args.chain_clouds):
        state = make_chain_cloud(rng)
        if fits_somewhere(state):
            continue
        found = {}
        for method, run, more in (
                ('optimum', by_optimum, ()),
                ('direct', by_plan, (False,)),
                ('chains', by_plan, ())):
            start = time.perf_counter()
            found[method] = run(state, args.max_moves, *more)
            times[method].append(time.perf_counter() - start)
        if found['optimum'] is None or (
                found['direct'] is not None and
                found['direct'] <= found['optimum']):
            continue            # chains not needed in this cloud
        needing += 1
        for method in answers:
            answers[method].append(found[method])
        if found['chains'] is None or found['chains'] > found['optimum']:
            worse += 1
    print(f"chain family: {args.chain_clouds} clouds (seed {args.seed}); "
          f"chains needed in {needing}")
    for method in ('optimum', 'chains', 'direct'):
        solved = [n for n in answers[method] if n is not None]
        median_ms = 1000 * statistics.median(times[method]) \
            if times[method] else 0
        print(f"  {method:8s} solved {len(solved):3d}/{needing}, moves "
              f"{sum(solved):3d}, median {median_ms:.1f} ms/cloud")
    print(f"  plan with chains worse than the optimum (or unsolved): "
          f"{worse}")
    return worse


def by_optimum(state, max_moves):
    """The fewest moves of the plans a defragmentation carries out."""
    return oracle.optimum(state, WHOLE_NODE, max_moves)


def by_any_order(state, max_moves):
    """The fewest moves, any guests, any destinations, any order."""
    guests = [(host, name, request, placed)
              for host, (_, listed) in state.items()
              for name, request, placed in listed]
    for size in range(max_moves + 1):
        for group in itertools.combinations(guests, size):
            if _some_order_works(state, group):
                return size
    return None


def _some_order_works(state, group):
    targets = [[h for h in state if h != g[0]] for g in group]
    for dests in itertools.product(*targets):
        for order in itertools.permutations(range(len(group))):
            topologies = {h: t for h, (t, _) in state.items()}
            if _replay(topologies, group, dests, order) and \
                    any(fit.fit(t, WHOLE_NODE).fits
                        for t in topologies.values()):
                return True
    return False


def _replay(topologies, group, dests, order):
    """Apply the moves in ``order``; False when one finds no room."""
    for index in order:
        source, _name, request, placed = group[index]
        result = fit.fit(topologies[dests[index]], request)
        if not result.fits:
            return False
        topologies[dests[index]] = usage.apply(topologies[dests[index]],
                                               result.topology)
        try:
            topologies[source] = usage.release(topologies[source], placed)
        except exception.UsageConflict:
            return False
    return True


def by_greedy(state, max_moves):
    """Per host, its largest guests first, each to the first host that
    fits it, until the new guest fits; the best host's count."""
    counts = [n for n in (_greedy_on(state, host, max_moves)
                          for host in state) if n is not None]
    return min(counts) if counts else None


def _greedy_on(state, host, max_moves):
    """Largest guest first; one that fits nowhere else is skipped."""
    topologies = {h: t for h, (t, _) in state.items()}
    guests = sorted(state[host][1], key=lambda g: -len(g[2].cpu_pinning))
    moves = 0
    for _name, request, placed in guests:
        if moves >= max_moves:
            return None
        for other in topologies:
            if other == host:
                continue
            result = fit.fit(topologies[other], request)
            if result.fits:
                topologies[other] = usage.apply(topologies[other],
                                                result.topology)
                topologies[host] = usage.release(topologies[host], placed)
                moves += 1
                break
        if moves and fit.fit(topologies[host], WHOLE_NODE).fits:
            return moves
    return None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--clouds', type=int, default=100)
    parser.add_argument('--hosts', type=int, default=3)
    parser.add_argument('--max-moves', type=int, default=3)
    parser.add_argument('--seed', type=int, default=1)
    parser.add_argument('--util', default='0.6-0.95', metavar='LOW-HIGH',
                        help="Pinned share each host is filled to.")
    parser.add_argument('--chain-clouds', type=int, default=40,
                        help="Clouds of the chain family (0: none).")
    parser.add_argument('--any-order', action='store_true',
                        help="Also solve the optimum over every order of "
                             "the moves (slow).")
    args = parser.parse_args(argv)
    util = tuple(float(v) for v in args.util.split('-'))
    rng = random.Random(args.seed)
    methods = {'plan': lambda s: plan_of(s, args.max_moves),
               'optimum': lambda s: by_optimum(s, args.max_moves),
               'greedy': lambda s: by_greedy(s, args.max_moves)}
    if args.any_order:
        methods['any order'] = lambda s: by_any_order(s, args.max_moves)
    results = {method: [] for method in methods}
    times = {method: [] for method in methods}
    outcomes = {drain.PLANNED: 0, drain.NO_PLAN: 0, drain.NOT_FOUND: 0}
    worse, needed, missed, smaller = [], 0, [], 0
    for index in range(args.clouds):
        state = _state(make_cloud(rng, args.hosts, util))
        if fits_somewhere(state):
            continue
        needed += 1
        answers = {}
        for method, run in methods.items():
            start = time.perf_counter()
            answers[method] = run(state)
            times[method].append(time.perf_counter() - start)
        answers['plan'], outcome = answers['plan']
        outcomes[outcome] += 1
        for method in methods:
            results[method].append(answers[method])
        best = answers['optimum']
        if answers['plan'] is not None and (best is None or
                                            answers['plan'] > best):
            worse.append((index, answers))
        if answers['plan'] is None and best is not None:
            missed.append((index, outcome, answers))
        if args.any_order and answers['any order'] is not None and (
                best is None or answers['any order'] < best):
            smaller += 1
    print(f"clouds: {args.clouds} of {args.hosts} hosts filled to "
          f"{args.util} (seed {args.seed}); room needed for a whole-node "
          f"guest in {needed}")
    for method in methods:
        solved = [n for n in results[method] if n is not None]
        mean = statistics.mean(solved) if solved else 0
        median_ms = 1000 * statistics.median(times[method]) \
            if times[method] else 0
        print(f"  {method:8s} solved {len(solved):3d}/{needed}, moves "
              f"{sum(solved):3d} (mean {mean:.2f}), median "
              f"{median_ms:.1f} ms/cloud")
    print(f"  plan's answers: a plan {outcomes[drain.PLANNED]}, no plan "
          f"exists (proven) {outcomes[drain.NO_PLAN]}, none found within "
          f"the limits {outcomes[drain.NOT_FOUND]}")
    print(f"  MISSED: plan worse than the optimum {len(worse)}; optimum "
          f"found where the plan found none {len(missed)} (of which "
          f"'no plan exists' said: "
          f"{sum(1 for m in missed if m[1] == drain.NO_PLAN)})")
    for index, outcome, answers in missed + [(i, None, a)
                                             for i, a in worse]:
        print(f"    cloud {index}: {answers} ({outcome})")
    if args.any_order:
        print(f"  clouds where a move into a host before one off it "
              f"saves moves (outside the plans carried out): {smaller}")
    chain_worse = chain_family(args) if args.chain_clouds else 0
    ok = not worse and not missed and not chain_worse
    print(f"VERDICT: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
