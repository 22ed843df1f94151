"""Measure what one live migration costs the control plane, before/after.

    .venv/bin/python benchmarks/bench_migration_trips.py [--migrations N]
        [--transport-url fake://|inproc://|rabbit://...]

First the baseline: the median and p95 of a bare oslo.messaging call
(an echo endpoint with numamig's serializer) on the same transport.
Then N emulated live migrations (one guest moved back and forth between
two embedded libvirt test-driver hosts, so the time is the control
plane's alone) in each of three modes, in the same process:

* old protocol: the protocol of before compute and conductor API 1.3,
  as a cloud capped there speaks it (the conductor's ``[upgrade_levels]
  compute = 1.2``; the agents' conductor clients treated as capped below
  1.3): the destination asks the source and records its claim, the
  source records every status and the destination applies the claim;
  the operator names the destination;
* explicit: API 1.3 and later everywhere, the operator names the
  destination;
* scheduler: the same, the conductor's scheduler chooses it.

Per mode it prints the RPC round trips and casts of one migration
(background report casts counted apart), the database transactions and
SQL statements of one migration (every service of the process, the
benchmark's own status reads aside), the median and 95th percentile
wall time from the operator's request to ``completed``, and the CPU
time of the whole process per migration. The target line: at most 8
round trips in both current modes and, over RabbitMQ, a median under
50 ms.
"""

# Services here run on oslo.service's threading backend, as in the
# daemons; it must be chosen before anything imports oslo_messaging.
from numamig import _backend

_backend.select_threading(strict=True)

import argparse
import collections
import os
import statistics
import sys
import tempfile
import threading
import time
from unittest import mock

from oslo_messaging.rpc import client as rpc_client
from oslo_utils import uuidutils
import sqlalchemy as sa

from numamig import embedded
from numamig import objects
from numamig import service
from numamig.conductor import records_rpcapi
from numamig.db import migrations
from numamig.db import models
from numamig.objects import fields

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_concurrency as concurrency  # noqa: E402

STATUS = fields.MigrationStatus
MAX_ROUND_TRIPS = 8
RABBIT_P50_TARGET_MS = 50
REPORTS = ('report_compute_node', 'migration_update_progress')
HOSTS = ('host-a', 'host-b')
DEADLINE_S = 60


# Set in a thread while it reads for the benchmark, not for numamig.
_UNCOUNTED = threading.local()


class Recorder:
    """Counts every RPC call and cast, by kind, and every database
    transaction and SQL statement, while installed."""

    def __init__(self):
        self.counts = collections.Counter()
        self._lock = threading.Lock()
        self._patches = []

    def __enter__(self):
        for kind in ('call', 'cast'):
            original = getattr(rpc_client._BaseCallContext, kind)
            self._patches.append(mock.patch.object(
                rpc_client._BaseCallContext, kind,
                self._counted(kind, original)))
        for patch in self._patches:
            patch.start()
        sa.event.listen(sa.engine.Engine, 'begin', self._began)
        sa.event.listen(sa.engine.Engine, 'before_cursor_execute',
                        self._executed)
        return self

    def __exit__(self, *exc_info):
        for patch in self._patches:
            patch.stop()
        sa.event.remove(sa.engine.Engine, 'begin', self._began)
        sa.event.remove(sa.engine.Engine, 'before_cursor_execute',
                        self._executed)

    def _began(self, conn):
        if getattr(_UNCOUNTED, 'on', False):
            return
        with self._lock:
            self.counts['transaction'] += 1

    def _executed(self, conn, cursor, statement, *args):
        # SQLite's BEGIN IMMEDIATE is a statement of numamig's own
        # (numamig.db.api); it is counted as the transaction it opens.
        if not statement.startswith('BEGIN') and \
                not getattr(_UNCOUNTED, 'on', False):
            with self._lock:
                self.counts['statement'] += 1

    def _counted(self, kind, original):
        def counted(cctxt, ctxt, method, **kwargs):
            with self._lock:
                key = 'report' if method in REPORTS else kind
                self.counts[key] += 1
            return original(cctxt, ctxt, method, **kwargs)
        return counted

    def take(self):
        with self._lock:
            counts, self.counts = self.counts, collections.Counter()
        return counts


class Mode(collections.namedtuple('Mode', 'name old_protocol scheduler')):
    """One way of asking for the migrations."""


MODES = (Mode('old protocol', True, False),
         Mode('explicit', False, False),
         Mode('scheduler', False, True))


def run_mode(mode, migrations_wanted, transport_url):
    hosts = [embedded.HostDefinition(name, 'numa-2cell-a.xml')
             for name in HOSTS]
    capped = mock.patch.object(records_rpcapi.RecordAPI,
                               'supports_short_path', lambda api: False)
    if mode.old_protocol:
        capped.start()
    try:
        with tempfile.TemporaryDirectory() as state, \
                embedded.EmbeddedDeployment(
                    hosts, transport_url=transport_url, state_dir=state,
                    # Its own topics: a shared broker may serve others.
                    names=service.RPCNames(
                        suffix=f'bench-{uuidutils.generate_uuid()[:8]}'),
                    conductor_compute_version_cap='1.2'
                    if mode.old_protocol else None) as dep:
            return _migrate_back_and_forth(dep, migrations_wanted,
                                           mode.scheduler)
    finally:
        if mode.old_protocol:
            capped.stop()


def _migrate_back_and_forth(dep, migrations_wanted, scheduler):
    api, ctxt = dep.api, dep.context
    guest = api.instance_create(ctxt, objects.Instance(
        uuid=uuidutils.generate_uuid(), name='bench', project_id='demo',
        vcpus=2, memory_mb=1024,
        extra_specs={'hw:cpu_policy': 'dedicated'}), HOSTS[0])
    times, per_migration = [], []
    with Recorder() as recorder:
        cpu_started = time.process_time()
        for index in range(migrations_wanted):
            # Two hosts: the scheduler's only choice is the other one.
            dest = None if scheduler else HOSTS[(index + 1) % 2]
            recorder.take()
            started = time.perf_counter()
            migration = api.live_migrate_instance(ctxt, guest.uuid, dest)
            _wait_completed(dep, migration)
            times.append(time.perf_counter() - started)
            per_migration.append(recorder.take())
        # Every thread of the process: conductor, agents, transport.
        cpu = (time.process_time() - cpu_started) / migrations_wanted
    per_migration[-1]['cpu_ms'] = cpu * 1000
    return times, per_migration


def _wait_completed(dep, migration):
    """Wait for ``completed``, woken by the conductor when it records
    the end; the status is read straight from the database, as polling
    over RPC would count."""
    deadline = time.monotonic() + DEADLINE_S
    ended = dep.ends.event_for(migration.uuid)
    try:
        status = migration.status
        while status not in STATUS.FINAL:
            if time.monotonic() > deadline:
                raise RuntimeError(f"migration {migration.uuid} still "
                                   f"{status} after {DEADLINE_S} s")
            ended.wait(1.0)
            status = _status(dep, migration.uuid)
    finally:
        dep.ends.forget(migration.uuid)
    if status != STATUS.COMPLETED:
        migration = migrations.get(dep.db, migration.uuid)
        raise RuntimeError(f"migration {migration.uuid} ended "
                           f"{status}: {migration.error}")


def _status(dep, migration_uuid):
    _UNCOUNTED.on = True
    try:
        with dep.db.reader() as session:
            return session.execute(
                sa.select(models.Migration.status).where(
                    models.Migration.uuid == migration_uuid)).scalar_one()
    finally:
        _UNCOUNTED.on = False


def summary(name, times, per_migration):
    def median(key):
        return statistics.median(c[key] for c in per_migration)
    cpu_ms = per_migration[-1]['cpu_ms']
    p50_ms = statistics.median(times) * 1000
    p95_ms = concurrency.percentile_95(times) * 1000
    line = (f"{name:12} {median('call'):3.0f} calls {median('cast'):2.0f} "
            f"cast(s) (+{median('report'):.0f} report casts)  p50 "
            f"{p50_ms:6.1f} ms  p95 {p95_ms:6.1f} ms  CPU {cpu_ms:5.1f} ms "
            f"per migration\n"
            f"{'':12} {median('transaction'):3.0f} database transactions, "
            f"{median('statement'):.0f} SQL statements per migration")
    return line, median('call'), p50_ms


def target_line(results, transport_url):
    """Whether the current modes meet issue 12's targets."""
    calls = max(calls for calls, _ in results)
    p50_ms = max(p50 for _, p50 in results)
    met = calls <= MAX_ROUND_TRIPS
    said = f"{calls:.0f} round trips"
    if transport_url.startswith('rabbit'):
        met = met and p50_ms < RABBIT_P50_TARGET_MS
        said += f", p50 {p50_ms:.1f} ms"
        wanted = (f"<= {MAX_ROUND_TRIPS} round trips, "
                  f"< {RABBIT_P50_TARGET_MS} ms p50 over RabbitMQ")
    else:
        wanted = (f"<= {MAX_ROUND_TRIPS} round trips (the p50 target is "
                  f"RabbitMQ's)")
    return f"target: {wanted}: {'met' if met else 'NOT met'} ({said})"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--migrations', type=int, default=20)
    parser.add_argument('--transport-url', default='fake://')
    args = parser.parse_args(argv)
    bare_p50, bare_p95 = concurrency.bare_call_ms(args.transport_url)
    lines, current = [], []
    for mode in MODES:
        times, per_migration = run_mode(mode, args.migrations,
                                        args.transport_url)
        line, calls, p50_ms = summary(mode.name, times, per_migration)
        lines.append(line)
        if not mode.old_protocol:
            current.append((calls, p50_ms))
    print(f"baseline: bare oslo.messaging call over {args.transport_url}: "
          f"p50 {bare_p50:.2f} ms, p95 {bare_p95:.2f} ms")
    print(f"{args.migrations} emulated migrations per mode over "
          f"{args.transport_url}:")
    for line in lines:
        print(line)
    print(target_line(current, args.transport_url))
    return 0


if __name__ == '__main__':
    sys.exit(main())
