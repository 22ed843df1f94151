"""Many live migrations at once: completion, throughput, pins, limits.

    .venv/bin/python benchmarks/bench_concurrency.py [--migrations 100]
        [--hosts 20] [--transport fake|inproc|rabbit] [--burst 1000]

An embedded deployment (one conductor, H compute agents on libvirt
test-driver hosts with 2 cells x 8 pCPUs, SQLite as the embedded tier
runs it, commits not waiting for the disk; ``--sqlite-synchronous`` for
a daemon's default) over the chosen transport. Every host gets guests
pinned to one pCPU each; then N migrations are requested at once, the
scheduler choosing every destination, and the run waits for all of them
to end. It prints:

* the baseline: the median of a bare oslo.messaging call (an echo
  endpoint with numamig's serializer) on the same transport;
* how many completed, the throughput (migrations per second from the
  first request to the last end) and p50/p95 request-to-end latency;
* an audit of the live domain XML of every guest on every hypervisor: a
  pCPU pinned by two guests is counted (target: zero);
* the most migrations seen in flight at once (sampled from the records)
  against the admission limits.

With ``--burst M`` a second run requests M unpinned migrations at once
over the same hosts (the queue holds them) and checks that every one
reaches a final status, none is lost and the limits held throughout.
Targets printed: 100 at once over 20 hosts all complete, no overlapping
pin, >= 20 migrations/s.
"""

# Services here run on oslo.service's threading backend, as in the
# daemons; it must be chosen before anything imports oslo_messaging.
from numamig import _backend

_backend.select_threading(strict=True)

import argparse
import collections
import dataclasses
import logging
import os
import statistics
import sys
import tempfile
import threading
import time

import oslo_messaging as messaging
from oslo_utils import uuidutils
import sqlalchemy as sa

from numamig import context as nm_context
from numamig import embedded
from numamig import objects
from numamig import rpc
from numamig import service
from numamig.audit import pins
from numamig.conf import CONF
from numamig.db import models
from numamig.db import queue
from numamig.objects import fields

STATUS = fields.MigrationStatus
RABBIT = 'rabbit://guest:guest@127.0.0.1:5672/'
URLS = {'fake': 'fake://', 'inproc': 'inproc://', 'rabbit': RABBIT}


class _Echo:
    target = messaging.Target(version='1.0')

    def echo(self, ctxt, value):
        return value


def bare_call_ms(url, calls=200):
    """Median and p95 (ms) of an oslo.messaging call on ``url``."""
    transport = rpc.get_transport(CONF, url=url)
    topic = f'bench-echo-{uuidutils.generate_uuid()[:8]}'
    server = rpc.get_server(transport, messaging.Target(
        topic=topic, server='echo'), [_Echo()])
    server.start()
    client = rpc.get_client(transport, messaging.Target(topic=topic))
    ctxt = nm_context.get_admin_context()
    try:
        client.prepare(timeout=30).call(ctxt, 'echo', value=0)
        times = []
        for n in range(calls):
            start = time.perf_counter()
            client.prepare(timeout=30).call(ctxt, 'echo', value=n)
            times.append((time.perf_counter() - start) * 1000)
    finally:
        server.stop()
        server.wait()
    return statistics.median(times), percentile_95(times)


def percentile_95(values):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]


def deployment(args, state_dir):
    hosts = [embedded.HostDefinition(f'host-{i:03d}', 'numa-2cell-a.xml')
             for i in range(args.hosts)]
    settings = dataclasses.replace(
        service.conductor_settings_from_conf(CONF),
        admission=queue.Limits(
            total=args.max_concurrent, per_source=args.per_host,
            per_dest=args.per_host,
            queued=max(args.burst, args.migrations) * 2),
        migration_workers=args.workers)
    names = service.RPCNames(suffix=uuidutils.generate_uuid()[:8])
    return embedded.EmbeddedDeployment(
        hosts, transport_url=URLS[args.transport], state_dir=state_dir,
        names=names, conductor_settings=settings, report_interval=10,
        sqlite_synchronous=args.sqlite_synchronous)


def create_guests(dep, count, pinned):
    specs = {'hw:cpu_policy': 'dedicated'} if pinned else {}
    guests = []
    names = sorted(dep.agents)
    for n in range(count):
        uuid = uuidutils.generate_uuid()
        guests.append(dep.api.instance_create(dep.context, objects.Instance(
            uuid=uuid, name=f'g-{uuid[:8]}', project_id='bench', vcpus=1,
            memory_mb=64, extra_specs=dict(specs)), names[n % len(names)]))
    return guests


class InFlightSampler:
    """Samples, from the records, the migrations in flight at once."""

    def __init__(self, db, interval=0.05):
        self.db = db
        self.interval = interval
        self.most = 0
        self.most_per_source = 0
        self.most_per_dest = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def _run(self):
        while not self._stop.wait(self.interval):
            with self.db.reader() as session:
                flights = session.execute(sa.select(
                    models.Migration.source_host,
                    models.Migration.dest_host).where(
                        queue.IN_FLIGHT)).all()
            self.most = max(self.most, len(flights))
            for key, index in (('most_per_source', 0),
                               ('most_per_dest', 1)):
                counts = collections.Counter(
                    f[index] for f in flights if f[index])
                if counts:
                    setattr(self, key, max(getattr(self, key),
                                           max(counts.values())))


class Ends:
    """Every end the conductor records, with when it was recorded: no
    poll of the records takes CPU from the run or sees an end late."""

    def __init__(self, dep):
        self._ended = {}
        self._changed = threading.Condition()
        dep.conductor.manager.add_end_listener(self._heard)

    @staticmethod
    def of(dep):
        """Listen to an in-process conductor; poll another's records."""
        return Ends(dep) if hasattr(dep, 'conductor') else PolledEnds(dep)

    def _heard(self, migration):
        with self._changed:
            self._ended[migration.uuid] = (migration.status,
                                           migration.get('error'),
                                           time.perf_counter())
            self._changed.notify_all()

    def wait(self, uuids, deadline):
        """{uuid: (status, error, ended at)} of ``uuids`` ended by
        ``deadline`` (time.monotonic)."""
        with self._changed:
            while not all(u in self._ended for u in uuids):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._changed.wait(left)
            return {u: self._ended[u] for u in uuids if u in self._ended}


class PolledEnds:
    """The ends of migrations a conductor in other processes records,
    read from the records with a backoff (an end is seen up to 0.5 s
    late)."""

    def __init__(self, dep):
        self.db = dep.db

    def wait(self, uuids, deadline):
        ended, delay = {}, 0.01
        while len(ended) < len(uuids) and time.monotonic() < deadline:
            with self.db.reader() as session:
                final = session.execute(sa.select(
                    models.Migration.uuid, models.Migration.status,
                    models.Migration.error).where(
                        models.Migration.uuid.in_(uuids),
                        models.Migration.status.in_(STATUS.FINAL))).all()
            now = time.perf_counter()
            for uuid, status, error in final:
                ended.setdefault(uuid, (status, error, now))
            if len(ended) < len(uuids):
                time.sleep(delay)
                delay = min(delay * 2, 0.5)
        return ended


def migrate_all(dep, guests, timeout):
    """Request every migration at once; wait for all to end."""
    ends = Ends.of(dep)
    started = time.perf_counter()
    requested = []
    barrier = threading.Barrier(min(len(guests), 50))
    lock = threading.Lock()

    def request(chunk):
        try:
            barrier.wait(30)
        except threading.BrokenBarrierError:
            pass
        for guest in chunk:
            migration = dep.api.live_migrate_instance(dep.context,
                                                      guest.uuid)
            with lock:
                requested.append((migration.uuid, time.perf_counter()))
    chunks = [guests[i::barrier.parties] for i in range(barrier.parties)]
    threads = [threading.Thread(target=request, args=(c,)) for c in chunks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    ended = {}
    errors = collections.Counter()
    at = dict(requested)
    for uuid, (status, error, when) in ends.wait(
            list(at), time.monotonic() + timeout).items():
        ended[uuid] = (status, when - at[uuid])
        if error:
            errors[error.split(' (refused')[0][:160]] += 1
    for error, count in errors.most_common(3):
        print(f"  {count} ended with: {error}")
    return requested, ended, time.perf_counter() - started


def overlapping_pins(dep):
    """pCPUs pinned by two guests in live XML, over every hypervisor."""
    count = 0
    for name, svc in dep.agents.items():
        driver = svc.manager.driver
        guests = [pins.Guest(uuid=uuid, name=gname,
                             xml=driver.get_domain_xml(uuid))
                  for uuid, gname in driver.list_guests().items()]
        findings = pins.audit_host(
            name, svc.manager.tracker.base_topology, guests)
        count += sum(1 for f in findings if f.kind == pins.SHARED_PCPU)
    return count


def overlapping_records(dep):
    """pCPUs that two instances' recorded placements pin on one host,
    with the instances: what the agents' usage recompute would refuse."""
    from numamig.db import instances as db_instances
    owners = collections.defaultdict(list)
    for record in db_instances.get_all(dep.db):
        inst = record.instance
        topology = inst.get('numa_topology')
        if not inst.host or topology is None:
            continue
        for cell in topology.cells:
            for pcpu in (cell.cpu_pinning or {}).values():
                owners[(inst.host, pcpu)].append(inst.uuid)
    return {key: uuids for key, uuids in owners.items() if len(uuids) > 1}


def report(title, requested, ended, elapsed, sampler, args):
    statuses = collections.Counter(status for status, _ in ended.values())
    latencies = [seconds * 1000 for _, seconds in ended.values()]
    lost = len(requested) - len(ended)
    print(f"\n{title}: {len(requested)} requested, "
          f"{statuses.get(STATUS.COMPLETED, 0)} completed, "
          f"statuses {dict(statuses)}, not ended {lost}")
    if latencies:
        print(f"  throughput {len(ended) / elapsed:.1f} migrations/s over "
              f"{elapsed:.1f} s; request-to-end p50 "
              f"{statistics.median(latencies):.0f} ms, p95 "
              f"{percentile_95(latencies):.0f} ms")
    print(f"  most in flight at once (sampled): {sampler.most} "
          f"(limit {args.max_concurrent}); per source "
          f"{sampler.most_per_source}, per destination "
          f"{sampler.most_per_dest} (limit {args.per_host})")
    return statuses, lost


class RecomputeOverlaps(logging.Handler):
    """Counts the agents' usage recomputes that found two guests on one
    pCPU in the records: an overlap too short-lived for the final audit
    still misleads the agent that reads it."""

    def __init__(self):
        super().__init__(level=logging.ERROR)
        self.count = 0
        logging.getLogger('numamig.compute.resource_tracker').addHandler(
            self)

    def emit(self, record):
        if 'overlaps another guest' in record.getMessage():
            self.count += 1


def _print_record_overlaps(dep, recomputes=None):
    """``recomputes``: RecomputeOverlaps of agents in this process."""
    found = overlapping_records(dep)
    meanwhile = '' if recomputes is None else \
        f", {recomputes.count} seen by recomputes meanwhile"
    print(f"  pCPUs pinned by two instances in the records: {len(found)} "
          f"at the end{meanwhile}")
    for (host, pcpu), uuids in sorted(found.items())[:5]:
        print(f"    {host} pCPU {pcpu}: {', '.join(uuids)}")


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--migrations', type=int, default=100)
    parser.add_argument('--hosts', type=int, default=20)
    parser.add_argument('--transport', choices=sorted(URLS), default='fake')
    parser.add_argument('--burst', type=int, default=0,
                        help="then request this many unpinned migrations "
                             "at once (e.g. 1000)")
    parser.add_argument('--max-concurrent', type=int, default=64)
    parser.add_argument('--per-host', type=int, default=4)
    parser.add_argument('--workers', type=int, default=8)
    parser.add_argument('--timeout', type=float, default=600)
    parser.add_argument(
        '--sqlite-synchronous', action='store_true',
        help="every SQLite commit waits for the disk (a daemon's "
             "default); the embedded tier's default does not")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    logging.basicConfig(level=logging.ERROR)
    recomputes = RecomputeOverlaps()
    url = URLS[args.transport]
    median, p95 = bare_call_ms(url)
    print(f"baseline: bare oslo.messaging call over {args.transport}: "
          f"p50 {median:.2f} ms, p95 {p95:.2f} ms")
    with tempfile.TemporaryDirectory() as state_dir, \
            deployment(args, state_dir) as dep:
        guests = create_guests(dep, args.migrations, pinned=True)
        with InFlightSampler(dep.db) as sampler:
            requested, ended, elapsed = migrate_all(dep, guests,
                                                    args.timeout)
        statuses, lost = report(
            f"{args.migrations} pinned migrations at once over "
            f"{args.hosts} hosts ({args.transport})", requested, ended,
            elapsed, sampler, args)
        overlaps = overlapping_pins(dep)
        print(f"  pCPUs pinned by two guests in live XML: {overlaps}")
        _print_record_overlaps(dep, recomputes)
        completed = statuses.get(STATUS.COMPLETED, 0)
        rate = len(ended) / elapsed if elapsed else 0
        ok = completed == len(requested) and overlaps == 0 and \
            sampler.most <= args.max_concurrent
        print(f"target: all complete, zero overlaps, >= 20 migrations/s: "
              f"{'met' if ok and rate >= 20 else 'NOT met'} "
              f"({completed}/{len(requested)}, {overlaps} overlaps, "
              f"{rate:.1f}/s)")
        if args.burst:
            burst = create_guests(dep, args.burst, pinned=False)
            with InFlightSampler(dep.db) as sampler:
                requested, ended, elapsed = migrate_all(dep, burst,
                                                        args.timeout)
            statuses, lost = report(
                f"burst of {args.burst} at once", requested, ended,
                elapsed, sampler, args)
            _print_record_overlaps(dep, recomputes)
            held = sampler.most <= args.max_concurrent and \
                sampler.most_per_source <= args.per_host and \
                sampler.most_per_dest <= args.per_host
            print(f"target: every one final, none lost, limits held: "
                  f"{'met' if lost == 0 and held else 'NOT met'}")
    rpc.cleanup()
    return 0


if __name__ == '__main__':
    sys.path.insert(0, os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    sys.exit(main())
