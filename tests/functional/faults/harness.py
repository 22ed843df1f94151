"""A deployment to break: daemons as processes behind proxies the test holds.

One ``numamig-conductor`` and N ``numamig-compute`` daemons run as
processes started from configuration files, as an operator runs them.
What they reach goes through the test's hands:

* RabbitMQ through a Proxy (proxy.py), on a vhost of the test's own
  (created with rabbitmqctl, deleted at clean-up): the shared server is
  never stopped or paused, its connections are cut or frozen instead;
  or, with ``cluster``, a RabbitMQ cluster of the test's own
  (tests/fixtures/rabbit_cluster.py) whose nodes the test kills and
  restarts itself;
* PostgreSQL through another Proxy, on a database of the test's own;
* each compute host's hypervisor is the libvirt test driver served by a
  libvirtd of the host's own (numamig_ci.libvirt_hosts), reached as
  ``test+unix:///default?socket=...``: its guests outlive the agent's
  process, as a real host's guests outlive a killed numamig-compute.

With ``conductors`` > 1 each conductor runs in a network namespace of
its own (tests/fixtures/netns.py), a conductor host of a multi-host
deployment: it reaches RabbitMQ and PostgreSQL only through its own
pair of proxies, listening on the root end of its namespace's link, so
that taking that link down (``cut_conductor``) cuts it off from both, as
a host whose network fails, while the other conductors and the agents
go on.

The test itself talks to the broker and the database directly, so its
own requests and its world checks do not suffer the faults it makes.
Every daemon runs in a session of its own and is killed with its whole
process group; clean-ups kill everything even after a failure.
"""

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid

import fixtures
import kombu
import libvirt
from oslo_utils import uuidutils
import sqlalchemy as sa

from numamig import embedded
from numamig import objects
from numamig import rpc
from numamig import service
from numamig.db import api as db_api
from numamig.db import compute_nodes
from numamig_ci import libvirt_hosts
from tests.fixtures import database
from tests.fixtures import libvirt_daemons
from tests.fixtures import netns
from tests.fixtures import postgres_pair
from tests.fixtures import rpc as rpc_fixture
from tests.functional.faults import proxy

START_TIMEOUT_S = 90
# A directory to copy the daemons' logs into at clean-up.
KEEP_LOGS_ENV = 'NUMAMIG_FAULT_KEEP_LOGS'
RABBIT_ADDRESS = ('127.0.0.1', 5672)
# Each host: 2 cells x 8 pCPUs, 4 of them shared: 12 dedicated pCPUs.
CAPABILITIES = 'numa-2cell-a.xml'
SHARED_SET = '0,4,8,12'
# What the deployment guide tells operators of a RabbitMQ cluster to set.
QUORUM_LINES = ['[oslo_messaging_rabbit]', 'rabbit_quorum_queue = true',
                'rabbit_transient_quorum_queue = true']


def missing_requirements():
    """Why this deployment cannot run here, or None."""
    return libvirt_hosts.missing_requirements() or \
        rpc_fixture.rabbit_unreachable_reason() or \
        (None if _rabbitmqctl_works() else
         "rabbitmqctl cannot add a vhost here (not root on the broker's "
         "machine?)")


def _rabbitmqctl_works():
    try:
        return subprocess.run(['rabbitmqctl', 'list_vhosts'],
                              capture_output=True, timeout=30
                              ).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


class Daemon:
    """One daemon process: started, killed and restarted by the test."""

    def __init__(self, command, host, config, log_path, namespace=None):
        """:param namespace: a netns.Namespace to run it in (None: the
            root namespace)."""
        self.command = command
        self.host = host
        self.config = config
        self.log_path = log_path
        self.namespace = namespace
        self.proc = None
        self.starts = 0

    def start(self):
        script = os.path.join(os.path.dirname(sys.executable), self.command)
        with open(self.log_path, 'a') as log:
            log.write(f"\n=== start #{self.starts + 1} by the fault suite "
                      f"===\n")
            log.flush()
            argv = [script, '--config-file', self.config]
            if self.namespace is not None:
                argv = self.namespace.command(argv)
            self.proc = subprocess.Popen(
                argv, stdout=log,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True)
        self.starts += 1

    def kill(self):
        """SIGKILL the daemon's whole process group and reap it."""
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=30)

    def exited(self):
        """The exit code of a daemon that stopped by itself, or None."""
        return None if self.proc is None else self.proc.poll()

    def log_tail(self, size=3000):
        with open(self.log_path, errors='replace') as log:
            return log.read()[-size:]


class FaultDeployment(fixtures.Fixture):
    """The daemons, their proxies, hypervisors, vhost and database.

    :ivar api: a conductor client reaching the broker directly.
    :ivar db: numamig.db.api.Database on the test's database, direct.
    :ivar broker: the Proxy between the daemons and RabbitMQ.
    :ivar database: the Proxy between the daemons and PostgreSQL.
    :ivar conductor: the (first) conductor's Daemon; ``conductors``:
        every conductor's Daemon; ``agents``: host -> Daemon.
    :ivar links: with several conductors, conductor host -> ConductorLink
        (its namespace and the two proxies it reaches the servers by).
    :ivar hypervisors: host -> libvirt connection to its test driver.
    """

    def __init__(self, hosts=3, conductor_options=(), standby=False,
                 conductors=1, cluster=None):
        """:param standby: run the database on a primary with a streaming
            standby of the deployment's own (postgres_pair.PostgresPair,
            as ``pair``), the daemons reaching it by libpq's multi-host
            URL with target_session_attrs=read-write, as the deployment
            guide says, and not through a proxy (``database`` is None).
        :param cluster: a started rabbit_cluster.RabbitCluster: every
            daemon and the test's own client reach it by a transport_url
            listing its three nodes, with quorum queues for every queue
            (``[oslo_messaging_rabbit] rabbit_quorum_queue`` and
            ``rabbit_transient_quorum_queue``), as the deployment guide
            says, and not through a proxy (``broker`` is None): its
            faults are its nodes' own. The deployment gets a vhost of
            its own on it.
        """
        super().__init__()
        self.host_count = hosts
        self.conductor_options = tuple(conductor_options)
        self.standby = standby
        self.conductor_count = conductors
        self.cluster = cluster

    def _setUp(self):  # noqa: N802 - the fixtures API
        self.dir = self.useFixture(fixtures.TempDir()).path
        keep = os.environ.get(KEEP_LOGS_ENV)
        if keep:
            self.addCleanup(self._keep_logs, keep)
        self.tag = uuid.uuid4().hex[:8]
        self.hosts = [f'fault-{self.tag}-{i}' for i in range(self.host_count)]
        if self.cluster is not None:
            direct_url = self._direct_url = self._cluster_vhost()
            self.broker = None
            self._daemon_broker_url = direct_url
            self._quorum_queues()
        else:
            direct_url = self._direct_url = self._vhost()
            self.broker = self._proxy(RABBIT_ADDRESS, 'broker')
            self._daemon_broker_url = (f'rabbit://guest:guest@127.0.0.1:'
                                       f'{self.broker.port}/{self.vhost}')
        if self.standby:
            self._pair_database()
        else:
            self._proxied_database()
        self.rpc = self.useFixture(rpc_fixture.RPCFixture(
            'rabbit', url=direct_url, exchange=rpc.CONTROL_EXCHANGE))
        self.context = self.rpc.context
        names = service.RPCNames()
        self.api = names.conductor_api(self.rpc.transport, timeout=30)
        self._probe = names.conductor_api(self.rpc.transport, timeout=2)
        self._uris = {}
        self.hypervisors = {h: self._hypervisor(h) for h in self.hosts}
        self.links = {}
        if self.conductor_count == 1:
            self.conductors = [self._daemon('numamig-conductor',
                                            f'fault-{self.tag}')]
        else:
            self.conductors = self._conductors_on_hosts()
        self.conductor = self.conductors[0]
        self.agents = {h: self._daemon('numamig-compute', h)
                       for h in self.hosts}
        # Registered last: run first at clean-up, before the proxies,
        # database and vhost go.
        self.addCleanup(self._kill_all)
        for daemon in self.daemons():
            daemon.start()
        self.wait_for_reports()

    def _conductors_on_hosts(self):
        """One conductor per network namespace, each reaching the broker
        and the database by proxies of its own on its link's root end."""
        if self.standby:
            raise ValueError("conductors in namespaces reach the database "
                             "through a proxy: not with standby=True")
        if self.cluster is not None:
            raise ValueError("conductors in namespaces reach the broker "
                             "through a proxy: not with a cluster")
        spaces = self.useFixture(netns.Namespaces(self.conductor_count,
                                                  prefix='nm'))
        self.namespaces = spaces
        conductors = []
        for index, space in enumerate(spaces.namespaces):
            host = f'fault-{self.tag}-conductor-{index}'
            broker = self._proxy(RABBIT_ADDRESS, f'broker-{index}',
                                 listen=space.host_address)
            database_ = self._proxy(self._db_upstream, f'database-{index}',
                                    listen=space.host_address)
            self.links[host] = ConductorLink(space, broker, database_)
            conductors.append(self._daemon(
                'numamig-conductor', host, namespace=space,
                broker_url=f'rabbit://guest:guest@{space.host_address}:'
                           f'{broker.port}/{self.vhost}',
                db_url=sa.engine.make_url(self._daemon_db_url).set(
                    host=space.host_address,
                    port=database_.port).render_as_string(
                        hide_password=False)))
        return conductors

    def cut_conductor(self, daemon):
        """Take the link of ``daemon``'s namespace down: that conductor
        reaches neither the broker nor the database, nothing is reset."""
        self.namespaces.cut(self.links[daemon.host].namespace)

    def restore_conductor(self, daemon):
        self.namespaces.restore(self.links[daemon.host].namespace)

    def _proxied_database(self):
        db = self.useFixture(database.ServerDatabase('postgresql'))
        self.db = db.db
        db_url = sa.engine.make_url(db.url)
        self._db_upstream = (db_url.host or '127.0.0.1', db_url.port or 5432)
        self.database = self._proxy(self._db_upstream, 'database')
        self._daemon_db_url = db_url.set(
            host='127.0.0.1', port=self.database.port).render_as_string(
                hide_password=False)

    def _pair_database(self):
        self.pair = self.useFixture(postgres_pair.PostgresPair())
        self.database = None
        # The test's own reads and checks go by the same URL: after a
        # promotion its pool's next connections find the new primary.
        self.db = db_api.Database(self.pair.url)
        self.addCleanup(self.db.dispose)
        self.db.sync()
        self._daemon_db_url = self.pair.url

    def _vhost(self):
        self.vhost = f'numamig-faults-{self.tag}'
        _rabbitmqctl('add_vhost', self.vhost)
        self.addCleanup(_rabbitmqctl, 'delete_vhost', self.vhost)
        _rabbitmqctl('set_permissions', '-p', self.vhost, 'guest', '.*',
                     '.*', '.*')
        return (f'rabbit://guest:guest@{RABBIT_ADDRESS[0]}:'
                f'{RABBIT_ADDRESS[1]}/{self.vhost}')

    def _cluster_vhost(self):
        self.vhost = self.cluster.add_vhost(f'numamig-faults-{self.tag}')
        self.addCleanup(self.cluster.delete_vhost, self.vhost)
        return self.cluster.url_for(self.vhost)

    def _quorum_queues(self):
        """The test's own client declares queues as the daemons do:
        RabbitMQ refuses a queue declared again with another type."""
        from oslo_config import fixture as config_fixture
        from oslo_messaging._drivers import impl_rabbit

        from numamig.conf import CONF
        CONF.register_opts(impl_rabbit.rabbit_opts,
                           group='oslo_messaging_rabbit')
        config = self.useFixture(config_fixture.Config(CONF))
        config.config(group='oslo_messaging_rabbit',
                      rabbit_quorum_queue=True,
                      rabbit_transient_quorum_queue=True)

    def _proxy(self, upstream, name, listen='127.0.0.1'):
        found = proxy.Proxy(upstream, name, listen=listen)
        self.addCleanup(found.close)
        return found

    def _hypervisor(self, host):
        """Start the host's libvirtd; return a connection to its test
        driver, emptied of the driver's built-in example guest."""
        daemon = self.useFixture(libvirt_daemons.LibvirtDaemon(
            host, os.path.join(self.dir, 'libvirt')))
        uri = f'test+unix:///default?socket={daemon.socket_path}'
        conn = libvirt.open(uri)
        self.addCleanup(conn.close)
        for dom in conn.listAllDomains():
            if dom.isActive():
                dom.destroy()
            dom.undefine()
        self._uris[host] = uri
        return conn

    def _daemon(self, command, host, namespace=None, broker_url=None,
                db_url=None):
        lines = ['[DEFAULT]', f'host = {host}',
                 f'transport_url = {broker_url or self._daemon_broker_url}',
                 f'state_path = {self.dir}', 'report_interval = 2',
                 '[database]',
                 f'connection = {db_url or self._daemon_db_url}',
                 '[conductor]', 'workers = 1', *self.conductor_options]
        if self.cluster is not None:
            lines += QUORUM_LINES
        if command == 'numamig-compute':
            lines += ['[libvirt]', f'connection_uri = {self._uris[host]}',
                      'capabilities_file = ' + os.path.join(
                          embedded.HOSTS_DIR, CAPABILITIES),
                      '[compute]', f'cpu_shared_set = {SHARED_SET}',
                      'reserved_host_memory_mb = 0']
        config = os.path.join(self.dir, f'{host}.conf')
        with open(config, 'w') as handle:
            handle.write('\n'.join(lines) + '\n')
        return Daemon(command, host, config,
                      os.path.join(self.dir, f'{host}.log'),
                      namespace=namespace)

    def manage(self, *argv, timeout=90):
        """Run ``numamig-manage`` as an operator's shell would, with a
        configuration of its own reaching the daemons' broker and
        database; returns the CompletedProcess (text)."""
        config = os.path.join(self.dir, 'manage.conf')
        if not os.path.exists(config):
            lines = ['[DEFAULT]', f'transport_url = {self._daemon_broker_url}',
                     '[database]', f'connection = {self._daemon_db_url}']
            if self.cluster is not None:
                lines += QUORUM_LINES
            with open(config, 'w') as handle:
                handle.write('\n'.join(lines) + '\n')
        script = os.path.join(os.path.dirname(sys.executable),
                              'numamig-manage')
        return subprocess.run([script, '--config-file', config, *argv],
                              capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)

    def _keep_logs(self, where):
        os.makedirs(where, exist_ok=True)
        for daemon in self.daemons():
            shutil.copy(daemon.log_path, where)

    def daemons(self):
        return [*self.conductors, *self.agents.values()]

    def _kill_all(self):
        for daemon in self.daemons():
            daemon.kill()

    def wait_for_reports(self, timeout=START_TIMEOUT_S):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.check_alive()
            try:
                reported = {r.host for r in self._probe.compute_node_get_all(
                    self.context)}
            except Exception:  # noqa: BLE001 - not listening yet
                reported = set()
            if set(self.hosts) <= reported:
                return
            time.sleep(0.5)
        raise AssertionError(f"compute agents did not report within "
                             f"{timeout} s:\n{self.logs()}")

    def check_alive(self):
        """Fail if a daemon stopped by itself (the suite kills none
        without restarting it)."""
        for daemon in self.daemons():
            code = daemon.exited()
            if code is not None:
                raise AssertionError(
                    f"{daemon.host} ({daemon.command}) exited with {code}:"
                    f"\n{daemon.log_tail()}")

    def logs(self, size=2000):
        return '\n'.join(f"--- {d.host}:\n{d.log_tail(size)}"
                         for d in self.daemons())

    def restart(self, daemon):
        """SIGKILL a daemon and start it again at once."""
        daemon.kill()
        daemon.start()

    def create_guests(self, per_host, vcpus=2):
        """Create ``per_host`` pinned guests (``vcpus`` dedicated vCPUs)
        on every host; returns their uuids."""
        created = []
        for host in self.hosts:
            for index in range(per_host):
                instance = self.api.instance_create(
                    self.context, objects.Instance(
                        uuid=uuidutils.generate_uuid(),
                        name=f'{host}-guest-{index}', project_id='demo',
                        vcpus=vcpus, memory_mb=1024,
                        extra_specs={'hw:cpu_policy': 'dedicated'}), host)
                created.append(instance.uuid)
        return created

    def reports(self):
        return compute_nodes.get_all(self.db)

    def forget_transient_broker_state(self):
        """Do to the vhost what a RabbitMQ node's restart does: close
        every connection (the test's own too: its client reconnects and
        declares again, as a real client would) and delete the
        non-durable queues, with every message in them, and exchanges.

        :returns: how many queues and exchanges went.
        """
        _rabbitmqctl('close_all_connections', '--vhost', self.vhost,
                     '--limit', '1000', 'a broker restart (fault suite)')
        queues = [name for name, durable in _rabbitmq_rows(
            self.vhost, 'list_queues', 'name', 'durable')
            if durable == 'false']
        exchanges = [name for name, durable in _rabbitmq_rows(
            self.vhost, 'list_exchanges', 'name', 'durable')
            if durable == 'false' and name and not name.startswith('amq.')]
        with kombu.Connection(
                self._direct_url.replace("rabbit://", "amqp://", 1)) as conn:
            channel = conn.channel()
            for name in queues:
                _quietly_delete(channel.queue_delete, name)
            for name in exchanges:
                _quietly_delete(channel.exchange_delete, name)
        # A restarted node accepts no connection before its queues are
        # gone; here the test's own client (not behind the cut proxy)
        # may have reconnected and declared its reply queue again
        # between the first close and the deletions, and be left
        # consuming from nothing. Closed again, it declares them anew,
        # as after a real restart.
        _rabbitmqctl('close_all_connections', '--vhost', self.vhost,
                     '--limit', '1000', 'a broker restart (fault suite)')
        return len(queues) + len(exchanges)


class ConductorLink:
    """A conductor host's network: its namespace and the proxies (on
    the namespace link's root end) it reaches RabbitMQ and PostgreSQL
    by."""

    def __init__(self, namespace, broker, database):
        self.namespace = namespace
        self.broker = broker
        self.database = database


def _rabbitmqctl(*args):
    return subprocess.run(['rabbitmqctl', *args], check=True,
                          capture_output=True, timeout=60, text=True)


def _rabbitmq_rows(vhost, command, *columns):
    """The rows (lists of column values) rabbitmqctl ``command`` lists."""
    out = _rabbitmqctl('-q', command, '-p', vhost, '--no-table-headers',
                       *columns).stdout
    return [line.split('\t') for line in out.splitlines() if line.strip()]


def _quietly_delete(action, name):
    """Delete a queue or exchange that may have gone meanwhile."""
    try:
        action(name)
    except Exception:  # noqa: BLE001 - gone already: what was wanted
        pass
