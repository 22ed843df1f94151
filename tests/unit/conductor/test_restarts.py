"""Tests of numamig.conductor.restarts: lost start requests sent again."""

import datetime

from numamig import objects
from numamig.conductor import records
from numamig.conductor import restarts
from numamig.db import migrations
from numamig.db import queue
from tests.unit.compute import base as cbase
from tests.unit.conductor import base


class SendAgainTest(base.ConductorTestCase):

    def setUp(self):
        super().setUp()
        self.inst = self.create_instance()
        self.migration = migrations.create(self.db, cbase.migration(
            self.inst, dest_host='dst1'))
        self.assertEqual([self.migration.uuid], queue.admit(
            self.db, self.conductor.admission, 1))
        self.start = objects.LiveMigrateData(
            instance_uuid=self.inst.uuid, source_host='src',
            dest_host='dst1', migration_uuid=self.migration.uuid,
            src_supports_numa_live_migration=True,
            dst_numa_info=objects.NUMAMigrateInfo(cell_pins={0: {1}}))

    def _queue(self, start=True):
        context = objects.MigrationContext(
            instance_uuid=self.inst.uuid,
            migration_uuid=self.migration.uuid, source_host='src',
            dest_host='dst1', old_numa_topology=self.inst.numa_topology,
            new_numa_topology=self.inst.numa_topology)
        return records.queue_with_claim(
            self.worker, context, detail='claimed',
            start=self.start if start else None)

    def _send(self, after_s, unchanged_for=0, held=()):
        return restarts.send_again(
            self.worker, None, self.now + datetime.timedelta(
                seconds=after_s), unchanged_for, held=held)

    def _cast(self):
        self.compute_api.live_migration.assert_called_once()
        _, instance, migration, data = \
            self.compute_api.live_migration.call_args[0]
        return instance, migration, data

    def test_a_queued_migration_gets_the_same_start_request_again(self):
        self._queue()
        self.assertEqual([self.migration.uuid], self._send(1))
        instance, migration, data = self._cast()
        self.assertEqual((self.inst.uuid, self.migration.uuid, 'queued'),
                         (instance.uuid, migration.uuid, migration.status))
        self.assertEqual(
            (self.migration.uuid, 'dst1', True, {0: {1}}),
            (data.migration_uuid, data.dest_host,
             data.src_supports_numa_live_migration,
             data.dst_numa_info.cell_pins))

    def test_a_start_request_no_queue_took_is_not_counted_sent(self):
        # The broker returned it (the source's agent is not connected):
        # one try, no wait, and the next sweep tries again.
        self._queue()
        self.compute_api.live_migration.return_value = False
        self.assertEqual([], self._send(1))
        self.assertIs(False,
                      self.compute_api.live_migration.call_args[1]['wait'])
        self.compute_api.live_migration.return_value = True
        self.assertEqual([self.migration.uuid], self._send(2))

    def test_only_once_unchanged_for_the_interval(self):
        self._queue()
        self.assertEqual([], self._send(5, unchanged_for=10))
        self.compute_api.live_migration.assert_not_called()
        self.assertEqual([self.migration.uuid],
                         self._send(11, unchanged_for=10))

    def test_a_source_that_is_down_is_skipped_by_the_sweep(self):
        self._queue()
        self.report('src', age_s=600)
        self.assertEqual([], self._send(11, unchanged_for=10))
        # A worker's start sends it regardless: the queue outlives the
        # agent.
        self.assertEqual([self.migration.uuid], self._send(11))

    def test_a_migration_this_worker_drives_is_left_to_its_task(self):
        self._queue()
        self.assertEqual([], self._send(1, held={self.migration.uuid}))

    def test_the_start_request_is_dropped_once_the_source_took_it(self):
        self._queue()
        migrations.set_status(self.db, self.migration.uuid, 'running')
        self.assertEqual([], self._send(1))
        self.assertEqual([], migrations.queued_start_requests(
            self.db, self.now + datetime.timedelta(seconds=1)))

    def test_a_migration_queued_without_one_is_left_to_the_sweep(self):
        self._queue(start=False)
        self.assertEqual([], self._send(1))
        self.compute_api.live_migration.assert_not_called()

    def test_the_manager_sends_at_start_and_then_after_the_interval(self):
        self._queue()
        self.conductor.end_stalled_migrations(None)
        self._cast()
        self.compute_api.live_migration.reset_mock()
        self.conductor.end_stalled_migrations(None, resend_after=3600)
        self.compute_api.live_migration.assert_not_called()


class AfterOutageTest(SendAgainTest):
    """A task whose database answer was lost: it is held by its worker,
    so no sweep sends its start; its own recovery must."""

    def test_a_claim_recorded_unanswered_gets_its_start_at_once(self):
        # The claim and 'queued' were committed; the task saw the
        # connection die and never cast. Just changed: a sweep would not
        # send it for another interval.
        self._queue()
        self.assertFalse(records.requeue_after_outage(
            self.worker, self.migration.uuid))
        instance, migration, data = self._cast()
        self.assertEqual((self.migration.uuid, 'queued', 'dst1'),
                         (migration.uuid, migration.status, data.dest_host))

    def test_a_migration_still_accepted_goes_back_in_line(self):
        self.assertTrue(records.requeue_after_outage(
            self.worker, self.migration.uuid))
        self.compute_api.live_migration.assert_not_called()
        self.assertEqual(1, queue.positions(self.db)[self.migration.uuid])

    def test_past_the_wait_it_ends_error_with_that_reason(self):
        ended = records.end_after_outage(
            self.worker, self.migration.uuid, 61.2,
            '[conductor] database_outage_wait')
        self.assertEqual('error', ended.status)
        self.assertIn('unreachable for more than 61 s', ended.error)
        self.assertIn('[conductor] database_outage_wait', ended.error)
        self.assertNotIn('stopped', ended.error)
        # Ended already: a second call changes nothing.
        self.assertIsNone(records.end_after_outage(
            self.worker, self.migration.uuid, 70, 'x'))
