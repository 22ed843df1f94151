"""Every object the migration flow sends to an older receiver, backported.

An agent or conductor of the release before NUMA-aware live migration
reads object versions up to compute API 1.0's manifest. Each object the
flow sends such a receiver (as an argument, or as an answer to its call)
goes through the serializer a new service would use and the one the old
receiver uses: it must arrive, hold nothing newer than the old release
knows, and lose every NUMA field (one test per field: Nova once forgot
to drop one of the two flags).
"""

import fixtures
from oslo_serialization import jsonutils
import testscenarios

from numamig import exception
from numamig import objects
from numamig import releases
from numamig import rpc
from numamig.compute import rpcapi as compute_rpcapi
from numamig.objects import live_migrate_data
from tests import base
from tests.unit.objects import samples

load_tests = testscenarios.load_tests_apply_scenarios

OLD_OBJECTS = releases.RELEASES[1].object_versions
OBJ = 'numamig_object'


def _versions_in(primitive):
    """(name, version) of every object in a primitive tree."""
    found = []
    if isinstance(primitive, dict):
        if f'{OBJ}.name' in primitive:
            found.append((primitive[f'{OBJ}.name'],
                          primitive[f'{OBJ}.version']))
        for value in primitive.values():
            found += _versions_in(value)
    elif isinstance(primitive, list):
        for value in primitive:
            found += _versions_in(value)
    return found


def _new_sender_at_1_0():
    """The serializer of a new client capped (or fallen back) to 1.0."""
    return rpc.ObjectSerializer(compute_rpcapi.OBJECT_VERSIONS['1.0'])


def _old_receiver():
    """The serializer of a service running as release 1."""
    return rpc.ObjectSerializer(OLD_OBJECTS, OLD_OBJECTS)


# (what the flow sends an old receiver, how it is built)
_SENT_TO_OLD = [
    ('instance-in-every-call', {'build': samples.instance}),
    ('migration-in-live-migration', {'build': samples.migration}),
    ('live-migrate-data-sent-or-answered',
     {'build': samples.live_migrate_data}),
    ('instance-topology-in-instance', {'build': samples.instance_topology}),
    ('migration-context-in-instance',
     {'build': samples.migration_context}),
]


class SentToOldReceiverTest(base.TestCase):
    """Each object arrives at an old receiver, holding old versions only."""

    scenarios = _SENT_TO_OLD

    def test_arrives_in_old_versions(self):
        wire = jsonutils.loads(jsonutils.dumps(
            _new_sender_at_1_0().serialize_entity(None, self.build())))
        for name, version in _versions_in(wire):
            self.assertEqual(OLD_OBJECTS[name], version, name)
        received = _old_receiver().deserialize_entity(None, wire)
        self.assertEqual(type(self.build()), type(received))


class NUMAFieldsDroppedTest(base.TestCase):
    """Neither the NUMA objects nor either flag reach an old receiver."""

    scenarios = [(name, {'field': name})
                 for name in live_migrate_data.NUMA_FIELDS]

    def test_dropped_on_the_way_to_an_old_receiver(self):
        wire = _new_sender_at_1_0().serialize_entity(
            None, samples.live_migrate_data())
        self.assertNotIn(self.field, wire[f'{OBJ}.data'])
        self.assertNotIn(self.field, wire.get(f'{OBJ}.changes', []))

    def test_dropped_from_an_answer_in_the_version_asked(self):
        # A new service answering an old caller: the object it returns
        # was received as 1.0 and had NUMA fields set since.
        received = releases.backported(samples.live_migrate_data(), '1.0')
        setattr(received, self.field,
                getattr(samples.live_migrate_data(), self.field))
        wire = rpc.ObjectSerializer().serialize_entity(None, received)
        self.assertEqual('1.0', wire[f'{OBJ}.version'])
        self.assertNotIn(self.field, wire[f'{OBJ}.data'])

    def test_dropped_by_an_old_server_answering(self):
        # An old agent's RPC server backports its answers to release 1.
        wire = _old_receiver().serialize_entity(
            None, samples.live_migrate_data())
        self.assertEqual('1.0', wire[f'{OBJ}.version'])
        self.assertNotIn(self.field, wire[f'{OBJ}.data'])


class OldReceiverRefusesNewObjectsTest(base.TestCase):
    """A forgotten backport fails loudly at the old receiver, as the old
    release's object registry would have refused it."""

    def test_live_migrate_data_1_1_refused(self):
        wire = rpc.ObjectSerializer().serialize_entity(
            None, samples.live_migrate_data())
        self.assertRaisesMessage(
            exception.ObjectValidationError,
            f'LiveMigrateData: version {objects.LiveMigrateData.VERSION} is '
            f'newer than 1.0, the newest this service reads',
            _old_receiver().deserialize_entity, None, wire)

    def test_nested_in_a_list_refused(self):
        wire = [rpc.ObjectSerializer().serialize_entity(
            None, samples.live_migrate_data())]
        self.assertRaises(exception.ObjectValidationError,
                          _old_receiver().deserialize_entity, None, wire)

    def test_new_receiver_reads_old_objects(self):
        wire = _new_sender_at_1_0().serialize_entity(
            None, samples.live_migrate_data())
        received = rpc.ObjectSerializer().deserialize_entity(None, wire)
        self.assertEqual(('1.0', None),
                         (received.VERSION, received.dst_numa_info))


class NeverAboveTheReceivedVersionTest(base.TestCase):
    """An object received as 1.0 and passed on goes out as 1.0, even by
    a client whose manifest allows 1.1 (the peer that built it is old)."""

    def test_manifest_above_the_object(self):
        received = releases.backported(samples.live_migrate_data(), '1.0')
        serializer = rpc.ObjectSerializer(
            compute_rpcapi.OBJECT_VERSIONS['1.1'])
        wire = serializer.serialize_entity(None, received)
        self.assertEqual('1.0', wire[f'{OBJ}.version'])

    def test_current_object_follows_the_manifest(self):
        serializer = rpc.ObjectSerializer(
            compute_rpcapi.OBJECT_VERSIONS['1.1'])
        wire = serializer.serialize_entity(None,
                                           samples.live_migrate_data())
        self.assertEqual(objects.LiveMigrateData.VERSION,
                         wire[f'{OBJ}.version'])


class MigrationResultNeverReachesAgentsTest(base.TestCase):
    """Migration 1.1 is for the conductor's records: no compute API
    version carries it, so even an uncapped client holds it back at 1.0
    (compute_rpcapi.HELD_BACK; an agent of release 1 would refuse 1.1)."""

    def test_uncapped_client_manifest(self):
        manifests = []

        def get_client(transport, target, version_manifest=None, **kwargs):
            manifests.append(version_manifest)
        self.useFixture(fixtures.MockPatch('numamig.rpc.get_client',
                                           side_effect=get_client))
        compute_rpcapi.ComputeAPI(None)
        self.assertEqual({'1.0'}, {m['Migration'] for m in manifests})

    def test_newest_api_sends_migration_1_0_to_an_old_agent(self):
        sender = rpc.ObjectSerializer(rpc.manifest_for_cap(
            compute_rpcapi.OBJECT_VERSIONS, compute_rpcapi.ComputeAPI.VERSION))
        wire = sender.serialize_entity(None, samples.migration())
        self.assertEqual('1.0', wire[f'{OBJ}.version'])
        self.assertNotIn('elapsed_ms', wire[f'{OBJ}.data'])
        received = _old_receiver().deserialize_entity(None, wire)
        self.assertEqual(samples.migration().uuid, received.uuid)
