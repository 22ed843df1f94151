"""An embedded deployment: a conductor and N compute agents in one process.

The quickest way to run numamig whole: the services are the daemons'
own (numamig.service), talking over oslo.messaging (the in-process
``inproc://`` transport by default (numamig.rpc_inproc), or any broker
URL) and keeping records
in SQL (a SQLite file by default, or any database URL). Each compute
host is a libvirt test-driver host whose NUMA topology comes from a
capabilities file; migrations between such hosts are EMULATED by the
agents (the destination defines the rewritten XML, the source forgets
the guest), and say so in their logs. A host may instead name the URI
of a real libvirtd (the real tier's daemons): its topology is then the
host's own, and its guests are real QEMU guests.

    with EmbeddedDeployment([HostDefinition('host-a', caps_a),
                             HostDefinition('host-b', caps_b)]) as dep:
        instance = dep.api.instance_create(dep.context, instance, 'host-a')
        migration = dep.api.live_migrate_instance(dep.context, uuid)
        dep.wait_for_migration(migration.uuid)
"""

import dataclasses
import os
import sys
import tempfile
import threading
import time

from oslo_log import log as logging

from numamig import context as nm_context
from numamig import exception
from numamig import rpc
from numamig import service
from numamig.conf import CONF
from numamig.db import api as db_api
from numamig.objects import fields
from numamig.objects import service as service_obj
from numamig.virt.libvirt import driver as lv_driver
from numamig.virt.libvirt import settings as lv_settings

LOG = logging.getLogger(__name__)
# wait_for_migration is woken by the conductor when the migration ends;
# it looks at the records again at least this often all the same.
SAFETY_LOOK_S = 1.0


class MigrationEnds:
    """Wake the threads waiting for a migration when the conductor
    records its end (ConductorManager.add_end_listener)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._events = {}

    def heard(self, migration):
        with self._lock:
            event = self._events.get(migration.uuid)
        if event is not None:
            event.set()

    def event_for(self, migration_uuid):
        """Register before reading the status, so no end goes unheard."""
        with self._lock:
            return self._events.setdefault(migration_uuid,
                                           threading.Event())

    def forget(self, migration_uuid):
        with self._lock:
            self._events.pop(migration_uuid, None)



def _find_hosts_dir():
    """Where the shipped capabilities files are.

    In a source checkout they sit beside the package; an installed wheel
    puts its data files under the installation prefix (the virtualenv,
    or /usr/local); packagers may move them to /etc/numamig.
    """
    candidates = [
        os.path.join(os.path.dirname(__file__), '..', 'etc', 'numamig',
                     'hosts'),
        os.path.join(sys.prefix, 'etc', 'numamig', 'hosts'),
        os.path.join(sys.base_prefix, 'etc', 'numamig', 'hosts'),
        '/etc/numamig/hosts',
    ]
    for candidate in candidates:
        if os.path.isfile(os.path.join(candidate, 'test-node.xml')):
            return os.path.abspath(candidate)
    return os.path.abspath(candidates[0])


HOSTS_DIR = _find_hosts_dir()
# Every test:///<node file> open is an independent, empty test host.
TEST_NODE_FILE = os.path.join(HOSTS_DIR, 'test-node.xml')


@dataclasses.dataclass(frozen=True)
class HostDefinition:
    """One embedded compute host.

    :param capabilities_file: libvirt capabilities XML of its topology
        (a name under etc/numamig/hosts, or a path): a test-driver host.
    :param uri: instead of a capabilities file, the URI of a real
        libvirtd (``qemu+unix:///system?socket=...``): the agent drives
        it as a daemon's agent would, with the host's own capabilities,
        so what a command does reaches real QEMU guests.
    :param virt_type: its ``[libvirt] virt_type`` on a real URI (``qemu``:
        TCG, which every machine can run).
    :param service_version: the release the agent behaves as (a testing
        aid for mixed-version clouds).
    :param compute_version_cap: its ``[upgrade_levels] compute``.
    :param migration_guard: its ``[libvirt] migration_guard``: its
        emulated incoming migrations go through the guard (numamig.virt.
        libvirt.guard) as libvirt passes real ones through the hook; None:
        as CONF says. Only a host of the current release has one.
    :param migration: its MigrationSettings (the [libvirt] migration
        options: convergence policies, the modelled pre-copy of its
        emulated migrations); None: as CONF's [libvirt] options say.
    :param cpu_power: its CPU power management (numamig.compute.settings.
        CPUPowerSettings: strategy, dedicated set, sysfs root: a test
        gives each host a tree of its own); None: as CONF's [compute]
        options say.
    :param node_file: a test-driver host's node file (a name under
        etc/numamig/hosts, or a path): its node devices are the host's
        PCI functions (test-node-pci.xml has some); None: test-node.xml,
        without any.
    """

    name: str
    capabilities_file: str = None
    cpu_dedicated_set: frozenset = None
    cpu_shared_set: frozenset = None
    reserved_host_memory_mb: int = 0
    service_version: int = service_obj.SERVICE_VERSION
    compute_version_cap: str = None
    migration_guard: bool | None = None
    migration: lv_settings.MigrationSettings = None
    uri: str = None
    virt_type: str = 'qemu'
    cpu_power: object = None
    node_file: str = None

    def __post_init__(self):
        if (self.capabilities_file is None) == (self.uri is None):
            raise exception.Invalid(
                reason=f"embedded host {self.name} needs either a "
                       f"capabilities file (a test-driver host) or the URI "
                       f"of a real libvirtd, not "
                       f"{'both' if self.uri else 'neither'}")

    def caps_path(self):
        """The capabilities file's path; None for a real libvirtd."""
        if self.capabilities_file is None:
            return None
        if os.path.isabs(self.capabilities_file):
            return self.capabilities_file
        return os.path.join(HOSTS_DIR, self.capabilities_file)

    def _node_path(self):
        if self.node_file is None:
            return TEST_NODE_FILE
        if os.path.isabs(self.node_file):
            return self.node_file
        return os.path.join(HOSTS_DIR, self.node_file)

    def driver(self, state_dir=None):
        """Its driver; the guard's claims file goes in ``state_dir``."""
        # A test-driver host keeps CONF's virt_type; the rest of what
        # CONF says ([libvirt], [compute]) applies to every host.
        real = {'virt_type': self.virt_type} if self.uri else {}
        settings = dataclasses.replace(
            lv_settings.LibvirtSettings.from_conf(CONF),
            host=self.name, uri=self.uri or f'test://{self._node_path()}',
            capabilities_file=self.caps_path(), **real,
            cpu_dedicated_set=_frozen(self.cpu_dedicated_set),
            cpu_shared_set=_frozen(self.cpu_shared_set),
            reserved_host_memory_mb=self.reserved_host_memory_mb,
            migration=self.migration or lv_settings.migration_from_conf(
                CONF.libvirt),
            migration_guard=self._guard_settings(state_dir))
        return lv_driver.LibvirtDriver(settings)

    def _guard_settings(self, state_dir):
        wanted = CONF.libvirt.migration_guard \
            if self.migration_guard is None else self.migration_guard
        if not wanted or \
                self.service_version < service_obj.SERVICE_VERSION:
            return None
        directory = state_dir or tempfile.gettempdir()
        # As [libvirt] says, but no hook (the emulated migrations call
        # the guard in-process) and its claims file in the state dir.
        return dataclasses.replace(
            lv_settings.guard_from_conf(CONF.libvirt), hook_path=None,
            log_file=None, claims_file=os.path.join(
                directory, f'{self.name}-migration-guard-claims.json'))


def _frozen(cpus):
    return None if cpus is None else frozenset(cpus)


class EmbeddedDeployment:
    """Start and stop a conductor and its compute agents together.

    :param hosts: HostDefinitions, one compute agent each.
    :param transport_url: oslo.messaging URL; ``inproc://`` needs
        nothing.
    :param db_url: SQLAlchemy URL; None: a SQLite file in ``state_dir``.
    :param names: service.RPCNames (topics/exchange); give each deployment
        sharing a broker its own.
    :param conductor_settings: the conductor's ConductorSettings; None:
        built from CONF (service.conductor_settings_from_conf).
    :param report_interval: seconds between agents' periodic reports,
        reconciles and usage recomputes (the embedded tier's tests ask
        for reports when they need them, so rarely by default); the
        agents' other settings come from CONF.
    :param call_timeout: seconds operators' calls wait for the conductor.
    :param conductor_compute_version_cap: the conductor's
        ``[upgrade_levels] compute``; None: as its settings say.
    :param conductor_service_version: the release the conductor runs as
        (a testing aid for mixed-version clouds; see doc/source/upgrades.rst).
    :param sweep_interval: seconds between the conductor's looks for
        stalled migrations; None: as its settings say.
    :param sqlite_synchronous: whether a SQLite commit waits for the
        disk (numamig.db.api.SQLITE_SYNCHRONOUS). False by default: the
        embedded tier's database lives as long as its test run, so a
        commit must survive a crash of its services (the crash tests
        kill them), which NORMAL keeps, not a power cut; a daemon's
        ``[database] sqlite_synchronous`` stays True unless an operator
        says otherwise.
    """

    def __init__(self, hosts, transport_url='inproc://', db_url=None,
                 state_dir=None, names=None, conductor_settings=None,
                 report_interval=60, call_timeout=120,
                 conductor_compute_version_cap=None,
                 conductor_service_version=service_obj.SERVICE_VERSION,
                 sweep_interval=None, sqlite_synchronous=False):
        names_seen = [h.name for h in hosts]
        if len(set(names_seen)) != len(names_seen):
            raise exception.Invalid(
                reason=f"embedded host names must be unique: {names_seen}")
        self.hosts = list(hosts)
        self.transport_url = transport_url
        self.state_dir = state_dir or tempfile.mkdtemp(prefix='numamig-')
        self.db_url = db_url or \
            f"sqlite:///{os.path.join(self.state_dir, 'numamig.sqlite')}"
        self.names = names or service.RPCNames()
        settings = conductor_settings or \
            service.conductor_settings_from_conf(CONF)
        given = {'compute_version_cap': conductor_compute_version_cap,
                 'sweep_interval': sweep_interval}
        self.conductor_settings = dataclasses.replace(
            settings, **{name: value for name, value in given.items()
                         if value is not None})
        self.report_interval = report_interval
        # Each status request waits [DEFAULT] rpc_response_timeout as
        # read when it is sent (None), so that a test lowering it after
        # the start is obeyed.
        self.compute_settings = dataclasses.replace(
            service.compute_settings_from_conf(CONF),
            report_interval=report_interval,
            reconcile_interval=report_interval,
            update_resources_interval=report_interval, status_timeout=None)
        self.call_timeout = call_timeout
        self.conductor_service_version = conductor_service_version
        self.sqlite_synchronous = sqlite_synchronous
        self.context = nm_context.get_admin_context()
        self.db = None
        self.conductor = None
        self.ends = MigrationEnds()
        self.agents = {}
        self.api = None
        self._transport = None
        # The hypervisors outlive their agents (a restarted agent reuses
        # its host's).
        self._drivers = {}

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc_info):
        self.stop()

    def start(self):
        """Sync the database, start the conductor, then every agent."""
        transport = self._transport = rpc.get_transport(
            CONF, url=self.transport_url)
        self.db = db_api.Database(
            self.db_url, sqlite_synchronous=self.sqlite_synchronous)
        self.db.sync()
        self._start_conductor()
        self.api = self.names.conductor_api(transport,
                                            timeout=self.call_timeout)
        try:
            for host in self.hosts:
                self._start_agent(host, transport)
        except Exception:
            self.stop()
            raise
        LOG.info("Embedded deployment up: conductor and %d compute agents "
                 "(%s) on %s, database %s", len(self.agents),
                 ', '.join(self.agents), self.transport_url,
                 self.db.safe_url)

    def _start_conductor(self):
        self.conductor = service.ConductorService(
            self.db, self._transport, self.conductor_settings, 'conductor',
            names=self.names,
            service_version=self.conductor_service_version)
        self.conductor.manager.add_end_listener(self.ends.heard)
        self.conductor.start()

    def _start_agent(self, host, transport):
        driver = self._drivers.get(host.name)
        if driver is None:
            driver = self._drivers[host.name] = host.driver(
                self.state_dir)
        agent = service.ComputeService(
            host.name, driver, transport, dataclasses.replace(
                self.compute_settings,
                compute_version_cap=host.compute_version_cap,
                cpu_power=(host.cpu_power or
                           self.compute_settings.cpu_power)),
            names=self.names, service_version=host.service_version)
        self.agents[host.name] = agent
        agent.start()

    def stop(self):
        """Stop every agent and the conductor, side by side.

        Stopping an RPC server waits for its in-flight requests and for
        its consumers to wind down (about a second, on fake:// as on a
        real broker), so the services stop in parallel.
        """
        if self.conductor is not None:
            # Migration threads still talking to agents end first.
            self.conductor.executor.stop()
        stoppers = [threading.Thread(target=self._stop_agent, args=(agent,))
                    for agent in self.agents.values()]
        if self.conductor is not None:
            stoppers.append(threading.Thread(target=self.conductor.stop))
        for stopper in stoppers:
            stopper.start()
        for stopper in stoppers:
            stopper.join()
        self.agents = {}
        self.conductor = None
        for driver in self._drivers.values():  # hosts of crashed agents
            driver.cleanup_host()
        self._drivers = {}
        if self.db is not None:
            self.db.dispose()
            self.db = None

    def _stop_agent(self, agent):
        try:
            agent.stop()
        except Exception:
            LOG.exception("Stopping compute agent %s failed", agent.host)
        finally:
            driver = self._drivers.pop(agent.host, None)
            if driver is not None:
                driver.cleanup_host()

    # -- restarts (after a crash: tests/fixtures/crash.py) -----------------

    def restart_agent(self, name):
        """Start a new agent for host ``name`` on the same hypervisor.

        It reconciles with the records at start, as after a real crash.
        """
        (host,) = [h for h in self.hosts if h.name == name]
        self._start_agent(host, self._transport)

    def restart_conductor(self):
        """Start a new conductor on the same database."""
        self._start_conductor()

    def agent(self, name):
        """The ComputeManager of host ``name``."""
        return self.agents[name].manager

    def report_all(self):
        """Make every agent recompute its usage and report now."""
        for agent in self.agents.values():
            manager = agent.manager
            manager.reconcile_outgoing(self.context)
            manager.tracker.update_available_resource(self.context)
            manager.report(self.context)

    def wait_for_migration(self, migration_uuid, timeout=60):
        """Wait until a migration ends; return it.

        The conductor wakes the wait when it records the end, so the end
        is seen at once and a long migration costs no calls meanwhile;
        the records are read again every SAFETY_LOOK_S all the same.

        :raises MigrationError: if it has not ended within ``timeout``.
        """
        deadline = time.monotonic() + timeout
        ended = self.ends.event_for(migration_uuid)
        try:
            while True:
                migration = self.api.migration_get(self.context,
                                                   migration_uuid)
                if migration.status in fields.MigrationStatus.SETTLED:
                    return migration
                left = deadline - time.monotonic()
                if left <= 0:
                    raise exception.MigrationError(
                        reason=f"migration {migration_uuid} still "
                               f"{migration.status} after {timeout} s")
                ended.wait(min(SAFETY_LOOK_S, left))
        finally:
            self.ends.forget(migration_uuid)
