"""The mixed-release matrix of the NUMA-aware live migration spec.

Each test runs one live migration of a pinned guest on the embedded tier
(a real conductor, real agents on libvirt test-driver hosts, real RPC)
in a cloud whose source, destination and conductor each run either the
current release (NEW, service version 2) or the release before NUMA-aware
live migration (OLD, service version 1, selected with the testing aid
``service_version``), and asserts the row of the spec's "Upgrade impact"
table, once for a migration that succeeds and once for one that fails
(the destination refuses to define the guest)::

    src      cell 0 [1-3,9-11]: filler guest on 1,9
             cell 1 [5-7,13-15]: the mover on 5,13
    dst      empty; fitting the mover here gives 1,9 (cell 0)
    bystander  always OLD: the cloud is mid-upgrade in every cell, so a
             NEW conductor needs [workarounds] enable_numa_live_migration
             (an OLD one has no such check and runs without it)

How each entry of the table is observed. "The wire" is every RPC message
sent in the process (method, version, serialized arguments and reply),
recorded below oslo.messaging's client; "logged" means the node logged
its old-path decision for that entry (numamig.releases.
log_old_path), which only NEW code does:

New NUMA objects from dest (the destination's call)
    yes: the reply of check_can_live_migrate_destination carries
    dst_numa_info. old path: it does not, and the destination logged the
    old path for "destination NUMA objects and claim". no: it does not,
    and the destination logged nothing.
New XML from source (the source's call)
    The XML the source sent in accept_emulated_migration. yes: its vCPU
    pins differ from the guest's XML on the source and equal the pins
    of dst_numa_info. old path: its pins, memory nodes and page sizes
    equal the source's (copied), and the source logged the old path for
    "source XML". no: copied, nothing logged.
Initial claim on dest (the destination's call)
    yes: the destination took a claim that was recorded as the
    migration's context: returned in its answer for the conductor to
    record (compute API 1.3), or recorded by itself
    (migration_context_set on the wire, API 1.1). old path: none, and the
    destination logged the old path for "destination NUMA objects and
    claim". no: none, nothing logged.
Claim drop for source on success (the source's call; success only)
    yes: when the migration is ``completed`` the source no longer counts
    the guest's pCPUs. old path: it still counts them (the next usage
    recompute drops them, which the test then checks), and the source
    logged the old path for "source usage drop". no: still counted,
    nothing logged.
Claim drop for dest on failure (the destination's call; failure only)
    yes: drop_move_claim_at_destination was sent to the destination.
    old path: it was not; the destination's rollback dropped any claim
    record itself (migration_context_drop on the wire) and logged the old
    path for "destination claim drop". no: neither message, nothing
    logged.

Destination guard (the destination's libvirt hook; success only)
    Scenarios run with and without ``[libvirt] migration_guard`` on the
    NEW hosts (an OLD host has no guard). yes: the destination's guard
    checked the incoming XML against its claim (rewrote it, or found it
    matching), and the XML defined there has the vCPU pins of the
    instance's record, not the source's when the source copied them.
    old path: the guard ran but the destination held no claim for the
    guest (it passed the XML through). off: a NEW destination without
    the guard. no: an OLD destination.

With an OLD conductor the claim parameters are never sent, so every
"yes" of the spec's table becomes "old path" (each NEW node takes its
old path); the other entries are the spec's.

With the guard on, a NEW destination claims even for an OLD source
(a "guarded" claim, recorded by itself): "Initial claim on dest" and
"Destination guard" of old source / NEW destination become "yes" (the
NUMA objects still cannot reach that source: old path, logged as such),
and the rollback drops the claim itself (old path, logged).

Whatever the cell, the test also checks that no OLD node was ever sent
an API or object version newer than it reads, that no message of the
run was refused with UnsupportedVersion (each sender caps a message at
what its receiver's reported service version serves, see
numamig.objects.service), and that the migration
converges: the guest ends on exactly one host, and no claim, migration
context or reservation is left anywhere.
"""

import collections
import logging
import time

import fixtures
import oslo_messaging as messaging
from oslo_messaging import transport as msg_transport
from oslo_utils import uuidutils
from oslo_utils import versionutils
import testscenarios

from numamig import embedded
from numamig import exception
from numamig import objects
from numamig import releases
from numamig.compute import rpcapi as compute_rpcapi
from numamig.objects import base as obj_base
from tests import base
from tests.fixtures import deployment
from tests.functional import test_live_migration as lm

load_tests = testscenarios.load_tests_apply_scenarios

OLD, NEW = 1, 2
NUMA, XML, CLAIM, SRC_DROP, DST_DROP, GUARD = (
    'New NUMA objects from dest', 'New XML from source',
    'Initial claim on dest', 'Claim drop for source on success',
    'Claim drop for dest on failure', 'Destination guard')
YES, OLD_PATH, NO, OFF = 'yes', 'old path', 'no', 'off'

# The spec's table, (source, destination) -> row, with a NEW conductor.
SPEC_TABLE = {
    (OLD, OLD): {NUMA: NO, XML: NO, CLAIM: NO, SRC_DROP: NO, DST_DROP: NO},
    (OLD, NEW): {NUMA: OLD_PATH, XML: NO, CLAIM: OLD_PATH, SRC_DROP: NO,
                 DST_DROP: OLD_PATH},
    (NEW, OLD): {NUMA: NO, XML: OLD_PATH, CLAIM: NO, SRC_DROP: OLD_PATH,
                 DST_DROP: NO},
    (NEW, NEW): {NUMA: YES, XML: YES, CLAIM: YES, SRC_DROP: YES,
                 DST_DROP: YES},
}
# What the destination's migration guard changes, with a NEW conductor
# (doc/source/upgrades.rst, "The mixed-release table").
GUARD_TABLE = {
    (OLD, OLD): {GUARD: NO},
    (OLD, NEW): {CLAIM: YES, GUARD: YES},
    (NEW, OLD): {GUARD: NO},
    (NEW, NEW): {GUARD: YES},
}
SUCCESS_ENTRIES = (NUMA, XML, CLAIM, SRC_DROP, GUARD)
FAILURE_ENTRIES = (NUMA, XML, CLAIM, DST_DROP)

DEDICATED = {'hw:cpu_policy': 'dedicated'}
SHARED = frozenset({0, 8, 4, 12})
OBJ = 'numamig_object'
API_1_0_OBJECTS = compute_rpcapi.OBJECT_VERSIONS['1.0']


def expected_row(source, dest, conductor, guard=False):
    row = dict(SPEC_TABLE[(source, dest)], **{GUARD: NO if dest == OLD
                                               else OFF})
    if guard:
        row.update(GUARD_TABLE[(source, dest)])
    if conductor == OLD:
        row = {entry: OLD_PATH if value == YES else value
               for entry, value in row.items()}
    return row


# What an RPC server answers when no endpoint takes the message.
_REFUSALS = (messaging.UnsupportedVersion, messaging.NoSuchMethod)

Message = collections.namedtuple(
    'Message', 'server method version args reply error')


class WireTap(fixtures.Fixture):
    """Record every RPC message sent in this process, as serialized.

    :ivar messages: Message tuples, in the order their send returned.
    """

    def _setUp(self):  # noqa: N802 - the fixtures API
        self.messages = []
        real = msg_transport.Transport._send
        tap = self

        def send(transport, target, ctxt, message, *args, **kwargs):
            reply = error = None
            try:
                reply = real(transport, target, ctxt, message, *args,
                             **kwargs)
                return reply
            except Exception as exc:
                error = exc
                raise
            finally:
                tap.messages.append(Message(
                    target.server, message['method'],
                    message.get('version', '1.0'), message['args'], reply,
                    error))
        self.useFixture(fixtures.MonkeyPatch(
            'oslo_messaging.transport.Transport._send', send))

    def sent(self, method, server=None, migration_uuid=None):
        """The messages of ``method`` that reached their endpoint (the
        RPC dispatcher did not refuse them), whatever it answered."""
        return [m for m in self.messages
                if m.method == method and
                not isinstance(m.error, _REFUSALS) and
                (server is None or m.server == server) and
                (migration_uuid is None or
                 migration_uuid in _uuids_in(m.args))]


def _uuids_in(value):
    if isinstance(value, dict):
        return {u for v in value.values() for u in _uuids_in(v)}
    if isinstance(value, (list, tuple)):
        return {u for v in value for u in _uuids_in(v)}
    return {value} if isinstance(value, str) and \
        uuidutils.is_uuid_like(value) else set()


def _objects_in(value):
    """(name, version) of every object primitive in ``value``."""
    if isinstance(value, dict):
        found = []
        if f'{OBJ}.name' in value:
            found.append((value[f'{OBJ}.name'], value[f'{OBJ}.version']))
        for item in value.values():
            found += _objects_in(item)
        return found
    if isinstance(value, (list, tuple)):
        return [o for item in value for o in _objects_in(item)]
    return []


def _version_key(version):
    return versionutils.convert_version_to_tuple(version)


class MatrixCellTests:
    """One cell of the matrix; scenarios set source, dest and conductor.

    A mixin: each test class pairs it with base.TestCase and scenarios.
    """

    transport_kind = 'fake'
    guard = False

    def setUp(self):
        super().setUp()
        self.logs = self.useFixture(fixtures.FakeLogger(
            name='numamig', level=logging.INFO,
            format='%(levelname)s %(message)s'))
        self.tap = self.useFixture(WireTap())
        self.flags(rpc_response_timeout_migration=15)
        # An OLD conductor has no version check; a NEW one needs the
        # workaround while the bystander is OLD.
        self.flags(group='workarounds',
                   enable_numa_live_migration=self.conductor == NEW)
        hosts = [self._host('src', self.source, self.guard),
                 self._host('dst', self.dest, self.guard),
                 self._host('bystander', OLD)]
        self.dep = self.useFixture(deployment.DeploymentFixture(
            self.transport_kind, hosts,
            conductor_service_version=self.conductor,
            call_timeout=30)).deployment
        self.api, self.ctxt = self.dep.api, self.dep.context
        self.old_hosts = {h.name for h in hosts if h.service_version == OLD}
        self.filler = self._create('src')
        self.mover = self._create('src')
        self.source_xml = self._xml('src')

    @staticmethod
    def _host(name, version, guard=False):
        return embedded.HostDefinition(name, 'numa-2cell-a.xml',
                                       cpu_shared_set=SHARED,
                                       service_version=version,
                                       migration_guard=guard)

    def _create(self, host_name):
        uuid = uuidutils.generate_uuid()
        instance = objects.Instance(
            uuid=uuid, name=f'guest-{uuid[:8]}', project_id='demo', vcpus=2,
            memory_mb=1024, extra_specs=dict(DEDICATED))
        return self.api.instance_create(self.ctxt, instance, host_name)

    def _xml(self, host_name):
        return self.dep.agent(host_name).driver.get_domain_xml(
            self.mover.uuid, persistent=True)

    def _pinned_on(self, host_name):
        usage = self.dep.agent(host_name).tracker.usage_topology()
        return set().union(*(c.pinned_cpus for c in usage.cells))

    def _migrate(self):
        migration = self.api.live_migrate_instance(self.ctxt,
                                                   self.mover.uuid, 'dst')
        self.migration_uuid = migration.uuid
        migration = self.dep.wait_for_migration(migration.uuid)
        self._wait_source_done(migration.uuid)
        self.source_pinned_at_end = self._pinned_on('src')
        return migration

    def _wait_source_done(self, migration_uuid, timeout=30):
        """The source drops the guest's usage once the records moved it,
        after ``completed`` is recorded: look at its usage only once its
        migration thread has ended (bounded; under load it took longer
        than the end's notice)."""
        outgoing = self.dep.agent('src').outgoing
        deadline = time.monotonic() + timeout
        while migration_uuid in outgoing.uuids() and \
                time.monotonic() < deadline:
            time.sleep(0.02)

    def _fail_at_destination(self):
        dest = self.dep.agent('dst').driver
        real = type(dest).accept_emulated_migration

        def accept(driver, instance_uuid, dest_xml):
            if driver is dest:
                raise exception.HypervisorError(
                    host='dst', action='define the guest',
                    reason='injected by the test')
            return real(driver, instance_uuid, dest_xml)
        self.useFixture(fixtures.MonkeyPatch(
            'numamig.virt.libvirt.driver.LibvirtDriver.'
            'accept_emulated_migration', accept))

    # -- observing the table's entries ---------------------------------

    def _logged(self, host, item):
        items = item if isinstance(item, tuple) else (item,)
        return any(f"{host}: migration {self.migration_uuid}: old path for "
                   f"the {one}" in self.logs.output for one in items)

    def _classify(self, new_seen, host, item, old_seen=True):
        """yes / old path / no, or what contradicts the definitions."""
        logged = self._logged(host, item)
        if new_seen:
            return YES if not logged else f"yes, but {host} logged old path"
        if not old_seen:
            return "neither the new nor the old behaviour"
        return OLD_PATH if logged else NO

    def _dest_reply(self):
        (reply,) = [m.reply for m in self.tap.sent(
            'check_can_live_migrate_destination', 'dst')]
        return reply

    def observe_numa_objects(self):
        data = self._dest_reply()[f'{OBJ}.data']
        return self._classify(data.get('dst_numa_info') is not None, 'dst',
                              (releases.OLD_PATH_NUMA_INFO,
                               releases.OLD_PATH_NUMA_OBJECTS))

    def observe_xml(self):
        (sent,) = self.tap.sent('accept_emulated_migration', 'dst')
        pins, nodes, pages = lm.xml_placement(sent.args['dest_xml'])
        source = lm.xml_placement(self.source_xml)
        numa_info = self._dest_reply()[f'{OBJ}.data'].get('dst_numa_info')
        rewritten = False
        if numa_info is not None:
            cpu_pins = obj_base.NumamigObject.obj_from_primitive(
                numa_info).cpu_pins
            rewritten = pins != source[0] and pins == {
                v: ','.join(str(p) for p in sorted(pcpus))
                for v, pcpus in cpu_pins.items()}
        return self._classify(rewritten, 'src', releases.OLD_PATH_XML,
                              old_seen=(pins, nodes, pages) == source)

    def observe_claim(self):
        recorded = self.tap.sent('migration_context_set',
                                 migration_uuid=self.migration_uuid)
        returned = self._dest_reply()[f'{OBJ}.data'].get(
            'migration_context') is not None
        return self._classify(bool(recorded) or returned, 'dst',
                              releases.OLD_PATH_NUMA_INFO)

    def observe_source_drop(self):
        mover_pins = set(self.mover.numa_topology.cpu_pinning.values())
        dropped = not mover_pins & self.source_pinned_at_end
        return self._classify(dropped, 'src', releases.OLD_PATH_SOURCE_DROP)

    def observe_dest_drop(self):
        asked = self.tap.sent('drop_move_claim_at_destination', 'dst')
        record_dropped = self.tap.sent('migration_context_drop',
                                       migration_uuid=self.migration_uuid)
        return self._classify(bool(asked), 'dst', releases.OLD_PATH_DEST_DROP,
                              old_seen=bool(record_dropped) or
                              not self._logged('dst',
                                               releases.OLD_PATH_DEST_DROP))

    def observe_guard(self):
        dest = self.dep.agent('dst')
        if dest.release.service_version == OLD:
            return NO
        if dest.driver.migration_guard_state() == 'off':
            return OFF
        checked = [line for line in self.logs.output.splitlines()
                   if line.startswith('INFO dst: migration guard, incoming '
                                      f'migration of {self.mover.name}')]
        if len(checked) != 1:
            return f"the guard logged {len(checked)} decisions"
        if 'holds no move claim' in checked[0]:
            return OLD_PATH
        if 'claim of migration' not in checked[0]:
            return f"unexpected decision: {checked[0]}"
        pins = lm.xml_placement(dest.driver.get_domain_xml(
            self.mover.uuid))[0]
        record = self.api.instance_get(self.ctxt, self.mover.uuid)
        recorded = {v: str(p) for v, p in
                    record.numa_topology.cpu_pinning.items()}
        if pins != recorded:
            return f"pins {pins} on dst, {recorded} in the record"
        if self.source == OLD and pins == lm.xml_placement(
                self.source_xml)[0]:
            return "the source's copied pins run on dst"
        return YES

    def observed_row(self, entries):
        observers = {NUMA: self.observe_numa_objects, XML: self.observe_xml,
                     CLAIM: self.observe_claim,
                     SRC_DROP: self.observe_source_drop,
                     DST_DROP: self.observe_dest_drop,
                     GUARD: self.observe_guard}
        return {entry: observers[entry]() for entry in entries}

    # -- invariants ----------------------------------------------------

    def assert_old_nodes_got_old_versions(self):
        """An OLD node was sent nothing newer than it reads, and no node
        of either release refused a message: every sender knew its
        peer's version from the service version the peer reports."""
        refused = [(m.method, m.version, m.server) for m in
                   self.tap.messages
                   if isinstance(m.error, messaging.UnsupportedVersion)]
        self.assertEqual([], refused)
        for message in self.tap.messages:
            if message.server not in self.old_hosts:
                continue
            self.assertEqual(
                '1.0', message.version,
                f"{message.method} {message.version} reached old host "
                f"{message.server}")
            for name, version in _objects_in(message.args):
                self.assertLessEqual(
                    _version_key(version),
                    _version_key(API_1_0_OBJECTS[name]),
                    f"{name} {version} sent to old host {message.server}")
        if self.conductor == OLD:
            for method in ('check_can_live_migrate_destination',
                           'live_migration'):
                self.assertEqual({'1.0'}, {m.version for m in
                                           self.tap.sent(method)})

    def assert_converged(self, on_host):
        self.dep.report_all()
        record = self.api.instance_get(self.ctxt, self.mover.uuid)
        self.assertEqual(on_host, record.host)
        self.assertIsNone(record.migration_context)
        elsewhere = {'src', 'dst'} - {on_host}
        for name in elsewhere:
            self.assertNotIn(self.mover.uuid,
                             self.dep.agent(name).driver.list_guests())
        for name in self.dep.agents:
            self.assertEqual([], self.dep.agent(name).tracker.claims(),
                             f"claims left on {name}")
            state = self.dep.conductor.manager.cache.get(name)
            self.assertEqual((), state.reservations)
        mover_pins = set(self.mover.numa_topology.cpu_pinning.values())
        if on_host == 'dst':
            self.assertEqual(set(), mover_pins & self._pinned_on('src'))

    # -- the tests -------------------------------------------------------

    def test_successful_migration(self):
        migration = self._migrate()
        self.assertEqual('completed', migration.status, migration.error)
        self.assertEqual(
            {e: v for e, v in expected_row(self.source, self.dest,
                                           self.conductor,
                                           self.guard).items()
             if e in SUCCESS_ENTRIES},
            self.observed_row(SUCCESS_ENTRIES))
        self.assert_old_nodes_got_old_versions()
        self.assert_converged('dst')

    def test_failing_migration(self):
        self._fail_at_destination()
        migration = self._migrate()
        self.assertEqual('failed', migration.status)
        self.assertIn('injected by the test', migration.error)
        self.assertEqual(
            {e: v for e, v in expected_row(self.source, self.dest,
                                           self.conductor,
                                           self.guard).items()
             if e in FAILURE_ENTRIES},
            self.observed_row(FAILURE_ENTRIES))
        self.assert_old_nodes_got_old_versions()
        self.assertEqual(self.source_xml, self._xml('src'))
        self.assert_converged('src')


_CELLS = [(f'{s}-source-{d}-dest', {'source': sv, 'dest': dv})
          for s, sv in (('old', OLD), ('new', NEW))
          for d, dv in (('old', OLD), ('new', NEW))]
_CONDUCTORS = [('new-conductor', {'conductor': NEW}),
               ('old-conductor', {'conductor': OLD})]
_GUARDS = [('no-guard', {'guard': False}), ('guard', {'guard': True})]


class MatrixTest(MatrixCellTests, base.TestCase):
    """Every cell, with a NEW and with an OLD conductor, with and without
    the destination's migration guard, over fake://."""

    scenarios = testscenarios.multiply_scenarios(_CELLS, _CONDUCTORS,
                                                 _GUARDS)


class MatrixOverRabbitMQTest(MatrixCellTests, base.TestCase):
    """New/new and a mixed cell over real RabbitMQ (remote errors such
    as UnsupportedVersion cross the broker as themselves)."""

    transport_kind = 'rabbit'
    scenarios = [
        ('new-source-new-dest', {'source': NEW, 'dest': NEW,
                                 'conductor': NEW}),
        ('old-source-new-dest', {'source': OLD, 'dest': NEW,
                                 'conductor': NEW}),
        ('old-source-new-dest-guard', {'source': OLD, 'dest': NEW,
                                       'conductor': NEW, 'guard': True}),
    ]


class GuardRefusalOverRabbitMQTest(MatrixCellTests, base.TestCase):
    """The guard's refusal of XML it cannot reconcile with the claim, from
    the destination's hypervisor to the operator, over real RabbitMQ: the
    old source's emulated copy meets the guard on the destination, whose
    error crosses the broker as itself and ends the migration failed with
    the guard's words; the guest stays on the source and nothing stays
    claimed."""

    transport_kind = 'rabbit'
    scenarios = [('old-source-new-dest-guard', {
        'source': OLD, 'dest': NEW, 'conductor': NEW, 'guard': True})]
    # MatrixOverRabbitMQTest runs this cell's success and failure already.
    test_successful_migration = None
    test_failing_migration = None

    def _irreconcilable_claims(self):
        dest = self.dep.agent('dst').driver
        real = type(dest).publish_move_claims

        def publish(driver, claims):
            if driver is dest:
                # What no source could send for a 2 MiB-backed guest: the
                # claim's cells on 1 GiB pages.
                claims = {uuid: (migration, _on_1g_pages(topology))
                          for uuid, (migration, topology) in claims.items()}
            return real(driver, claims)
        self.useFixture(fixtures.MonkeyPatch(
            'numamig.virt.libvirt.driver.LibvirtDriver.publish_move_claims',
            publish))

    def test_refusal_reaches_the_operator(self):
        self._irreconcilable_claims()
        migration = self._migrate()
        self.assertEqual('failed', migration.status)
        self.assertIn('numamig migration guard: cannot be reconciled with '
                      'the claim of migration', migration.error)
        self.assertIn('1048576 KiB pages', migration.error)
        self.assertEqual(self.source_xml, self._xml('src'))
        self.assert_converged('src')


def _on_1g_pages(topology):
    changed = topology.obj_clone()
    for cell in changed.cells:
        cell.pagesize = 1048576
    return changed
