"""The admission queue: order, limits, positions and release."""

import datetime
from unittest import mock

from numamig import exception
from numamig.db import _rows
from numamig.db import instances
from numamig.db import migrations
from numamig.db import queue
from tests.unit.db import base

LIMITS = queue.Limits(total=3, per_source=2, per_dest=1, queued=4)


class QueueTestCase(base.DBTestCase):

    def request(self, source='src', requested=None, priority=0,
                max_queued=LIMITS.queued):
        instance = instances.create(self.db, base.make_instance(
            host=source)).instance
        return migrations.create(self.db, base.make_migration(
            instance.uuid, source_host=source, requested_host=requested,
            priority=priority), max_queued=max_queued)


class AdmitTestCase(QueueTestCase):

    def test_an_empty_queue_is_looked_at_without_the_write_lock(self):
        admitted = self.request()
        self.assertEqual([admitted.uuid], queue.admit(self.db, LIMITS, 5))
        writer = self.db.writer
        writes = []
        self.db.writer = lambda: (writes.append(1), writer())[1]
        self.assertEqual([], queue.admit(self.db, LIMITS, 5))
        self.assertEqual([], writes)

    def test_highest_priority_first_then_oldest(self):
        old = self.request(source='a')
        drain = self.request(source='b', priority=100)
        newer = self.request(source='c')
        self.assertEqual([drain.uuid, old.uuid, newer.uuid],
                         queue.admit(self.db, LIMITS, 10))

    def test_cloud_wide_limit(self):
        for source in 'abcd':
            self.request(source=source)
        self.assertEqual(3, len(queue.admit(self.db, LIMITS, 10)))
        self.assertEqual([], queue.admit(self.db, LIMITS, 10),
                         "three are in flight already")

    def test_a_postcopy_paused_migration_holds_no_slot(self):
        # Its guest waits for an operator; no copy runs (its claims are
        # kept elsewhere: the instance's migration context).
        first, second, third = [self.request(source=s) for s in 'abc']
        self.assertEqual(3, len(queue.admit(self.db, LIMITS, 10)))
        for status in ('queued', 'running', 'postcopy-paused'):
            migrations.set_status(self.db, first.uuid, status)
        fourth = self.request(source='a')
        self.assertEqual([fourth.uuid], queue.admit(self.db, LIMITS, 10))
        self.assertTrue(migrations.get(self.db, first.uuid).in_progress)

    def test_per_source_limit_skips_to_the_next_source(self):
        first, second, third = [self.request(source='a') for _ in range(3)]
        other = self.request(source='b')
        self.assertEqual([first.uuid, second.uuid, other.uuid],
                         queue.admit(self.db, LIMITS, 10))
        self.assertTrue(migrations.get(self.db, third.uuid).waiting)

    def test_requested_destination_limit(self):
        first = self.request(source='a', requested='d')
        second = self.request(source='b', requested='d')
        self.assertEqual([first.uuid], queue.admit(self.db, LIMITS, 10))
        self.assertTrue(migrations.get(self.db, second.uuid).waiting)

    def test_at_most_the_free_threads(self):
        for source in 'ab':
            self.request(source=source)
        self.assertEqual(1, len(queue.admit(self.db, LIMITS, 1)))
        self.assertEqual([], queue.admit(self.db, LIMITS, 0))

    def test_an_ended_migration_frees_its_slot(self):
        uuids = [self.request(source=s).uuid for s in 'abcd']
        admitted = queue.admit(self.db, LIMITS, 10)
        migrations.set_status(self.db, admitted[0], 'cancelled')
        self.assertEqual([uuids[3]], queue.admit(self.db, LIMITS, 10))

    def test_a_destination_tried_counts_against_its_limit(self):
        moving = self.request(source='a')
        queue.admit(self.db, LIMITS, 1)
        migrations.set_dest_host(self.db, moving.uuid, 'd')
        waiting = self.request(source='b', requested='d')
        self.assertEqual([], queue.admit(self.db, LIMITS, 10))
        self.assertEqual({'d'}, queue.busy_destinations(self.db, 1))
        self.assertTrue(migrations.get(self.db, waiting.uuid).waiting)


class RequeueTestCase(QueueTestCase):

    def test_back_in_line_first_and_without_destination(self):
        first = self.request(source='a')
        queue.admit(self.db, LIMITS, 1)
        migrations.set_dest_host(self.db, first.uuid, 'd')
        later = self.request(source='b')
        self.assertTrue(queue.requeue(self.db, first.uuid))
        back = migrations.get(self.db, first.uuid)
        self.assertEqual((True, None), (back.waiting, back.dest_host))
        self.assertEqual({first.uuid: 1, later.uuid: 2},
                         queue.positions(self.db))

    def test_a_migration_that_moved_on_stays(self):
        moving = self.request(source='a')
        queue.admit(self.db, LIMITS, 1)
        migrations.set_status(self.db, moving.uuid, 'cancelled')
        self.assertFalse(queue.requeue(self.db, moving.uuid))
        self.assertEqual('cancelled',
                         migrations.get(self.db, moving.uuid).status)


class EnqueueTestCase(QueueTestCase):

    def test_positions_follow_the_admission_order(self):
        low = self.request()
        high = self.request(priority=50)
        self.assertEqual({high.uuid: 1, low.uuid: 2}, queue.positions(self.db))
        queue.admit(self.db, LIMITS, 1)
        self.assertEqual({low.uuid: 1}, queue.positions(self.db))

    def test_a_position_is_counted_as_the_line_lists_it(self):
        line = [self.request(priority=p) for p in (0, 50, 0, 100)]
        listed = queue.positions(self.db)
        self.assertEqual(listed, {m.uuid: queue.position(self.db, m.uuid)
                                  for m in line})
        (admitted,) = queue.admit(self.db, LIMITS, 1)
        self.assertIsNone(queue.position(self.db, admitted))
        self.assertEqual(1, queue.position(self.db, line[1].uuid))
        self.assertEqual(3, queue.position(self.db, line[2].uuid))

    def test_a_queued_request_is_recorded_with_its_position(self):
        first = self.request(priority=50)
        later = self.request()
        self.assertEqual((1, 2), (first.queue_position,
                                  later.queue_position))

    def test_full_queue_refused_and_nothing_recorded(self):
        for _ in range(LIMITS.queued):
            self.request()
        self.assertRaisesMessage(exception.MigrationQueueFull,
                                 'max_queued_migrations is 4', self.request)
        self.assertEqual(LIMITS.queued, len(migrations.get_all(self.db)))

    def test_second_request_for_an_instance_in_flight_refused(self):
        first = self.request()
        again = base.make_migration(first.instance_uuid)
        self.assertRaisesMessage(
            exception.InstanceBusy, f'migration {first.uuid} of it is '
            f'accepted', migrations.create, self.db, again, max_queued=10)

    def test_after_the_first_ends_a_new_request_is_taken(self):
        first = self.request()
        migrations.set_status(self.db, first.uuid, 'cancelled')
        again = migrations.create(self.db, base.make_migration(
            first.instance_uuid), max_queued=10)
        self.assertTrue(again.waiting)


class DestinationLimitTestCase(QueueTestCase):

    def test_busy_destination_refused_and_not_recorded(self):
        moving = self.request(source='a')
        other = self.request(source='b')
        queue.admit(self.db, LIMITS, 10)
        migrations.set_dest_host(self.db, moving.uuid, 'd', max_incoming=1)
        self.assertRaisesMessage(
            exception.DestinationBusy, 'max_incoming_migrations_per_host is 1',
            migrations.set_dest_host, self.db, other.uuid, 'd',
            max_incoming=1)
        self.assertIsNone(migrations.get(self.db, other.uuid).dest_host)

    def test_trying_the_same_destination_again_is_not_counted_twice(self):
        moving = self.request(source='a')
        queue.admit(self.db, LIMITS, 10)
        for _ in range(2):
            migrations.set_dest_host(self.db, moving.uuid, 'd',
                                     max_incoming=1)
        self.assertEqual('d', migrations.get(self.db, moving.uuid).dest_host)


class ReleaseTestCase(QueueTestCase):

    def test_only_untouched_admitted_migrations_go_back(self):
        untouched = self.request(source='a')
        tried = self.request(source='b')
        queue.admit(self.db, LIMITS, 10)
        migrations.set_dest_host(self.db, tried.uuid, 'd')
        self.assertEqual(1, queue.release(self.db, {untouched.uuid,
                                                    tried.uuid}))
        self.assertEqual({untouched.uuid: 1}, queue.positions(self.db))
        self.assertEqual(0, queue.release(self.db, set()))


class PositionTestCase(QueueTestCase):

    def test_admitted_between_the_two_reads_has_no_place(self):
        # The row read as waiting, then admitted by another worker
        # before the count: the count no longer includes it.
        waiting = self.request(source='a')
        with mock.patch.object(queue, 'position_of', return_value=0):
            self.assertIsNone(queue.position(self.db, waiting.uuid))

    def test_a_waiting_migration_counts_itself(self):
        first = self.request(source='a')
        second = self.request(source='b')
        self.assertEqual(1, queue.position(self.db, first.uuid))
        self.assertEqual(2, queue.position(self.db, second.uuid))


class LeaseTestCase(QueueTestCase):
    """Admitted migrations are held by leases their worker renews."""

    def later(self, seconds):
        return _rows.utcnow() + datetime.timedelta(seconds=seconds)

    def test_admitted_with_a_lease_stalled_once_it_runs_out(self):
        held = self.request(source='a')
        queue.admit(self.db, LIMITS, 1, lease_s=15)
        self.assertEqual([], queue.stalled(self.db, self.later(10), 3600))
        self.assertEqual([held.uuid],
                         queue.stalled(self.db, self.later(20), 3600))

    def test_renewal_pushes_the_end_of_the_lease(self):
        held = self.request(source='a')
        queue.admit(self.db, LIMITS, 1, lease_s=1)
        self.assertEqual(1, queue.renew(self.db, {held.uuid}, 60))
        self.assertEqual([], queue.stalled(self.db, self.later(30), 3600))

    def test_only_accepted_admitted_migrations_are_renewed(self):
        waiting = self.request(source='a')
        moved_on = self.request(source='b')
        queue.admit(self.db, LIMITS, 10, lease_s=1)
        queue.requeue(self.db, waiting.uuid)
        migrations.set_status(self.db, moved_on.uuid, 'cancelled')
        self.assertEqual(0, queue.renew(self.db, {waiting.uuid,
                                                  moved_on.uuid}, 60))
        self.assertEqual(0, queue.renew(self.db, set(), 60))

    def test_the_admitting_worker_is_recorded_as_the_holder(self):
        held = self.request(source='a')
        queue.admit(self.db, LIMITS, 1, lease_s=15, holder='cond-a:12')
        self.assertEqual({held.uuid: 'cond-a:12'},
                         queue.holders(self.db, [held.uuid]))
        self.assertEqual({}, queue.holders(self.db, []))

    def test_a_worker_renews_only_the_leases_it_holds(self):
        # Fencing: a worker cut off for longer than its lease comes back
        # still counting the migration as its own; once it went back in
        # line and another worker admitted it, the lease is that
        # worker's and the returning one must not extend it.
        taken = self.request(source='a')
        queue.admit(self.db, LIMITS, 1, lease_s=1, holder='cond-a:12')
        self.assertTrue(queue.requeue(self.db, taken.uuid))
        self.assertEqual({taken.uuid: None},
                         queue.holders(self.db, [taken.uuid]),
                         "back in line: nobody holds it")
        queue.admit(self.db, LIMITS, 1, lease_s=1, holder='cond-b:7')
        self.assertEqual(0, queue.renew(self.db, {taken.uuid}, 60,
                                        holder='cond-a:12'))
        self.assertEqual([taken.uuid],
                         queue.stalled(self.db, self.later(30), 3600),
                         "cond-a's renewal left cond-b's lease alone")
        self.assertEqual(1, queue.renew(self.db, {taken.uuid}, 60,
                                        holder='cond-b:7'))
        self.assertEqual([], queue.stalled(self.db, self.later(30), 3600))

    def test_released_migrations_have_no_holder(self):
        back = self.request(source='a')
        queue.admit(self.db, LIMITS, 1, lease_s=1, holder='cond-a:12')
        self.assertEqual(1, queue.release(self.db, {back.uuid}))
        self.assertEqual({back.uuid: None},
                         queue.holders(self.db, [back.uuid]))

    def test_waiting_migrations_never_stall(self):
        back = self.request(source='a')
        queue.admit(self.db, LIMITS, 1, lease_s=1)
        self.assertTrue(queue.requeue(self.db, back.uuid))
        self.request(source='b')
        self.assertEqual([], queue.stalled(self.db, self.later(7200), 1))

    def test_unleased_rows_judged_by_their_age(self):
        old = self.request(source='a')
        queue.admit(self.db, LIMITS, 1)
        self.assertEqual([], queue.stalled(self.db, self.later(50), 100))
        self.assertEqual([old.uuid],
                         queue.stalled(self.db, self.later(150), 100))
