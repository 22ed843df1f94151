"""Many migrations at once through two conductor worker processes.

    .venv/bin/python benchmarks/bench_workers.py [--migrations 100]
        [--hosts 20] [--workers 2] [--timeout 600]

The concurrency run of bench_concurrency.py, deployed as an operator
deploys: one ``numamig-conductor`` daemon with ``[conductor] workers``
worker processes and one ``numamig-compute`` daemon per host (libvirt
test-driver hosts, 2 cells x 8 pCPUs), all separate processes, over this
machine's RabbitMQ (a fresh control exchange) and PostgreSQL (a fresh
database, dropped at the end). Every daemon is killed at the end, on
error too. It prints:

* the baseline: a bare oslo.messaging call over the same RabbitMQ;
* completed / failed / error, throughput and p50/p95 request-to-end;
* each conductor worker's share of the migrations it admitted (from the
  conductor's log: ``Migration X admitted``, with the worker's pid), and
  how many went back to the queue because every destination left was
  busy when its claim was asked for;
* the destinations that refused a claim (what a worker's stale cache
  costs: its scheduler chose a host another worker had just filled) and
  the migrations that needed another candidate because of it;
* the most migrations in flight at once against the admission limits;
* an audit: pCPUs pinned by two guests in the live XML of every host
  (read through the conductor) and in the records. Target: zero.
"""

# Services here run on oslo.service's threading backend, as in the
# daemons; it must be chosen before anything imports oslo_messaging.
from numamig import _backend

_backend.select_threading(strict=True)

import argparse
import collections
import contextlib
import logging
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid

import sqlalchemy as sa

from numamig import context as nm_context
from numamig import embedded
from numamig import rpc
from numamig import service
from numamig.conf import CONF
from numamig.db import api as db_api
from numamig.db import instances as db_instances
from numamig.db import models

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_concurrency as concurrency  # noqa: E402

RABBIT = concurrency.RABBIT
POSTGRESQL = os.environ.get(
    'NUMAMIG_TEST_POSTGRESQL_URL',
    'postgresql+psycopg2://postgres@127.0.0.1:5432/postgres')
START_TIMEOUT_S = 180
_PIN = re.compile(r"<vcpupin vcpu='(\d+)' cpuset='([\d,-]+)'/>")
_ADMITTED = re.compile(r'^\S+ \S+ (\d+) .*Migration (\S+) admitted')


class Deployment:
    """The daemons, their database and exchange; ``dep``-shaped for
    bench_concurrency's helpers (api, context, db, agents)."""

    def __init__(self, args, workdir, stack):
        self.args = args
        self.dir = workdir
        self.stack = stack
        tag = uuid.uuid4().hex[:8]
        self.exchange = f'bench-workers-{tag}'
        self.agents = {f'bw-{tag}-{i:02d}': 'numa-2cell-a.xml'
                       for i in range(args.hosts)}
        self.conductor_host = f'bw-{tag}-conductor'
        self.db_url = self._create_database(f'numamig_bench_{tag}')
        self.db = db_api.Database(self.db_url)
        stack.callback(self.db.dispose)
        self.db.sync()
        self.transport = rpc.get_transport(CONF, url=RABBIT)
        names = service.RPCNames(suffix=self.exchange,
                                 exchange=self.exchange)
        self.api = names.conductor_api(self.transport, timeout=60)
        self.context = nm_context.get_admin_context()
        self.procs = []
        stack.callback(self._kill_all)

    def _create_database(self, name):
        admin_url = sa.engine.make_url(POSTGRESQL)
        admin = sa.create_engine(admin_url, isolation_level='AUTOCOMMIT')
        self.stack.callback(admin.dispose)
        with admin.connect() as connection:
            connection.exec_driver_sql(f'CREATE DATABASE {name}')

        def drop():
            with admin.connect() as connection:
                connection.exec_driver_sql(
                    f'DROP DATABASE {name} WITH (FORCE)')
        self.stack.callback(drop)
        return admin_url.set(database=name).render_as_string(
            hide_password=False)

    def _config(self, host, caps=None):
        lines = ['[DEFAULT]', f'host = {host}', f'transport_url = {RABBIT}',
                 f'control_exchange = {self.exchange}',
                 f'state_path = {self.dir}', 'report_interval = 10',
                 '[database]', f'connection = {self.db_url}',
                 '[conductor]', f'workers = {self.args.workers}',
                 f'max_concurrent_migrations = {self.args.max_concurrent}',
                 f'max_outgoing_migrations_per_host = {self.args.per_host}',
                 f'max_incoming_migrations_per_host = {self.args.per_host}']
        sync_s = getattr(self.args, 'report_sync_interval', None)
        if sync_s is not None:
            lines.append(f'report_sync_interval = {sync_s}')
        if caps:
            lines += ['[libvirt]',
                      f'connection_uri = test://{embedded.TEST_NODE_FILE}',
                      'capabilities_file = '
                      f'{os.path.join(embedded.HOSTS_DIR, caps)}',
                      '[compute]', 'cpu_shared_set = 0,4,8,12',
                      'reserved_host_memory_mb = 0']
        path = os.path.join(self.dir, f'{host}.conf')
        with open(path, 'w') as handle:
            handle.write('\n'.join(lines) + '\n')
        return path

    def start(self):
        self._start('numamig-conductor', self.conductor_host)
        for host, caps in self.agents.items():
            self._start('numamig-compute', host, caps)
        self._wait_for_reports()

    def _start(self, command, host, caps=None):
        log = open(self.log_path(host), 'w')
        self.stack.callback(log.close)
        script = os.path.join(os.path.dirname(sys.executable), command)
        self.procs.append((host, subprocess.Popen(
            [script, '--config-file', self._config(host, caps)],
            stdout=log, stderr=subprocess.STDOUT)))

    def log_path(self, host):
        return os.path.join(self.dir, f'{host}.log')

    def _wait_for_reports(self):
        deadline = time.monotonic() + START_TIMEOUT_S
        probe = service.RPCNames(
            suffix=self.exchange, exchange=self.exchange).conductor_api(
                self.transport, timeout=2)
        while time.monotonic() < deadline:
            for host, proc in self.procs:
                if proc.poll() is not None:
                    raise RuntimeError(f"{host} exited {proc.returncode}; "
                                       f"see {self.log_path(host)}")
            try:
                reported = {r.host for r in
                            probe.compute_node_get_all(self.context)}
            except Exception:  # noqa: BLE001 - not listening yet
                reported = set()
            if set(self.agents) <= reported:
                return
            time.sleep(0.5)
        raise RuntimeError(f"agents did not report in {START_TIMEOUT_S} s")

    def _kill_all(self):
        for _host, proc in self.procs:
            if proc.poll() is None:
                proc.kill()
        for _host, proc in self.procs:
            proc.wait(timeout=30)


def worker_shares(dep, uuids):
    """({conductor worker pid: admissions}, migrations sent back to the
    queue because every destination was busy), from the conductor's log.
    """
    shares, requeued = collections.Counter(), 0
    with open(dep.log_path(dep.conductor_host)) as handle:
        for line in handle:
            found = _ADMITTED.search(line)
            if found and found.group(2) in uuids:
                shares[found.group(1)] += 1
            elif 'back in the queue' in line:
                requeued += 1
    return shares, requeued


def refusals(dep, uuids):
    """(refusals, migrations with one, reasons counted) from the records."""
    with dep.db.reader() as session:
        rows = session.execute(sa.select(
            models.Migration.uuid, models.Migration.refused_hosts)).all()
    total, affected, reasons = 0, 0, collections.Counter()
    for migration_uuid, refused in rows:
        if migration_uuid not in uuids or not refused:
            continue
        affected += 1
        total += len(refused)
        for reason in refused.values():
            reasons[str(reason).split(':')[0][:80]] += 1
    return total, affected, reasons


def live_overlaps(dep):
    """pCPUs pinned by two guests in the live XML, over every host."""
    owners = collections.defaultdict(set)
    for record in db_instances.get_all(dep.db):
        inst = record.instance
        if not inst.host:
            continue
        xml = dep.api.get_domain_xml(dep.context, inst.uuid)
        for _vcpu, cpuset in _PIN.findall(xml):
            for pcpu in _cpus(cpuset):
                owners[(inst.host, pcpu)].add(inst.uuid)
    return sum(1 for guests in owners.values() if len(guests) > 1)


def _cpus(cpuset):
    result = set()
    for part in cpuset.split(','):
        low, _, high = part.partition('-')
        result.update(range(int(low), int(high or low) + 1))
    return result


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--migrations', type=int, default=100)
    parser.add_argument('--hosts', type=int, default=20)
    parser.add_argument('--workers', type=int, default=2,
                        help='[conductor] workers of the conductor daemon')
    parser.add_argument('--max-concurrent', type=int, default=64)
    parser.add_argument('--per-host', type=int, default=4)
    parser.add_argument('--timeout', type=float, default=600)
    return parser.parse_args(argv)


def run(args):
    with contextlib.ExitStack() as stack:
        workdir = stack.enter_context(tempfile.TemporaryDirectory())
        dep = Deployment(args, workdir, stack)
        started = time.perf_counter()
        dep.start()
        print(f"{args.hosts} agents and a conductor with {args.workers} "
              f"worker(s) reporting after "
              f"{time.perf_counter() - started:.0f} s")
        guests = concurrency.create_guests(dep, args.migrations,
                                           pinned=True)
        with concurrency.InFlightSampler(dep.db) as sampler:
            requested, ended, elapsed = concurrency.migrate_all(
                dep, guests, args.timeout)
        statuses, _lost = concurrency.report(
            f"{args.migrations} pinned migrations at once over "
            f"{args.hosts} hosts, {args.workers} conductor workers "
            f"(RabbitMQ, PostgreSQL)", requested, ended, elapsed, sampler,
            args)
        uuids = {migration_uuid for migration_uuid, _ in requested}
        shares, requeued = worker_shares(dep, uuids)
        print(f"  admitted per conductor worker (pid: count): "
              f"{dict(sorted(shares.items()))}; back in the queue because "
              f"every destination was busy: {requeued}")
        total, affected, reasons = refusals(dep, uuids)
        print(f"  claims refused by destinations: {total}, in {affected} "
              f"migrations; reasons: {dict(reasons.most_common(3))}")
        overlaps = live_overlaps(dep)
        print(f"  pCPUs pinned by two guests in live XML: {overlaps}")
        concurrency._print_record_overlaps(dep)
        completed = statuses.get('completed', 0)
        ok = completed == len(requested) and overlaps == 0 and \
            sampler.most <= args.max_concurrent and \
            sampler.most_per_dest <= args.per_host
        print(f"target: all complete, zero overlaps, limits held: "
              f"{'met' if ok else 'NOT met'}")
        return 0 if ok else 1


def main(argv=None):
    args = parse_args(argv)
    logging.basicConfig(level=logging.ERROR)
    median, p95 = concurrency.bare_call_ms(RABBIT)
    print(f"baseline: bare oslo.messaging call over RabbitMQ: p50 "
          f"{median:.2f} ms, p95 {p95:.2f} ms")
    try:
        return run(args)
    finally:
        rpc.cleanup()


if __name__ == '__main__':
    sys.exit(main())
