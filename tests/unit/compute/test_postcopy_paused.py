"""Tests of numamig.compute.postcopy_paused: an operator's resume of a
postcopy-paused migration, on the source and the destination."""

from unittest import mock

import oslo_messaging as messaging

from numamig import exception
from numamig import objects
from numamig.compute import postcopy_paused
from numamig.virt import driver as virt_driver
from tests import base
from tests.unit.compute import base as cbase

HISTORY = [{'event': 'link-lost', 'at': 't1', 'attempt': None,
            'detail': 'stream broke'},
           {'event': 'gave-up', 'at': 't2', 'attempt': None,
            'detail': '20 resume attempts failed'}]
TARGET = {'dest_connect_uri': 'qemu+tcp://dst/system',
          'migration_uri': 'tcp://dst', 'xml': '<domain/>'}


class _PausedTestCase(base.TestCase):
    """A guest paused here in a broken post-copy to cbase.HOST, its
    migration moved to running by the conductor's resume."""

    def setUp(self):
        super().setUp()
        self.inst = cbase.instance(host=cbase.SOURCE, pins={0: 2, 1: 10})
        self.agent = cbase.agent(host=cbase.SOURCE, instances=[self.inst])
        self.agent.driver.supports_native_migration = True
        self.agent.driver.postcopy_paused.return_value = True
        self.migration = cbase.migration(self.inst, status='running')
        recorded = self.migration.obj_clone()
        recorded.status = 'running'
        conductor = self.agent.conductor_api
        conductor.migration_get.return_value = recorded
        # The satellites a resume reads with it (records API 2.0).
        conductor.migration_get_with_satellites.return_value = (
            recorded, {'convergence': objects.MigrationConvergence(
                migration_uuid=recorded.uuid, policy='timer'),
                'recovery': objects.MigrationRecovery(
                    migration_uuid=recorded.uuid, events=list(HISTORY))})
        conductor.supports_short_path.return_value = True
        self.statuses = []

        def set_status(ctxt, uuid, status, detail=None, error=None,
                       result=None, timeout=None):
            self.statuses.append((status, error, result))
            return self.migration
        conductor.migration_set_status.side_effect = set_status
        conductor.migration_complete.side_effect = \
            lambda ctxt, uuid, result=None, detail=None, timeout=None: \
            self.statuses.append(('completed', None, result)) or \
            self.migration
        self.agent.compute_api.postcopy_resume_target.return_value = \
            dict(TARGET)

    def _job(self):
        return postcopy_paused.PausedResume(self.agent, None, self.inst,
                                            self.migration)


class AcceptResumeTest(_PausedTestCase):

    def test_hands_a_registered_run_to_the_executor(self):
        submitted = []
        self.assertTrue(postcopy_paused.accept_resume(
            self.agent, None, self.inst, self.migration, submitted.append))
        (job,) = submitted
        self.assertIsInstance(job, postcopy_paused.PausedResume)
        self.assertIs(job, self.agent.outgoing.get(self.migration.uuid))
        self.assertFalse(job.abort(), "neither half can be rolled back to")

    def test_repeated_request_starts_nothing(self):
        submitted = []
        postcopy_paused.accept_resume(self.agent, None, self.inst,
                                      self.migration, submitted.append)
        self.assertFalse(postcopy_paused.accept_resume(
            self.agent, None, self.inst, self.migration, submitted.append))
        self.assertEqual(1, len(submitted))

    def test_request_delivered_after_its_run_ended_is_ignored(self):
        ended = self.migration.obj_clone()
        ended.status = 'postcopy-paused'
        self.agent.conductor_api.migration_get.return_value = ended
        submit = mock.Mock()
        self.assertFalse(postcopy_paused.accept_resume(
            self.agent, None, self.inst, self.migration, submit))
        submit.assert_not_called()

    def test_guest_not_paused_here_is_refused(self):
        self.agent.driver.postcopy_paused.return_value = False
        submit = mock.Mock()
        exc = self.assertRaises(
            exception.MigrationNotResumable, postcopy_paused.accept_resume,
            self.agent, None, self.inst, self.migration, submit)
        self.assertIn('is not paused in a broken post-copy on source host '
                      'src', str(exc))
        submit.assert_not_called()
        self.assertEqual(set(), self.agent.outgoing.uuids())

    def test_stopping_agent_refuses_and_unregisters(self):
        def stopped(job):
            raise RuntimeError('shut down')
        self.assertRaisesMessage(
            exception.MigrationNotResumable, 'is stopping',
            postcopy_paused.accept_resume, self.agent, None, self.inst,
            self.migration, stopped)
        self.assertEqual(set(), self.agent.outgoing.uuids())


class PausedResumeTest(_PausedTestCase):

    def test_success_completes_like_a_normal_run(self):
        self.agent.driver.resume_postcopy.return_value = \
            virt_driver.MigrationResult(
                emulated=False, elapsed_ms=900, post_copy=True,
                postcopy_recovery=HISTORY + [
                    {'event': 'resume-requested', 'at': 't3',
                     'attempt': None, 'detail': 'by an operator'},
                    {'event': 'resumed', 'at': 't4', 'attempt': 1,
                     'detail': None}])
        self._job().run()
        args, kwargs = self.agent.driver.resume_postcopy.call_args
        self.assertEqual(self.inst.uuid, args[0])
        self.assertEqual(dict(TARGET, dest_host=cbase.HOST), args[1])
        self.assertEqual(HISTORY, args[2], "the history is carried on")
        # Read with the migration in one round trip, and the policy the
        # run chose asked of the driver.
        conductor = self.agent.conductor_api
        conductor.migration_get_with_satellites.assert_called_once_with(
            None, self.migration.uuid, ('convergence', 'recovery'))
        conductor.migration_get.assert_not_called()
        self.agent.driver.select_migration_policy.assert_called_once_with(
            'timer', None, None)
        (status, _error, result), = self.statuses
        self.assertEqual('completed', status)
        self.assertEqual('resumed', result['postcopy_recovery'][-1]['event'])
        post = self.agent.compute_api.post_live_migration_at_destination
        post.assert_called_once()
        # The destination's claim became the placement: this host no
        # longer counts the guest.
        self.assertEqual(set(), self.agent.tracker.instance_uuids())

    def test_giving_up_again_records_postcopy_paused_with_the_attempt(self):
        def resume(uuid, target, history, policy=None,
                   progress_callback=None, recovery_callback=None,
                   reason=None):
            recovery_callback(history + [{'event': 'resume-requested',
                                          'at': 't3', 'attempt': None,
                                          'detail': reason}])
            raise exception.PostCopyPaused(instance=uuid, host='src',
                                           dest='dst', reason='no link')
        self.agent.driver.resume_postcopy.side_effect = resume
        self._job().run()
        (status, error, result), = self.statuses
        self.assertEqual('postcopy-paused', status)
        self.assertIn('no link', error)
        self.assertEqual(['link-lost', 'gave-up', 'resume-requested'],
                         [e['event'] for e in result['postcopy_recovery']])
        self.agent.conductor_api.migration_complete.assert_not_called()
        self.assertEqual({self.inst.uuid},
                         self.agent.tracker.instance_uuids())
        self.agent.conductor_api.migration_record_recovery.\
            assert_called_once()

    def test_destination_refusing_leaves_it_paused_saying_why(self):
        self.agent.compute_api.postcopy_resume_target.side_effect = \
            exception.MigrationNotResumable(
                migration_uuid=self.migration.uuid, status='running',
                reason='destination dst has no paused half')
        self._job().run()
        (status, error, _result), = self.statuses
        self.assertEqual('postcopy-paused', status)
        self.assertIn('resume did not run', error)
        self.assertIn('no paused half', error)
        self.agent.driver.resume_postcopy.assert_not_called()


    def test_a_release_1_conductor_is_asked_migration_get(self):
        # It has no migration_get_with_satellites (the client sends
        # nothing) and records no satellite: the resume starts from an
        # empty history and the policy the instance's specs choose.
        conductor = self.agent.conductor_api
        conductor.migration_get_with_satellites.side_effect = \
            messaging.UnsupportedVersion('2.0')
        self.agent.driver.resume_postcopy.return_value = \
            virt_driver.MigrationResult(emulated=False, post_copy=True)
        self._job().run()
        conductor.migration_get.assert_called_once_with(
            None, self.migration.uuid)
        args, _kwargs = self.agent.driver.resume_postcopy.call_args
        self.assertEqual([], args[2])
        self.agent.driver.select_migration_policy.assert_called_once_with(
            None, None, None)
        (status, _error, _result), = self.statuses
        self.assertEqual('completed', status)


class ResumeTargetTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.inst = cbase.instance(host=cbase.SOURCE)
        self.migration = cbase.migration(self.inst, status='running')

    def test_what_the_paused_half_runs(self):
        agent = cbase.agent(host=cbase.HOST,
                            guests={self.inst.uuid: self.inst.name})
        agent.driver.get_destination_xml.return_value = '<paused/>'
        self.assertEqual(
            {'dest_connect_uri': 'test:///dst', 'migration_uri': None,
             'xml': '<paused/>'},
            postcopy_paused.resume_target(agent, self.inst, self.migration))
        agent.driver.get_destination_xml.assert_called_once_with(
            self.inst.uuid, None)

    def test_no_half_here_is_refused(self):
        agent = cbase.agent(host=cbase.HOST, guests={})
        self.assertRaisesMessage(
            exception.MigrationNotResumable,
            'destination dst has no paused half',
            postcopy_paused.resume_target, agent, self.inst, self.migration)
