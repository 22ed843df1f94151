"""numamig-conductor and two numamig-compute daemons as real processes.

Over the RabbitMQ and PostgreSQL servers of this machine: the daemons are
started from configuration files as an operator would, one pinned guest
is created and live-migrated between the two (test-driver) hosts, the
outcome is checked in the database and in the destination's domain XML
(read through the conductor, since a test-driver host lives inside its
agent's process), and every daemon must stop cleanly on SIGTERM. With
``[conductor] workers = 2`` two concurrent migrations are served by two
conductor worker processes sharing the database.
"""

import os
import signal
import subprocess
import sys
import threading
import time
import uuid

import fixtures
from oslo_utils import uuidutils

from numamig import embedded
from numamig import objects
from numamig import rpc
from numamig import service
from numamig.db import instances
from tests import base
from tests.fixtures import database
from tests.fixtures import rpc as rpc_fixture

START_TIMEOUT = 60


class MultiProcessTestBase(base.TestCase):
    """A conductor and two compute agents as processes; no test here."""

    # [conductor] workers of the conductor daemon.
    WORKERS = 1

    def setUp(self):
        super().setUp()
        database.server_or_skip(self, 'postgresql')
        self.dir = self.useFixture(fixtures.TempDir()).path
        tag = uuid.uuid4().hex[:8]
        self.hosts = {f'mp-a-{tag}': 'numa-2cell-a.xml',
                      f'mp-b-{tag}': 'numa-2cell-b.xml'}
        self.rpc = self.useFixture(self.rpc_fixture())
        self.db = self.useFixture(database.ServerDatabase('postgresql'))
        # The daemons run on this test's exchange, so their topics carry
        # its name (service.RPCNames.from_conf), unless it is numamig's.
        self.names = service.RPCNames() \
            if self.rpc.exchange == rpc.CONTROL_EXCHANGE else \
            service.RPCNames(suffix=self.rpc.exchange,
                             exchange=self.rpc.exchange)
        self.rpc._queues.update(
            {self.names.conductor_topic, self.names.compute_topic,
             f'{self.names.conductor_topic}.mp-{tag}'} |
            {f'{self.names.compute_topic}.{h}' for h in self.hosts})
        self.procs = []
        self.conductor_host = f'mp-{tag}'
        self.start_daemon('numamig-conductor', self.conductor_host)
        for name, caps in self.hosts.items():
            self.start_daemon('numamig-compute', name, caps)
        self.api = self.names.conductor_api(self.rpc.transport, timeout=30)
        self.probe = self.names.conductor_api(self.rpc.transport, timeout=2)
        self.wait_for_reports()

    def rpc_fixture(self):
        """The broker the daemons and the test use (set up after the
        test's directory and host names exist)."""
        return rpc_fixture.RPCFixture('rabbit')

    def write_config(self, host, caps=None):
        lines = ['[DEFAULT]', f'host = {host}',
                 f'transport_url = {self.rpc.url}',
                 f'control_exchange = {self.rpc.exchange}',
                 f'state_path = {self.dir}', 'report_interval = 2',
                 '[database]', f'connection = {self.db.url}',
                 '[conductor]', f'workers = {self.WORKERS}']
        if caps:
            lines += ['[libvirt]',
                      f'connection_uri = test://{embedded.TEST_NODE_FILE}',
                      f'capabilities_file = '
                      f'{os.path.join(embedded.HOSTS_DIR, caps)}',
                      '[compute]', 'cpu_shared_set = 0,4,8,12',
                      'reserved_host_memory_mb = 0']
        path = os.path.join(self.dir, f'{host}.conf')
        with open(path, 'w') as f:
            f.write('\n'.join(lines) + '\n')
        return path

    def config_files(self, host, caps=None):
        """The --config-file arguments of a daemon, in order."""
        return [self.write_config(host, caps)]

    def start_daemon(self, command, host, caps=None):
        log = open(os.path.join(self.dir, f'{host}.log'), 'w')
        self.addCleanup(log.close)
        script = os.path.join(os.path.dirname(sys.executable), command)
        argv = [script]
        for path in self.config_files(host, caps):
            argv += ['--config-file', path]
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        self.procs.append((host, proc))
        self.addCleanup(self._kill, proc)

    @staticmethod
    def _kill(proc):
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    def log_of(self, host):
        with open(os.path.join(self.dir, f'{host}.log')) as f:
            return f.read()

    def wait_for_reports(self):
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            for host, proc in self.procs:
                if proc.poll() is not None:
                    self.fail(f"{host} exited with {proc.returncode}:\n"
                              f"{self.log_of(host)[-3000:]}")
            try:
                reported = {r.host for r in self.probe.compute_node_get_all(
                    self.rpc.context)}
            except Exception:  # the conductor may not listen yet
                reported = set()
            if set(self.hosts) <= reported:
                return
            time.sleep(0.5)
        logs = '\n'.join(f"--- {h}:\n{self.log_of(h)[-2000:]}"
                         for h, _ in self.procs)
        self.fail(f"compute agents did not report within {START_TIMEOUT} "
                  f"s:\n{logs}")

    def create(self, host, name):
        return self.api.instance_create(self.rpc.context, objects.Instance(
            uuid=uuidutils.generate_uuid(), name=name,
            project_id='demo', vcpus=2, memory_mb=1024,
            extra_specs={'hw:cpu_policy': 'dedicated'}), host)

    def wait_for_end(self, migration):
        deadline = time.monotonic() + 60
        while migration.status not in ('completed', 'failed', 'error',
                                       'cancelled'):
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.2)
            migration = self.api.migration_get(self.rpc.context,
                                               migration.uuid)
        return migration

    def assert_placed(self, instance, dest):
        record = instances.get(self.db.db, instance.uuid).instance
        self.assertEqual(dest, record.host)
        self.assertIsNone(record.migration_context)
        xml = self.api.get_domain_xml(self.rpc.context, instance.uuid)
        for vcpu, pcpu in record.numa_topology.cpu_pinning.items():
            self.assertIn(f"<vcpupin vcpu='{vcpu}' cpuset='{pcpu}'/>", xml)
        return record

    def stop_daemons(self):
        """SIGTERM every daemon: each exits 0 after a graceful stop
        (oslo.service's words in one process, cotyledon's with workers).
        """
        for host, proc in reversed(self.procs):
            proc.send_signal(signal.SIGTERM)
            self.assertEqual(0, proc.wait(timeout=30),
                             self.log_of(host)[-3000:])
            self.assertRegex(self.log_of(host),
                             r'Graceful shutdown|graceful exiting')


class MultiProcessTest(MultiProcessTestBase):

    def test_one_migration_end_to_end(self):
        source, dest = sorted(self.hosts)
        instance = self.create(source, 'mp-guest')
        migration = self.wait_for_end(self.api.live_migrate_instance(
            self.rpc.context, instance.uuid, dest))
        self.assertEqual('completed', migration.status, migration.error)
        self.assert_placed(instance, dest)
        self.stop_daemons()


class MultiWorkerConductorTest(MultiProcessTestBase):
    """Two conductor worker processes sharing the broker and PostgreSQL."""

    WORKERS = 2

    def test_two_concurrent_migrations_stay_consistent(self):
        source, dest = sorted(self.hosts)
        guests = [self.create(source, f'mw-guest-{i}') for i in range(2)]
        started = [None, None]

        def start(index):
            started[index] = self.api.live_migrate_instance(
                self.rpc.context, guests[index].uuid, dest)
        threads = [threading.Thread(target=start, args=(i,))
                   for i in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        ended = [self.wait_for_end(m) for m in started]
        self.assertEqual(['completed'] * 2, [m.status for m in ended],
                         [m.error for m in ended])
        pins = [set(self.assert_placed(g, dest).numa_topology
                    .cpu_pinning.values()) for g in guests]
        self.assertEqual(set(), pins[0] & pins[1])
        for migration in ended:
            history = [c.status for c in migration.history]
            # Conductor API 1.3: the claim is recorded with 'queued', the
            # result and the applied claim with 'completed'.
            self.assertEqual(['accepted', 'queued', 'running', 'completed'],
                             history)
        workers = {line.split()[2] for line in
                   self.log_of(self.conductor_host).splitlines()
                   if 'numamig.service' in line and 'started' in line}
        self.assertEqual(2, len(workers), "conductor worker processes")
        self.stop_daemons()


class QuorumQueuesTest(MultiWorkerConductorTest):
    """The same, with every queue a quorum queue, as OpenStack
    deployments on RabbitMQ clusters configure it
    (``[oslo_messaging_rabbit] rabbit_quorum_queue``): numamig's
    topics, fanouts and reply queues all work on them."""

    QUORUM = ('[oslo_messaging_rabbit]\n'
              'rabbit_quorum_queue = true\n'
              'rabbit_transient_quorum_queue = true\n')

    def rpc_fixture(self):
        # The test's own client declares the queues it sends to with the
        # daemons' arguments (RabbitMQ refuses a queue declared twice
        # with different types).
        from oslo_messaging._drivers import impl_rabbit

        from numamig.conf import CONF
        CONF.register_opts(impl_rabbit.rabbit_opts,
                           group='oslo_messaging_rabbit')
        self.flags(group='oslo_messaging_rabbit', rabbit_quorum_queue=True,
                   rabbit_transient_quorum_queue=True)
        return super().rpc_fixture()

    def write_config(self, host, caps=None):
        path = super().write_config(host, caps)
        with open(path, 'a') as f:
            f.write(self.QUORUM)
        return path

    def test_two_concurrent_migrations_stay_consistent(self):
        super().test_two_concurrent_migrations_stay_consistent()
        queues = subprocess.run(
            ['rabbitmqctl', '-q', 'list_queues', 'name', 'type'],
            capture_output=True, text=True, timeout=30).stdout
        conductor = [line.split() for line in queues.splitlines()
                     if line.startswith(self.names.conductor_topic)]
        self.assertTrue(conductor, queues)
        self.assertEqual({'quorum'}, {parts[1] for parts in conductor})
