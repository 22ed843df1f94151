"""A deployment to redeliver RPC messages in, and what it looks like.

``World`` builds the states an RPC method acts on (a guest, a migration
waiting with its destination's claim, one running, one whose guest has
arrived, one completed) on an embedded deployment of two libvirt
test-driver hosts, delivers a raw oslo.messaging message to the
conductor or to an agent, and takes a ``snapshot``: the database rows,
every agent's usage (tracker) and every hypervisor's domains. A method
is idempotent under redelivery when the snapshot after the second
delivery equals the one after the first.

    host-a  cell 0 [1-3,9-11]  cell 1 [5-7,13-15]   (dedicated)
    host-b  the same
"""

import functools
import json
import threading
import time

import oslo_messaging as messaging
from oslo_utils import timeutils
from oslo_utils import uuidutils
import sqlalchemy as sa

from numamig import embedded
from numamig import objects
from numamig import rpc
from numamig.compute import rpcapi as compute_rpcapi
from numamig.conductor import api_versions
from numamig.conductor import records
from numamig.conductor import records_manager
from numamig.conductor.tasks import live_migrate
from numamig.db import migrations
from numamig.db import models

SHARED = frozenset({0, 8, 4, 12})
DEDICATED = {'hw:cpu_policy': 'dedicated'}
HOSTS = (embedded.HostDefinition('host-a', 'numa-2cell-a.xml',
                                 cpu_shared_set=SHARED),
         embedded.HostDefinition('host-b', 'numa-2cell-a.xml',
                                 cpu_shared_set=SHARED))
# Bookkeeping columns a write may touch without changing what a row says.
VOLATILE = {'updated_at', 'lease_expires_at'}
# Tables that hold reports (compared by rows that deliver reports) and
# counters, not records.
NOT_RECORDS = {'compute_nodes', 'sequences'}
SETTLE_S = 30


class Delivery:
    """One message: to whom, what, and how to wait for its effect.

    :param to: 'conductor' or a host name.
    :param cast: send as a cast (no answer); ``settle`` then waits.
    :param settle: callable waiting until the message's effect is done
        (default: World.settle, every migration thread idle).
    """

    def __init__(self, to, method, kwargs, cast=False, settle=None):
        self.to = to
        self.method = method
        self.kwargs = kwargs
        self.cast = cast
        self.settle = settle


class _HeldTask(live_migrate.LiveMigrationTask):
    """The conductor's task up to the claim: it records ``queued`` with
    the destination's claim and keeps the start request instead of
    casting it."""

    def _start(self, migrate_data):
        self.held = migrate_data


class World:
    """Builders of states, delivery and snapshots on one deployment."""

    def __init__(self, test, fixture):
        self.test = test
        self.dep = fixture.deployment
        self.transport = fixture.rpc.transport
        self.ctxt = self.dep.context
        self.api = self.dep.api
        # An agent's client, for the records the agents write.
        self.agents = self.dep.names.records_api(self.transport, timeout=30)
        self.worker = self.dep.conductor.manager.worker
        # Migrations left in progress on purpose (nothing drives them).
        self.parked = set()

    # -- states ---------------------------------------------------------------

    def guest(self, host='host-a', vcpus=2):
        uuid = uuidutils.generate_uuid()
        instance = objects.Instance(
            uuid=uuid, name=f'guest-{uuid[:8]}', project_id='demo',
            vcpus=vcpus, memory_mb=1024, extra_specs=dict(DEDICATED))
        return self.api.instance_create(self.ctxt, instance, host)

    def vmem_guest(self, host='host-a'):
        """A guest with one virtio-mem device per guest node (512 MiB,
        256 plugged)."""
        uuid = uuidutils.generate_uuid()
        instance = objects.Instance(
            uuid=uuid, name=f'guest-{uuid[:8]}', project_id='demo',
            vcpus=2, memory_mb=1024, extra_specs={
                'hw:numa_nodes': '2', 'hw:virtio_mem_size': '512',
                'hw:virtio_mem_requested': '256'})
        return self.api.instance_create(self.ctxt, instance, host)

    def record(self, instance_uuid):
        return self.api.instance_get(self.ctxt, instance_uuid)

    def migration(self, migration_uuid):
        return self.api.migration_get(self.ctxt, migration_uuid)

    def admitted(self, guest, dest='host-b'):
        """A migration admitted by this conductor, nothing claimed yet
        (out of the admission queue: no migration thread takes it)."""
        migration = migrations.create(self.dep.db, objects.Migration(
            uuid=uuidutils.generate_uuid(), instance_uuid=guest.uuid,
            source_host=guest.host, requested_host=dest,
            status='accepted', admitted_at=timeutils.utcnow(
                with_timezone=True)))
        self.parked.add(migration.uuid)
        return migration

    def claimed(self, guest, dest='host-b'):
        """``queued`` with the destination's claim recorded and held.

        :returns: (Migration, the LiveMigrateData the source is sent).
        """
        migration = self.admitted(guest, dest)
        task = _HeldTask(self.ctxt, self.worker, self.record(guest.uuid),
                         migration)
        migration = task.execute()
        return migration, task.held

    def running(self, guest, dest='host-b'):
        """``running``, as the source records it before the copy."""
        migration, migrate_data = self.claimed(guest, dest)
        migration = records.set_status(self.worker, migration.uuid,
                                       'running')
        return migration, migrate_data

    def dest_xml(self, guest, migrate_data):
        """The domain XML the source sends its destination."""
        return self.dep.agent(guest.host).driver.get_destination_xml(
            guest.uuid, migrate_data.dst_numa_info)

    def arrived(self, guest, dest='host-b'):
        """``running``, the guest defined on the destination and gone
        from the source (an emulated copy), nothing recorded of it."""
        migration, migrate_data = self.running(guest, dest)
        self.compute_api().accept_emulated_migration(
            self.ctxt, guest, migration, self.dest_xml(guest, migrate_data))
        self.dep.agent(guest.host).driver.destroy(guest.uuid)
        return migration

    def counted(self, guest, dest='host-b'):
        """``arrived``, and the destination counts the guest (its
        post-migration step), the records not yet completed."""
        migration = self.arrived(guest, dest)
        self.compute_api().post_live_migration_at_destination(
            self.ctxt, guest, migration, records_by_source=True)
        return migration

    def completed(self, guest, dest='host-b'):
        """A migration run to its end by the services themselves."""
        migration = self.api.live_migrate_instance(self.ctxt, guest.uuid,
                                                   dest)
        ended = self.dep.wait_for_migration(migration.uuid)
        self.test.assertEqual('completed', ended.status, ended.error)
        return ended

    def blocked(self, guest, dest='host-b'):
        """A migration its source runs, held right after it recorded
        ``running`` (before the copy) until the test ends.

        :returns: the Migration, ``running``.
        """
        migration, migrate_data = self.claimed(guest, dest)
        gate, reached = threading.Event(), threading.Event()
        conductor_api = self.dep.agent(guest.host).conductor_api
        real = conductor_api.migration_set_running

        def running_then_wait(ctxt, migration_uuid, timeout=None):
            answer = real(ctxt, migration_uuid, timeout=timeout)
            reached.set()
            gate.wait(SETTLE_S)
            return answer
        conductor_api.migration_set_running = running_then_wait
        self.test.addCleanup(setattr, conductor_api,
                             'migration_set_running', real)
        self.test.addCleanup(self._unblock, gate, migration.uuid)
        self.compute_api().live_migration(
            self.ctxt, self.record(guest.uuid), migration, migrate_data)
        self.test.assertTrue(reached.wait(SETTLE_S), "the source never "
                             "recorded running")
        self.parked.add(migration.uuid)
        return self.migration(migration.uuid)

    def _unblock(self, gate, migration_uuid):
        """Let a blocked migration go on, and wait for its end while the
        services still answer (a source whose conductor has stopped
        would wait out RPC timeouts)."""
        gate.set()
        self.parked.discard(migration_uuid)
        self.settle()

    def compute_api(self):
        return self.worker.compute_api

    # -- delivery -------------------------------------------------------------

    def client(self, to, method=None):
        if to == 'conductor':
            # The agents' calls are the records API's, the rest the
            # operators'; both served on the conductor topic.
            api = api_versions.RECORDS if hasattr(
                records_manager.RecordManager, method) \
                else api_versions.OPERATIONS
            target = messaging.Target(
                topic=self.dep.names.conductor_topic,
                exchange=self.dep.names.exchange, namespace=api.namespace,
                version=api.version)
        else:
            target = messaging.Target(
                topic=self.dep.names.compute_topic, server=to,
                exchange=self.dep.names.exchange,
                version=compute_rpcapi.ComputeAPI.VERSION)
        return rpc.get_client(self.transport, target).prepare(timeout=30)

    def deliver(self, delivery):
        """Send ``delivery``; wait for its effect.

        :returns: ('ok', answer) or ('error', the error's class name).
        """
        client = self.client(delivery.to, delivery.method)
        try:
            if delivery.cast:
                handled = self._handled(delivery)
                client.cast(self.ctxt, delivery.method, **delivery.kwargs)
                self.test.assertTrue(handled.wait(SETTLE_S),
                                     f"{delivery.method} never handled")
                outcome = ('ok', None)
            else:
                outcome = ('ok', client.call(self.ctxt, delivery.method,
                                             **delivery.kwargs))
        except messaging.RemoteError as exc:
            outcome = ('error', exc.exc_type)
        except Exception as exc:  # noqa: BLE001 - an answer to compare
            outcome = ('error', type(exc).__name__.replace('_Remote', ''))
        (delivery.settle or self.settle)()
        return outcome

    def _handled(self, delivery):
        """An Event set once the agent's endpoint has run for the next
        cast of ``delivery.method`` (a cast has no answer to wait for)."""
        manager = self.dep.agent(delivery.to)
        endpoint = getattr(type(manager), delivery.method)
        handled = threading.Event()

        @functools.wraps(endpoint)
        def counted(ctxt, **kwargs):
            try:
                return endpoint(manager, ctxt, **kwargs)
            finally:
                handled.set()
                del manager.__dict__[delivery.method]
        setattr(manager, delivery.method, counted)
        return handled

    def settle(self):
        """Wait until no migration thread (the conductor's or a source's)
        runs and every migration not parked on purpose has ended."""
        deadline = time.monotonic() + SETTLE_S
        while not self._idle():
            if time.monotonic() > deadline:
                self.test.fail("the deployment did not settle in "
                               f"{SETTLE_S} s")
            time.sleep(0.02)

    def _idle(self):
        if self.dep.conductor.executor.held():
            return False
        if any(self.dep.agent(h).outgoing.uuids() - self.parked
               for h in self.dep.agents):
            return False
        return not [m for m in migrations.get_all(self.dep.db)
                    if m.in_progress and m.uuid not in self.parked]

    # -- what a delivery may change ---------------------------------------

    def snapshot(self):
        """Records, every agent's usage and every hypervisor's domains."""
        return {'records': self.records(), 'usage': self.usage(),
                'hypervisors': self.hypervisors(),
                'outgoing': self.outgoing(), 'hosts': self.hosts()}

    def outgoing(self):
        """Per source host: its migrations running, and whether each
        was asked to abort."""
        return {name: {job.migration.uuid: job.abort_requested.is_set()
                       for job in self.dep.agent(name).outgoing.jobs()}
                for name in self.dep.agents}

    def hosts(self):
        """The hosts the records know."""
        with self.dep.db.engine.connect() as conn:
            return sorted(conn.execute(sa.select(
                models.ComputeNode.host)).scalars())

    def records(self):
        """Every row of every table but reports, without bookkeeping."""
        rows = {}
        with self.dep.db.engine.connect() as conn:
            for name, table in sorted(models.Base.metadata.tables.items()):
                if name in NOT_RECORDS:
                    continue
                keys = [c for c in table.columns if c.name not in VOLATILE]
                rows[name] = [
                    {c.name: _plain(row[c.name]) for c in keys}
                    for row in conn.execute(sa.select(table).order_by(
                        *table.primary_key.columns)).mappings()]
        return rows

    def usage(self):
        """Per host: the guests and claims its tracker counts, and the
        usage of each host cell that follows."""
        hosts = {}
        for name in self.dep.agents:
            tracker = self.dep.agent(name).tracker
            with tracker.lock:
                hosts[name] = {
                    'instances': {i.uuid: _primitive(i.get('numa_topology'))
                                  for i in tracker.instances()},
                    'claims': {c.migration_uuid: (
                        c.instance_uuid, c.persisted,
                        _primitive(c.topology)) for c in tracker.claims()},
                    'cells': cell_usage(tracker.usage_topology())}
        return hosts

    def hypervisors(self):
        """Per host: each domain's state and persistent definition."""
        hosts = {}
        for name in self.dep.agents:
            conn = self.dep.agent(name).driver._connection()
            domains = {}
            for dom in conn.listAllDomains():
                persistent = bool(dom.isPersistent())
                domains[dom.UUIDString()] = {
                    'active': bool(dom.isActive()),
                    'persistent': persistent,
                    'xml': dom.XMLDesc(2 if persistent else 0)}
            hosts[name] = domains
        return hosts

    def stored_report(self, host):
        """The report the conductor stored for ``host`` and the one its
        scheduler cache holds: when made, and the usage each carries."""
        stored = self.api.compute_node_get_all(self.ctxt)
        (report,) = [r for r in stored if r.host == host]
        cached = self.worker.cache.get(host).report
        return {'stored': (report.reported_at, report.fingerprint,
                           cell_usage(report.topology)),
                'cached': (cached.reported_at, cached.fingerprint,
                           cell_usage(cached.topology))}


def cell_usage(topology):
    """What a host topology says is used, cell by cell."""
    return [(c.id, sorted(c.pinned_cpus), c.memory_usage_mb, c.cpu_usage,
             sorted((p.size_kb, p.used) for p in c.mempages))
            for c in topology.cells]


def _primitive(obj):
    if obj is None:
        return None
    return json.dumps(obj.obj_to_primitive(), sort_keys=True, default=str)


def _plain(value):
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, default=str)
    return value

