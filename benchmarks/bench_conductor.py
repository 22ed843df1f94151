"""The conductor's own work per migration, against the number of hosts.

    .venv/bin/python benchmarks/bench_conductor.py [--hosts 10,100,1000,10000]
        [--migrations 20] [--db-url postgresql+psycopg2://...]

For each cloud size a fresh database (SQLite in a temporary directory by
default) holds that many hosts' reports (8 cells x 8 pCPUs each) and a
conductor worker (ConductorManager with its scheduler cache) is built on
it, as at a worker's start. Then, per migration, what runs in the
conductor process is timed: the request (``live_migrate_instance``:
checks, queue) and the migration thread's part (``execute_admitted``:
report sync, scheduling, destination records, claim and ``queued``),
with the compute agents replaced by a stub that answers at once, so
that no RPC is timed. With ``--churn`` every host also stores a new
report between two migrations, half of them through another worker (the
database only): the sync then reads what changed, a cost that follows
the report rate, not the migrations.

The baseline, measured in the same run on the same database, is what a
worker did per migration before report change numbers: read and
deserialize every stored report, with each host's guests. Printed: ms
per migration (median) for both, and the growth from the smallest to the
largest cloud (target: less than 2x).
"""

import argparse
import dataclasses
import os
import statistics
import sys
import tempfile
import time
from unittest import mock

from oslo_utils import timeutils
from oslo_utils import uuidutils

from numamig import fingerprint
from numamig import objects
from numamig.conductor import manager as conductor_manager
from numamig.conductor import settings as conductor_settings
from numamig.conf import CONF
from numamig.db import api as db_api
from numamig.db import compute_nodes
from numamig.db import instances
from numamig.db import queue
from numamig.numa import constraints
from numamig.numa import fit
from numamig.scheduler import host_state
from numamig.scheduler import scheduler as nm_scheduler

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_fit  # noqa: E402  (benchmarks/, next to this script)

SPECS = {'hw:cpu_policy': 'dedicated'}
# The old full read takes seconds at 10,000 hosts: a few samples do.
OLD_SAMPLES = 3


def _report(host, topology, now):
    return objects.ComputeNodeReport(
        host=host, hypervisor_uri=f'test:///{host}', hypervisor_type='test',
        topology=topology, service_version=2,
        fingerprint=fingerprint.compute([]), reported_at=now)


class StubComputeAPI:
    """Agents that answer every check at once and claim what fits.

    ``conductor`` is set once the conductor that holds this client exists.
    """

    conductor = None

    def supports_conductor_checks(self):
        return True

    def supports_numa_live_migration(self):
        return True

    def check_can_live_migrate_source(self, ctxt, instance, request,
                                      timeout=None):
        answer = request.obj_clone()
        answer.src_supports_numa_live_migration = True
        return answer

    def check_can_live_migrate_destination(self, ctxt, instance, host,
                                           migration, limits, timeout=None,
                                           source_data=None):
        topology = self.conductor.cache.get(host).topology
        request = constraints.get_numa_request(
            instance.vcpus, instance.memory_mb, instance.extra_specs, {})
        placed = fit.fit(topology, request).topology
        placed.instance_uuid = instance.uuid
        data = objects.LiveMigrateData(
            instance_uuid=instance.uuid, source_host=instance.host,
            dest_host=host, migration_uuid=migration.uuid,
            src_supports_numa_live_migration=True,
            dst_supports_numa_live_migration=True,
            dst_numa_info=objects.NUMAMigrateInfo(cell_pins={}))
        data.migration_context = objects.MigrationContext(
            instance_uuid=instance.uuid, migration_uuid=migration.uuid,
            source_host=instance.host, dest_host=host,
            old_numa_topology=instance.numa_topology,
            new_numa_topology=placed)
        return data

    def live_migration(self, *args, **kwargs):
        """The cast: nothing to wait for."""

    def __getattr__(self, name):
        return mock.Mock(name=name)


def build_world(db, hosts, migrations):
    """``hosts`` reports and ``migrations`` pinned guests on host 0."""
    topology = bench_fit.make_host(8, 4, threads=2, memory_mb=32768,
                                   pages_2m=0)
    now = timeutils.utcnow(with_timezone=True)
    for n in range(hosts):
        compute_nodes.save_report(db, _report(f'host-{n:05d}', topology,
                                              now))
    request = constraints.get_numa_request(2, 512, SPECS, {})
    guests = []
    for _ in range(migrations):
        uuid = uuidutils.generate_uuid()
        placed = fit.fit(topology, request).topology
        placed.instance_uuid = uuid
        guests.append(instances.create(db, objects.Instance(
            uuid=uuid, name=f'g-{uuid[:8]}', project_id='bench',
            host='host-00000', vcpus=2, memory_mb=512,
            extra_specs=dict(SPECS), numa_topology=placed,
            power_state='running')).instance)
    return topology, guests


def conductor_on(db):
    cache = host_state.HostStateCache(reservation_timeout=300,
                                      service_down_time=3600)
    # The shipped settings, but admission never the bottleneck.
    settings = dataclasses.replace(
        conductor_settings.from_conf(CONF),
        admission=queue.Limits(total=10 ** 6, per_source=10 ** 6,
                               per_dest=10 ** 6, queued=10 ** 6))
    stub = StubComputeAPI()
    conductor = conductor_manager.ConductorManager(
        db, cache, nm_scheduler.Scheduler(cache), stub, settings)
    stub.conductor = conductor
    conductor.load_reports()
    return conductor


def old_sync(conductor):
    """What a worker did per migration before change numbers."""
    for report in compute_nodes.get_all(conductor.db):
        [(r.instance.project_id, r.instance.uuid)
         for r in instances.get_all(conductor.db, host=report.host)]


def others_report(db, topology, hosts, step):
    """Every host reports anew; half of them through another worker."""
    now = timeutils.utcnow(with_timezone=True)
    for n in range(step % 2, hosts, 2):
        compute_nodes.save_report(db, _report(f'host-{n:05d}', topology,
                                              now))


def measure(url, hosts, migrations, churn):
    db = db_api.Database(url)
    db.sync()
    try:
        topology, guests = build_world(db, hosts, migrations)
        conductor = conductor_on(db)
        new, old = [], []
        for step, guest in enumerate(guests):
            if churn:
                others_report(db, topology, hosts, step)
            start = time.perf_counter()
            migration = conductor.live_migrate_instance(None, guest.uuid)
            queue.admit(db, conductor.admission, 1)
            conductor.execute_admitted(migration.uuid)
            new.append((time.perf_counter() - start) * 1000)
            if step < OLD_SAMPLES:
                start = time.perf_counter()
                old_sync(conductor)
                old.append((time.perf_counter() - start) * 1000)
        return statistics.median(new), statistics.median(old)
    finally:
        db.dispose()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--hosts', default='10,100,1000,10000')
    parser.add_argument('--migrations', type=int, default=20)
    parser.add_argument('--db-url', default=None)
    parser.add_argument('--churn', action='store_true',
                        help="every host reports anew between migrations")
    args = parser.parse_args(argv)
    sizes = [int(n) for n in args.hosts.split(',')]
    print(f"{'hosts':>7} {'per migration':>14} {'old full sync alone':>20}")
    results = {}
    for hosts in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            url = args.db_url or f"sqlite:///{tmp}/bench.sqlite"
            new, old = measure(url, hosts, args.migrations, args.churn)
        results[hosts] = new
        print(f"{hosts:>7} {new:>11.1f} ms {old:>17.1f} ms")
    growth = results[sizes[-1]] / results[sizes[0]]
    print(f"target: per-migration cost grows < 2x from {sizes[0]} to "
          f"{sizes[-1]} hosts: {'met' if growth < 2 else 'NOT met'} "
          f"({growth:.2f}x)")
    return 0


if __name__ == '__main__':
    sys.exit(main())
