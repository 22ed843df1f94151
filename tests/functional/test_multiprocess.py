"""numamig-conductor and two numamig-compute daemons as real processes.

Over the RabbitMQ and PostgreSQL servers of this machine: the daemons are
started from configuration files as an operator would, one pinned guest
is created and live-migrated between the two (test-driver) hosts, the
outcome is checked in the database and in the destination's domain XML
(read through the conductor, since a test-driver host lives inside its
agent's process), and every daemon must stop cleanly on SIGTERM.
"""

import os
import signal
import subprocess
import sys
import time
import uuid

import fixtures
from oslo_utils import uuidutils

from numamig import embedded
from numamig import objects
from numamig import service
from numamig.db import instances
from tests import base
from tests.fixtures import database
from tests.fixtures import rpc as rpc_fixture

START_TIMEOUT = 60


class MultiProcessTest(base.TestCase):

    def setUp(self):
        super().setUp()
        database.server_or_skip(self, 'postgresql')
        self.rpc = self.useFixture(rpc_fixture.RPCFixture('rabbit'))
        self.db = self.useFixture(database.ServerDatabase('postgresql'))
        self.dir = self.useFixture(fixtures.TempDir()).path
        tag = uuid.uuid4().hex[:8]
        self.hosts = {f'mp-a-{tag}': 'numa-2cell-a.xml',
                      f'mp-b-{tag}': 'numa-2cell-b.xml'}
        # The daemons run on this test's exchange, so their topics carry
        # its name (service.RPCNames.from_conf).
        self.names = service.RPCNames(suffix=self.rpc.exchange,
                                      exchange=self.rpc.exchange)
        self.rpc._queues.update(
            {self.names.conductor_topic, self.names.compute_topic,
             f'{self.names.conductor_topic}.mp-{tag}'} |
            {f'{self.names.compute_topic}.{h}' for h in self.hosts})
        self.procs = []
        self.start_daemon('numamig-conductor', f'mp-{tag}')
        for name, caps in self.hosts.items():
            self.start_daemon('numamig-compute', name, caps)
        self.api = self.names.conductor_api(self.rpc.transport, timeout=30)
        self.probe = self.names.conductor_api(self.rpc.transport, timeout=2)
        self.wait_for_reports()

    def write_config(self, host, caps=None):
        lines = ['[DEFAULT]', f'host = {host}',
                 f'transport_url = {self.rpc.url}',
                 f'control_exchange = {self.rpc.exchange}',
                 f'state_path = {self.dir}', 'report_interval = 2',
                 '[database]', f'connection = {self.db.url}']
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

    def start_daemon(self, command, host, caps=None):
        log = open(os.path.join(self.dir, f'{host}.log'), 'w')
        self.addCleanup(log.close)
        script = os.path.join(os.path.dirname(sys.executable), command)
        proc = subprocess.Popen(
            [script, '--config-file', self.write_config(host, caps)],
            stdout=log, stderr=subprocess.STDOUT)
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

    def test_one_migration_end_to_end(self):
        source, dest = sorted(self.hosts)
        ctxt = self.rpc.context
        instance = self.api.instance_create(ctxt, objects.Instance(
            uuid=uuidutils.generate_uuid(), name='mp-guest',
            project_id='demo', vcpus=2, memory_mb=1024,
            extra_specs={'hw:cpu_policy': 'dedicated'}), source)
        migration = self.api.live_migrate_instance(ctxt, instance.uuid, dest)
        deadline = time.monotonic() + 60
        while migration.status not in ('completed', 'failed', 'error',
                                       'cancelled'):
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.2)
            migration = self.api.migration_get(ctxt, migration.uuid)
        self.assertEqual('completed', migration.status, migration.error)

        record = instances.get(self.db.db, instance.uuid).instance
        self.assertEqual(dest, record.host)
        self.assertIsNone(record.migration_context)
        xml = self.api.get_domain_xml(ctxt, instance.uuid)
        for vcpu, pcpu in record.numa_topology.cpu_pinning.items():
            self.assertIn(f"<vcpupin vcpu='{vcpu}' cpuset='{pcpu}'/>", xml)

        for host, proc in reversed(self.procs):
            proc.send_signal(signal.SIGTERM)
            self.assertEqual(0, proc.wait(timeout=30),
                             self.log_of(host)[-3000:])
            self.assertIn('Graceful shutdown', self.log_of(host))
