"""Measure what one live migration costs the control plane, before/after.

    .venv/bin/python benchmarks/bench_migration_trips.py [--migrations N]
        [--transport-url fake://]

Runs N emulated live migrations (one guest moved back and forth between
two embedded libvirt test-driver hosts, so the time is the control
plane's alone) twice in the same process:

* baseline: the protocol of before compute and conductor API 1.3, as a
  cloud capped there speaks it (the conductor's ``[upgrade_levels]
  compute = 1.2``; the agents' conductor clients treated as capped below
  1.3): the destination asks the source and records its claim, the
  source records every status and the destination applies the claim;
* current: API 1.3 everywhere.

Per mode it prints the RPC round trips and casts of one migration
(background report casts counted apart), the database transactions and
SQL statements of one migration (every service of the process, the
benchmark's own status reads aside), the median and 90th percentile
wall time from the operator's request to ``completed``, and the CPU
time of the whole process per migration.
"""

# Services here run on oslo.service's threading backend, as in the
# daemons; it must be chosen before anything imports oslo_messaging.
from numamig import _backend

_backend.select_threading(strict=True)

import argparse
import collections
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
from numamig.conductor import rpcapi as conductor_rpcapi
from numamig.db import migrations
from numamig.db import models
from numamig.objects import fields

STATUS = fields.MigrationStatus
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


def run_mode(baseline, migrations_wanted, transport_url):
    hosts = [embedded.HostDefinition(name, 'numa-2cell-a.xml')
             for name in HOSTS]
    capped = mock.patch.object(conductor_rpcapi.ConductorAPI,
                               'supports_short_path', lambda api: False)
    if baseline:
        capped.start()
    try:
        with tempfile.TemporaryDirectory() as state, \
                embedded.EmbeddedDeployment(
                    hosts, transport_url=transport_url, state_dir=state,
                    # Its own topics: a shared broker may serve others.
                    names=service.RPCNames(
                        suffix=f'bench-{uuidutils.generate_uuid()[:8]}'),
                    conductor_compute_version_cap='1.2' if baseline
                    else None) as dep:
            return _migrate_back_and_forth(dep, migrations_wanted)
    finally:
        if baseline:
            capped.stop()


def _migrate_back_and_forth(dep, migrations_wanted):
    api, ctxt = dep.api, dep.context
    guest = api.instance_create(ctxt, objects.Instance(
        uuid=uuidutils.generate_uuid(), name='bench', project_id='demo',
        vcpus=2, memory_mb=1024,
        extra_specs={'hw:cpu_policy': 'dedicated'}), HOSTS[0])
    times, per_migration = [], []
    with Recorder() as recorder:
        cpu_started = time.process_time()
        for index in range(migrations_wanted):
            dest = HOSTS[(index + 1) % 2]
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
    ordered = sorted(times)
    p90 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))]
    return (f"{name:9} {median('call'):5.0f} calls {median('cast'):3.0f} "
            f"cast(s) (+{median('report'):.0f} report casts)  median "
            f"{statistics.median(times) * 1000:6.1f} ms  p90 "
            f"{p90 * 1000:6.1f} ms  CPU {cpu_ms:5.1f} ms per migration\n"
            f"{'':9} {median('transaction'):5.0f} database transactions, "
            f"{median('statement'):.0f} SQL statements per migration")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--migrations', type=int, default=20)
    parser.add_argument('--transport-url', default='fake://')
    args = parser.parse_args(argv)
    lines = []
    for name, baseline in (('baseline', True), ('current', False)):
        times, per_migration = run_mode(baseline, args.migrations,
                                        args.transport_url)
        lines.append(summary(name, times, per_migration))
    print(f"{args.migrations} emulated migrations per mode over "
          f"{args.transport_url}:")
    for line in lines:
        print(line)
    return 0


if __name__ == '__main__':
    sys.exit(main())
