"""Unit tests of numamig.rpc: manifests, serializers, transport cache."""

import logging

import fixtures
from oslo_config import cfg
import oslo_messaging as messaging

from numamig import context as nm_context
from numamig import exception
from numamig import objects
from numamig import rpc
from numamig.conf import CONF
from tests import base
from tests.unit.objects import samples

VERSIONS = {
    '1.0': {'LiveMigrateData': '1.0'},
    '1.1': {'LiveMigrateData': '1.1'},
    '1.3': {'LiveMigrateData': '1.1', 'Extra': '1.0'},
    '2.0': {'LiveMigrateData': '2.0'},
}


class ManifestForCapTest(base.TestCase):

    def test_no_cap_means_newest(self):
        # Each registered object's newest version, whatever the manifests
        # say (they name LiveMigrateData 2.0 here).
        manifest = rpc.manifest_for_cap(VERSIONS, None)
        self.assertEqual(objects.LiveMigrateData.VERSION,
                         manifest['LiveMigrateData'])
        self.assertEqual(objects.Migration.VERSION, manifest['Migration'])

    def test_no_cap_holds_back_what_it_is_told(self):
        manifest = rpc.manifest_for_cap(VERSIONS, None,
                                        held_back={'Migration': '1.0'})
        self.assertEqual('1.0', manifest['Migration'])
        self.assertEqual(objects.Instance.VERSION, manifest['Instance'])

    def test_exact_version(self):
        self.assertEqual({'LiveMigrateData': '1.0'},
                         rpc.manifest_for_cap(VERSIONS, '1.0'))

    def test_highest_within_cap(self):
        self.assertEqual(VERSIONS['1.1'],
                         rpc.manifest_for_cap(VERSIONS, '1.2'))
        self.assertEqual(VERSIONS['1.3'],
                         rpc.manifest_for_cap(VERSIONS, '1.9'))

    def test_minor_compared_as_number(self):
        versions = {'1.2': {'A': '1.0'}, '1.10': {'A': '1.1'}}
        self.assertEqual({'A': '1.1'}, rpc.manifest_for_cap(versions, '1.11'))

    def test_other_major_not_compatible(self):
        self.assertEqual(VERSIONS['2.0'],
                         rpc.manifest_for_cap(VERSIONS, '2.5'))
        self.assertRaisesMessage(
            exception.InvalidConfiguration,
            "cap 3.0 is below every known API version ['1.0', '1.1', "
            "'1.3', '2.0']", rpc.manifest_for_cap, VERSIONS, '3.0')

    def test_cap_below_every_version(self):
        self.assertRaisesMessage(
            exception.InvalidConfiguration,
            'Invalid configuration option upgrade_levels: cap 0.9 is below',
            rpc.manifest_for_cap, VERSIONS, '0.9')

    def test_malformed_cap(self):
        self.assertRaisesMessage(
            exception.InvalidConfiguration,
            "'one' is not an RPC version such as '1.3'",
            rpc.manifest_for_cap, VERSIONS, 'one')


class ObjectSerializerTest(base.TestCase):

    def test_without_manifest_sends_current_version(self):
        primitive = rpc.ObjectSerializer().serialize_entity(
            None, samples.live_migrate_data())
        self.assertEqual(objects.LiveMigrateData.VERSION,
                         primitive['numamig_object.version'])
        self.assertIn('dst_numa_info', primitive['numamig_object.data'])

    def test_manifest_backports(self):
        serializer = rpc.ObjectSerializer(
            {'LiveMigrateData': '1.0', 'NUMAMigrateInfo': '1.0'})
        primitive = serializer.serialize_entity(
            None, samples.live_migrate_data())
        self.assertEqual('1.0', primitive['numamig_object.version'])
        self.assertNotIn('dst_numa_info', primitive['numamig_object.data'])

    def test_manifest_without_the_object_sends_current(self):
        serializer = rpc.ObjectSerializer({'Other': '1.0'})
        primitive = serializer.serialize_entity(None, samples.limits())
        self.assertEqual('1.0', primitive['numamig_object.version'])

    def test_round_trip_of_nested_containers(self):
        serializer = rpc.ObjectSerializer()
        value = {'hosts': [samples.host_topology()], 'n': 3}
        back = serializer.deserialize_entity(
            None, serializer.serialize_entity(None, value))
        self.assertEqual(value, back)

    def test_invalid_object_in_a_list_rejected(self):
        serializer = rpc.ObjectSerializer()
        pool = samples.pages()
        pool.used = 1000
        wire = serializer.serialize_entity(None, {'pools': [pool]})
        self.assertRaisesMessage(
            exception.ObjectValidationError,
            'Invalid NUMAPagesTopology: 2048 KiB pool: used (1000)',
            serializer.deserialize_entity, None, wire)

    def test_unknown_object_named(self):
        wire = samples.limits().obj_to_primitive()
        wire['numamig_object.name'] = 'Teleporter'
        self.assertRaisesMessage(
            exception.ObjectValidationError,
            'Invalid Teleporter: Unsupported object type Teleporter',
            rpc.ObjectSerializer().deserialize_entity, None, [wire])

    def test_primitives_that_do_not_parse_are_refused_naming_them(self):
        # Found by the wire fuzz: each used to escape as the library's
        # own error (InvalidVersion, KeyError, ...), a crash on the wire.
        good = samples.limits().obj_to_primitive()
        for change in ({'numamig_object.version': 'x'},
                       {'numamig_object.data': 'not a mapping'},
                       {'numamig_object.data': {'cpu_allocation_ratio':
                                                {'a': 1}}}):
            wire = dict(good, **change)
            exc = self.assertRaises(
                exception.ObjectValidationError,
                rpc.ObjectSerializer().deserialize_entity, None, wire)
            self.assertIn('NUMALimits', str(exc))
        # Data that is no mapping used to arrive as an object of defaults.
        self.assertRaisesMessage(
            exception.ObjectValidationError, 'not a mapping',
            rpc.ObjectSerializer().deserialize_entity, None,
            dict(good, **{'numamig_object.data': 'x'}))
        deep = good
        for _ in range(rpc.MAX_DEPTH + 1):
            deep = [deep]
        self.assertRaisesMessage(
            exception.ObjectValidationError, 'nested deeper',
            rpc.ObjectSerializer().deserialize_entity, None, deep)

    def test_plain_values_pass_through(self):
        serializer = rpc.ObjectSerializer()
        self.assertEqual({'a': [1, 'b']},
                         serializer.deserialize_entity(None, {'a': [1, 'b']}))


class RequestContextSerializerTest(base.TestCase):

    def test_context_round_trip(self):
        serializer = rpc.get_serializer()
        ctxt = nm_context.RequestContext(user_id='u', project_id='p',
                                         request_id='req-1')
        back = serializer.deserialize_context(
            serializer.serialize_context(ctxt))
        self.assertIsInstance(back, nm_context.RequestContext)
        self.assertEqual(('u', 'p', 'req-1'),
                         (back.user_id, back.project_id, back.request_id))

    def test_entities_delegate_to_object_serializer(self):
        serializer = rpc.get_serializer()
        topology = objects.HostNUMATopology(cells=[samples.host_cell()])
        self.assertEqual(topology, serializer.deserialize_entity(
            None, serializer.serialize_entity(None, topology)))

    def test_admin_context(self):
        self.assertTrue(nm_context.get_admin_context().is_admin)


class TransportTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.addCleanup(rpc.cleanup)

    def test_cached_per_url(self):
        first = rpc.get_transport(CONF, url='fake://')
        self.assertIs(first, rpc.get_transport(CONF, url='fake://'))

    def test_configured_url_used(self):
        transport = rpc.get_transport(CONF, url='fake://')
        self.flags(transport_url='fake://')
        self.assertIs(transport, rpc.get_transport(CONF))

    def test_cleanup_closes_and_forgets(self):
        transport = rpc.get_transport(CONF, url='fake://')
        closed = []
        self.useFixture(fixtures.MockPatchObject(
            transport, 'cleanup', side_effect=lambda: closed.append(1)))
        rpc.cleanup()
        self.assertEqual([1], closed)
        self.assertIsNot(transport, rpc.get_transport(CONF, url='fake://'))

    def test_numamig_and_dispatcher_exceptions_allowed(self):
        self.assertIn('numamig.exception', rpc.ALLOWED_EXMODS)
        self.assertIn(messaging.UnsupportedVersion.__module__,
                      rpc.ALLOWED_EXMODS)

    def test_client_honours_cap(self):
        transport = rpc.get_transport(CONF, url='fake://')
        client = rpc.get_client(transport,
                                messaging.Target(topic='t', version='1.0'),
                                version_cap='1.0')
        self.assertFalse(client.can_send_version('1.1'))
        self.assertTrue(client.can_send_version('1.0'))


class AmqpCloseNoticeTest(base.TestCase):

    def test_a_transport_quiets_the_amqp_close_notice(self):
        from amqp import abstract_channel
        self.addCleanup(rpc.cleanup)
        logger = self.useFixture(fixtures.FakeLogger(name='amqp',
                                                     level=logging.DEBUG))
        rpc.get_transport(CONF, url='fake://')
        logging.getLogger('amqp').warning(
            abstract_channel.IGNORED_METHOD_DURING_CHANNEL_CLOSE, (60, 30),
            1)
        self.assertEqual('', logger.output)


class ResponseTimeoutTest(base.TestCase):

    def test_read_before_any_client_registered_it(self):
        # A daemon's wiring reads it before oslo.messaging built a client
        # (the fault suite's agents failed to start without this).
        conf = cfg.ConfigOpts()
        conf([], project='numamig-test')
        self.assertRaises(cfg.NoSuchOptError, getattr, conf,
                          'rpc_response_timeout')
        self.assertEqual(60, rpc.response_timeout(conf))
        conf.set_override('rpc_response_timeout', 42)
        self.assertEqual(42, rpc.response_timeout(conf))

    def test_the_library_registering_it_later_does_not_clash(self):
        conf = cfg.ConfigOpts()
        conf([], project='numamig-test')
        rpc.response_timeout(conf)
        transport = messaging.get_rpc_transport(conf, url='fake://')
        self.addCleanup(transport.cleanup)
        messaging.get_rpc_client(transport, messaging.Target(topic='t'))
        self.assertEqual(60, rpc.response_timeout(conf))


class _Echo:
    target = messaging.Target(version='1.0')

    def echo(self, ctxt, value):
        return value


class RequestPoolTest(base.TestCase):
    """RPC servers start a thread per request only while none is idle."""

    def test_sequential_requests_reuse_one_thread(self):
        transport = rpc.get_transport(CONF, url='inproc://')
        target = messaging.Target(topic=f'pool-{id(self)}', server='s')
        server = rpc.get_server(transport, target, [_Echo()])
        server.start()
        self.addCleanup(server.wait)
        self.addCleanup(server.stop)
        client = rpc.get_client(transport, target).prepare(timeout=10)
        ctxt = nm_context.get_admin_context()
        for n in range(20):
            self.assertEqual(n, client.call(ctxt, 'echo', value=n))
        pool = server._work_executor
        self.assertIsInstance(pool, rpc.RequestPool)
        # futurist.ThreadPoolExecutor would hold 20 threads by now.
        self.assertLessEqual(pool.num_workers, 2)
        self.assertEqual(CONF.executor_thread_pool_size, pool._max_workers)


class ObjectNeedsInTest(base.TestCase):
    """object_needs_in (one walk) answers what object_versions_in and
    holds_virtio_mem (a walk each) answer."""

    def _without(self, topology):
        for cell in topology.cells:
            for name in ('virtio_mem_size_mb', 'virtio_mem_block_kb',
                         'virtio_mem_requested_mb', 'virtio_mem_current_mb'):
                setattr(cell, name, None)
        return topology

    def _cases(self):
        plain = samples.instance()
        self._without(plain.numa_topology)
        self._without(plain.migration_context.old_numa_topology)
        self._without(plain.migration_context.new_numa_topology)
        in_context_only = plain.obj_clone()
        in_context_only.migration_context.new_numa_topology = \
            samples.instance_topology()
        data = samples.live_migrate_data()
        data.migration_context = in_context_only.migration_context
        return [
            ((plain, samples.migration(), 'host-b'), False),
            ((samples.instance(),), True),
            ((in_context_only,), True),
            (([plain, {'nested': data}],), True),
            (('no objects', 3), False),
        ]

    def test_agrees_with_holds_virtio_mem(self):
        for values, expected in self._cases():
            needs = rpc.object_needs_in(values)
            self.assertEqual(expected, rpc.holds_virtio_mem(values))
            self.assertEqual(expected, needs.virtio_mem)
            self.assertEqual(rpc.object_versions_in(values), needs.versions)
            self.assertEqual(expected, needs.versions.get(
                'InstanceNUMACell') == '1.1')


class PrimitiveForReceivedTest(base.TestCase):
    """An object received at an older version is sent as OVO would send
    a copy of it raised to its class's version (what primitive_for did
    before it stopped copying), at every version down to 1.0."""

    def _by_copy(self, obj, target):
        clone = obj.obj_clone()
        clone.VERSION = type(obj).VERSION
        return clone.obj_to_primitive(target_version=target)

    def _ordered(self, primitive):
        """The list of changed fields comes from a set: its order is not
        part of the answer."""
        if isinstance(primitive, dict):
            return {key: sorted(value) if key.endswith('.changes')
                    else self._ordered(value)
                    for key, value in primitive.items()}
        if isinstance(primitive, (list, tuple)):
            return [self._ordered(value) for value in primitive]
        return primitive

    def test_same_as_a_raised_copy(self):
        compared = 0
        for make in (samples.instance, samples.live_migrate_data,
                     samples.migration, samples.migration_context,
                     samples.instance_topology):
            obj = make()
            major, minor = map(int, type(obj).VERSION.split('.'))
            for received in range(minor):
                obj.VERSION = f'{major}.{received}'
                for target in range(received, minor + 1):
                    version = f'{major}.{target}'
                    self.assertEqual(
                        self._ordered(self._by_copy(obj, version)),
                        self._ordered(rpc.primitive_for(obj, version)))
                    compared += 1
        # One version per release: each received as 1.0 and sent at 1.0
        # and at release 2's 1.1.
        self.assertEqual(5 * 2, compared)


class TransportCacheTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.addCleanup(rpc.cleanup)

    def test_a_closed_transport_is_not_given_again(self):
        first = rpc.get_transport(CONF, url='fake:///close-test')
        self.assertIs(first, rpc.get_transport(CONF,
                                               url='fake:///close-test'))
        rpc.close_transport(first)
        second = rpc.get_transport(CONF, url='fake:///close-test')
        self.assertIsNot(first, second)

    def test_closing_leaves_other_transports_cached(self):
        kept = rpc.get_transport(CONF, url='fake:///kept')
        rpc.close_transport(rpc.get_transport(CONF, url='fake:///closed'))
        self.assertIs(kept, rpc.get_transport(CONF, url='fake:///kept'))


class _Context:
    """A prepared oslo.messaging call context that raises each of
    ``errors`` in turn, then answers ``'done'``."""

    _unset = object()

    def __init__(self, *errors, timeout=10, log=None, silence=0,
                 call_monitor_timeout=None):
        self.errors = list(errors)
        self.timeout = timeout
        self.call_monitor_timeout = call_monitor_timeout
        self.log = [] if log is None else log
        self.conf = cfg.ConfigOpts()
        self.conf.register_opt(cfg.IntOpt('rpc_call_silence_timeout',
                                          default=silence))
        self.conf([])

    def call(self, ctxt, method, **kwargs):
        self.log.append(('call', self.timeout))
        if self.errors:
            raise self.errors.pop(0)
        return 'done'

    cast = call

    def prepare(self, timeout=_unset, call_monitor_timeout=None):
        # As oslo.messaging's: what is not given is kept.
        again = _Context(
            timeout=self.timeout if timeout is self._unset else timeout,
            log=self.log, call_monitor_timeout=call_monitor_timeout)
        again.errors = self.errors
        again.conf = self.conf
        return again


class _SilentContext(_Context):
    """A call context whose first ``lost`` calls are lost (no answer,
    no heartbeat): each raises MessagingTimeout once its call monitor's
    silence, or its whole timeout, has passed on ``clock``."""

    def __init__(self, clock, lost, timeout=30, silence=6, log=None,
                 call_monitor_timeout=None):
        super().__init__(timeout=timeout, log=log, silence=silence,
                         call_monitor_timeout=call_monitor_timeout)
        self.clock = clock
        self.lost = lost

    def call(self, ctxt, method, **kwargs):
        self.log.append((self.timeout, self.call_monitor_timeout))
        if self.lost[0] > 0:
            self.lost[0] -= 1
            self.clock.now += min(self.call_monitor_timeout or self.timeout,
                                  self.timeout)
            raise messaging.MessagingTimeout('Timed out waiting for a '
                                             'reply to message ID 1')
        return 'done'

    def prepare(self, timeout=_Context._unset, call_monitor_timeout=None):
        again = _SilentContext(
            self.clock, self.lost,
            timeout=self.timeout if timeout is self._unset else timeout,
            log=self.log, call_monitor_timeout=call_monitor_timeout)
        again.conf = self.conf
        return again


class _Clock:
    def __init__(self):
        self.now = 100.0
        self.slept = []

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.slept.append(seconds)
        self.now += seconds


class LinkLostTest(base.TestCase):
    """A broken broker connection is asked again within the call's
    deadline, then is an unanswered call, not a refusal."""

    def setUp(self):
        super().setUp()
        self.clock = _Clock()

    def prepared(self, context):
        return rpc._PreparedCall(context, clock=self.clock,
                                 sleep=self.clock.sleep)

    def call(self, *errors, timeout=1):
        """A call whose every attempt fails (a 1 s deadline: one try)."""
        context = _Context(*errors, *([errors[-1]] * 20), timeout=timeout)
        return self.prepared(context).call(
            nm_context.get_admin_context(),
            'check_can_live_migrate_destination')

    def remote(self, error):
        error.remote_traceback = 'Traceback (most recent call last): ...'
        return error

    def test_asked_again_after_pauses_until_answered(self):
        reset = ConnectionResetError(104, 'Connection reset by peer')
        context = _Context(reset, reset, reset, timeout=10)
        answer = self.prepared(context).call(nm_context.get_admin_context(),
                                             'migration_set_status')
        self.assertEqual('done', answer)
        self.assertEqual([0.25, 0.5, 1.0], self.clock.slept)
        # Each try waits what is left of the call's one deadline.
        self.assertEqual([('call', 10), ('call', 10), ('call', 10),
                          ('call', 9)], context.log)

    def test_a_reset_connection_is_a_timeout_at_the_deadline(self):
        cause = ConnectionResetError(104, 'Connection reset by peer')
        context = _Context(*[cause] * 50, timeout=6)
        exc = self.assertRaises(
            rpc.LinkLost, self.prepared(context).call,
            nm_context.get_admin_context(),
            'check_can_live_migrate_destination')
        self.assertIsInstance(exc, messaging.MessagingTimeout)
        self.assertIs(cause, exc.__cause__)
        self.assertEqual(
            "check_can_live_migrate_destination: the connection to the "
            "broker broke and no answer came within the call's deadline "
            "(ConnectionResetError: [Errno 104] Connection reset by peer)",
            str(exc))
        # Paused (doubling up to 2 s), never beyond the deadline.
        self.assertEqual([0.25, 0.5, 1.0, 2.0, 2.0], self.clock.slept)
        self.assertLessEqual(self.clock.now - 100.0, 6)

    def test_a_context_without_timeout_waits_the_configured_one(self):
        reset = ConnectionResetError(104, 'Connection reset by peer')
        context = _Context(*[reset] * 200, timeout=None)
        context.conf = cfg.ConfigOpts()
        context.conf.register_opt(cfg.IntOpt('rpc_response_timeout',
                                             default=3))
        context.conf([])
        self.assertRaises(rpc.LinkLost, self.prepared(context).call,
                          nm_context.get_admin_context(), 'ping')
        self.assertEqual([0.25, 0.5, 1.0], self.clock.slept)

    def test_library_connection_errors_are_link_losses(self):
        import amqp.exceptions
        import kombu.exceptions
        for error in (kombu.exceptions.OperationalError('closed'),
                      amqp.exceptions.RecoverableConnectionError('gone'),
                      amqp.exceptions.ConnectionForced('restart'),
                      BrokenPipeError(32, 'Broken pipe'),
                      TimeoutError('timed out')):
            self.assertRaises(rpc.LinkLost, self.call, error)

    def test_a_peer_that_lost_its_own_link_is_a_link_loss(self):
        self.assertRaises(rpc.LinkLost, self.call, self.remote(
            ConnectionResetError(104, 'Connection reset by peer')))

    def test_other_errors_pass_unchanged(self):
        import amqp.exceptions
        for error in (self.remote(OSError(28, 'No space left on device')),
                      self.remote(FileNotFoundError(2, 'gone')),
                      amqp.exceptions.NotFound('no queue'),
                      ValueError('bad'),
                      exception.MigrationPreCheckError(reason='full'),
                      messaging.MessageUndeliverable(
                          Exception(), 'nova', 'compute.h1', {})):
            exc = self.assertRaises(type(error), self.call, error)
            self.assertIs(error, exc)
            self.assertNotIsInstance(exc, rpc.LinkLost)

    def test_a_timeout_passes_unchanged(self):
        error = messaging.MessagingTimeout('no reply')
        self.assertIs(error, self.assertRaises(
            messaging.MessagingTimeout, self.call, error))

    def test_a_cast_on_a_broken_link_was_not_delivered(self):
        cast = self.prepared(_Context(
            ConnectionResetError(104, 'Connection reset by peer'))).cast
        exc = self.assertRaises(messaging.MessageDeliveryFailure, cast,
                                nm_context.get_admin_context(),
                                'live_migration')
        self.assertIn('live_migration was not sent', str(exc))
        refused = self.prepared(_Context(ValueError('bad'))).cast
        self.assertRaises(ValueError, refused,
                          nm_context.get_admin_context(), 'live_migration')

    def test_it_crosses_the_wire_as_a_timeout(self):
        from oslo_messaging._drivers import common as driver_common
        data = driver_common.serialize_remote_exception(
            (rpc.LinkLost, rpc.LinkLost('claim', ConnectionResetError(
                104, 'Connection reset by peer')), None))
        exc = driver_common.deserialize_remote_exception(
            data, rpc.ALLOWED_EXMODS)
        self.assertIsInstance(exc, messaging.MessagingTimeout)
        self.assertIsInstance(exc, rpc.LinkLost)


class SilenceTest(base.TestCase):
    """A call the peer stays silent on (no answer, no call-monitor
    heartbeat) is sent again at once, within the call's deadline."""

    def setUp(self):
        super().setUp()
        self.clock = _Clock()

    def call(self, context, method='migration_set_status'):
        return rpc._PreparedCall(context, clock=self.clock,
                                 sleep=self.clock.sleep).call(
            nm_context.get_admin_context(), method)

    def test_a_lost_request_costs_the_silence_not_the_wait(self):
        context = _SilentContext(self.clock, [1], timeout=30, silence=6)
        self.assertEqual('done', self.call(context))
        # Asked with the monitor, silent 6 s, asked again with what is
        # left (24 s) and twice the silence.
        self.assertEqual([(30, 6), (24, 12)], context.log)
        self.assertEqual(6, self.clock.now - 100.0)
        self.assertEqual([], self.clock.slept)

    def test_silences_double_and_the_deadline_holds(self):
        context = _SilentContext(self.clock, [10], timeout=30, silence=3)
        self.assertRaises(messaging.MessagingTimeout, self.call, context)
        # 3 + 6 + 12 s of silence, then the 9 s left with no monitor
        # (a silence longer than what is left is the wait itself).
        self.assertEqual([(30, 3), (27, 6), (21, 12), (9, None)],
                         context.log)
        self.assertEqual(30, self.clock.now - 100.0)

    def test_off_when_set_to_zero_or_below_a_heartbeat(self):
        for silence in (0, 1):
            log = []
            context = _SilentContext(self.clock, [1], timeout=30,
                                     silence=silence, log=log)
            self.assertRaises(messaging.MessagingTimeout, self.call,
                              context)
            self.assertEqual([(30, None)], log)

    def test_a_call_no_longer_than_the_silence_has_no_monitor(self):
        context = _SilentContext(self.clock, [1], timeout=6, silence=6)
        self.assertRaises(messaging.MessagingTimeout, self.call, context)
        self.assertEqual([(6, None)], context.log)

    def test_a_timeout_the_peer_raised_is_not_a_silence(self):
        # An agent's own unanswered call, rebuilt here: the peer
        # answered, and its answer is the refusal.
        timeout = messaging.MessagingTimeout('the agent timed out')
        timeout.remote_traceback = 'Traceback (most recent call last): ...'
        context = _Context(timeout, timeout=30, silence=6)
        self.assertIs(timeout, self.assertRaises(
            messaging.MessagingTimeout, self.call, context))
        self.assertEqual([('call', 30)], context.log)

    def test_a_broken_link_keeps_the_monitor(self):
        reset = ConnectionResetError(104, 'Connection reset by peer')
        log = []
        context = _Context(reset, timeout=30, silence=6, log=log)
        seen = []
        real_call = _Context.call

        def call(self, ctxt, method, **kwargs):
            seen.append(self.call_monitor_timeout)
            return real_call(self, ctxt, method, **kwargs)

        self.useFixture(fixtures.MonkeyPatch(
            'tests.unit.test_rpc._Context.call', call))
        self.assertEqual('done', self.call(context))
        self.assertEqual([6, 6], seen)

