"""The conductor client: which API version each call goes at, and what
is dropped for a conductor that cannot take it."""

from unittest import mock

import fixtures
import oslo_messaging as messaging
from oslo_utils import uuidutils

from numamig import exception
from numamig import rpc
from numamig.conductor import rpcapi
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
        self.api = rpcapi.ConductorAPI(mock.sentinel.transport)
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
        self.assertEqual((rpcapi.QUEUE_VERSION, 'migration_set_status',
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

    def test_host_delete_sent_at_1_4(self):
        self.client.can_send_version.return_value = True
        self.api.compute_node_delete(None, 'old-1')
        (version, method, kwargs), = self.sent
        self.assertEqual(('1.4', 'compute_node_delete', 'old-1'),
                         (version, method, kwargs['host']))

    def test_host_delete_capped_below_is_refused_clearly(self):
        self.client.can_send_version.side_effect = lambda v: v < '1.4'
        exc = self.assertRaises(exception.Invalid,
                                self.api.compute_node_delete, None, 'old-1')
        self.assertIn('needs conductor API 1.4', str(exc))
        self.assertEqual([], self.sent)

    def test_refresh_usage_sent_at_1_6(self):
        self.client.can_send_version.return_value = True
        self.api.host_refresh_usage(None, 'h-1')
        (version, method, kwargs), = self.sent
        self.assertEqual(('1.6', 'host_refresh_usage', {'host': 'h-1'}),
                         (version, method, kwargs))

    def test_refresh_usage_capped_or_refused_is_invalid(self):
        self.client.can_send_version.side_effect = lambda v: v < '1.6'
        exc = self.assertRaises(exception.Invalid,
                                self.api.host_refresh_usage, None, 'h-1')
        self.assertIn("recomputing a host's usage needs conductor API 1.6, "
                      "but [upgrade_levels] conductor caps", str(exc))
        self.assertEqual([], self.sent)
        self.client.can_send_version.side_effect = None
        self.client.can_send_version.return_value = True
        self.answers = [messaging.UnsupportedVersion('1.6')]
        exc = self.assertRaises(exception.Invalid,
                                self.api.host_refresh_usage, None, 'h-1')
        self.assertIn('the conductor is older: upgrade it first', str(exc))

    def test_maintenance_sent_at_1_7(self):
        self.client.can_send_version.return_value = True
        self.answers = ['disabled', 'plan']
        self.api.host_set_disabled(None, 'h-1', True, 'new DIMMs')
        self.api.host_drain_plan(None, 'h-1', to=('h-2',),
                                 keep_free_nodes=1)
        self.assertEqual([
            ('1.8', 'host_set_disabled',
             {'host': 'h-1', 'disabled': True, 'reason': 'new DIMMs'}),
            ('1.8', 'host_drain_plan',
             {'host': 'h-1', 'to': ['h-2'], 'keep_free_nodes': 1})],
            self.sent)

    def test_maintenance_capped_or_refused_is_invalid(self):
        self.client.can_send_version.side_effect = lambda v: v < '1.8'
        exc = self.assertRaises(exception.Invalid,
                                self.api.host_set_disabled, None, 'h-1',
                                False)
        self.assertIn('enabling a host needs conductor API 1.8', str(exc))
        self.client.can_send_version.side_effect = None
        self.client.can_send_version.return_value = True
        self.answers = [messaging.UnsupportedVersion('1.8')]
        exc = self.assertRaises(exception.Invalid,
                                self.api.host_drain_plan, None, 'h-1')
        self.assertIn('planning a drain needs conductor API 1.8; the '
                      'conductor is older', str(exc))

    def test_drains_sent_at_1_10(self):
        self.client.can_send_version.return_value = True
        self.answers = ['started', 'shown', 'waited', 'aborted']
        self.api.host_drain_start(None, 'h-1', 3, to=('h-2',),
                                  drain_uuid='d-1')
        self.api.host_drain_show(None, host='h-1')
        self.api.host_drain_wait(None, {'uuid': 'd-1', 'signature': 's'},
                                 5)
        self.api.host_drain_abort(None, 'h-1', abort_running=True)
        self.assertEqual([
            ('1.10', 'host_drain_start',
             {'host': 'h-1', 'drain_uuid': 'd-1', 'parallel': 3,
              'to': ['h-2'], 'keep_free_nodes': 0}),
            ('1.10', 'host_drain_show', {'host': 'h-1', 'drain_uuid': None}),
            ('1.10', 'host_drain_wait',
             {'drain_uuid': 'd-1', 'signature': 's', 'wait_s': 5}),
            ('1.10', 'host_drain_abort',
             {'host': 'h-1', 'abort_running': True})], self.sent)

    def test_defragment_plan_sent_at_1_10(self):
        self.client.can_send_version.return_value = True
        self.api.host_defragment_plan(None, 8, 1024, {'hw:numa_nodes': '1'},
                                      hosts=('h-1',), max_moves=2)
        self.assertEqual([('1.10', 'host_defragment_plan', {
            'vcpus': 8, 'memory_mb': 1024,
            'extra_specs': {'hw:numa_nodes': '1'}, 'hosts': ['h-1'],
            'max_moves': 2})], self.sent)

    def test_defragment_start_sent_at_1_13_or_refused_clearly(self):
        self.client.can_send_version.return_value = True
        self.api.host_defragment_start(None, 8, 1024, {'hw:numa_nodes': '1'},
                                       2, hosts=('h-1',), max_moves=2,
                                       drain_uuid='d-1')
        self.assertEqual([('1.13', 'host_defragment_start', {
            'vcpus': 8, 'memory_mb': 1024,
            'extra_specs': {'hw:numa_nodes': '1'}, 'drain_uuid': 'd-1',
            'parallel': 2, 'hosts': ['h-1'], 'max_moves': 2})], self.sent)
        self.client.can_send_version.side_effect = \
            lambda v: tuple(map(int, v.split('.'))) < (1, 13)
        error = self.assertRaises(exception.Invalid,
                                  self.api.host_defragment_start, None, 8,
                                  1024, {}, 1)
        self.assertIn('carrying out a defragmentation needs conductor API '
                      '1.13', str(error))
        self.assertEqual(1, len(self.sent))

    def test_a_drain_start_chooses_its_uuid_once(self):
        self.client.can_send_version.return_value = True
        self.api.host_drain_start(None, 'h-1', 1)
        (_, _, kwargs), = self.sent
        self.assertTrue(uuidutils.is_uuid_like(kwargs['drain_uuid']))

    def test_drains_capped_below_1_10_are_refused_clearly(self):
        self.client.can_send_version.side_effect = \
            lambda v: tuple(map(int, v.split('.'))) < (1, 10)
        for call in (lambda: self.api.host_drain_start(None, 'h-1', 1),
                     lambda: self.api.host_drain_abort(None, 'h-1')):
            exc = self.assertRaises(exception.Invalid, call)
            self.assertIn('needs conductor API 1.10, but [upgrade_levels] '
                          'conductor caps', str(exc))
        self.assertEqual([], self.sent)

    def test_wait_sent_at_1_17_to_1_12_then_1_5_with_what_it_saw(self):
        self.client.can_send_version.return_value = True
        self.answers = [messaging.UnsupportedVersion('1.17'),
                        messaging.UnsupportedVersion('1.16'),
                        messaging.UnsupportedVersion('1.15'),
                        messaging.UnsupportedVersion('1.14'),
                        messaging.UnsupportedVersion('1.12'), 'answer']
        seen = mock.Mock(uuid='m-1', status='running',
                         memory_processed=7)
        self.api.migration_wait(None, seen, 10)
        (paused, _, _), (newest, _, _), (recovery, _, _), (reclaim, _, _), \
            (convergence, _, _), (version, method, kwargs) = self.sent
        self.assertEqual(rpcapi.PAUSED_VERSION, paused)
        self.assertEqual((rpcapi.THREADS_VERSION, rpcapi.RECOVERY_VERSION,
                          rpcapi.MEMORY_RECLAIM_VERSION,
                          rpcapi.CONVERGENCE_VERSION),
                         (newest, recovery, reclaim, convergence))
        self.assertEqual(('1.5', 'migration_wait'), (version, method))
        self.assertEqual({'migration_uuid': 'm-1', 'status': 'running',
                          'memory_processed': 7, 'timeout': 10}, kwargs)
        # The call outlives the wait it asks for.
        timeout = self.client.prepare.call_args[1]['timeout']
        self.assertGreater(timeout, 10)

    def test_wait_capped_below_1_5_says_unsupported(self):
        self.client.can_send_version.side_effect = lambda v: v < '1.5'
        self.assertRaises(messaging.UnsupportedVersion,
                          self.api.migration_wait, None, mock.Mock(), 10)
        self.assertEqual([], self.sent)

    def test_capped_below_1_2_sends_no_result(self):
        self.client.can_send_version.side_effect = \
            lambda v: v < rpcapi.RESULTS_VERSION
        with self.assertLogs('numamig.conductor.rpcapi', 'INFO') as logs:
            self._set_status()
        (version, _, kwargs), = self.sent
        self.assertEqual('1.0', version)
        self.assertNotIn('result', kwargs)
        self.assertIn('result not sent', logs.output[0])

    def test_conductor_of_1_2_gets_the_result_at_1_2(self):
        self.client.can_send_version.return_value = True
        self.answers = [messaging.UnsupportedVersion('1.3'), 'answer']
        self.assertEqual('answer', self._set_status())
        self.assertEqual([('1.3', True), ('1.2', True)],
                         [(v, 'result' in kw) for v, _, kw in self.sent])

    def test_older_conductor_gets_it_again_without_result(self):
        self.client.can_send_version.return_value = True
        self.answers = [messaging.UnsupportedVersion('1.3'),
                        messaging.UnsupportedVersion('1.2'), 'answer']
        self.assertEqual('answer', self._set_status())
        self.assertEqual([('1.3', True), ('1.2', True), ('1.0', False)],
                         [(v, 'result' in kw) for v, _, kw in self.sent])

    def test_operation_falls_back_to_its_own_version(self):
        self.client.can_send_version.return_value = True
        self.answers = [messaging.UnsupportedVersion('1.3'),
                        messaging.UnsupportedVersion('1.2'), True]
        self.api.migration_context_drop(None, 'i', 'm', dest_host='dst')
        self.assertEqual([('1.3', 'dst'), ('1.2', 'dst'), ('1.1', 'dst')],
                         [(v, kw['dest_host']) for v, _, kw in self.sent])

    def test_priority_only_to_a_conductor_with_the_queue(self):
        self.client.can_send_version.return_value = True
        self.answers = [messaging.UnsupportedVersion('1.17'),
                        messaging.UnsupportedVersion('1.16'),
                        messaging.UnsupportedVersion('1.15'),
                        messaging.UnsupportedVersion('1.14'),
                        messaging.UnsupportedVersion('1.12'),
                        messaging.UnsupportedVersion('1.9'),
                        messaging.UnsupportedVersion('1.3'), 'answer']
        self.api.live_migrate_instance(None, 'i', priority=100)
        self.assertEqual([('1.17', 100), ('1.16', 100), ('1.15', 100),
                          ('1.14', 100), ('1.12', 100),
                          ('1.9', 100),
                          ('1.3', 100), ('1.2', None)],
                         [(v, kw.get('priority')) for v, _, kw in self.sent])

    def test_request_uuid_only_to_a_conductor_that_knows_it(self):
        self.client.can_send_version.return_value = True
        self.answers = [messaging.UnsupportedVersion('1.17'),
                        messaging.UnsupportedVersion('1.16'),
                        messaging.UnsupportedVersion('1.15'),
                        messaging.UnsupportedVersion('1.14'),
                        messaging.UnsupportedVersion('1.12'),
                        messaging.UnsupportedVersion('1.9'), 'answer']
        self.api.live_migrate_instance(None, 'i')
        _paused, _threads, _recovery, _reclaim, _newest, (first, uuid), \
            (older, none) = [
            (v, kw.get('migration_uuid')) for v, _, kw in self.sent]
        self.assertEqual((rpcapi.REQUEST_UUID_VERSION, True, '1.3', None),
                         (first, uuidutils.is_uuid_like(uuid), older, none))

    def test_the_caller_s_request_uuid_is_sent(self):
        self.client.can_send_version.return_value = True
        self.api.live_migrate_instance(None, 'i', migration_uuid='m-1')
        (version, _, kwargs), = self.sent
        self.assertEqual((rpcapi.PAUSED_VERSION, 'm-1'),
                         (version, kwargs['migration_uuid']))

    def test_calls_without_newer_arguments_never_try_1_9(self):
        # 1.9 carries what 1.8 does: trying it first would cost every
        # call a refusal by a conductor of 1.3 to 1.8.
        self.client.can_send_version.return_value = True
        self.api.instance_get_all_by_host(None, 'h')
        self.assertNotIn(rpcapi.REQUEST_UUID_VERSION,
                         [v for v, _, _ in self.sent])

    def test_a_source_reads_its_migrations_at_1_17_first(self):
        # Below 1.17 a postcopy-paused migration reads ``running``, which
        # a source's reconciliation would try to end.
        self.client.can_send_version.return_value = True
        self.answers = [messaging.UnsupportedVersion('1.17'), 'answer']
        self.api.migration_get_in_progress_by_host(None, 'h')
        self.assertEqual([rpcapi.PAUSED_VERSION, rpcapi.QUEUE_VERSION],
                         [v for v, _, _ in self.sent])

    def test_postcopy_paused_is_recorded_at_1_17_or_not_at_all(self):
        self.client.can_send_version.return_value = True
        self.api.migration_set_status(None, 'm', 'postcopy-paused',
                                      result={'post_copy': True})
        self.assertEqual([(rpcapi.PAUSED_VERSION, True)],
                         [(v, 'result' in kw) for v, _, kw in self.sent])
        self.client.can_send_version.side_effect = \
            lambda v: v != rpcapi.PAUSED_VERSION
        self.assertRaises(messaging.UnsupportedVersion,
                          self.api.migration_set_status, None, 'm',
                          'postcopy-paused')
        self.assertEqual(1, len(self.sent))

    def test_resume_needs_1_17(self):
        self.client.can_send_version.side_effect = \
            lambda v: v != rpcapi.PAUSED_VERSION
        self.assertRaisesMessage(
            exception.Invalid, 'resuming a post-copy migration needs '
            'conductor API 1.17', self.api.migration_resume, None, 'm')
        self.assertEqual([], self.sent)

    def test_operator_reads_try_1_17_then_1_16_to_1_12(self):
        # Migration 1.6 (where the threads ran) comes at 1.16, 1.5 (the
        # post-copy recovery) at 1.15, 1.4 (the memory reclaimed) at
        # 1.14, the convergence fields of 1.3 at 1.12.
        self.client.can_send_version.return_value = True
        self.answers = [messaging.UnsupportedVersion('1.17'),
                        messaging.UnsupportedVersion('1.16'),
                        messaging.UnsupportedVersion('1.15'),
                        messaging.UnsupportedVersion('1.14'),
                        messaging.UnsupportedVersion('1.12'), 'answer']
        self.api.migration_get(None, 'm')
        self.assertEqual([rpcapi.PAUSED_VERSION, rpcapi.THREADS_VERSION,
                          rpcapi.RECOVERY_VERSION,
                          rpcapi.MEMORY_RECLAIM_VERSION,
                          rpcapi.CONVERGENCE_VERSION, rpcapi.QUEUE_VERSION],
                         [v for v, _, _ in self.sent])

    def test_operator_reads_capped_at_1_12_skip_1_14_to_1_17(self):
        self.client.can_send_version.side_effect = \
            lambda v: v not in (rpcapi.PAUSED_VERSION,
                                rpcapi.THREADS_VERSION,
                                rpcapi.RECOVERY_VERSION,
                                rpcapi.MEMORY_RECLAIM_VERSION)
        self.answers = ['answer']
        self.api.migration_get(None, 'm')
        self.assertEqual([rpcapi.CONVERGENCE_VERSION],
                         [v for v, _, _ in self.sent])

    def test_policy_never_sent_without_it(self):
        self.client.can_send_version.side_effect = \
            lambda v: v != rpcapi.CONVERGENCE_VERSION
        exc = self.assertRaises(exception.Invalid,
                                self.api.live_migrate_instance, None, 'i',
                                policy='nfv')
        self.assertIn('needs conductor API 1.12', str(exc))
        self.assertEqual([], self.sent)

    def test_a_dry_run_under_a_policy_goes_at_1_18_or_is_refused(self):
        self.client.can_send_version.return_value = True
        self.api.live_migration_dry_run(None, 'i-1', policy='nfv')
        (version, method, kwargs), = self.sent
        self.assertEqual(('1.18', 'live_migration_dry_run', 'nfv'),
                         (version, method, kwargs['policy']))
        # Capped below: refused here, not answered under another policy.
        self.client.can_send_version.side_effect = \
            lambda v: tuple(map(int, v.split('.'))) < (1, 18)
        exc = self.assertRaises(exception.Invalid,
                                self.api.live_migration_dry_run, None, 'i-1',
                                policy='nfv')
        self.assertIn('needs conductor API 1.18', str(exc))
        # Without a policy it goes as before, without the argument.
        self.answers = ['answer']
        self.api.live_migration_dry_run(None, 'i-1')
        self.assertNotIn('policy', self.sent[-1][2])

    def test_result_without_convergence_when_capped_below_1_12(self):
        self.client.can_send_version.side_effect = \
            lambda v: v != rpcapi.CONVERGENCE_VERSION
        self.api.migration_complete(
            None, 'm', result=dict(RESULT, convergence_policy='nfv',
                                   convergence_actions=['x']))
        (_, _, kwargs), = self.sent
        self.assertEqual(RESULT, kwargs['result'])

    def test_short_path_goes_at_1_3(self):
        self.client.can_send_version.return_value = True
        self.answers = ['answer', 'answer']
        self.api.migration_complete(None, 'm', result=RESULT)
        self.api.migration_set_running(None, 'm')
        self.assertEqual(
            [('1.3', 'migration_complete', RESULT),
             ('1.3', 'migration_set_status', 'running')],
            [(v, m, kw.get('result') or kw.get('status'))
             for v, m, kw in self.sent])

    def test_short_path_capped_is_refused_without_sending(self):
        self.client.can_send_version.side_effect = \
            lambda v: v != rpcapi.SHORT_PATH_VERSION
        self.assertRaises(messaging.UnsupportedVersion,
                          self.api.migration_complete, None, 'm')
        self.assertRaises(messaging.UnsupportedVersion,
                          self.api.migration_set_running, None, 'm')
        self.assertEqual([], self.sent)

    def test_short_path_refused_by_an_older_conductor_is_raised(self):
        # The caller then walks the statuses of before 1.3.
        self.client.can_send_version.return_value = True
        self.answers = [messaging.UnsupportedVersion('1.3')]
        self.assertRaises(messaging.UnsupportedVersion,
                          self.api.migration_complete, None, 'm')
        self.assertEqual(['1.3'], [v for v, _, _ in self.sent])


class ReportVersionsTest(base.TestCase):
    """Reports carry the migration guard's state only to a conductor of
    API 1.7 (ComputeNodeReport 1.1); an older one gets 1.0."""

    # ConductorAPIVersionsTest's recording client, not its tests.
    record_calls = ConductorAPIVersionsTest.record_calls
    _prepare = ConductorAPIVersionsTest._prepare

    def setUp(self):
        super().setUp()
        self.record_calls()
        self.report = db_base.make_report(migration_guard='on')

    def test_sent_at_1_7_with_the_guard_state(self):
        self.client.can_send_version.return_value = True
        self.api.report_compute_node(None, self.report)
        (version, _method, kwargs), = self.sent
        self.assertEqual(rpcapi.GUARD_VERSION, version)
        self.assertEqual(('1.1', 'on'), (kwargs['report'].VERSION,
                                         kwargs['report'].migration_guard))

    def test_older_conductor_gets_1_0_and_so_do_later_casts(self):
        self.client.can_send_version.return_value = True
        self.answers = [messaging.UnsupportedVersion('1.7'), 'stored']
        self.assertEqual('stored', self.api.report_compute_node(
            None, self.report))
        self.assertEqual(['1.7', '1.0'], [v for v, _m, _k in self.sent])
        resent = self.sent[1][2]['report']
        self.assertEqual('1.0', resent.VERSION)
        # As the serializer puts it on the wire.
        self.assertNotIn('migration_guard', rpc.primitive_for(resent)[
            'numamig_object.data'])
        self.api.report_compute_node_cast(None, self.report)
        cast_report = self.client.cast.call_args[1]['report']
        self.assertEqual('1.0', cast_report.VERSION)

    def test_casts_go_at_1_7_once_a_call_was_answered_there(self):
        self.client.can_send_version.return_value = True
        self.api.report_compute_node(None, self.report)
        self.api.report_compute_node_cast(None, self.report)
        self.client.prepare.assert_called_with(version=rpcapi.GUARD_VERSION)

    def test_capped_client_sends_1_0_without_trying(self):
        self.client.can_send_version.side_effect = lambda v: v < '1.7'
        self.api.report_compute_node(None, self.report)
        (version, _method, kwargs), = self.sent
        self.assertEqual(('1.0', '1.0'), (version,
                                          kwargs['report'].VERSION))
