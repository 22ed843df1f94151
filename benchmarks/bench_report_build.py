"""What a conductor worker pays per stored report it has never seen.

    .venv/bin/python benchmarks/bench_report_build.py [--hosts 1000,10000]
        [--repeats 3] [--seed 1]

A worker reads back the reports other workers stored
(numamig.conductor.records.sync_reports); one whose cache holds no report
of a host (its first look, a restart, a cloud growing) builds each one
into a host state, on the path of the migration that made it look. At
10,000 hosts with three workers on two cores that took over a minute
(issue 37, item 4; doc/source/control-plane.rst).

Per cloud size, the same generated reports (hosts of 8 cells x 8 pCPUs
with SMT, two page sizes, each host's pinned pCPUs and huge pages drawn
at random, so that no two are alike) stored as the database stores them
(the JSON text of their primitive) are fed to an empty HostStateCache
as sync_reports feeds it (the text's digest, the report built, the cache
updated), by:

* old: ``Change.load`` (numamig.db.primitives.load: OVO hydration and
  validation), then the cache's update;
* new: ``scheduler.stored.ReportBuilder.build``, then the cache's update.

The two run alternately, ``--repeats`` times each; the fastest run of
each counts, in this thread's CPU time (steady when other work shares
the machine). The built host states are compared, every host, old
against new. Targets: new at least 2x cheaper than old at every size,
and its cost per report within 1.5x from the smallest to the largest
cloud. The exit code is 1 when a target or the comparison fails.
"""

import argparse
import datetime
import gc
import json
import os
import random
import sys
import time

from numamig import fingerprint
from numamig import objects
from numamig.db import compute_nodes
from numamig.db import primitives
from numamig.scheduler import host_state
from numamig.scheduler import stored

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_fit  # noqa: E402

# The new path must be this much cheaper than the old, at every size.
FASTER_BY = 2.0
# Its cost per report may grow this much from the smallest cloud.
FLAT_WITHIN = 1.5


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--hosts', default='1000,10000',
                        help="hosts per run, comma-separated")
    parser.add_argument('--repeats', type=int, default=3)
    parser.add_argument('--seed', type=int, default=1)
    args = parser.parse_args(argv)
    args.sizes = [int(n) for n in args.hosts.split(',')]
    if any(n < 1 for n in args.sizes) or args.repeats < 1:
        parser.error("--hosts and --repeats must be positive")
    return args


def stored_rows(count, seed):
    """(host, reported_at, text) of ``count`` distinct reports, as
    compute_nodes stores them."""
    rng = random.Random(seed)
    now = datetime.datetime.now(datetime.UTC)
    sign = fingerprint.compute([])
    rows = []
    for index in range(count):
        report = objects.ComputeNodeReport(
            host=f'sim-{index:05d}', hypervisor_uri='test:///sim',
            hypervisor_type='test', service_version=2, fingerprint=sign,
            topology=bench_fit.make_host(8, 4, threads=2, shared_cores=1,
                                         rng=rng, load=0.8),
            reported_at=now)
        rows.append((report.host, now, json.dumps(primitives.dump(report))))
    return rows


def fill(rows, build):
    """An empty cache fed every row as sync_reports feeds it; returns
    (the cache, CPU seconds)."""
    cache = host_state.HostStateCache(service_down_time=3600)
    gc.collect()
    start = time.thread_time()
    for host, reported_at, text in rows:
        change = compute_nodes.Change(
            host, reported_at, compute_nodes.content_digest(text), text)
        cache.update(build(change), guests=(), received_at=reported_at,
                     digest=change.digest)
    return cache, time.thread_time() - start


def differing(rows, old, new):
    """Hosts whose states differ between the two caches."""
    bad = []
    for host, _, _ in rows:
        a, b = old.get(host), new.get(host)
        if a.report != b.report or a.topology != b.topology or \
                a.capacity.cells != b.capacity.cells or \
                a.report.obj_what_changed() != b.report.obj_what_changed():
            bad.append(host)
    return bad


def _builder(name):
    return compute_nodes.Change.load if name == 'old' else \
        stored.ReportBuilder().build


def measure(rows, repeats):
    """The fastest fill of each path, each timed with no other cache
    alive (a larger heap makes the collector's passes longer); then one
    more fill of each, untimed, for the comparison."""
    best = {'old': float('inf'), 'new': float('inf')}
    for _ in range(repeats):
        for name in ('old', 'new'):
            _cache, spent = fill(rows, _builder(name))
            del _cache
            best[name] = min(best[name], spent)
    old = fill(rows, _builder('old'))[0]
    new = fill(rows, _builder('new'))[0]
    return best, differing(rows, old, new)


def main(argv=None):
    args = parse_args(argv)
    ok = True
    per_report = {}
    print(f"{'hosts':>7} {'old ms/report':>14} {'new ms/report':>14} "
          f"{'faster':>7}  states equal")
    for size in args.sizes:
        rows = stored_rows(size, args.seed)
        best, bad = measure(rows, args.repeats)
        old, new = (best[k] / size * 1000 for k in ('old', 'new'))
        per_report[size] = new
        print(f"{size:>7} {old:>14.3f} {new:>14.3f} {old / new:>6.1f}x  "
              f"{'yes' if not bad else f'NO: {len(bad)} hosts differ'}")
        if bad or old / new < FASTER_BY:
            ok = False
        del rows
    smallest, largest = min(per_report), max(per_report)
    growth = per_report[largest] / per_report[smallest]
    print(f"new cost per report, {largest} hosts against {smallest}: "
          f"{growth:.2f}x (target within {FLAT_WITHIN}x)")
    if growth > FLAT_WITHIN:
        ok = False
    print("targets met" if ok else "TARGET MISSED")
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
