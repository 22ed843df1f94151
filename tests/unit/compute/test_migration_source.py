"""Tests of numamig.compute.migration_source: the source's side."""

from unittest import mock

import oslo_messaging as messaging
import testscenarios

from numamig import cpumodel
from numamig import exception
from numamig import objects
from numamig.compute import migration_source
from numamig.compute import migration_threads
from numamig.compute import rpcapi
from tests import base
from tests.unit.compute import base as cbase

load_tests = testscenarios.load_tests_apply_scenarios


class CheckSourceFlagTest(base.TestCase):
    """The source keeps its flag only if both it and the peer can."""

    scenarios = [
        ('new-new', {'dst_flag': True, 'can_send': True, 'new': True,
                     'expected': True}),
        ('dest-did-not-offer', {'dst_flag': False, 'can_send': True,
                                'new': True, 'expected': False}),
        ('capped-source', {'dst_flag': True, 'can_send': False,
                           'new': True, 'expected': False}),
        ('old-source', {'dst_flag': True, 'can_send': True, 'new': False,
                        'expected': False}),
    ]

    def test_flag(self):
        agent = cbase.agent(host=cbase.SOURCE)
        agent = cbase.as_release(agent, new=self.new)
        agent.compute_api.supports_numa_live_migration.return_value = \
            self.can_send
        inst = cbase.instance()
        agent.driver.list_guests.return_value = {inst.uuid: inst.name}
        data = objects.LiveMigrateData(
            instance_uuid=inst.uuid, source_host=cbase.SOURCE,
            dest_host=cbase.HOST, migration_uuid=cbase.new_uuid(),
            dst_supports_numa_live_migration=self.dst_flag)
        result = agent.flows.check_source(agent, None, inst, data)
        self.assertEqual(self.expected,
                         result.src_supports_numa_live_migration)
        self.assertFalse(data.src_supports_numa_live_migration,
                         "the received object must not change")


class CheckSourceTest(base.TestCase):

    def test_guest_not_here(self):
        agent = cbase.agent(host=cbase.SOURCE)
        self.assertRaisesMessage(
            exception.MigrationPreCheckError, 'not running on source',
            migration_source.check_source, agent, None, cbase.instance(),
            mock.Mock())


class _SourceMigrationTestCase(base.TestCase):
    """A queued migration of a pinned guest, with mocked peers."""

    def setUp(self):
        super().setUp()
        self.inst = cbase.instance(host=cbase.SOURCE, pins={0: 2, 1: 10})
        self.agent = cbase.agent(host=cbase.SOURCE, instances=[self.inst])
        self.migration = cbase.migration(self.inst, status='queued')
        self.statuses = []
        self.results = {}

        def set_status(ctxt, uuid, status, detail=None, error=None,
                       result=None, timeout=None):
            self.statuses.append(status)
            self.results[status] = result
            result = self.migration.obj_clone()
            result.status = status
            return result
        self.agent.conductor_api.migration_set_status.side_effect = set_status
        self.agent.compute_api.pre_live_migration.side_effect = \
            lambda ctxt, instance, data, **kwargs: data
        self.agent.driver.get_destination_xml.return_value = '<new/>'
        self.numa_info = objects.NUMAMigrateInfo(cell_pins={0: {1}})

    def _data(self, numa=True):
        return objects.LiveMigrateData(
            instance_uuid=self.inst.uuid, source_host=cbase.SOURCE,
            dest_host=cbase.HOST, migration_uuid=self.migration.uuid,
            emulated=True, src_supports_numa_live_migration=numa,
            dst_supports_numa_live_migration=numa,
            dst_numa_info=self.numa_info if numa else None)

    def _run(self, numa=True):
        job = migration_source.SourceMigration(
            self.agent, None, self.inst, self.migration, self._data(numa))
        job.run()
        return job


class SourceMigrationTest(_SourceMigrationTestCase):

    def test_success_walks_the_statuses_and_converges(self):
        self._run()
        self.assertEqual(['preparing', 'running', 'post-migrating',
                          'completed'], self.statuses)
        self.agent.driver.get_destination_xml.assert_called_once_with(
            self.inst.uuid, self.numa_info)
        api = self.agent.compute_api
        call = api.accept_emulated_migration.call_args[0]
        self.assertEqual((self.inst.uuid, self.migration.uuid, '<new/>'),
                         (call[1].uuid, call[2].uuid, call[3]))
        self.agent.driver.destroy.assert_called_once_with(self.inst.uuid)
        api.post_live_migration_at_destination.assert_called_once()
        api.rollback_live_migration_at_destination.assert_not_called()
        self.assertEqual(set(), self.agent.tracker.instance_uuids())

    def test_a_destination_that_lost_the_definition_is_asked_again(self):
        # Its agent was killed holding the request; the restarted one
        # answers the next try.
        self.patch(migration_source.patience, 'attempt_timeout',
                   lambda timeout: 7)
        self.agent.compute_api.accept_emulated_migration.side_effect = [
            rpcapi.AgentCallTimeout(host=cbase.HOST,
                                    method='accept_emulated_migration',
                                    timeout=7, option='a third'), None]
        self._run()
        self.assertEqual('completed', self.statuses[-1])
        calls = self.agent.compute_api.accept_emulated_migration.call_args_list
        # Growing shares of three thirds (21 s): the lost answer cost 3 s.
        self.assertEqual([3, 7], [c[1]['timeout'] for c in calls])
        self.agent.driver.destroy.assert_called_once_with(self.inst.uuid)

    def test_a_destination_that_never_answers_is_named_in_the_error(self):
        errors = []
        fail = self.agent.conductor_api.migration_set_status.side_effect

        def record(ctxt, uuid, status, detail=None, error=None,
                   result=None, timeout=None):
            errors.append(error)
            return fail(ctxt, uuid, status, detail, error, result)
        self.agent.conductor_api.migration_set_status.side_effect = record
        self.agent.compute_api.accept_emulated_migration.side_effect = \
            rpcapi.AgentCallTimeout(host=cbase.HOST,
                                    method='accept_emulated_migration',
                                    timeout=20, option='one of 3 tries')
        self._run()
        self.assertEqual('failed', self.statuses[-1])
        self.assertEqual(
            3, self.agent.compute_api.accept_emulated_migration.call_count)
        self.assertIn(f"Compute host {cbase.HOST} did not answer "
                      f"accept_emulated_migration within 20 s (one of 3 "
                      f"tries)", errors[-1])
        self.agent.driver.destroy.assert_not_called()

    def test_old_path_copies_the_xml_and_keeps_the_usage(self):
        self._run(numa=False)
        self.agent.driver.get_destination_xml.assert_called_once_with(
            self.inst.uuid, None)
        self.assertEqual('completed', self.statuses[-1])
        # The periodic recompute drops it once the records move it.
        self.assertEqual({self.inst.uuid},
                         self.agent.tracker.instance_uuids())

    def test_failure_before_leaving_rolls_back(self):
        self.agent.compute_api.accept_emulated_migration.side_effect = \
            exception.HypervisorError(host='dst', action='define',
                                      reason='no')
        self._run()
        self.assertEqual(['preparing', 'running', 'failed'], self.statuses)
        api = self.agent.compute_api
        api.rollback_live_migration_at_destination.assert_called_once()
        api.drop_move_claim_at_destination.assert_called_once()
        self.agent.driver.destroy.assert_not_called()
        self.assertEqual({self.inst.uuid},
                         self.agent.tracker.instance_uuids())

    def test_old_path_failure_does_not_drop_a_claim_never_taken(self):
        self.agent.compute_api.pre_live_migration.side_effect = \
            exception.MigrationError(reason='dest not ready')
        self._run(numa=False)
        self.assertEqual('failed', self.statuses[-1])
        self.agent.compute_api.drop_move_claim_at_destination.\
            assert_not_called()
        self.agent.compute_api.rollback_live_migration_at_destination.\
            assert_called_once()

    def test_failure_after_leaving_is_an_error_not_a_rollback(self):
        self.agent.compute_api.post_live_migration_at_destination.\
            side_effect = exception.MigrationError(reason='boom')
        self._run()
        self.assertEqual('error', self.statuses[-1])
        self.agent.compute_api.rollback_live_migration_at_destination.\
            assert_not_called()

    def test_no_answer_after_leaving_is_left_to_reconciliation(self):
        self.agent.compute_api.post_live_migration_at_destination.\
            side_effect = messaging.MessagingTimeout()
        self._run()
        self.assertEqual(['preparing', 'running', 'post-migrating'],
                         self.statuses)
        self.agent.compute_api.rollback_live_migration_at_destination.\
            assert_not_called()

    def test_lost_answer_to_a_status_change_is_asked_again(self):
        recorded = []
        set_status = self.agent.conductor_api.migration_set_status.side_effect

        def lose_first_answer(ctxt, uuid, status, detail=None, error=None,
                              result=None, timeout=None):
            if status == 'preparing' and not recorded:
                recorded.append(status)  # recorded, then the worker died
                raise messaging.MessagingTimeout()
            if status == 'preparing':
                raise exception.InvalidStatusTransition(
                    migration_uuid=uuid, current='preparing',
                    requested=status, allowed='running')
            return set_status(ctxt, uuid, status, detail, error, result)
        self.agent.conductor_api.migration_set_status.side_effect = \
            lose_first_answer
        current = self.migration.obj_clone()
        current.status = 'preparing'
        self.agent.conductor_api.migration_get.return_value = current
        self._run()
        self.assertEqual(['running', 'post-migrating', 'completed'],
                         self.statuses)

    def test_abort_before_the_guest_moves_cancels(self):
        job = migration_source.SourceMigration(
            self.agent, None, self.inst, self.migration, self._data())

        def abort_now(*args):
            self.assertTrue(job.abort())
            return '<new/>'
        self.agent.driver.get_destination_xml.side_effect = abort_now
        job.run()
        self.assertEqual(['preparing', 'cancelled'], self.statuses)
        self.agent.compute_api.accept_emulated_migration.assert_not_called()
        self.agent.compute_api.drop_move_claim_at_destination.\
            assert_called_once()

    def test_cancelled_before_it_started(self):
        self.agent.conductor_api.migration_set_status.side_effect = [
            exception.InvalidStatusTransition(
                migration_uuid='m', current='cancelled',
                requested='preparing', allowed='nothing'),
            mock.DEFAULT]
        cancelled = self.migration.obj_clone()
        cancelled.status = 'cancelled'
        self.agent.conductor_api.migration_get.return_value = cancelled
        self._run()
        self.agent.compute_api.pre_live_migration.assert_not_called()
        self.agent.compute_api.drop_move_claim_at_destination.\
            assert_called_once()

    def test_repeated_start_of_a_finished_migration_does_nothing(self):
        # A redelivered cast of a migration that completed: nothing may
        # be rolled back (the guest runs on the destination).
        self.agent.conductor_api.migration_set_status.side_effect = \
            exception.InvalidStatusTransition(
                migration_uuid='m', current='completed',
                requested='preparing', allowed='nothing')
        completed = self.migration.obj_clone()
        completed.status = 'completed'
        self.agent.conductor_api.migration_get.return_value = completed
        self._run()
        api = self.agent.compute_api
        api.pre_live_migration.assert_not_called()
        api.rollback_live_migration_at_destination.assert_not_called()
        api.drop_move_claim_at_destination.assert_not_called()

    def test_native_abort_after_running_starts_no_job(self):
        # The operator's abort lands once running is recorded, before the
        # driver has a job to abort: the migration must not start.
        self.agent.driver.supports_native_migration = True
        self.agent.driver.live_migration_abort.side_effect = \
            exception.NoRunningMigration(instance='i', host='src',
                                         action='abort', reason='no job')
        job = migration_source.SourceMigration(
            self.agent, None, self.inst, self.migration, self._data())
        set_status = self.agent.conductor_api.migration_set_status.side_effect

        def abort_when_running(ctxt, uuid, status, **kwargs):
            if status == 'running':
                self.assertTrue(job.abort())
            return set_status(ctxt, uuid, status, **kwargs)
        self.agent.conductor_api.migration_set_status.side_effect = \
            abort_when_running
        job.run()
        self.assertEqual('cancelled', self.statuses[-1])
        self.agent.driver.live_migrate.assert_not_called()
        self.agent.compute_api.drop_move_claim_at_destination.\
            assert_called_once()

    def test_native_run_gets_the_abort_event(self):
        # An abort arriving while the driver sets its job up is honoured
        # by the driver itself, through this event.
        self.agent.driver.supports_native_migration = True
        job = migration_source.SourceMigration(
            self.agent, None, self.inst, self.migration, self._data())

        def migrate(uuid, xml, data, progress_callback, policy=None,
                    recovery_callback=None, abort_requested=None,
                    threads=None, action_callback=None):
            self.assertIs(job.abort_requested, abort_requested)
            # The CPUs for the job's threads, chosen by this agent.
            self.assertIsInstance(threads, migration_threads.SourceThreads)
            job.abort()
            raise exception.MigrationAborted(
                instance=uuid, host='src', dest='dst', code=1,
                reason='aborted by request')
        self.agent.driver.live_migrate.side_effect = migrate
        job.run()
        self.assertEqual('cancelled', self.statuses[-1])

    def test_abort_is_refused_once_the_guest_left(self):
        job = migration_source.SourceMigration(
            self.agent, None, self.inst, self.migration, self._data())
        job.left_source = True
        self.assertFalse(job.abort())

    def test_native_migration_reports_progress(self):
        self.agent.driver.supports_native_migration = True
        from numamig.virt import driver as virt_driver

        def migrate(uuid, xml, data, progress_callback, policy=None,
                    recovery_callback=None, abort_requested=None,
                    threads=None, action_callback=None):
            progress_callback(virt_driver.MigrationProgress(
                memory_total=100, memory_processed=40,
                memory_remaining=60))
        self.agent.driver.live_migrate.side_effect = migrate
        self._run()
        self.assertEqual('completed', self.statuses[-1])
        progress = self.agent.conductor_api.migration_update_progress
        sample = progress.call_args[0]
        self.assertEqual(40, sample[2]['memory_processed'])
        self.agent.driver.destroy.assert_not_called()

    def test_each_policy_action_is_told_as_it_happens(self):
        from numamig.compute import events
        from numamig.convergence import policy as convergence
        self.agent.driver.supports_native_migration = True
        told, during = [], []
        self.agent.events.listeners.append(told.extend)

        def migrate(uuid, xml, data, progress_callback, policy=None,
                    recovery_callback=None, abort_requested=None,
                    threads=None, action_callback=None):
            action_callback(convergence.Action(convergence.POST_COPY,
                                               'stalled'),
                            convergence.APPLIED, 'post-copy (stalled)')
            # Told before the run ends, not with its result.
            during.extend(told)
        self.agent.driver.live_migrate.side_effect = migrate
        self._run()
        self.assertEqual('completed', self.statuses[-1])
        self.assertEqual(1, len(during))
        kind, action, _detail = during[0]
        self.assertEqual(events.POLICY_ACTION, kind)
        self.assertEqual(
            (self.migration.uuid, self.inst.uuid, 'post_copy',
             'applied', 'post-copy (stalled)'),
            (action.migration_uuid, action.instance_uuid, action.kind,
             action.outcome, action.line))


class SourceMigrationResultTest(_SourceMigrationTestCase):
    """The run's result goes to the conductor with the status after it."""

    EMULATED = {'emulated': True, 'elapsed_ms': 4, 'downtime_ms': None,
                'memory_total': None, 'memory_processed': None,
                'post_copy': None, 'paused': None}

    def test_emulated_result_of_the_destination(self):
        self.agent.compute_api.accept_emulated_migration.return_value = \
            dict(self.EMULATED)
        self._run()
        self.assertEqual(self.EMULATED, self.results['post-migrating'])
        self.assertIsNone(self.results['completed'])
        self.assertIsNone(self.results['running'])

    def test_destination_that_answers_nothing_is_measured(self):
        self.agent.compute_api.accept_emulated_migration.return_value = None
        self._run()
        result = self.results['post-migrating']
        self.assertTrue(result['emulated'])
        self.assertGreaterEqual(result['elapsed_ms'], 0)
        self.assertIsNone(result['downtime_ms'])

    def test_native_result_of_the_driver(self):
        from numamig.virt import driver as virt_driver
        self.agent.driver.supports_native_migration = True
        native = virt_driver.MigrationResult(
            emulated=False, elapsed_ms=412, downtime_ms=18,
            memory_total=100, memory_processed=120, post_copy=True,
            paused=False)
        self.agent.driver.live_migrate.return_value = native
        self._run()
        # No recovery history (the stream never broke): not reported, so
        # a conductor before API 1.15 accepts the result.
        expected = native.as_dict()
        del expected['postcopy_recovery']
        self.assertEqual(expected, self.results['post-migrating'])

    def test_partial_native_run_reports_what_the_source_saw(self):
        from numamig.virt import driver as virt_driver
        self.agent.driver.supports_native_migration = True

        def migrate(uuid, xml, data, progress_callback, policy=None,
                    recovery_callback=None, abort_requested=None,
                    threads=None, action_callback=None):
            progress_callback(virt_driver.MigrationProgress(
                memory_total=100, memory_processed=40,
                memory_remaining=60))
            raise exception.MigrationError(reason='link down')
        self.agent.driver.live_migrate.side_effect = migrate
        self._run()
        self.assertEqual('failed', self.statuses[-1])
        result = self.results['failed']
        self.assertEqual((False, 100, 40, None),
                         (result['emulated'], result['memory_total'],
                          result['memory_processed'],
                          result['downtime_ms']))
        self.assertGreaterEqual(result['elapsed_ms'], 0)

    def test_no_run_no_result(self):
        self.agent.compute_api.pre_live_migration.side_effect = \
            exception.MigrationError(reason='dest not ready')
        self._run()
        self.assertEqual('failed', self.statuses[-1])
        self.assertIsNone(self.results['failed'])

    def test_failure_after_leaving_sends_the_result_again(self):
        self.agent.compute_api.accept_emulated_migration.return_value = \
            dict(self.EMULATED)
        self.agent.compute_api.post_live_migration_at_destination.\
            side_effect = exception.MigrationError(reason='boom')
        self._run()
        self.assertEqual(self.EMULATED, self.results['error'])

    def test_refused_result_does_not_cost_the_status(self):
        self.agent.compute_api.accept_emulated_migration.return_value = \
            {'emulated': True, 'elapsed_ms': -1}
        set_status = self.agent.conductor_api.migration_set_status.side_effect

        def refuse_results(ctxt, uuid, status, detail=None, error=None,
                           result=None, timeout=None):
            if result is not None:
                raise exception.InvalidMigrationResult(
                    migration_uuid=uuid, reason='elapsed_ms unusable')
            return set_status(ctxt, uuid, status, detail, error, result)
        self.agent.conductor_api.migration_set_status.side_effect = \
            refuse_results
        self._run()
        self.assertEqual(['preparing', 'running', 'post-migrating',
                          'completed'], self.statuses)

    def test_abort_before_the_run_reports_no_result(self):
        job = migration_source.SourceMigration(
            self.agent, None, self.inst, self.migration, self._data())
        # Abort lands between the running status and the emulated copy.
        set_status = self.agent.conductor_api.migration_set_status.side_effect

        def abort_when_running(ctxt, uuid, status, **kwargs):
            if status == 'running':
                job.abort()
            return set_status(ctxt, uuid, status, **kwargs)
        self.agent.conductor_api.migration_set_status.side_effect = \
            abort_when_running
        job.run()
        self.assertEqual('cancelled', self.statuses[-1])
        self.assertIsNone(self.results['cancelled'])
        self.agent.compute_api.accept_emulated_migration.assert_not_called()


class ShortPathTest(_SourceMigrationTestCase):
    """A conductor of API 1.3: running once, completed+apply once."""

    def setUp(self):
        super().setUp()
        conductor = self.agent.conductor_api
        conductor.supports_short_path.return_value = True
        self.completed = []

        def running(ctxt, uuid, timeout=None):
            self.statuses.append('running')
            result = self.migration.obj_clone()
            result.status = 'running'
            return result

        def complete(ctxt, uuid, result=None, detail=None, timeout=None):
            self.statuses.append('completed')
            self.completed.append(result)
            done = self.migration.obj_clone()
            done.status = 'completed'
            return done
        conductor.migration_set_running.side_effect = running
        conductor.migration_complete.side_effect = complete

    def test_database_outage_at_running_resumes_once_it_is_back(self):
        # The fault suite's cut-database round: the conductor answered
        # 'running' with a DatabaseError; the source used to roll back,
        # fail to record 'failed' too, and leave the migration queued
        # until the stalled sweep ended it minutes later, saying the
        # source was never told to start.
        self.patch(migration_source.patience.time, 'sleep', lambda s: None)
        running = self.agent.conductor_api.migration_set_running
        answer = running.side_effect
        outage = [exception.DatabaseError(url='db', reason='gone')] * 2

        def database_out_then_back(ctxt, uuid, timeout=None):
            if outage:
                raise outage.pop()
            return answer(ctxt, uuid)
        running.side_effect = database_out_then_back
        self._run()
        self.assertEqual(['running', 'completed'], self.statuses)
        self.assertEqual(3, running.call_count)
        self.agent.compute_api.rollback_live_migration_at_destination.\
            assert_not_called()

    def test_destination_not_answering_is_said_in_the_error(self):
        # The fault suite's kill-dest-at-queued round recorded only
        # "Timed out waiting for a reply to message ID ...".
        self.agent.compute_api.pre_live_migration.side_effect = \
            messaging.MessagingTimeout('Timed out waiting for a reply')
        errors = []
        fail = self.agent.conductor_api.migration_set_status.side_effect

        def record(ctxt, uuid, status, detail=None, error=None,
                   result=None, timeout=None):
            errors.append(error)
            return fail(ctxt, uuid, status, detail, error, result)
        self.agent.conductor_api.migration_set_status.side_effect = record
        self._run()
        self.assertEqual(['failed'], self.statuses)
        self.assertEqual(
            3, self.agent.compute_api.pre_live_migration.call_count)
        self.assertIn(f"destination {cbase.HOST} did not answer "
                      f"pre_live_migration in 3 tries", errors[-1])

    def test_a_lost_pre_live_migration_answer_is_asked_again(self):
        # A broker restart lost the reply queue with the destination's
        # answer in it; the same request, sent again, is answered.
        self.patch(migration_source.patience, 'attempt_timeout',
                   lambda timeout: 7)
        api = self.agent.compute_api
        answer = api.pre_live_migration.side_effect
        lost = [rpcapi.AgentCallTimeout(host=cbase.HOST,
                                        method='pre_live_migration',
                                        timeout=7, option='a third')]

        def lost_once(ctxt, instance, migrate_data, **kwargs):
            if lost:
                raise lost.pop()
            return answer(ctxt, instance, migrate_data)
        api.pre_live_migration.side_effect = lost_once
        self._run()
        self.assertEqual(['running', 'completed'], self.statuses)
        calls = api.pre_live_migration.call_args_list
        # Growing shares of three thirds (21 s): the lost answer cost 3 s.
        self.assertEqual([3, 7], [c[1]['timeout'] for c in calls])
        self.assertIs(calls[0][0][2], calls[1][0][2])

    def test_an_abort_between_pre_live_migration_tries_stops_them(self):
        job = migration_source.SourceMigration(
            self.agent, None, self.inst, self.migration, self._data())
        api = self.agent.compute_api

        def lost_and_aborted(ctxt, instance, migrate_data, **kwargs):
            job.abort()
            raise rpcapi.AgentCallTimeout(host=cbase.HOST,
                                          method='pre_live_migration',
                                          timeout=7, option='a third')
        api.pre_live_migration.side_effect = lost_and_aborted
        self.patch(migration_source.patience.Asking, 'again',
                   lambda asking, exc: None)
        job.run()
        self.assertEqual(1, api.pre_live_migration.call_count)
        self.assertEqual('cancelled', self.statuses[-1])

    def test_two_status_calls_and_the_destination_only_counts(self):
        self._run()
        self.assertEqual(['running', 'completed'], self.statuses)
        self.agent.conductor_api.migration_set_status.assert_not_called()
        self.agent.conductor_api.migration_context_apply.assert_not_called()
        post = self.agent.compute_api.post_live_migration_at_destination
        self.assertEqual({'records_by_source': True}, post.call_args[1])
        (result,) = self.completed
        self.assertIs(True, result['emulated'])
        self.assertEqual(set(), self.agent.tracker.instance_uuids())

    def test_guest_counted_here_until_the_records_moved_it(self):
        # Freed before ``completed`` is recorded, its pCPUs could go to
        # an incoming migration while the records still place it here.
        counted = []
        complete = self.agent.conductor_api.migration_complete.side_effect

        def recording(ctxt, uuid, result=None, detail=None, timeout=None):
            counted.append(self.agent.tracker.instance_uuids())
            return complete(ctxt, uuid, result=result, detail=detail)
        self.agent.conductor_api.migration_complete.side_effect = recording
        self._run()
        self.assertEqual([{self.inst.uuid}], counted)
        self.assertEqual(set(), self.agent.tracker.instance_uuids())

    def test_running_is_recorded_after_the_destination_prepared(self):
        order = []
        api, conductor = self.agent.compute_api, self.agent.conductor_api
        api.pre_live_migration.side_effect = \
            lambda ctxt, instance, data, **kw: order.append('pre') or data
        running = conductor.migration_set_running.side_effect
        conductor.migration_set_running.side_effect = \
            lambda ctxt, uuid, timeout=None: (order.append('running')
                                              or running(ctxt, uuid))
        self._run()
        self.assertEqual(['pre', 'running'], order)

    def test_older_conductor_gets_the_long_walk(self):
        conductor = self.agent.conductor_api
        conductor.migration_set_running.side_effect = \
            messaging.UnsupportedVersion('1.3')
        conductor.migration_complete.side_effect = \
            messaging.UnsupportedVersion('1.3')
        conductor.migration_get.return_value = self.migration
        self._run()
        self.assertEqual(['preparing', 'running', 'post-migrating',
                          'completed'], self.statuses)
        # The destination was told the source records the claim, so the
        # source applies it itself.
        conductor.migration_context_apply.assert_called_once_with(
            None, self.inst.uuid, self.migration.uuid)
        self.assertIs(True, self.results['post-migrating']['emulated'])

    def test_lost_answer_to_completed_is_asked_again(self):
        complete = self.agent.conductor_api.migration_complete.side_effect
        lost = []

        def lose_first(ctxt, uuid, result=None, detail=None, timeout=None):
            lost.append(timeout)
            if len(lost) == 1:
                raise messaging.MessagingTimeout()
            return complete(ctxt, uuid, result=result, detail=detail)
        self.agent.conductor_api.migration_complete.side_effect = lose_first
        self._run()
        self.assertEqual(['running', 'completed'], self.statuses)
        # The second try waited longer than the first.
        self.assertEqual(2, len(lost))
        self.assertLess(lost[0], lost[1])
        self.agent.compute_api.rollback_live_migration_at_destination.\
            assert_not_called()

    def test_repeated_start_after_completion_undoes_nothing(self):
        # The destination no longer holds the claim (it was applied), so
        # pre_live_migration refuses; the migration is completed.
        self.agent.compute_api.pre_live_migration.side_effect = \
            exception.MigrationError(reason='claim gone')
        completed = self.migration.obj_clone()
        completed.status = 'completed'
        self.agent.conductor_api.migration_get.return_value = completed
        self._run()
        self.assertEqual([], self.statuses)
        api = self.agent.compute_api
        api.rollback_live_migration_at_destination.assert_not_called()
        api.drop_move_claim_at_destination.assert_not_called()

    def _running_refused_as(self, current, allowed):
        """``running`` is refused: the migration is ``current``."""
        self.agent.conductor_api.migration_set_running.side_effect = \
            exception.InvalidStatusTransition(
                migration_uuid='m', current=current, requested='running',
                allowed=allowed)
        found = self.migration.obj_clone()
        found.status = current
        self.agent.conductor_api.migration_get.return_value = found

    def test_own_running_delivered_twice_goes_on(self):
        # A broker restart broke the connection before it confirmed the
        # request: oslo.messaging published it again, the conductor
        # recorded the first and refused the second, whose refusal is the
        # answer that came back. No timeout was seen here.
        self._running_refused_as('running', allowed='post-migrating')
        self._run()
        api = self.agent.compute_api
        api.accept_emulated_migration.assert_called_once()
        api.rollback_live_migration_at_destination.assert_not_called()
        self.assertEqual('completed', self.statuses[-1])

    def test_refused_running_of_a_cancelled_migration_rolls_back(self):
        self._running_refused_as('cancelled', allowed='nothing')
        self._run()
        api = self.agent.compute_api
        api.rollback_live_migration_at_destination.assert_called_once()
        api.drop_move_claim_at_destination.assert_called_once()
        api.accept_emulated_migration.assert_not_called()


class PostCopyPausedTest(_SourceMigrationTestCase):
    """A post-copy whose stream broke and was not resumed: the guest is
    paused, split between the hosts; nothing may be rolled back."""

    HISTORY = [{'event': 'link-lost', 'at': 't1', 'attempt': None,
                'detail': 'stream broke'},
               {'event': 'gave-up', 'at': 't2', 'attempt': None,
                'detail': '3 resume attempts failed'}]

    def setUp(self):
        super().setUp()
        self.agent.driver.supports_native_migration = True
        self.errors = {}
        set_status = self.agent.conductor_api.migration_set_status.side_effect

        def recording(ctxt, uuid, status, detail=None, error=None,
                      result=None, timeout=None):
            self.errors[status] = error
            return set_status(ctxt, uuid, status, detail, error, result)
        self.agent.conductor_api.migration_set_status.side_effect = recording

        def migrate(uuid, xml, data, progress_callback, policy=None,
                    recovery_callback=None, abort_requested=None,
                    threads=None, action_callback=None):
            recovery_callback(self.HISTORY[:1])
            recovery_callback(self.HISTORY)
            raise exception.PostCopyPaused(
                instance=uuid, host='src', dest='dst',
                reason='3 resume attempts failed')
        self.agent.driver.live_migrate.side_effect = migrate

    def test_ends_postcopy_paused_keeping_both_claims(self):
        self._run()
        self.assertEqual('postcopy-paused', self.statuses[-1])
        self.assertNotIn('error', self.statuses)
        self.assertIn('the guest is PAUSED',
                      self.errors['postcopy-paused'])
        self.assertIn("numamig-manage migration resume",
                      self.errors['postcopy-paused'])
        result = self.results['postcopy-paused']
        self.assertTrue(result['post_copy'])
        self.assertEqual(self.HISTORY, result['postcopy_recovery'])
        api = self.agent.compute_api
        api.rollback_live_migration_at_destination.assert_not_called()
        api.drop_move_claim_at_destination.assert_not_called()
        self.agent.driver.destroy.assert_not_called()
        # The source still counts the guest: its half holds its pins.
        self.assertIn(self.inst.uuid,
                      {i.uuid for i in self.agent.tracker.instances()})

    def test_older_conductor_gets_error_as_before(self):
        set_status = self.agent.conductor_api.migration_set_status.side_effect

        def older(ctxt, uuid, status, detail=None, error=None, result=None,
                  timeout=None):
            if status == 'postcopy-paused':
                raise messaging.UnsupportedVersion('1.17')
            return set_status(ctxt, uuid, status, detail, error, result)
        self.agent.conductor_api.migration_set_status.side_effect = older
        self._run()
        self.assertEqual('error', self.statuses[-1])
        self.assertIn('the guest is PAUSED', self.errors['error'])
        self.assertEqual(self.HISTORY,
                         self.results['error']['postcopy_recovery'])
        self.agent.compute_api.rollback_live_migration_at_destination.\
            assert_not_called()

    def test_history_reported_as_it_grows(self):
        self._run()
        record = self.agent.conductor_api.migration_record_recovery
        self.assertEqual([1, 2], [len(c[0][2]) for c in
                                  record.call_args_list])


class CheckSourceGuestCPUTest(base.TestCase):
    """The source tells the destinations the guest's CPU."""

    def _check(self, guest_cpu):
        agent = cbase.agent(host=cbase.SOURCE)
        inst = cbase.instance()
        agent.driver.list_guests.return_value = {inst.uuid: inst.name}
        if isinstance(guest_cpu, Exception):
            agent.driver.guest_cpu.side_effect = guest_cpu
        else:
            agent.driver.guest_cpu.return_value = guest_cpu
        data = objects.LiveMigrateData(
            instance_uuid=inst.uuid, source_host=cbase.SOURCE,
            dest_host=cbase.HOST, migration_uuid=cbase.new_uuid(),
            dst_supports_numa_live_migration=True)
        return migration_source.check_source(agent, None, inst, data)

    def test_guest_cpu_travels(self):
        guest = cpumodel.GuestCPU('custom', 'Broadwell', frozenset({'ss'}),
                                  frozenset({'mpx'}))
        self.assertEqual(guest, self._check(guest).guest_cpu())

    def test_unreadable_cpu_is_not_told(self):
        with self.assertLogs('numamig.compute.migration_source',
                             'WARNING') as logs:
            data = self._check(RuntimeError('gone'))
        self.assertIsNone(data.guest_cpu())
        self.assertIn('destinations will not check it', logs.output[0])

    def test_default_cpu_is_not_told(self):
        self.assertIsNone(self._check(cpumodel.GuestCPU()).guest_cpu())
