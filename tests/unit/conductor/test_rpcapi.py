"""The conductor client: which API version each call goes at, and what
is dropped for a conductor that cannot take it."""

from unittest import mock

import fixtures
import oslo_messaging as messaging
from oslo_utils import uuidutils

from numamig import exception
from numamig.conductor import rpcapi
from numamig.objects import service as service_obj
from tests import base
from tests.unit.db import base as db_base

RESULT = {'emulated': True, 'elapsed_ms': 3}


class ConductorAPIVersionsTest(base.TestCase):
    """Calls recorded as (version, method, kwargs) in ``sent``; each gets
    the next of ``answers``."""

    def setUp(self):
        super().setUp()
        self.record_calls()

    def record_calls(self):
        self.client = mock.Mock(name='client')
        self.useFixture(fixtures.MockPatch('numamig.rpc.get_client',
                                           return_value=self.client))
        # A conductor of this release: its service version known (the
        # ping is ConductorVersionTest's).
        self.api = rpcapi.ConductorAPI(
            mock.sentinel.transport,
            conductor_version=service_obj.SERVICE_VERSION)
        self.sent = []
        self.answers = ['answer']
        self.client.prepare.side_effect = self._prepare

    def _prepare(self, version, **options):
        """A call context recording what is sent and giving the next
        answer (raised if it is an exception)."""
        cctxt = mock.Mock(name=f'cctxt-{version}')

        def call(ctxt, method, **kwargs):
            self.sent.append((version, method, kwargs))
            answer = self.answers.pop(0)
            if isinstance(answer, Exception):
                raise answer
            return answer
        cctxt.call.side_effect = call
        return cctxt

    def _set_status(self):
        return self.api.migration_set_status(None, 'm', 'post-migrating',
                                             result=RESULT)

    def test_result_sent_at_the_newest_version(self):
        self.client.can_send_version.return_value = True
        self.assertEqual('answer', self._set_status())
        (version, method, kwargs), = self.sent
        # The newest version migration_set_status exists in.
        self.assertEqual((rpcapi.RELEASE_2, 'migration_set_status',
                          RESULT), (version, method, kwargs['result']))

    def test_a_status_change_waits_what_its_caller_says(self):
        # An agent asking again waits growing shares; without one the
        # client's status_timeout applies.
        self.client.can_send_version.return_value = True
        self.api.status_timeout = 20
        self.answers = ['answer', 'answer', 'answer']
        self.api.migration_set_status(None, 'm', 'running', timeout=7)
        self.api.migration_complete(None, 'm', timeout=9)
        self.api.migration_set_status(None, 'm', 'running')
        waits = [c[1].get('timeout') for c in
                 self.client.prepare.call_args_list]
        self.assertEqual([7, 9, 20], waits)

    def test_a_call_no_conductor_queue_took_is_sent_again(self):
        # After a broker restart, until a conductor declared its queue
        # again: the request comes back and is sent again, not dropped.
        self.client.can_send_version.return_value = True
        self.patch(rpcapi.rpc, 'RETURNED_PAUSE_S', 0.01)
        self.client.transport.conf.rpc_response_timeout = 60
        self.answers = [messaging.MessageUndeliverable(
            Exception('NO_ROUTE'), 'numamig', 'numamig-conductor', {}),
            'answer']
        self.assertEqual('answer', self._set_status())
        self.assertEqual(2, len(self.sent))
        options = [c.kwargs for c in self.client.prepare.call_args_list]
        self.assertEqual([True, True], [o['transport_options'].at_least_once
                                        for o in options])

    def test_host_delete_sent_at_release_2(self):
        self.client.can_send_version.return_value = True
        self.api.compute_node_delete(None, 'old-1')
        (version, method, kwargs), = self.sent
        self.assertEqual(('1.2', 'compute_node_delete', 'old-1'),
                         (version, method, kwargs['host']))

    def test_host_delete_capped_below_is_refused_clearly(self):
        self.client.can_send_version.side_effect = lambda v: v < '1.2'
        exc = self.assertRaises(exception.Invalid,
                                self.api.compute_node_delete, None, 'old-1')
        self.assertIn('needs conductor API 1.2', str(exc))
        self.assertEqual([], self.sent)

    def test_refresh_usage_sent_at_release_2(self):
        self.client.can_send_version.return_value = True
        self.api.host_refresh_usage(None, 'h-1')
        (version, method, kwargs), = self.sent
        self.assertEqual(('1.2', 'host_refresh_usage', {'host': 'h-1'}),
                         (version, method, kwargs))

    def test_refresh_usage_capped_is_invalid(self):
        self.client.can_send_version.side_effect = lambda v: v < '1.2'
        exc = self.assertRaises(exception.Invalid,
                                self.api.host_refresh_usage, None, 'h-1')
        self.assertIn("recomputing a host's usage needs conductor API 1.2, "
                      "but [upgrade_levels] conductor caps", str(exc))
        self.assertEqual([], self.sent)

    def test_maintenance_sent_at_release_2(self):
        self.client.can_send_version.return_value = True
        self.answers = ['disabled', 'plan']
        self.api.host_set_disabled(None, 'h-1', True, 'new DIMMs')
        self.api.host_drain_plan(None, 'h-1', to=('h-2',),
                                 keep_free_nodes=1)
        self.assertEqual([
            ('1.2', 'host_set_disabled',
             {'host': 'h-1', 'disabled': True, 'reason': 'new DIMMs'}),
            ('1.2', 'host_drain_plan',
             {'host': 'h-1', 'to': ['h-2'], 'keep_free_nodes': 1})],
            self.sent)

    def test_maintenance_capped_is_invalid(self):
        self.client.can_send_version.side_effect = lambda v: v < '1.2'
        exc = self.assertRaises(exception.Invalid,
                                self.api.host_set_disabled, None, 'h-1',
                                False)
        self.assertIn('enabling a host needs conductor API 1.2', str(exc))
        self.assertEqual([], self.sent)

    def test_drains_sent_at_release_2(self):
        self.client.can_send_version.return_value = True
        self.answers = ['started', 'shown', 'waited', 'aborted']
        self.api.host_drain_start(None, 'h-1', 3, to=('h-2',),
                                  drain_uuid='d-1')
        self.api.host_drain_show(None, host='h-1')
        self.api.host_drain_wait(None, {'uuid': 'd-1', 'signature': 's'},
                                 5)
        self.api.host_drain_abort(None, 'h-1', abort_running=True)
        self.assertEqual([
            ('1.2', 'host_drain_start',
             {'host': 'h-1', 'drain_uuid': 'd-1', 'parallel': 3,
              'to': ['h-2'], 'keep_free_nodes': 0}),
            ('1.2', 'host_drain_show', {'host': 'h-1', 'drain_uuid': None}),
            ('1.2', 'host_drain_wait',
             {'drain_uuid': 'd-1', 'signature': 's', 'wait_s': 5}),
            ('1.2', 'host_drain_abort',
             {'host': 'h-1', 'abort_running': True})], self.sent)

    def test_defragment_plan_sent_at_release_2(self):
        self.client.can_send_version.return_value = True
        self.api.host_defragment_plan(None, 8, 1024, {'hw:numa_nodes': '1'},
                                      hosts=('h-1',), max_moves=2)
        self.assertEqual([('1.2', 'host_defragment_plan', {
            'vcpus': 8, 'memory_mb': 1024,
            'extra_specs': {'hw:numa_nodes': '1'}, 'hosts': ['h-1'],
            'max_moves': 2})], self.sent)

    def test_defragment_start_sent_at_release_2_or_refused_clearly(self):
        self.client.can_send_version.return_value = True
        self.api.host_defragment_start(None, 8, 1024, {'hw:numa_nodes': '1'},
                                       2, hosts=('h-1',), max_moves=2,
                                       drain_uuid='d-1')
        self.assertEqual([('1.2', 'host_defragment_start', {
            'vcpus': 8, 'memory_mb': 1024,
            'extra_specs': {'hw:numa_nodes': '1'}, 'drain_uuid': 'd-1',
            'parallel': 2, 'hosts': ['h-1'], 'max_moves': 2})], self.sent)
        self.client.can_send_version.side_effect = \
            lambda v: tuple(map(int, v.split('.'))) < (1, 2)
        error = self.assertRaises(exception.Invalid,
                                  self.api.host_defragment_start, None, 8,
                                  1024, {}, 1)
        self.assertIn('carrying out a defragmentation needs conductor API '
                      '1.2', str(error))
        self.assertEqual(1, len(self.sent))

    def test_a_drain_start_chooses_its_uuid_once(self):
        self.client.can_send_version.return_value = True
        self.api.host_drain_start(None, 'h-1', 1)
        (_, _, kwargs), = self.sent
        self.assertTrue(uuidutils.is_uuid_like(kwargs['drain_uuid']))

    def test_drains_capped_below_release_2_are_refused_clearly(self):
        self.client.can_send_version.side_effect = \
            lambda v: tuple(map(int, v.split('.'))) < (1, 2)
        for call in (lambda: self.api.host_drain_start(None, 'h-1', 1),
                     lambda: self.api.host_drain_abort(None, 'h-1')):
            exc = self.assertRaises(exception.Invalid, call)
            self.assertIn('needs conductor API 1.2, but [upgrade_levels] '
                          'conductor caps', str(exc))
        self.assertEqual([], self.sent)

    def test_wait_sent_at_release_2_with_what_it_saw(self):
        self.client.can_send_version.return_value = True
        seen = mock.Mock(uuid='m-1', status='running',
                         memory_processed=7)
        self.api.migration_wait(None, seen, 10)
        (version, method, kwargs), = self.sent
        self.assertEqual((rpcapi.RELEASE_2, 'migration_wait'),
                         (version, method))
        self.assertEqual({'migration_uuid': 'm-1', 'status': 'running',
                          'memory_processed': 7, 'timeout': 10}, kwargs)
        # The call outlives the wait it asks for.
        timeout = self.client.prepare.call_args[1]['timeout']
        self.assertGreater(timeout, 10)

    def test_wait_capped_at_release_2_goes_there(self):
        self.client.can_send_version.side_effect = \
            lambda v: _tuple(v) <= (1, 12)
        self.api.migration_wait(None, mock.Mock(), 10)
        self.assertEqual([rpcapi.RELEASE_2],
                         [v for v, _, _ in self.sent])

    def test_wait_capped_below_release_2_says_unsupported(self):
        self.client.can_send_version.side_effect = lambda v: v < '1.2'
        self.assertRaises(messaging.UnsupportedVersion,
                          self.api.migration_wait, None, mock.Mock(), 10)
        self.assertEqual([], self.sent)

    def test_capped_below_release_2_sends_no_result(self):
        self.client.can_send_version.side_effect = \
            lambda v: v < rpcapi.RELEASE_2
        with self.assertLogs('numamig.conductor.rpcapi', 'INFO') as logs:
            self._set_status()
        (version, _, kwargs), = self.sent
        self.assertEqual('1.0', version)
        self.assertNotIn('result', kwargs)
        self.assertIn('result not sent', logs.output[0])

    def test_the_caller_s_request_uuid_is_sent(self):
        self.client.can_send_version.return_value = True
        self.api.live_migrate_instance(None, 'i', migration_uuid='m-1')
        (version, _, kwargs), = self.sent
        self.assertEqual((rpcapi.RELEASE_2, 'm-1'),
                         (version, kwargs['migration_uuid']))

    def test_postcopy_paused_is_recorded_at_release_2_or_not_at_all(self):
        self.client.can_send_version.return_value = True
        self.api.migration_set_status(None, 'm', 'postcopy-paused',
                                      result={'post_copy': True})
        self.assertEqual([(rpcapi.RELEASE_2, True)],
                         [(v, 'result' in kw) for v, _, kw in self.sent])
        self.client.can_send_version.side_effect = \
            lambda v: v != rpcapi.RELEASE_2
        self.assertRaises(messaging.UnsupportedVersion,
                          self.api.migration_set_status, None, 'm',
                          'postcopy-paused')
        self.assertEqual(1, len(self.sent))

    def test_resume_needs_release_2(self):
        self.client.can_send_version.side_effect = \
            lambda v: v != rpcapi.RELEASE_2
        self.assertRaisesMessage(
            exception.Invalid, 'resuming a post-copy migration needs '
            'conductor API 1.2', self.api.migration_resume, None, 'm')
        self.assertEqual([], self.sent)

    def test_operator_reads_capped_below_release_2_go_at_1_0(self):
        self.client.can_send_version.side_effect = \
            lambda v: v != rpcapi.RELEASE_2
        self.answers = ['answer']
        self.api.migration_get(None, 'm')
        self.assertEqual(['1.0'], [v for v, _, _ in self.sent])

    def test_policy_never_sent_without_it(self):
        self.client.can_send_version.side_effect = \
            lambda v: v != rpcapi.RELEASE_2
        exc = self.assertRaises(exception.Invalid,
                                self.api.live_migrate_instance, None, 'i',
                                policy='nfv')
        self.assertIn('needs conductor API 1.2', str(exc))
        self.assertEqual([], self.sent)

    def test_a_dry_run_under_a_policy_goes_at_release_2_or_is_refused(self):
        self.client.can_send_version.return_value = True
        self.api.live_migration_dry_run(None, 'i-1', policy='nfv')
        (version, method, kwargs), = self.sent
        self.assertEqual(('1.2', 'live_migration_dry_run', 'nfv'),
                         (version, method, kwargs['policy']))
        # Capped below: refused here, not answered under another policy.
        self.client.can_send_version.side_effect = \
            lambda v: tuple(map(int, v.split('.'))) < (1, 2)
        exc = self.assertRaises(exception.Invalid,
                                self.api.live_migration_dry_run, None, 'i-1',
                                policy='nfv')
        self.assertIn('needs conductor API 1.2', str(exc))
        # Without a policy it goes as before, without the argument.
        self.answers = ['answer']
        self.api.live_migration_dry_run(None, 'i-1')
        self.assertNotIn('policy', self.sent[-1][2])

    def test_short_path_goes_at_release_2(self):
        self.client.can_send_version.return_value = True
        self.answers = ['answer', 'answer']
        self.api.migration_complete(None, 'm', result=RESULT)
        self.api.migration_set_running(None, 'm')
        self.assertEqual(
            [('1.2', 'migration_complete', RESULT),
             ('1.2', 'migration_set_status', 'running')],
            [(v, m, kw.get('result') or kw.get('status'))
             for v, m, kw in self.sent])

    def test_short_path_capped_is_refused_without_sending(self):
        self.client.can_send_version.side_effect = \
            lambda v: v != rpcapi.RELEASE_2
        self.assertRaises(messaging.UnsupportedVersion,
                          self.api.migration_complete, None, 'm')
        self.assertRaises(messaging.UnsupportedVersion,
                          self.api.migration_set_running, None, 'm')
        self.assertEqual([], self.sent)

class ReportVersionsTest(base.TestCase):
    """Reports carry the migration guard's state only to a conductor of
    API 1.2 (ComputeNodeReport 1.1); an older one gets 1.0."""

    # ConductorAPIVersionsTest's recording client, not its tests.
    record_calls = ConductorAPIVersionsTest.record_calls
    _prepare = ConductorAPIVersionsTest._prepare

    def setUp(self):
        super().setUp()
        self.record_calls()
        self.report = db_base.make_report(migration_guard='on')

    def test_casts_go_at_release_2_to_a_conductor_of_this_release(self):
        self.client.can_send_version.return_value = True
        self.api.report_compute_node_cast(None, self.report)
        self.client.prepare.assert_called_with(version=rpcapi.RELEASE_2)

    def test_sent_at_release_2_with_the_guard_state(self):
        self.client.can_send_version.return_value = True
        self.api.report_compute_node(None, self.report)
        (version, _method, kwargs), = self.sent
        self.assertEqual(rpcapi.RELEASE_2, version)
        self.assertEqual(('1.1', 'on'), (kwargs['report'].VERSION,
                                         kwargs['report'].migration_guard))

    def test_capped_client_sends_1_0_without_trying(self):
        self.client.can_send_version.side_effect = lambda v: v < '1.2'
        self.api.report_compute_node(None, self.report)
        (version, _method, kwargs), = self.sent
        self.assertEqual(('1.0', '1.0'), (version,
                                          kwargs['report'].VERSION))


def _tuple(version):
    return tuple(int(part) for part in version.split('.'))


class ConductorOfRelease1Test(base.TestCase):
    """A conductor of release 1 (conductor API 1.1, ping answers
    ``'pong'``), through clients whose cap is oslo.messaging's own: the
    client learns the cap from the ping and never sends above it."""

    def setUp(self):
        super().setUp()
        self.sent = []
        self.conductor_version = 1
        self.useFixture(fixtures.MockPatch('numamig.rpc.get_client',
                                           side_effect=self._get_client))

    def _served(self):
        return service_obj.SERVICE_VERSION_HISTORY[
            self.conductor_version]['conductor_rpc']

    def _get_client(self, transport, target, version_cap=None, **kwargs):
        """A client honouring ``version_cap`` whose calls reach a
        conductor of ``self.conductor_version``."""
        client = mock.Mock(name=f'client-{version_cap}')
        client.can_send_version.side_effect = lambda v: (
            version_cap is None or _tuple(v) <= _tuple(version_cap))

        def prepare(version='1.0', **options):
            cctxt = mock.Mock()

            def call(ctxt, method, **kw):
                self.sent.append((version, method, kw))
                if _tuple(version) > _tuple(self._served()):
                    raise messaging.UnsupportedVersion(version)
                if method == 'ping':
                    return 'pong' if self.conductor_version == 1 else {
                        'service_version': self.conductor_version}
                return 'answer'
            cctxt.call.side_effect = call
            cctxt.cast.side_effect = lambda ctxt, method, **kw: \
                self.sent.append((version, method, kw))
            return cctxt
        client.prepare.side_effect = prepare
        client.cast.side_effect = lambda ctxt, method, **kw: \
            self.sent.append(('1.0', method, kw))
        return client

    def test_an_operator_read_is_the_ping_and_one_call(self):
        # Before the cap came from the conductor's service version, this
        # read took the ping and eight sends (seven refused: 1.17, 1.16,
        # 1.15, 1.14, 1.12, 1.3, 1.2).
        api = rpcapi.ConductorAPI(mock.sentinel.transport)
        api.ping(None, 5)
        api.migration_get(None, 'm')
        self.assertEqual([('1.0', 'ping'), ('1.0', 'migration_get')],
                         [(v, m) for v, m, _ in self.sent])
        self.assertEqual((1, '1.1'), (api.conductor_version,
                                      api.version_cap))

    def test_the_first_call_asks_the_version_once(self):
        api = rpcapi.ConductorAPI(mock.sentinel.transport)
        api.instance_get(None, 'i')
        api.instance_get(None, 'i')
        self.assertEqual(['ping', 'instance_get', 'instance_get'],
                         [m for _, m, _ in self.sent])

    def test_a_conductor_of_this_release_leaves_the_client_uncapped(self):
        self.conductor_version = service_obj.SERVICE_VERSION
        api = rpcapi.ConductorAPI(mock.sentinel.transport)
        api.ping(None, 5)
        api.migration_get(None, 'm')
        self.assertIsNone(api.version_cap)
        self.assertEqual([('1.0', 'ping'), (rpcapi.RELEASE_2,
                                            'migration_get')],
                         [(v, m) for v, m, _ in self.sent])

    def test_newer_arguments_are_not_sent(self):
        api = rpcapi.ConductorAPI(mock.sentinel.transport,
                                  conductor_version=1)
        with self.assertLogs('numamig.conductor.rpcapi', 'INFO') as logs:
            api.live_migrate_instance(None, 'i', priority=100)
            api.migration_set_status(None, 'm', 'post-migrating',
                                     result=RESULT)
        self.assertEqual([('1.0', []), ('1.0', [])],
                         [(v, sorted(set(kw) & {'priority', 'result'}))
                          for v, _, kw in self.sent])
        self.assertNotIn('migration_uuid', self.sent[0][2])
        self.assertIn('priority not sent: the conductor or [upgrade_levels] '
                      'conductor allows only API 1.1', logs.output[0])

    def test_an_operation_goes_at_1_1(self):
        api = rpcapi.ConductorAPI(mock.sentinel.transport,
                                  conductor_version=1)
        api.migration_context_drop(None, 'i', 'm', dest_host='dst')
        self.assertEqual([('1.1', 'dst')],
                         [(v, kw['dest_host']) for v, _, kw in self.sent])

    def test_newer_calls_are_refused_here_naming_the_release(self):
        api = rpcapi.ConductorAPI(mock.sentinel.transport,
                                  conductor_version=1)
        exc = self.assertRaises(exception.Invalid, api.host_drain_plan,
                                None, 'h-1')
        self.assertIn('planning a drain needs conductor API 1.2, but the '
                      'conductor runs an older release (service version 1, '
                      'conductor API 1.1): upgrade it first', str(exc))
        self.assertRaises(messaging.UnsupportedVersion, api.migration_wait,
                          None, mock.Mock(), 10)
        self.assertRaises(messaging.UnsupportedVersion,
                          api.migration_complete, None, 'm')
        self.assertEqual([], self.sent)

    def test_reports_go_at_1_0_and_follow_the_conductor_s_upgrade(self):
        api = rpcapi.ConductorAPI(mock.sentinel.transport,
                                  conductor_version=1)
        report = db_base.make_report(migration_guard='on')
        api.report_compute_node(None, report)
        api.report_compute_node_cast(None, report)
        self.assertEqual([('1.0', 'ping', '-'),
                          ('1.0', 'report_compute_node', '1.0'),
                          ('1.0', 'report_compute_node', '1.0')],
                         [(v, m, kw['report'].VERSION if kw else '-')
                          for v, m, kw in self.sent])
        # The conductor is upgraded: the next periodic report learns it.
        self.conductor_version = service_obj.SERVICE_VERSION
        del self.sent[:]
        api.report_compute_node(None, report)
        api.report_compute_node_cast(None, report)
        self.assertEqual([('1.0', 'ping', '-'),
                          (rpcapi.RELEASE_2, 'report_compute_node',
                           '1.1'),
                          (rpcapi.RELEASE_2, 'report_compute_node',
                           '1.1')],
                         [(v, m, kw['report'].VERSION if kw else '-')
                          for v, m, kw in self.sent])

    def test_an_agent_stays_on_the_conductor_topic(self):
        api = rpcapi.ConductorAPI(mock.sentinel.transport,
                                  agent_topic='agents')
        api.wait_until_ready(None)
        self.assertEqual(rpcapi.TOPIC, api.topic)
        self.conductor_version = service_obj.SERVICE_VERSION
        api = rpcapi.ConductorAPI(mock.sentinel.transport,
                                  agent_topic='agents')
        api.wait_until_ready(None)
        self.assertEqual('agents', api.topic)

    def test_a_refusal_is_raised_not_retried(self):
        # A conductor older than it said (several conductors of two
        # releases): the call is not sent again at another version.
        api = rpcapi.ConductorAPI(
            mock.sentinel.transport,
            conductor_version=service_obj.SERVICE_VERSION)
        self.assertRaises(messaging.UnsupportedVersion, api.migration_get,
                          None, 'm')
        self.assertEqual(1, len(self.sent))

    def test_ping_answers_name_the_service_version(self):
        for answer, version in (('pong', 1), ({'service_version': 2}, 2),
                                ({'service_version': 'x'}, 1), (None, 1)):
            self.assertEqual(version, rpcapi._service_version_of(answer))
