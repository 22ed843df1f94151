"""numamig's RPC plumbing over real calls, on fake:// and on RabbitMQ.

Each test runs twice (scenarios ``fake`` and ``rabbit``): exceptions and
serialization differ between the two transports, so passing on fake alone
proves little about production.
"""

import collections
import threading
import time

import fixtures
import oslo_messaging as messaging
import testscenarios

from numamig import exception
from numamig import objects
from numamig import rpc
from numamig.compute import rpcapi as compute_rpcapi
from numamig.objects import live_migrate_data
from tests import base
from tests.fixtures import rpc as rpc_fixture
from tests.unit.objects import samples

load_tests = testscenarios.load_tests_apply_scenarios

NAME = 'numamig_object.name'

# What a test API carries at each of its versions, as an rpcapi module
# declares it: 1.1 is the release that brought NUMA-aware live migration.
OBJECT_VERSIONS = {
    '1.0': {'LiveMigrateData': '1.0', 'NUMAMigrateInfo': '1.0',
            'HostNUMATopology': '1.0', 'HostNUMACell': '1.0',
            'NUMAPagesTopology': '1.0'},
    '1.1': {'LiveMigrateData': '1.1', 'NUMAMigrateInfo': '1.0',
            'HostNUMATopology': '1.0', 'HostNUMACell': '1.0',
            'NUMAPagesTopology': '1.0'},
}


class Endpoint:
    """A compute-like endpoint that records what reaches it."""

    def __init__(self, version):
        self.target = messaging.Target(version=version)
        self.calls = []

    def echo_topology(self, context, topology):
        self.calls.append(('echo_topology', context, topology))
        return topology

    def check_destination(self, context, migrate_data):
        self.calls.append(('check_destination', context, migrate_data))
        return {'version': migrate_data.VERSION,
                'changed': sorted(migrate_data.obj_what_changed())}

    # Expected: the server must not log it as a crash.
    @messaging.expected_exceptions(exception.MigrationPreCheckError)
    def refuse(self, context, host):
        self.calls.append(('refuse', context, host))
        raise exception.MigrationPreCheckError(
            reason=f"{host} has no free 2048 KiB pages on any cell")

    def fail_unexpectedly(self, context, kind):
        self.calls.append(('fail_unexpectedly', context, kind))
        error = {'builtin': ValueError, 'foreign': PeerBug}[kind]
        try:
            raise OSError("the cause, with its own traceback")
        except OSError as cause:
            raise error(f"{kind} failure on the peer") from cause

    def lose_own_link(self, context):
        """A handler whose own call met a broken broker connection."""
        self.calls.append(('lose_own_link', context))
        raise ConnectionResetError(104, 'Connection reset by peer')

    # What a conductor handler passes on when the agent it asked did not
    # answer (numamig.compute.rpcapi).
    @messaging.expected_exceptions(exception.MigrationError)
    def ask_silent_agent(self, context, host):
        self.calls.append(('ask_silent_agent', context, host))
        raise compute_rpcapi.AgentCallTimeout(
            host=host, method='delete_instance', timeout=60,
            option='[DEFAULT] rpc_response_timeout_migration')


class PeerBug(Exception):
    """An error of a module oslo.messaging does not rebuild (a
    RemoteError on RabbitMQ)."""


class RPCTestBase(base.TestCase):

    scenarios = rpc_fixture.TRANSPORT_SCENARIOS
    endpoint_version = '1.1'

    def setUp(self):
        super().setUp()
        self.rpc = self.useFixture(rpc_fixture.RPCFixture(
            self.transport_kind))
        self.topic = self.rpc.topic('compute')
        self.endpoint = Endpoint(self.endpoint_version)
        self.rpc.start_server([self.endpoint], self.topic)
        self.client = self.rpc.client(self.topic)
        self.ctxt = self.rpc.context

    def wire_objects(self, name):
        """Record every primitive named ``name`` the serializers decode."""
        seen = []
        real = rpc.ObjectSerializer.deserialize_entity

        def recording(serializer, ctxt, entity):
            if isinstance(entity, dict) and entity.get(NAME) == name:
                seen.append(entity)
            return real(serializer, ctxt, entity)

        self.useFixture(fixtures.MonkeyPatch(
            'numamig.rpc.ObjectSerializer.deserialize_entity', recording))
        return seen


class RoundTripTest(RPCTestBase):

    def test_host_topology_round_trip(self):
        topology = samples.host_topology()
        result = self.client.call(self.ctxt, 'echo_topology',
                                  topology=topology)
        self.assertIsInstance(result, objects.HostNUMATopology)
        self.assertEqual(topology, result)
        (_name, context, received), = self.endpoint.calls
        self.assertEqual(topology, received)
        self.assertEqual({2, 3}, received.cell(0).pinned_cpus)
        self.assertEqual('test-project', context.project_id)

    def test_an_agent_that_did_not_answer_arrives_named(self):
        exc = self.assertRaises(exception.AgentDidNotAnswer,
                                self.client.call, self.ctxt,
                                'ask_silent_agent', host='h1')
        # Still a timeout for callers that retry or move on after one.
        self.assertIsInstance(exc, messaging.MessagingTimeout)
        if self.transport_kind == 'rabbit':
            self.assertEqual('AgentCallTimeout_Remote', type(exc).__name__)
        self.assertEqual(
            "Compute host h1 did not answer delete_instance within 60 s "
            "([DEFAULT] rpc_response_timeout_migration): its agent stopped "
            "or restarted while it held the request, or is stuck",
            exception.brief(exc))

    def test_a_peer_that_lost_its_broker_link_did_not_answer(self):
        # The caller asks again (or moves on) as after a timeout; an
        # outage once ended a migration "error" with the bare reset.
        exc = self.assertRaises(rpc.LinkLost, self.client.call, self.ctxt,
                                'lose_own_link')
        self.assertIsInstance(exc, messaging.MessagingTimeout)
        self.assertIn('the connection to the broker broke', str(exc))
        self.assertIn('Connection reset by peer', str(exc))

    def test_numamig_exception_arrives_as_itself(self):
        exc = self.assertRaises(exception.MigrationPreCheckError,
                                self.client.call, self.ctxt, 'refuse',
                                host='dst')
        self.assertIsInstance(exc, exception.MigrationError)
        if self.transport_kind == 'rabbit':
            # Rebuilt from the wire by oslo.messaging, not passed in memory.
            self.assertEqual('MigrationPreCheckError_Remote',
                             type(exc).__name__)
        self.assertIn('dst has no free 2048 KiB pages on any cell', str(exc))
        self.assertEqual(
            {'reason': 'dst has no free 2048 KiB pages on any cell'},
            exc.kwargs)


    def test_a_peer_error_says_its_message_alone(self):
        # What the conductor records (a migration's or memory change's
        # error) and what an operator reads: the peer's message, not its
        # stack (there over RabbitMQ until numamig.rpc.RPCClient).
        exc = self.assertRaises(exception.MigrationPreCheckError,
                                self.client.call, self.ctxt, 'refuse',
                                host='dst')
        self.assertEqual(str(exception.MigrationPreCheckError(
            reason='dst has no free 2048 KiB pages on any cell')), str(exc))
        self.assertEqual(str(exc), f"{exc}")
        builtin = self.assertRaises(ValueError, self.client.call, self.ctxt,
                                    'fail_unexpectedly', kind='builtin')
        self.assertEqual('builtin failure on the peer', str(builtin))
        # RemoteError on RabbitMQ, PeerBug itself where not serialized.
        foreign = self.assertRaises((messaging.RemoteError, PeerBug),
                                    self.client.call, self.ctxt,
                                    'fail_unexpectedly', kind='foreign')
        self.assertNotIn('Traceback', str(foreign))
        self.assertIn('foreign failure on the peer', str(foreign))
        if self.transport_kind == 'rabbit':
            self.assertIsInstance(foreign, messaging.RemoteError)
            # Kept for whoever wants the peer's stack.
            for error in (exc, builtin, foreign):
                self.assertIn('Traceback', error.remote_traceback)


class MalformedObjectTest(RPCTestBase):

    def test_invalid_object_rejected_before_endpoint(self):
        topology = samples.host_topology()
        topology.cells[1].pinned_cpus = {0}
        exc = self.assertRaises(exception.ObjectValidationError,
                                self.client.call, self.ctxt,
                                'echo_topology', topology=topology)
        self.assertIn('Invalid HostNUMACell: cell 1: pinned CPUs [0]',
                      str(exc))
        self.assertEqual([], self.endpoint.calls)

    def test_uncoercible_primitive_rejected_naming_object(self):
        primitive = samples.host_topology().obj_to_primitive()
        primitive['numamig_object.data']['cells'][0][
            'numamig_object.data']['cpuset'] = ['zero']
        exc = self.assertRaises(exception.ObjectValidationError,
                                self.client.call, self.ctxt,
                                'echo_topology', topology=primitive)
        self.assertIn("Invalid HostNUMACell: malformed primitive: field "
                      "cpuset = ['zero']", str(exc))
        self.assertEqual([], self.endpoint.calls)

    def test_object_newer_than_receiver_rejected(self):
        primitive = samples.host_topology().obj_to_primitive()
        primitive['numamig_object.version'] = '1.9'
        exc = self.assertRaises(exception.ObjectValidationError,
                                self.client.call, self.ctxt,
                                'echo_topology', topology=primitive)
        self.assertIn('Invalid HostNUMATopology: Version 1.9', str(exc))


class VersionCapTest(RPCTestBase):

    def capped_client(self, cap):
        return self.rpc.client(
            self.topic, version=cap, version_cap=cap,
            version_manifest=rpc.manifest_for_cap(OBJECT_VERSIONS, cap))

    def test_capped_client_backports_live_migrate_data(self):
        wire = self.wire_objects('LiveMigrateData')
        result = self.capped_client('1.0').call(
            self.ctxt, 'check_destination',
            migrate_data=samples.live_migrate_data())
        self.assertEqual('1.0', result['version'])
        (_name, _ctxt, received), = self.endpoint.calls
        self.assertIsNone(received.dst_numa_info)
        self.assertFalse(received.src_supports_numa_live_migration)
        self.assertFalse(received.dst_supports_numa_live_migration)
        for field in live_migrate_data.NUMA_FIELDS:
            self.assertNotIn(field, result['changed'])
            self.assertNotIn(field, wire[0]['numamig_object.data'])
        self.assertEqual('src', received.source_host)

    def test_uncapped_client_sends_numa_fields(self):
        wire = self.wire_objects('LiveMigrateData')
        result = self.rpc.client(self.topic, version='1.1').call(
            self.ctxt, 'check_destination',
            migrate_data=samples.live_migrate_data())
        self.assertEqual(objects.LiveMigrateData.VERSION, result['version'])
        (_name, _ctxt, received), = self.endpoint.calls
        self.assertEqual({0: {1}}, received.dst_numa_info.cell_pins)
        self.assertIn('dst_numa_info', wire[0]['numamig_object.data'])

    def test_capped_client_refuses_newer_call_locally(self):
        client = self.capped_client('1.0')
        self.assertFalse(client.can_send_version('1.1'))
        self.assertRaises(messaging.RPCVersionCapError,
                          client.prepare(version='1.1').call, self.ctxt,
                          'check_destination',
                          migrate_data=samples.live_migrate_data())
        self.assertEqual([], self.endpoint.calls)


class OlderEndpointTest(RPCTestBase):
    """An uncapped (new) client calling an endpoint of an older release."""

    endpoint_version = '1.0'

    def test_newer_method_version_gets_unsupported_version(self):
        exc = self.assertRaises(
            messaging.UnsupportedVersion,
            self.rpc.client(self.topic, version='1.1').call, self.ctxt,
            'check_destination', migrate_data=samples.live_migrate_data())
        self.assertIn('Endpoint does not support RPC version 1.1', str(exc))
        self.assertIn('check_destination', str(exc))
        self.assertEqual([], self.endpoint.calls)

    def test_older_version_still_served(self):
        result = self.rpc.client(self.topic, version='1.0').call(
            self.ctxt, 'echo_topology', topology=samples.host_topology())
        self.assertEqual(samples.host_topology(), result)


class ConfiguredTransportTest(RPCTestBase):

    def test_get_transport_returns_the_fixture_transport(self):
        from numamig.conf import CONF
        self.assertIs(self.rpc.transport, rpc.get_transport(CONF))


class AMQPPollingTest(base.TestCase):
    """After a call, a daemon's AMQP pollers do not spin in 1 ms slices.

    oslo.messaging restarts each listener's and reply waiter's wait at
    1 ms after every message; numamig starts it at rpc.AMQP_FIRST_POLL_S
    (each wake is a pass through kombu, per poller, after every
    message).
    """

    def test_pollers_wake_a_few_times_after_a_call_not_dozens(self):
        reason = rpc_fixture.rabbit_unreachable_reason()
        if reason:
            self.skipTest(reason)
        from oslo_messaging._drivers import impl_rabbit
        rig = self.useFixture(rpc_fixture.RPCFixture('rabbit'))
        topic = rig.topic('compute')
        endpoint = Endpoint('1.1')
        rig.start_server([endpoint], topic)
        client = rig.client(topic)
        topology = samples.host_topology()
        client.call(rig.context, 'echo_topology', topology=topology)
        polls = []
        real = impl_rabbit.Connection.consume

        def counted(connection, timeout=None):
            polls.append(timeout)
            return real(connection, timeout=timeout)
        self.useFixture(fixtures.MonkeyPatch(
            'oslo_messaging._drivers.impl_rabbit.Connection.consume',
            counted))
        for _ in range(3):
            client.call(rig.context, 'echo_topology', topology=topology)
        # Two pollers (the server's listener, the client's reply
        # waiter) for 0.4 s after three calls: with 1 ms first slices
        # they woke ~9 times each after every message (1, 2, 4, ... 256
        # ms); from 50 ms, 3 or 4 times.
        time.sleep(0.4)
        self.assertLessEqual(len(polls), 24, sorted(polls))
        self.assertGreaterEqual(min(polls), rpc.AMQP_FIRST_POLL_S)


class StartRequestEndpoint:
    """The one method of a compute agent this test casts to."""

    target = messaging.Target(version=compute_rpcapi.ComputeAPI.VERSION)

    def __init__(self):
        self.started = []

    def live_migration(self, context, instance, migration, migrate_data):
        self.started.append(migration.uuid)


class StartRequestDeliveryTest(base.TestCase):
    """A start request cast before the source's queue exists (a broker
    restart took it; the agent declares it again when it reconnects) is
    delivered once the agent listens, not lost until the conductor's
    sweep sends it again."""

    scenarios = rpc_fixture.TRANSPORT_SCENARIOS

    def setUp(self):
        super().setUp()
        self.rpc = self.useFixture(rpc_fixture.RPCFixture(
            self.transport_kind))
        self.topic = self.rpc.topic('compute')
        self.api = compute_rpcapi.ComputeAPI(
            self.rpc.transport, topic=self.topic, exchange=self.rpc.exchange)
        self.inst = samples.instance()
        self.migration = objects.Migration(
            uuid='5f0c7a3e-9b1d-4c2e-8a6f-0d4b7e1c9a25',
            instance_uuid=self.inst.uuid, source_host='late-source',
            dest_host='dst', status='queued')

    def test_cast_before_the_source_listens_arrives(self):
        endpoint = StartRequestEndpoint()
        listening = threading.Timer(
            1.0, self.rpc.start_server, ([endpoint], self.topic),
            {'server': 'late-source'})
        listening.start()
        self.addCleanup(listening.cancel)
        pauses = []

        def sleep(seconds):
            pauses.append(seconds)
            time.sleep(seconds)
        self.assertIs(True, self.api.live_migration(
            self.rpc.context, self.inst, self.migration,
            objects.LiveMigrateData(
                migration_uuid=self.migration.uuid,
                instance_uuid=self.inst.uuid, source_host='late-source',
                dest_host='dst'), sleep=sleep))
        if self.transport_kind == 'rabbit':
            # The broker returned the casts made before the queue was.
            self.assertGreaterEqual(sum(pauses), 0.5)
        listening.join(10)
        deadline = time.monotonic() + 10
        while not endpoint.started and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual([self.migration.uuid], endpoint.started)



class StartRequestReturnedTest(base.TestCase):
    """On RabbitMQ a start request no queue takes comes back, and after
    the wait allowed the conductor leaves it to its sweep (fake:// keeps
    every cast, so there is nothing to see there)."""

    def test_a_source_that_never_listens_is_left_to_the_sweep(self):
        rig = self.useFixture(rpc_fixture.RPCFixture('rabbit'))
        api = compute_rpcapi.ComputeAPI(
            rig.transport, topic=rig.topic('compute'), exchange=rig.exchange)
        api.client.timeout = 3
        inst = samples.instance()
        migration = objects.Migration(
            uuid='0b6e2d4a-7c1f-4e9a-b3d5-8f2a6c0e4b71',
            instance_uuid=inst.uuid, source_host='gone-source',
            dest_host='dst', status='queued')
        started = time.monotonic()
        self.assertIs(False, api.live_migration(
            rig.context, inst, migration,
            objects.LiveMigrateData(
                migration_uuid=migration.uuid, instance_uuid=inst.uuid,
                source_host='gone-source', dest_host='dst')))
        # A third of the 3 s timeout, in growing pauses.
        self.assertLess(time.monotonic() - started, 2.5)


class SlowEndpoint:
    """An agent method that works longer than a caller's silence, and
    one that answers at once; both count their calls."""

    target = messaging.Target(version='1.0')

    def __init__(self, work_s):
        self.work_s = work_s
        self.calls = collections.Counter()

    def work(self, context):
        self.calls['work'] += 1
        time.sleep(self.work_s)
        return 'worked'

    def answer(self, context):
        self.calls['answer'] += 1
        return 'answered'


class SilenceOnTheBrokerTest(base.TestCase):
    """``[DEFAULT] rpc_call_silence_timeout`` on RabbitMQ, where its
    heartbeats and lost requests are real: a server working longer than
    the silence heartbeats and is waited for, once; a request no queue
    took (its server declares its queue a moment later, as after a
    broker restart) is sent again after the silence, not after the
    call's whole timeout."""

    SILENCE_S = 2

    def setUp(self):
        super().setUp()
        reason = rpc_fixture.rabbit_unreachable_reason()
        if reason:
            self.skipTest(reason)
        self.rpc = self.useFixture(rpc_fixture.RPCFixture('rabbit'))
        self.topic = self.rpc.topic('compute')
        self.flags(rpc_call_silence_timeout=self.SILENCE_S)

    def test_a_server_working_longer_is_waited_for_once(self):
        endpoint = SlowEndpoint(work_s=3 * self.SILENCE_S)
        self.rpc.start_server([endpoint], self.topic)
        client = self.rpc.client(self.topic, timeout=30)
        self.assertEqual('worked', client.call(self.rpc.context, 'work'))
        self.assertEqual(1, endpoint.calls['work'])

    def _lost_then_listening(self, silence, timeout):
        """Ask ``answer`` of a server that starts listening 1 s after
        the request was published (so that the request is lost); the
        seconds the answer took, or the exception."""
        self.flags(rpc_call_silence_timeout=silence)
        endpoint = SlowEndpoint(work_s=0)
        late = threading.Timer(1.0, self.rpc.start_server,
                               ([endpoint], self.topic))
        late.start()
        self.addCleanup(late.cancel)
        client = self.rpc.client(self.topic, timeout=timeout)
        began = time.monotonic()
        try:
            answer = client.call(self.rpc.context, 'answer')
        except messaging.MessagingTimeout as exc:
            return time.monotonic() - began, exc, endpoint
        finally:
            late.join(10)
        self.assertEqual('answered', answer)
        return time.monotonic() - began, None, endpoint

    def test_a_lost_request_is_sent_again_after_the_silence(self):
        took, error, endpoint = self._lost_then_listening(
            silence=self.SILENCE_S, timeout=30)
        self.assertIsNone(error)
        self.assertLess(took, 3 * self.SILENCE_S)
        self.assertEqual(1, endpoint.calls['answer'])

    def test_without_it_a_lost_request_costs_the_whole_wait(self):
        # The same loss with the silence off: the call waits out its
        # timeout (what every lost request cost before).
        took, error, endpoint = self._lost_then_listening(
            silence=0, timeout=3 * self.SILENCE_S)
        self.assertIsInstance(error, messaging.MessagingTimeout)
        self.assertGreaterEqual(took, 3 * self.SILENCE_S - 0.5)
        self.assertEqual(0, endpoint.calls['answer'])
