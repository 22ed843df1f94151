"""Measure the conductor's scheduler at 100 / 1,000 / 10,000 hosts.

    .venv/bin/python benchmarks/bench_scheduler.py [--hosts 100,1000,10000]
        [--repeats R] [--seed S]

Each host count runs in a fresh interpreter, so that its process RSS is
its own: the cache is fed one report per host (8 cells like bench_fit.py's
``make_host``, 16 cores x 2 threads each, random pins and 2M page use), and
nothing but the cache keeps the reports, as in the conductor; the cache's
clock stands still, so that every host stays up for the whole run. Then
``select_destinations`` runs for requests of several shapes; the median
and p95 of the indexed selection are shown against the exhaustive one
(every host filtered and weighed, as before the index; the baseline of
the same run), and the two must agree. Cache memory is what tracemalloc
sees a second cache of the first ``--traced`` hosts take, per host and
times the host count (tracing 10,000 would double the run); RSS is read
from /proc/self/status after the first cache is built, untraced.
"""

import argparse
import datetime
import gc
import json
import random
import statistics
import subprocess
import sys
import time
import tracemalloc

from numamig import fingerprint
from numamig import objects
from numamig.numa import constraints
from numamig.scheduler import host_state
from numamig.scheduler import scheduler

TARGET_MS = 20.0
TARGET_RSS_MB = 250.0
CELLS = 8
T0 = datetime.datetime(2026, 11, 23, tzinfo=datetime.UTC)

# name: (vcpus, memory MiB, flavor extra specs)
SHAPES = {
    'pinned 1-node': (8, 4096, {'hw:cpu_policy': 'dedicated'}),
    'pinned 2-node': (16, 8192, {'hw:cpu_policy': 'dedicated',
                                 'hw:numa_nodes': '2'}),
    'huge pages': (4, 8192, {'hw:cpu_policy': 'dedicated',
                             'hw:mem_page_size': '2MB'}),
    'unpinned': (2, 2048, {'hw:numa_nodes': '1'}),
    'fits nowhere': (40, 4096, {'hw:cpu_policy': 'dedicated'}),
}


def make_topology(rng, cores=16, threads=2, shared_cores=2,
                  memory_mb=65536, pages_2m=8192, load=0.8):
    """An 8-cell host as bench_fit.make_host draws it, with random load."""
    total = CELLS * cores
    cells = []
    for cell_id in range(CELLS):
        siblings = [{cell_id * cores + c + t * total for t in range(threads)}
                    for c in range(cores)]
        shared = set().union(*siblings[:shared_cores])
        dedicated = set().union(*siblings) - shared
        pinned = set(rng.sample(sorted(dedicated),
                                int(len(dedicated) * rng.uniform(0, load))))
        used_2m = rng.randint(0, pages_2m // 2)
        cells.append(objects.HostNUMACell(
            id=cell_id, cpuset=shared, pcpuset=dedicated, pinned_cpus=pinned,
            siblings=siblings, memory_mb=memory_mb,
            memory_usage_mb=used_2m * 2, cpu_usage=rng.randint(0, 8),
            distances={other: 10 if other == cell_id else 21
                       for other in range(CELLS)},
            mempages=[
                objects.NUMAPagesTopology(
                    size_kb=4, total=(memory_mb - pages_2m * 2) * 256),
                objects.NUMAPagesTopology(size_kb=2048, total=pages_2m,
                                          used=used_2m)]))
    return objects.HostNUMATopology(cells=cells)


_EMPTY = fingerprint.compute(())


def fill(cache, count, seed):
    """Feed ``count`` reports to ``cache``; keep none of them."""
    rng = random.Random(seed)
    for index in range(count):
        cache.update(objects.ComputeNodeReport(
            host=f'host{index:05d}', hypervisor_uri='qemu:///system',
            hypervisor_type='qemu', topology=make_topology(rng),
            service_version=2, fingerprint=_EMPTY, reported_at=T0))


def _cache():
    """A cache whose clock stands still: building 10,000 hosts takes
    about a minute, and with a moving clock the first hosts would go
    down (service_down_time) between one selection and the next."""
    return host_state.HostStateCache(clock=lambda: T0)


def rss_mb():
    with open('/proc/self/status') as status:
        for line in status:
            if line.startswith('VmRSS:'):
                return int(line.split()[1]) / 1024
    return float('nan')


def _times_ms(select, request, repeats):
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        selection = select(request, 'source', pagesize_kb=None)
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    p95 = samples[min(len(samples) - 1, int(len(samples) * 0.95))]
    return statistics.median(samples), p95, selection


def _decisions(selection):
    return [(c.host, c.weight, None if c.fit is None else c.placement)
            for c in selection.candidates]


def measure(count, repeats, seed, traced_count):
    """Run one host count in this process; return a dict of figures."""
    gc.collect()
    rss_before = rss_mb()
    cache = _cache()
    start = time.perf_counter()
    fill(cache, count, seed)
    build_s = time.perf_counter() - start
    gc.collect()
    rss_after = rss_mb()
    sched = scheduler.Scheduler(cache)
    exhaustive = getattr(sched, '_select_exhaustive', None)
    shapes = {}
    for name, (vcpus, memory, specs) in SHAPES.items():
        request = constraints.get_numa_request(vcpus, memory, specs, {})
        p50, p95, indexed = _times_ms(sched.select_destinations, request,
                                      repeats)
        row = {'p50': p50, 'p95': p95, 'candidates': len(indexed.hosts)}
        if exhaustive is not None:
            slow = max(3, repeats // (1 + count // 1000))
            row['base_p50'], row['base_p95'], full = _times_ms(
                exhaustive, request, slow)
            row['agree'] = _decisions(full) == _decisions(indexed)
        shapes[name] = row
    del sched, cache
    gc.collect()
    traced_count = min(count, traced_count)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    traced = _cache()
    fill(traced, traced_count, seed)
    gc.collect()
    per_host = (tracemalloc.get_traced_memory()[0] - before) / traced_count
    cache_mb = per_host * count / 2 ** 20
    tracemalloc.stop()
    return {'hosts': count, 'build_s': build_s, 'rss_mb': rss_after,
            'rss_cache_mb': rss_after - rss_before, 'cache_mb': cache_mb,
            'shapes': shapes}


def _cell(row, key):
    return f"{row[key]:9.2f}" if key in row else f"{'n/a':>9}"


def print_table(results):
    print(f"{'hosts':>6} {'request':<14} {'p50 ms':>9} {'p95 ms':>9} "
          f"{'base p50':>9} {'base p95':>9} {'cands':>5} agree")
    for result in results:
        for name, row in result['shapes'].items():
            agree = {True: 'yes', False: 'NO'}.get(row.get('agree'), 'n/a')
            print(f"{result['hosts']:>6} {name:<14} {_cell(row, 'p50')} "
                  f"{_cell(row, 'p95')} {_cell(row, 'base_p50')} "
                  f"{_cell(row, 'base_p95')} {row['candidates']:>5} "
                  f"{agree}")
    print()
    print(f"{'hosts':>6} {'build s':>8} {'cache MB':>9} {'KB/host':>8} "
          f"{'RSS MB':>8}")
    for result in results:
        per_host = result['cache_mb'] * 1024 / result['hosts']
        print(f"{result['hosts']:>6} {result['build_s']:8.2f} "
              f"{result['cache_mb']:9.1f} {per_host:8.1f} "
              f"{result['rss_mb']:8.1f}")


def print_targets(results):
    by_count = {result['hosts']: result for result in results}
    biggest = by_count.get(10000)
    if biggest is None:
        print("targets are judged at 10,000 hosts: run with --hosts "
              "including 10000")
        return
    worst = max(row['p50'] for row in biggest['shapes'].values())
    print(f"< {TARGET_MS:g} ms median at 10,000 hosts (worst shape "
          f"{worst:.2f} ms): {'met' if worst < TARGET_MS else 'NOT met'}")
    rss = biggest['rss_mb']
    print(f"< {TARGET_RSS_MB:g} MB RSS with 10,000 hosts cached "
          f"({rss:.0f} MB): {'met' if rss < TARGET_RSS_MB else 'NOT met'}")
    agree = all(row.get('agree', True) for result in results
                for row in result['shapes'].values())
    print(f"indexed and exhaustive selections agree: "
          f"{'met' if agree else 'NOT met'}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--hosts', default='100,1000,10000',
                        help="Comma-separated host counts.")
    parser.add_argument('--repeats', type=int, default=21,
                        help="Selections timed per request shape (the "
                             "exhaustive path runs fewer at large counts).")
    parser.add_argument('--seed', type=int, default=7)
    parser.add_argument('--traced', type=int, default=1000,
                        help="Hosts whose cache memory tracemalloc "
                             "measures.")
    parser.add_argument('--one', type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(measure(args.one, args.repeats, args.seed,
                                 args.traced)))
        return 0
    results = []
    for count in (int(value) for value in args.hosts.split(',')):
        output = subprocess.run(
            [sys.executable, __file__, '--one', str(count), '--repeats',
             str(args.repeats), '--seed', str(args.seed), '--traced',
             str(args.traced)],
            check=True, capture_output=True, text=True)
        results.append(json.loads(output.stdout))
    print_table(results)
    print()
    print_targets(results)
    return 0


if __name__ == '__main__':
    sys.exit(main())
