"""The conductor's clients: where each call goes (namespace, version,
topic), and what is dropped or refused for a conductor that cannot take
it. The operators' client (rpcapi.ConductorAPI) and the agents'
(records_rpcapi.RecordAPI) each reach their own API; both reach release
1's one API when the conductor or ``[upgrade_levels] conductor`` is of
release 1."""

from unittest import mock

import fixtures
import oslo_messaging as messaging
from oslo_utils import uuidutils

from numamig import exception
from numamig.conductor import records_rpcapi
from numamig.conductor import rpcapi
from numamig.conductor import rpcclient
from numamig.objects import service as service_obj
from tests import base
from tests.unit.db import base as db_base

RESULT = {'emulated': True, 'elapsed_ms': 3}
NEWEST = service_obj.SERVICE_VERSION


def _tuple(version):
    return tuple(int(part) for part in version.split('.'))


class FakeConductor(fixtures.Fixture):
    """Every RPC client numamig makes reaches a conductor of
    ``service_version``; what is sent is recorded in ``sent`` as
    (namespace, version, method, kwargs), with its topic and options in
    ``options``. A version the conductor does not serve is refused
    (UnsupportedVersion), as its RPC server would."""

    def __init__(self, service_version=NEWEST):
        super().__init__()
        self.service_version = service_version
        self.sent = []
        self.options = []
        self.answers = []

    def _setUp(self):  # noqa: N802 - the fixtures API
        self.useFixture(fixtures.MockPatch('numamig.rpc.get_client',
                                           side_effect=self._get_client))

    def _serves(self, namespace, version):
        key = {None: 'conductor_rpc', 'records': 'conductor_records_rpc',
               'operations': 'conductor_operations_rpc'}[namespace]
        served = service_obj.api_version_for(self.service_version, key)
        return served is not None and \
            _tuple(version)[0] == _tuple(served)[0] and \
            _tuple(version) <= _tuple(served)

    def _answer(self, method):
        if method == 'ping':
            return 'pong' if self.service_version == 1 else {
                'service_version': self.service_version}
        answer = self.answers.pop(0) if self.answers else 'answer'
        if isinstance(answer, Exception):
            raise answer
        return answer

    def _get_client(self, transport, target, version_cap=None, **kwargs):
        client = mock.Mock(name=f'client-{target.namespace}-{version_cap}')
        client.transport = transport
        client.can_send_version.side_effect = lambda v: (
            version_cap is None or
            _tuple(v)[0] == _tuple(version_cap)[0] and
            _tuple(v) <= _tuple(version_cap))

        def prepare(version=target.version, **options):
            cctxt = mock.Mock()

            def send(ctxt, method, **kw):
                self.sent.append((target.namespace, version, method, kw))
                self.options.append(dict(options, topic=target.topic))
                if not self._serves(target.namespace, version):
                    raise messaging.UnsupportedVersion(version)
                return self._answer(method)
            cctxt.call.side_effect = send
            cctxt.cast.side_effect = lambda ctxt, method, **kw: (
                self.sent.append((target.namespace, version, method, kw)),
                self.options.append(dict(options, topic=target.topic)))
            return cctxt
        client.prepare.side_effect = prepare
        return client

    def calls(self):
        """(namespace, version, method) of what was sent."""
        return [(n, v, m) for n, v, m, _ in self.sent]


class ClientTestCase(base.TestCase):

    conductor_version = NEWEST

    def setUp(self):
        super().setUp()
        self.conductor = self.useFixture(FakeConductor(
            self.conductor_version))
        self.transport = mock.Mock(name='transport')
        self.transport.conf.rpc_response_timeout = 60

    def operators(self, **kwargs):
        kwargs.setdefault('conductor_version', self.conductor_version)
        return rpcapi.ConductorAPI(self.transport, **kwargs)

    def agents(self, **kwargs):
        kwargs.setdefault('conductor_version', self.conductor_version)
        return records_rpcapi.RecordAPI(self.transport, **kwargs)


class OperationsAPITest(ClientTestCase):
    """The operators' client and a conductor of this release."""

    def test_release_2_calls_go_to_the_operations_namespace(self):
        api = self.operators()
        api.compute_node_delete(None, 'old-1')
        api.host_refresh_usage(None, 'h-1')
        api.host_set_disabled(None, 'h-1', True, 'new DIMMs')
        api.host_drain_plan(None, 'h-1', to=('h-2',), keep_free_nodes=1)
        api.host_drain_start(None, 'h-1', 3, to=('h-2',), drain_uuid='d-1')
        api.host_drain_show(None, host='h-1')
        api.host_drain_wait(None, {'uuid': 'd-1', 'signature': 's'}, 5)
        api.host_drain_abort(None, 'h-1', abort_running=True)
        api.host_defragment_plan(None, 8, 1024, {'hw:numa_nodes': '1'},
                                 hosts=('h-1',), max_moves=2)
        api.host_defragment_start(None, 8, 1024, {'hw:numa_nodes': '1'}, 2,
                                  hosts=('h-1',), drain_uuid='d-2')
        api.migration_resume(None, 'm', pauses=1)
        api.instance_memory_set(None, 'c', 'i', 0, 1024)
        api.host_reclaim(None, 'c', 'h-1', 0, 512)
        self.assertEqual({('operations', '2.0')},
                         {(n, v) for n, v, _ in self.conductor.calls()})
        self.assertEqual([
            {'host': 'h-1', 'disabled': True, 'reason': 'new DIMMs'},
            {'host': 'h-1', 'to': ['h-2'], 'keep_free_nodes': 1},
            {'host': 'h-1', 'drain_uuid': 'd-1', 'parallel': 3,
             'to': ['h-2'], 'keep_free_nodes': 0},
            {'host': 'h-1', 'drain_uuid': None},
            {'drain_uuid': 'd-1', 'signature': 's', 'wait_s': 5},
            {'host': 'h-1', 'abort_running': True}],
            [kw for _, _, _, kw in self.conductor.sent[2:8]])

    def test_release_1_calls_go_there_too_with_release_2_arguments(self):
        api = self.operators()
        api.live_migrate_instance(None, 'i', migration_uuid='m-1',
                                  priority=7, policy='nfv')
        api.live_migration_dry_run(None, 'i-1', policy='nfv')
        api.migration_get(None, 'm')
        api.instance_delete(None, 'i')
        api.heal_claims(None, dry_run=True)
        self.assertEqual({('operations', '2.0')},
                         {(n, v) for n, v, _ in self.conductor.calls()})
        kwargs = self.conductor.sent[0][3]
        self.assertEqual(('m-1', 7, 'nfv'), (kwargs['migration_uuid'],
                                             kwargs['priority'],
                                             kwargs['policy']))
        self.assertEqual('nfv', self.conductor.sent[1][3]['policy'])

    def test_a_request_chooses_its_uuids_once(self):
        api = self.operators()
        api.live_migrate_instance(None, 'i')
        api.host_drain_start(None, 'h-1', 1)
        self.assertTrue(uuidutils.is_uuid_like(
            self.conductor.sent[0][3]['migration_uuid']))
        self.assertTrue(uuidutils.is_uuid_like(
            self.conductor.sent[1][3]['drain_uuid']))

    def test_wait_sent_with_what_it_saw(self):
        seen = mock.Mock(uuid='m-1', status='running', memory_processed=7)
        self.operators().migration_wait(None, seen, 10)
        (namespace, version, method, kwargs), = self.conductor.sent
        self.assertEqual(('operations', '2.0', 'migration_wait'),
                         (namespace, version, method))
        self.assertEqual({'migration_uuid': 'm-1', 'status': 'running',
                          'memory_processed': 7, 'timeout': 10}, kwargs)
        # The call outlives the wait it asks for.
        self.assertGreater(self.conductor.options[0]['timeout'], 10)

    def test_a_call_no_conductor_queue_took_is_sent_again(self):
        # After a broker restart, until a conductor declared its queue
        # again: the request comes back and is sent again, not dropped.
        self.patch(rpcclient.rpc, 'RETURNED_PAUSE_S', 0.01)
        self.conductor.answers = [messaging.MessageUndeliverable(
            Exception('NO_ROUTE'), 'numamig', 'numamig-conductor', {}),
            'answer']
        self.assertEqual('answer', self.operators().migration_get(None, 'm'))
        self.assertEqual(2, len(self.conductor.sent))
        self.assertEqual([True, True],
                         [o['transport_options'].at_least_once
                          for o in self.conductor.options])


class OperationsCappedTest(ClientTestCase):
    """``[upgrade_levels] conductor`` at release 1: release 1's API."""

    def api(self):
        return self.operators(version_cap='release-1')

    def test_reads_and_release_1_operations_go_to_release_1_s_api(self):
        api = self.api()
        api.migration_get(None, 'm')
        api.instance_delete(None, 'i')
        self.assertEqual([(None, '1.0', 'migration_get'),
                          (None, '1.1', 'instance_delete')],
                         self.conductor.calls())

    def test_release_2_calls_are_refused_clearly(self):
        api = self.api()
        for call, what in (
                (lambda: api.compute_node_delete(None, 'h'),
                 'deleting a host'),
                (lambda: api.host_refresh_usage(None, 'h'),
                 "recomputing a host's usage"),
                (lambda: api.host_set_disabled(None, 'h', False),
                 'enabling a host'),
                (lambda: api.host_drain_start(None, 'h', 1),
                 'draining a host'),
                (lambda: api.host_defragment_start(None, 8, 1024, {}, 1),
                 'carrying out a defragmentation'),
                (lambda: api.migration_resume(None, 'm'),
                 'resuming a post-copy migration'),
                (lambda: api.live_migration_dry_run(None, 'i', policy='x'),
                 'a dry run under a requested policy')):
            exc = self.assertRaises(exception.Invalid, call)
            self.assertIn(f'{what} needs conductor API 2.0, but '
                          f'[upgrade_levels] conductor caps', str(exc))
        exc = self.assertRaises(exception.Invalid, api.live_migrate_instance,
                                None, 'i', policy='nfv')
        self.assertIn('a convergence policy needs conductor API 2.0',
                      str(exc))
        self.assertRaises(messaging.UnsupportedVersion, api.migration_wait,
                          None, mock.Mock(), 10)
        self.assertEqual([], self.conductor.sent)

    def test_release_2_arguments_are_not_sent(self):
        with self.assertLogs('numamig.conductor.rpcclient', 'INFO') as logs:
            self.api().live_migrate_instance(None, 'i', priority=100)
        (namespace, version, _, kwargs), = self.conductor.sent
        self.assertEqual((None, '1.0'), (namespace, version))
        self.assertFalse({'priority', 'migration_uuid'} & set(kwargs))
        self.assertIn('priority not sent: the conductor or [upgrade_levels] '
                      'conductor allows only API 1.1', logs.output[0])

    def test_a_cap_of_1_0_refuses_release_1_s_operations(self):
        api = self.operators(version_cap='1.0')
        self.assertFalse(api.can_operate())
        exc = self.assertRaises(exception.Invalid, api.heal_claims, None)
        self.assertIn('heal_claims needs conductor API 1.1', str(exc))


class RecordAPITest(ClientTestCase):
    """The agents' client and a conductor of this release."""

    def test_calls_go_to_the_records_namespace_on_the_agents_topic(self):
        api = self.agents(agent_topic='agents', topic='conductor')
        api.migration_set_status(None, 'm', 'post-migrating', result=RESULT)
        api.migration_get(None, 'm')
        api.migration_context_drop(None, 'i', 'm', dest_host='dst')
        api.compute_node_get_all(None)
        self.assertEqual({('records', '2.0')},
                         {(n, v) for n, v, _ in self.conductor.calls()})
        self.assertEqual({'agents'},
                         {o['topic'] for o in self.conductor.options})
        self.assertEqual(RESULT, self.conductor.sent[0][3]['result'])
        self.assertEqual('dst', self.conductor.sent[2][3]['dest_host'])

    def test_a_status_change_waits_what_its_caller_says(self):
        # An agent asking again waits growing shares; without one the
        # client's status_timeout applies.
        api = self.agents(status_timeout=20)
        api.migration_set_status(None, 'm', 'running', timeout=7)
        api.migration_complete(None, 'm', timeout=9)
        api.migration_set_status(None, 'm', 'running')
        self.assertEqual([7, 9, 20],
                         [o.get('timeout') for o in self.conductor.options])

    def test_short_path_and_postcopy_paused(self):
        api = self.agents()
        self.assertTrue(api.supports_short_path())
        api.migration_complete(None, 'm', result=RESULT)
        api.migration_set_running(None, 'm')
        api.migration_set_status(None, 'm', 'postcopy-paused',
                                 result={'post_copy': True})
        self.assertEqual(
            [('migration_complete', RESULT),
             ('migration_set_status', 'running'),
             ('migration_set_status', 'postcopy-paused')],
            [(m, kw.get('result') if m == 'migration_complete'
              else kw['status']) for _, _, m, kw in self.conductor.sent])

    def test_a_migration_with_its_satellites_in_one_call(self):
        api = self.agents(agent_topic='agents')
        self.conductor.answers.append(
            {'migration': 'the migration', 'satellites': {
                'convergence': 'its convergence',
                'recovery': 'its recovery'}})
        migration, found = api.migration_get_with_satellites(
            None, 'm', ('convergence', 'recovery'))
        self.assertEqual(('the migration', {'convergence': 'its convergence',
                                            'recovery': 'its recovery'}),
                         (migration, found))
        (namespace, version, method, kwargs), = self.conductor.sent
        self.assertEqual(
            ('records', '2.0', 'migration_get_with_satellites',
             {'migration_uuid': 'm', 'names': ['convergence', 'recovery']}),
            (namespace, version, method, kwargs))
        self.assertEqual('agents', self.conductor.options[0]['topic'])

    def test_casts(self):
        api = self.agents()
        report = db_base.make_report(migration_guard='on')
        api.report_compute_node_cast(None, report)
        api.migration_update_progress(None, 'm', {'memory_processed': 1})
        self.assertTrue(api.migration_record_recovery(None, 'm', []))
        self.assertTrue(api.migration_record_threads(None, 'm', 'source',
                                                     {}))
        self.assertTrue(api.migration_record_devices(None, 'm', 'dst', []))
        self.assertEqual({('records', '2.0')},
                         {(n, v) for n, v, _ in self.conductor.calls()})
        self.assertEqual('1.1', self.conductor.sent[0][3]['report'].VERSION)

    def test_reports_carry_the_guard_state(self):
        self.agents().report_compute_node(
            None, db_base.make_report(migration_guard='on'))
        (namespace, version, _, kwargs), = self.conductor.sent
        self.assertEqual(('records', '2.0', '1.1', 'on'),
                         (namespace, version, kwargs['report'].VERSION,
                          kwargs['report'].migration_guard))


class RecordAPICappedTest(ClientTestCase):
    """An agent's client capped at release 1 (as an agent running as
    release 1 is): release 1's API, without release 2's arguments."""

    def api(self):
        return self.agents(version_cap='1.1', agent_topic='agents',
                           topic='conductor')

    def test_release_1_s_api_on_the_conductor_topic(self):
        api = self.api()
        with self.assertLogs('numamig.conductor.rpcclient', 'INFO') as logs:
            api.migration_set_status(None, 'm', 'post-migrating',
                                     result=RESULT)
        api.migration_context_drop(None, 'i', 'm', dest_host='dst')
        api.report_compute_node(None, db_base.make_report(
            migration_guard='on'))
        self.assertEqual([(None, '1.0', 'migration_set_status'),
                          (None, '1.1', 'migration_context_drop'),
                          (None, '1.0', 'report_compute_node')],
                         self.conductor.calls())
        self.assertEqual({'conductor'},
                         {o['topic'] for o in self.conductor.options})
        self.assertNotIn('result', self.conductor.sent[0][3])
        self.assertEqual('1.0', self.conductor.sent[2][3]['report'].VERSION)
        self.assertIn('result not sent', logs.output[0])

    def test_release_2_calls_are_not_sent(self):
        api = self.api()
        self.assertFalse(api.supports_short_path())
        self.assertRaises(messaging.UnsupportedVersion,
                          api.migration_complete, None, 'm')
        self.assertRaises(messaging.UnsupportedVersion,
                          api.migration_set_running, None, 'm')
        self.assertRaises(messaging.UnsupportedVersion,
                          api.migration_set_status, None, 'm',
                          'postcopy-paused')
        self.assertFalse(api.migration_record_recovery(None, 'm', []))
        self.assertFalse(api.migration_record_threads(None, 'm', 'dest',
                                                      {}))
        self.assertFalse(api.migration_record_devices(None, 'm', 'dst', []))
        # The caller reads migration_get instead (postcopy_paused).
        self.assertRaises(messaging.UnsupportedVersion,
                          api.migration_get_with_satellites, None, 'm',
                          ('recovery',))
        self.assertEqual([], self.conductor.sent)

    def test_a_cap_of_1_0_drops_where_the_claim_is_held(self):
        api = self.agents(version_cap='1.0')
        api.migration_context_drop(None, 'i', 'm', dest_host='dst')
        (_, version, _, kwargs), = self.conductor.sent
        self.assertEqual('1.0', version)
        self.assertNotIn('dest_host', kwargs)


class ConductorOfRelease1Test(ClientTestCase):
    """A conductor of release 1 (its one API at 1.1, ping answers
    ``'pong'``): each client learns it from the ping and never sends what
    it would refuse."""

    conductor_version = 1

    def test_an_operator_read_is_the_ping_and_one_call(self):
        api = self.operators(conductor_version=None)
        api.ping(None, 5)
        api.migration_get(None, 'm')
        self.assertEqual([(None, '1.0', 'ping'),
                          (None, '1.0', 'migration_get')],
                         self.conductor.calls())
        self.assertEqual(1, api.conductor_version)

    def test_the_first_call_asks_the_version_once(self):
        api = self.operators(conductor_version=None)
        api.instance_get(None, 'i')
        api.instance_get(None, 'i')
        self.assertEqual(['ping', 'instance_get', 'instance_get'],
                         [m for _, _, m in self.conductor.calls()])

    def test_a_conductor_of_this_release_gets_the_namespaces(self):
        self.conductor.service_version = NEWEST
        api = self.operators(conductor_version=None)
        api.ping(None, 5)
        api.migration_get(None, 'm')
        self.assertEqual([(None, '1.0', 'ping'),
                          ('operations', '2.0', 'migration_get')],
                         self.conductor.calls())

    def test_release_2_calls_are_refused_here_naming_the_release(self):
        exc = self.assertRaises(exception.Invalid,
                                self.operators().host_drain_plan, None, 'h')
        self.assertIn('planning a drain needs conductor API 2.0, but the '
                      'conductor runs an older release (service version 1, '
                      'conductor API 1.1): upgrade it first', str(exc))
        self.assertRaises(messaging.UnsupportedVersion,
                          self.operators().migration_wait, None,
                          mock.Mock(), 10)
        self.assertRaises(messaging.UnsupportedVersion,
                          self.agents().migration_complete, None, 'm')
        self.assertRaises(messaging.UnsupportedVersion,
                          self.agents().migration_get_with_satellites, None,
                          'm', ('convergence', 'recovery'))
        self.assertEqual([], self.conductor.sent)

    def test_an_operation_goes_at_1_1(self):
        self.operators().host_domains(None, 'h')
        self.agents().migration_context_drop(None, 'i', 'm',
                                             dest_host='dst')
        self.assertEqual([(None, '1.1', 'host_domains'),
                          (None, '1.1', 'migration_context_drop')],
                         self.conductor.calls())

    def test_reports_follow_the_conductor_s_upgrade(self):
        api = self.agents(agent_topic='agents', topic='conductor')
        report = db_base.make_report(migration_guard='on')
        api.report_compute_node(None, report)
        api.report_compute_node_cast(None, report)
        self.assertEqual([(None, '1.0', 'ping', '-', 'conductor'),
                          (None, '1.0', 'report_compute_node', '1.0',
                           'conductor'),
                          (None, '1.0', 'report_compute_node', '1.0',
                           'conductor')],
                         self._reports())
        # The conductor is upgraded: the next periodic report learns it
        # and goes to the agents' topic, in the records namespace.
        self.conductor.service_version = NEWEST
        del self.conductor.sent[:], self.conductor.options[:]
        api.report_compute_node(None, report)
        api.report_compute_node_cast(None, report)
        self.assertEqual([(None, '1.0', 'ping', '-', 'conductor'),
                          ('records', '2.0', 'report_compute_node', '1.1',
                           'agents'),
                          ('records', '2.0', 'report_compute_node', '1.1',
                           'agents')],
                         self._reports())

    def _reports(self):
        return [(n, v, m, kw['report'].VERSION if kw else '-', o['topic'])
                for (n, v, m, kw), o in zip(self.conductor.sent,
                                            self.conductor.options,
                                            strict=True)]

    def test_an_agent_waits_on_the_conductor_topic(self):
        api = self.agents(conductor_version=None, agent_topic='agents',
                          topic='conductor')
        api.wait_until_ready(None)
        api.migration_get(None, 'm')
        self.assertEqual(['conductor', 'conductor'],
                         [o['topic'] for o in self.conductor.options])

    def test_a_refusal_is_raised_not_retried(self):
        # A conductor older than it said (several conductors of two
        # releases): the call is not sent again elsewhere.
        api = self.operators(conductor_version=NEWEST)
        self.assertRaises(messaging.UnsupportedVersion, api.migration_get,
                          None, 'm')
        self.assertEqual(1, len(self.conductor.sent))

    def test_ping_answers_name_the_service_version(self):
        for answer, version in (('pong', 1), ({'service_version': 2}, 2),
                                ({'service_version': 'x'}, 1), (None, 1)):
            self.assertEqual(version, rpcclient.service_version_of(answer))
