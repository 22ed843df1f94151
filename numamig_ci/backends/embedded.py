"""--embedded: a conductor and three test-driver hosts in this process.

The hosts have multi-cell SMT topologies with huge page pools
(etc/numamig/hosts) and DIFFERENT shared sets, so a migration that
copied the source XML would put floating vCPUs and emulator threads on
the wrong pCPUs::

    host-a  2 nodes x 4 cores x 2 threads, shared 0,4,8,12
    host-b  2 nodes x 4 cores x 2 threads, shared 1,4,9,12
    host-c  4 nodes x 4 cores x 2 threads, shared 1,5,9,13,17,21,25,29

Node 1 of host-a and host-b is alike on purpose (node 0 keeps 512 MiB
for the host, so a first guest lands on node 1): it gets the same pins on
both, which a copied XML would then double-book. Migrations
between test-driver hosts are emulated by numamig's agents (define on
the destination, forget on the source), as the embedded tier does.
"""

import contextlib
import shutil
import tempfile
import threading

from oslo_utils import uuidutils

from numamig import embedded
from numamig import exception
from numamig import service
from numamig.conf import CONF
from numamig_ci import broker
from numamig_ci.backends import base

ALL_2CELL = frozenset(range(16))
ALL_4CELL = frozenset(range(32))
SHARED = {
    'host-a': frozenset({0, 4, 8, 12}),
    'host-b': frozenset({1, 9, 4, 12}),
    'host-c': frozenset({1, 5, 9, 13, 17, 21, 25, 29}),
}
HOSTS = (
    ('host-a', 'numa-2cell-a.xml', ALL_2CELL),
    ('host-b', 'numa-2cell-b.xml', ALL_2CELL),
    ('host-c', 'numa-4cell.xml', ALL_4CELL),
)


def host_definitions():
    """The HostDefinitions of the embedded hosts."""
    return [embedded.HostDefinition(
        name, caps, cpu_dedicated_set=every - SHARED[name],
        cpu_shared_set=SHARED[name], reserved_host_memory_mb=512)
        for name, caps, every in HOSTS]


class EmbeddedBackend(base.Backend):
    """numamig.embedded's deployment, with in-process failure injection.

    :param transport_url: ``inproc://`` (default, needs nothing) or a
        broker URL (each run uses its own topics there).
    """

    name = 'embedded'
    features = frozenset({'multi_node', 'huge_pages', 'smt',
                          'inject_failure', 'hold_migration'})
    guest_memory_mb = 1024
    migration_timeout_s = 60

    def __init__(self, transport_url='inproc://'):
        super().__init__()
        self.transport_url = transport_url
        self.deployment = None
        self._state_dir = None
        self._names = None

    def start(self):
        self._state_dir = tempfile.mkdtemp(prefix='numamig-ci-')
        self._names = service.RPCNames(
            suffix=f"ci-{uuidutils.generate_uuid()[:8]}")
        definitions = host_definitions()
        self.deployment = embedded.EmbeddedDeployment(
            definitions, transport_url=self.transport_url,
            state_dir=self._state_dir,
            names=self._names,
            report_interval=3600, call_timeout=60)
        self.deployment.start()
        self.api = self.deployment.api
        self.context = self.deployment.context
        for definition in definitions:
            with open(definition.caps_path()) as f:
                self.hosts[definition.name] = base.host_config(
                    definition.name, f.read(),
                    definition.cpu_dedicated_set,
                    definition.cpu_shared_set)

    def stop(self):
        if self.deployment is not None:
            self.deployment.stop()
            broker.delete_queues(self.transport_url, self._names,
                                 ['conductor'] + list(self.hosts))
            self.deployment = None
        if self._state_dir:
            shutil.rmtree(self._state_dir, ignore_errors=True)
            self._state_dir = None

    def probe(self, host):
        return self.deployment.agent(host).driver

    def database(self):
        return self.deployment.db

    def refresh(self):
        self.deployment.report_all()

    @contextlib.contextmanager
    def inject_failure(self, host):
        """Make ``host``'s driver refuse to define incoming guests."""
        driver = self.probe(host)

        def refuse(instance_uuid, dest_xml):
            raise exception.HypervisorError(
                host=host, action=f"define incoming guest {instance_uuid}",
                reason="failure injected by numamig-ci")
        driver.accept_emulated_migration = refuse
        try:
            yield
        finally:
            del driver.accept_emulated_migration

    @contextlib.contextmanager
    def hold_migration(self, host, guest):
        """Hold ``host``'s outgoing migrations while the source prepares
        the destination XML (before it records running: the abort
        cancels a migration the source has not started)."""
        driver = self.probe(host)
        hold = _SourceHold(self.migration_timeout_s)
        original = driver.get_destination_xml

        def held(instance_uuid, numa_info):
            hold.entered.set()
            hold.go.wait(self.migration_timeout_s)
            return original(instance_uuid, numa_info)
        driver.get_destination_xml = held
        try:
            yield hold
        finally:
            hold.release()
            del driver.get_destination_xml


class _SourceHold:
    """What EmbeddedBackend.hold_migration yields (see
    base.Backend.hold_migration)."""

    phase = 'the source prepares it (held in its destination XML step)'

    def __init__(self, timeout):
        self.entered, self.go = threading.Event(), threading.Event()
        self.timeout = timeout

    def wait(self, session, migration, until=None):
        """Once the source holds it, whatever ``until`` asks."""
        reached = self.entered.wait(self.timeout)
        return reached, session.api.migration_get(session.ctxt,
                                                  migration.uuid)

    def release(self):
        self.go.set()


def configure_logging(debug=False):
    """oslo.log options for an in-process run (no config files)."""
    from oslo_log import log as os_log
    os_log.register_options(CONF)
    CONF([], project='numamig')
    CONF.set_override('debug', debug)
    os_log.setup(CONF, 'numamig')
