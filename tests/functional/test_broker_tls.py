"""numamig over a broker that requires TLS client certificates, with one
user per service.

A RabbitMQ node of the test's own (tests/fixtures/tls_broker.py) listens
for TLS only and refuses a client without a certificate its CA signed.
The conductor, two compute agents, the test (as the operators' client)
and numamig-manage each log in as their own user, with the permissions
doc/source/deployment.rst ("Securing the broker") gives each service,
and with oslo.messaging's ``[oslo_messaging_rabbit] ssl`` options. A
guest migrates (conductor -> agents, agent -> agent and agents ->
conductor over TLS); an agent's user is refused the operators' topic
and another host's queue; numamig-manage without a certificate ends in
one line and exit code 255.
"""

import os
import re
import ssl
import subprocess
import sys
import time

import amqp
import oslo_messaging as messaging

from numamig.conf import CONF
from numamig.conf import opts as conf_opts
from tests.fixtures import rpc as rpc_fixture
from tests.fixtures import tls_broker
from tests.functional import test_multiprocess

PASSWORD = 'tls-test-password'
# numamig-manage's check of a broker that refuses it must end in this.
MANAGE_TIMEOUT = 60


def conductor_permissions():
    """(configure, write, read, topic write) of the conductor's user."""
    own = r'^(numamig|numamig-conductor(-agents)?(\..+|_fanout(_.+)?)?' \
          r'|reply_.+)$'
    return own, _replying(own), own, r'^numamig-compute\..+$'


def compute_permissions(host):
    """The same for the agent of ``host``: its own queues only."""
    own = rf'^(numamig|numamig-compute(\.{re.escape(host)}|_fanout(_.+)?)?' \
          r'|reply_.+)$'
    # The operators' topic too: an agent pings there at start to learn
    # whether the conductor serves the agents' topic (its service version).
    return own, _replying(own), own, \
        r'^(numamig-conductor(-agents)?|numamig-compute\..+)$'


def _replying(write):
    """A server replies through the default exchange (a reply queue's
    name as the routing key): it needs write on amq.default."""
    return write[:-2] + r'|amq\.default)$'


def operator_permissions():
    """The same for numamig-manage: replies, and the operators' topic
    (configure on the control exchange: every publisher declares it)."""
    return r'^(numamig|reply_.+)$', r'^(numamig|reply_.+)$', \
        r'^reply_.+$', r'^numamig-conductor$'


class TLSBrokerTest(test_multiprocess.MultiProcessTestBase):

    def rpc_fixture(self):
        self.broker = self.useFixture(tls_broker.TLSBroker(
            clients=['conductor', 'operator', *self.hosts]))
        print(f"TLS RabbitMQ node accepted TLS clients after "
              f"{self.broker.start_seconds:.1f} s")
        self.broker.add_user('conductor', PASSWORD,
                             *conductor_permissions())
        for host in self.hosts:
            self.broker.add_user(f'compute-{host}', PASSWORD,
                                 *compute_permissions(host))
        self.broker.add_user('operator', PASSWORD, *operator_permissions())
        self._client_tls('operator')
        return rpc_fixture.RPCFixture(
            'rabbit', url=self.broker.url('operator', PASSWORD),
            exchange='numamig')

    def _client_tls(self, client):
        """This process's transport logs in with ``client``'s
        certificate (the options exist once the driver's are known).

        numamig's defaults for the driver's options first: the options
        registered here are copies, and the driver registering its own
        later with other defaults would be a duplicate."""
        conf_opts.update_library_defaults()
        for group, opts in messaging.opts.list_opts():
            if group == 'oslo_messaging_rabbit':
                CONF.register_opts(opts, group=group)
        cert, key = self.broker.cert_files(client)
        self.flags(group='oslo_messaging_rabbit', ssl=True,
                   ssl_ca_file=self.broker.ca_file, ssl_cert_file=cert,
                   ssl_key_file=key)

    def config_files(self, host, caps=None):
        """The test's file, then the service's user and certificate."""
        user = f'compute-{host}' if caps else 'conductor'
        client = host if caps else 'conductor'
        return [self.write_config(host, caps),
                self._service_file(host, user, client)]

    def _service_file(self, name, user, client):
        lines = ['[DEFAULT]',
                 f'transport_url = {self.broker.url(user, PASSWORD)}',
                 *self.broker.ssl_lines(client)]
        path = os.path.join(self.dir, f'{name}-tls.conf')
        with open(path, 'w') as f:
            f.write('\n'.join(lines) + '\n')
        return path

    def manage(self, client, *argv):
        """numamig-manage as the operator, offering ``client``'s
        certificate (None: none)."""
        lines = ['[DEFAULT]',
                 f'transport_url = {self.broker.url("operator", PASSWORD)}',
                 'cli_broker_retries = 0',
                 *self.broker.ssl_lines(client)]
        path = os.path.join(self.dir, f'manage-{client}.conf')
        with open(path, 'w') as f:
            f.write('\n'.join(lines) + '\n')
        started = time.monotonic()
        run = subprocess.run(
            [os.path.join(os.path.dirname(sys.executable), 'numamig-manage'),
             '--config-file', self.write_config('operator'),
             '--config-file', path, *argv],
            capture_output=True, text=True, timeout=MANAGE_TIMEOUT)
        return run, time.monotonic() - started

    def _amqp(self, user, client):
        """A plain AMQP connection as ``user``, for what oslo.messaging
        would never try."""
        cert, key = self.broker.cert_files(client)
        conn = amqp.Connection(
            f'127.0.0.1:{self.broker.port}', userid=user, password=PASSWORD,
            virtual_host=self.broker.vhost, connect_timeout=10,
            # basic_publish waits for the broker's word (and its refusal).
            confirm_publish=True,
            ssl={'ca_certs': self.broker.ca_file, 'certfile': cert,
                 'keyfile': key, 'cert_reqs': ssl.CERT_REQUIRED})
        conn.connect()
        return conn

    def test_a_migration_over_tls_with_per_service_users(self):
        source, dest = sorted(self.hosts)
        instance = self.create(source, 'tls-guest')
        migration = self.wait_for_end(self.api.live_migrate_instance(
            self.rpc.context, instance.uuid, dest))
        self.assertEqual('completed', migration.status, migration.error)
        self.assert_placed(instance, dest)

        run, _took = self.manage('operator', 'migration', 'start',
                                 instance.uuid, '--host', source,
                                 '--dry-run')
        self.assertEqual(0, run.returncode, run.stdout + run.stderr)

        self._assert_users_are_kept_to_their_own(source, dest)
        self.stop_daemons()
        for host, _proc in self.procs:
            self.assertNotIn('ACCESS_REFUSED', self.log_of(host), host)

    def _assert_users_are_kept_to_their_own(self, host, other):
        """The operators' user cannot call an agent past the conductor;
        an agent's user cannot take another host's requests."""
        with self._amqp('operator', 'operator') as conn:
            exc = self.assertRaises(
                amqp.exceptions.AccessRefused, conn.channel().basic_publish,
                amqp.Message('{}'), exchange='numamig',
                routing_key=f'numamig-compute.{host}')
            self.assertIn(f"topic 'numamig-compute.{host}'", str(exc))
        with self._amqp(f'compute-{host}', host) as conn:
            exc = self.assertRaises(
                amqp.exceptions.AccessRefused, conn.channel().basic_consume,
                f'numamig-compute.{other}')
            self.assertIn(f"queue 'numamig-compute.{other}'", str(exc))

    def test_a_client_without_a_certificate_is_refused_in_one_line(self):
        source, _dest = sorted(self.hosts)
        instance = self.create(source, 'tls-refused')
        run, took = self.manage(None, 'migration', 'start', instance.uuid,
                                '--dry-run')
        output = run.stdout + run.stderr
        self.assertEqual(255, run.returncode, output)
        self.assertNotIn('Traceback', output)
        errors = [line for line in run.stderr.splitlines() if line]
        self.assertEqual(1, len(errors), output)
        self.assertRegex(errors[0], r'^error: The message broker rabbit://'
                                    r'operator:\*\*\*@127\.0\.0\.1:\d+/'
                                    r'\S+ refused this client: .*requires a '
                                    r'client certificate')
        self.assertNotIn(PASSWORD, output)
        print(f"numamig-manage without a certificate ended in {took:.1f} s")
        self.stop_daemons()
