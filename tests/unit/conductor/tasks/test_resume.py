"""Tests of a postcopy-paused migration in the conductor: its claims,
its admission slot, an operator's resume (numamig.conductor.tasks.resume) and
the refused abort, on a real SQLite database."""

from unittest import mock

import oslo_messaging as messaging

from numamig import exception
from numamig import objects
from numamig.audit import claims as audit_claims
from numamig.conductor import records
from numamig.conductor.tasks import resume
from numamig.db import instances
from numamig.db import migration_satellites
from numamig.db import migrations
from tests.unit.compute import base as cbase
from tests.unit.conductor import base


class PausedTestCase(base.ConductorTestCase):
    """A migration src -> dst1 whose post-copy recovery gave up."""

    def setUp(self):
        super().setUp()
        self.inst = self.create_instance()
        self.migration = migrations.create(self.db, cbase.migration(
            self.inst, dest_host='dst1'))
        self.new_topology = self.inst.numa_topology.obj_clone()
        self.new_topology.cells[0].cpu_pinning = {0: 3, 1: 11}
        records.queue_with_claim(self.worker, objects.MigrationContext(
            instance_uuid=self.inst.uuid, migration_uuid=self.migration.uuid,
            source_host='src', dest_host='dst1',
            old_numa_topology=self.inst.numa_topology,
            new_numa_topology=self.new_topology), 'claimed')
        migrations.set_status(self.db, self.migration.uuid, 'running')
        self.conductor.cache.reserve('dst1', self.inst.uuid, 'demo',
                                     self.new_topology)
        self.ended = mock.Mock()
        self.reconfigure(migration_ended=self.ended)
        self.paused = records.set_status(
            self.worker, self.migration.uuid, 'postcopy-paused',
            error='the guest is PAUSED', result={
                'post_copy': True, 'postcopy_recovery': [
                    {'event': 'link-lost', 'at': 't1', 'attempt': None,
                     'detail': 'stream broke'},
                    {'event': 'gave-up', 'at': 't2', 'attempt': None,
                     'detail': '20 resume attempts failed'}]})

    def _record(self):
        return instances.get(self.db, self.inst.uuid).instance


class PausedClaimsTest(PausedTestCase):

    def test_both_placements_are_kept(self):
        record = self._record()
        self.assertEqual('src', record.host)
        self.assertEqual({0: 2, 1: 10},
                         record.numa_topology.cells[0].cpu_pinning)
        context = record.migration_context
        self.assertEqual((self.migration.uuid, 'dst1'),
                         (context.migration_uuid, context.dest_host))
        self.assertEqual({0: 3, 1: 11},
                         context.new_numa_topology.cells[0].cpu_pinning)
        self.assertEqual(1, len(self.conductor.cache.get('dst1')
                                .reservations))

    def test_its_claim_is_no_leak(self):
        self.assertEqual([], audit_claims.leaked(self.db))

    def test_it_frees_its_admission_slot_and_settles_waits(self):
        self.ended.assert_called_once_with(self.paused)

    def test_the_recovery_history_is_recorded_with_it(self):
        recorded = migrations.get(self.db, self.migration.uuid)
        self.assertEqual('postcopy-paused', recorded.status)
        # MigrationRecovery, a satellite record in the same row.
        recovery = migration_satellites.get(
            self.db, self.migration.uuid, ('recovery',))['recovery']
        self.assertEqual(['link-lost', 'gave-up'],
                         [e['event'] for e in recovery.events])
        self.assertIsNone(recorded.memory_remaining or None,
                          "its copy is not over; nothing said it is")

    def test_no_new_migration_of_the_split_guest(self):
        self.assertRaisesMessage(
            exception.Invalid, 'postcopy-paused',
            self.call, 'live_migrate_instance', self.inst.uuid)


class AbortRefusedTest(PausedTestCase):

    def test_abort_of_a_paused_migration_is_refused_saying_why(self):
        exc = self.assertRaises(exception.MigrationNotAbortable,
                                self.call, 'migration_abort',
                                self.migration.uuid)
        self.assertIn('is postcopy-paused', str(exc))
        self.assertIn('neither half is the guest', str(exc))
        self.assertIn("numamig-manage migration resume", str(exc))
        self.compute_api.live_migration_abort.assert_not_called()
        self.assertIsNotNone(self._record().migration_context)

    def test_abort_while_it_is_resumed_is_refused_too(self):
        self.compute_api.resume_postcopy.return_value = True
        resume.ResumeTask(None, self.worker,
                          self.migration.uuid).execute()
        exc = self.assertRaises(exception.MigrationNotAbortable,
                                self.call, 'migration_abort',
                                self.migration.uuid)
        self.assertIn('neither half is the guest', str(exc))
        self.compute_api.live_migration_abort.assert_not_called()


class ResumeTest(PausedTestCase):

    def test_moves_it_running_then_asks_the_source(self):
        seen = []

        def resume_postcopy(ctxt, instance, migration, timeout=None):
            seen.append((migration.status, timeout, migrations.get(
                self.db, migration.uuid).status))
            return True
        self.compute_api.resume_postcopy.side_effect = resume_postcopy
        answer = self.call('migration_resume', self.migration.uuid)
        self.assertEqual(resume.RESUMING, answer['outcome'])
        self.assertEqual('running', answer['migration'].status)
        self.assertEqual([('running', 5, 'running')], seen)
        self.assertIsNotNone(self._record().migration_context)
        # The pause's error goes with it; its history keeps why.
        recorded = migrations.get(self.db, self.migration.uuid)
        self.assertIsNone(recorded.error)
        recovery = migration_satellites.get(
            self.db, self.migration.uuid, ('recovery',))['recovery']
        self.assertEqual('gave-up', recovery.events[-1]['event'])

    def test_redelivered_request_starts_nothing(self):
        self.compute_api.resume_postcopy.return_value = True
        resume.ResumeTask(None, self.worker,
                          self.migration.uuid).execute()
        answer = self.call('migration_resume', self.migration.uuid)
        self.assertEqual(resume.ALREADY_RESUMING, answer['outcome'])
        self.compute_api.resume_postcopy.assert_called_once()

    def test_repeat_after_its_run_paused_again_starts_nothing(self):
        self.compute_api.resume_postcopy.return_value = True
        seen = resume.pauses(migrations.get(self.db, self.migration.uuid))
        self.assertEqual(1, seen)
        self.call('migration_resume', self.migration.uuid, pauses=seen)
        records.set_status(self.worker, self.migration.uuid,
                           'postcopy-paused', error='no link')
        answer = self.call('migration_resume', self.migration.uuid,
                           pauses=seen)
        self.assertEqual(resume.ALREADY_RESUMED, answer['outcome'])
        self.assertEqual('postcopy-paused', answer['migration'].status)
        self.compute_api.resume_postcopy.assert_called_once()
        # A new request, for the new pause, runs.
        answer = self.call('migration_resume', self.migration.uuid,
                           pauses=seen + 1)
        self.assertEqual(resume.RESUMING, answer['outcome'])

    def test_source_already_running_it_answers_already(self):
        self.compute_api.resume_postcopy.return_value = False
        answer = resume.ResumeTask(None, self.worker,
                                   self.migration.uuid).execute()
        self.assertEqual(resume.ALREADY_RESUMING, answer['outcome'])

    def test_completed_meanwhile_answers_already_completed(self):
        self.compute_api.resume_postcopy.return_value = True
        resume.ResumeTask(None, self.worker,
                          self.migration.uuid).execute()
        records.complete(self.worker, self.migration.uuid)
        answer = resume.ResumeTask(None, self.worker,
                                   self.migration.uuid).execute()
        self.assertEqual(resume.ALREADY_COMPLETED, answer['outcome'])
        self.compute_api.resume_postcopy.assert_called_once()
        # Completed: the destination's claim became the placement.
        record = self._record()
        self.assertEqual('dst1', record.host)
        self.assertEqual({0: 3, 1: 11},
                         record.numa_topology.cells[0].cpu_pinning)
        self.assertIsNone(record.migration_context)

    def test_resume_giving_up_again_keeps_both_claims(self):
        self.compute_api.resume_postcopy.return_value = True
        resume.ResumeTask(None, self.worker,
                          self.migration.uuid).execute()
        records.set_status(self.worker, self.migration.uuid,
                           'postcopy-paused', error='no link')
        self.assertIsNotNone(self._record().migration_context)
        self.assertEqual(['accepted', 'queued', 'running', 'postcopy-paused',
                          'running', 'postcopy-paused'],
                         [c.status for c in migrations.get(
                             self.db, self.migration.uuid).history])

    def test_source_refusing_puts_it_back_paused(self):
        self.compute_api.resume_postcopy.side_effect = \
            exception.MigrationNotResumable(
                migration_uuid=self.migration.uuid, status='running',
                reason='the agent on src is of a release older than '
                       'compute API 1.7')
        self.assertRaisesMessage(
            exception.MigrationNotResumable, 'older than compute API 1.7',
            self.call, 'migration_resume', self.migration.uuid)
        recorded = migrations.get(self.db, self.migration.uuid)
        self.assertEqual('postcopy-paused', recorded.status)
        self.assertIn('resume refused', recorded.history[-1].detail)
        self.assertEqual('the guest is PAUSED', recorded.error)
        self.assertIsNotNone(self._record().migration_context)

    def test_source_not_answering_leaves_it_running(self):
        self.compute_api.resume_postcopy.side_effect = \
            messaging.MessagingTimeout('no answer')
        self.assertRaises(messaging.MessagingTimeout,
                          self.call, 'migration_resume',
                          self.migration.uuid)
        self.assertEqual('running', migrations.get(
            self.db, self.migration.uuid).status)

    def test_a_migration_that_is_not_paused_is_refused(self):
        other = self.create_instance()
        running = migrations.create(self.db, cbase.migration(
            other, dest_host='dst2'))
        exc = self.assertRaises(exception.MigrationNotResumable,
                                self.call, 'migration_resume',
                                running.uuid)
        self.assertIn('only a postcopy-paused migration can be resumed',
                      str(exc))
        self.compute_api.resume_postcopy.assert_not_called()

    def test_unknown_migration(self):
        self.assertRaises(exception.MigrationNotFound,
                          self.call, 'migration_resume',
                          cbase.new_uuid())
