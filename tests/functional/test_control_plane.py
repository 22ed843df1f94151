"""The control plane under load: admission, the queue, no pool deadlock.

Embedded deployments over fake:// and RabbitMQ with an RPC pool smaller
than the number of migrations requested at once. Before the admission
queue, every conductor RPC thread waited in live_migrate_instance for a
destination that called back into the conductor, and the requests only
ended by timing out. Hosts are 2 cells x 4 cores x 2 threads, every
pCPU dedicated; guests are pinned.
"""

import dataclasses

from oslo_messaging import opts as messaging_opts
from oslo_utils import uuidutils
import testscenarios

from numamig import embedded
from numamig import objects
from numamig import service
from numamig.conf import CONF
from numamig.db import migrations as db_migrations
from numamig.db import queue
from tests import base
from tests.fixtures import deployment
from tests.fixtures import rpc as rpc_fixture

load_tests = testscenarios.load_tests_apply_scenarios

DEDICATED = {'hw:cpu_policy': 'dedicated'}
POOL = 4
NAMES = ('host-a', 'host-b', 'host-c', 'host-d')


def _settings(admission):
    """The shipped settings, a 10 s wait for destinations, POOL
    migration threads and ``admission``."""
    return dataclasses.replace(
        service.conductor_settings_from_conf(CONF), check_timeout=10,
        migration_workers=POOL, admission=admission)


class ControlPlaneTestCase(base.TestCase):

    scenarios = rpc_fixture.TRANSPORT_SCENARIOS
    NAMES = NAMES
    ADMISSION = queue.Limits(total=64, per_source=1, per_dest=1, queued=100)

    def setUp(self):
        super().setUp()
        # Every RPC server of the deployment (conductor and agents) gets
        # this many threads.
        for group, opts in messaging_opts.list_opts():
            CONF.register_opts([o for o in opts if group is None and
                                o.name == 'executor_thread_pool_size'])
        self.flags(executor_thread_pool_size=POOL)
        hosts = [embedded.HostDefinition(name, 'numa-2cell-a.xml')
                 for name in self.NAMES]
        self.dep = self.useFixture(deployment.DeploymentFixture(
            self.transport_kind, hosts,
            conductor_settings=_settings(self.ADMISSION))).deployment
        self.api, self.ctxt = self.dep.api, self.dep.context

    def create(self, host_name):
        uuid = uuidutils.generate_uuid()
        instance = objects.Instance(
            uuid=uuid, name=f'guest-{uuid[:8]}',
            project_id='demo', vcpus=2, memory_mb=512,
            extra_specs=dict(DEDICATED))
        return self.api.instance_create(self.ctxt, instance, host_name)

    def wait_all(self, migrations, timeout=90):
        return [self.dep.wait_for_migration(m.uuid, timeout=timeout)
                for m in migrations]


class MoreRequestsThanThreadsTest(ControlPlaneTestCase):

    def test_every_migration_completes(self):
        # Three times the pool, in a ring: every host is source and
        # destination at once.
        guests = [(self.create(name), NAMES[(i + 1) % len(NAMES)])
                  for i, name in enumerate(NAMES) for _ in range(3)]
        requested = [self.api.live_migrate_instance(self.ctxt, g.uuid, dest)
                     for g, dest in guests]
        self.assertEqual({'accepted'}, {m.status for m in requested})
        ended = self.wait_all(requested)
        self.assertEqual(['completed'] * len(guests),
                         [m.status for m in ended],
                         [m.error for m in ended])
        for (guest, dest), migration in zip(guests, ended, strict=True):
            self.assertEqual(dest, migration.dest_host)
            self.assertEqual(dest, self.api.instance_get(
                self.ctxt, guest.uuid).host)


class QueueTest(ControlPlaneTestCase):

    ADMISSION = queue.Limits(total=1, per_source=4, per_dest=4, queued=3)

    def test_priority_order_abort_and_restart(self):
        guests = [self.create('host-a') for _ in range(3)]
        self.dep.conductor.executor.stop()      # nothing is admitted now
        routine, drain, maintenance = [
            self.api.live_migrate_instance(self.ctxt, g.uuid, 'host-b',
                                           priority=p)
            for g, p in zip(guests, (0, 100, 50), strict=True)]
        listed = {m.uuid: m.queue_position
                  for m in self.api.migration_get_all(self.ctxt)}
        self.assertEqual({drain.uuid: 1, maintenance.uuid: 2,
                          routine.uuid: 3}, listed)
        # A full queue refuses at once and records nothing.
        extra = self.create('host-c')
        self.assertRaisesMessage(
            base.exception.MigrationQueueFull, 'max_queued_migrations is 3',
            self.api.live_migrate_instance, self.ctxt, extra.uuid)
        # A second request for a guest already queued is refused.
        self.assertRaisesMessage(
            base.exception.InstanceBusy, 'is accepted',
            self.api.live_migrate_instance, self.ctxt, guests[0].uuid)
        self.assertEqual('cancelled', self.api.migration_abort(
            self.ctxt, maintenance.uuid).status)
        # The queue is in the database: a new conductor takes it up.
        self.dep.conductor.stop()
        self.dep.restart_conductor()
        done_drain, done_routine = self.wait_all([drain, routine])
        self.assertEqual(('completed', 'completed'),
                         (done_drain.status, done_routine.status))
        self.assertLess(self._admitted(drain), self._admitted(routine),
                        "the drain was admitted first")
        self.assertEqual(1, len(self.api.migration_get_all(
            self.ctxt, status='cancelled')))


    def _admitted(self, migration):
        # From the records: on the wire times lose their microseconds.
        return db_migrations.get(self.dep.db, migration.uuid).admitted_at


class BackAndForthTest(ControlPlaneTestCase):
    """The scheduler sends a guest back to a host it has just left."""

    NAMES = ('host-a', 'host-b')

    def test_back_before_a_report_counts_it(self):
        # Each move is over before the hosts' paced reports count it:
        # the placement reserved when the guest came must not keep it
        # from coming back.
        guest = self.create('host-a')
        for expected in ('host-b', 'host-a', 'host-b', 'host-a'):
            ended = self.dep.wait_for_migration(
                self.api.live_migrate_instance(self.ctxt, guest.uuid).uuid,
                timeout=60)
            self.assertEqual(('completed', expected),
                             (ended.status, ended.dest_host), ended.error)
