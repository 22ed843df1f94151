"""The drain driver: the plan reserved (and rebuilt by a new worker),
renewed before it expires, moves followed to their ends, aborts
followed (the drain task itself: test_drain)."""

import datetime

from numamig.conductor import records
from numamig.db import drains
from numamig.db import instances
from numamig.db import migrations
from tests.unit.conductor.tasks import test_drain

DRAIN = test_drain.DRAIN
MIGRATION = '7b2d4f6a-1c3e-4a5b-9d8f-0e1a2b3c4d5e'


class DrainDriverTestCase(test_drain.StartedDrainBase):

    def test_a_pass_starts_one_move_and_reserves_the_whole_plan(self):
        self.driver.run_once()
        (migration,) = migrations.get_all(self.db)
        self.assertEqual(('accepted', 100), (migration.status,
                                             migration.priority))
        self.assertEqual(['migrating', 'pending'],
                         [m['status'] for m in self.moves()])
        self.assertEqual(self.planned()[migration.instance_uuid],
                         migration.requested_host)
        self.assertEqual(self.planned(), self.reserved())
        # Another pass starts nothing more: one at a time.
        self.driver.run_once()
        self.assertEqual(1, len(migrations.get_all(self.db)))

    def test_a_stopping_worker_starts_no_move(self):
        """SIGTERM: a move that ends while the worker stops must not be
        followed by the next one here; the next conductor starts it."""
        self.driver.run_once()
        (migration,) = migrations.get_all(self.db)
        records.set_status(self.worker, migration.uuid, 'cancelled')
        self.driver.stop_starting()
        self.driver.run_once()
        self.assertEqual([migration.uuid],
                         [m.uuid for m in migrations.get_all(self.db)])
        self.assertEqual(['cancelled', 'pending'],
                         [m['status'] for m in self.moves()])
        cache, restarted = self.new_worker()
        restarted.drains.run_once()
        self.assertEqual(2, len(migrations.get_all(self.db)))
        self.assertEqual(['cancelled', 'migrating'],
                         [m['status'] for m in self.moves()])

    def test_a_stopping_worker_leaves_an_unrecorded_move_to_the_next(self):
        """A move marked migrating whose migration a dead worker never
        recorded is recorded by the next worker, not by a stopping one."""
        started = drains.start_moves(self.db, DRAIN, lambda: MIGRATION)
        self.assertEqual(1, len(started))
        self.driver.stop_starting()
        self.driver.run_once()
        self.assertEqual([], migrations.get_all(self.db))
        cache, restarted = self.new_worker()
        restarted.drains.run_once()
        self.assertEqual([MIGRATION],
                         [m.uuid for m in migrations.get_all(self.db)])

    def test_a_new_worker_rebuilds_the_reservations(self):
        self.driver.run_once()
        cache, restarted = self.new_worker()
        self.assertEqual({}, self.reserved(cache))
        restarted.drains.run_once()
        self.assertEqual(self.planned(), self.reserved(cache))
        self.assertEqual(1, len(migrations.get_all(self.db)))

    def test_reservations_are_renewed_before_they_expire(self):
        self.driver.run_once()
        first = self.now
        self.now += datetime.timedelta(seconds=200)
        self.driver.run_once()
        for host in set(self.planned().values()):
            for reservation in self.conductor.cache.get(host).reservations:
                self.assertEqual(self.now, reservation.reserved_at)
        self.assertNotEqual(first, self.now)
        self.now += datetime.timedelta(seconds=200)
        self.assertEqual(self.planned(), self.reserved())

    def test_a_migration_that_failed_running_fails_its_move(self):
        migration = self.first_move_running()
        records.set_status(self.worker, migration.uuid, 'failed',
                           error='the copy broke')
        self.driver.run_once()
        first = self.moves()[0]
        self.assertEqual(('failed', 'the copy broke', 1),
                         (first['status'], first['error'],
                          first['attempts']))
        self.assertEqual('migrating', self.moves()[1]['status'])

    def test_a_refusal_whatever_the_destination_fails_the_move_at_once(self):
        # Issue 44: the guest's policy became unknown after the plan (a
        # worker configured with other policies): every destination
        # would be refused, so the move is not re-planned onto them.
        (first, second) = self.moves()
        record = instances.get(self.db, first['instance_uuid'])
        instances.update(self.db, first['instance_uuid'], {
            'extra_specs': dict(record.instance.extra_specs, **{
                'hw:live_migration_policy': 'gold'})})
        self.driver.run_once()
        moves = {m['instance_uuid']: m for m in self.moves()}
        failed = moves[first['instance_uuid']]
        self.assertEqual(('failed', 1, {}), (
            failed['status'], failed['attempts'], failed['refused'] or {}))
        self.assertIn('Unknown live-migration policy gold', failed['error'])
        self.assertIn('not re-planned', failed['error'])
        self.assertNotIn(first['instance_uuid'], self.reserved())
        # The other guest goes on (its turn comes at the next pass).
        self.driver.run_once()
        moves = {m['instance_uuid']: m for m in self.moves()}
        self.assertEqual('migrating',
                         moves[second['instance_uuid']]['status'])

    def test_a_refusal_of_the_planned_destination_is_replanned(self):
        (first, _second) = self.moves()
        self.call('host_set_disabled', first['planned_host'], True, 'fans')
        self.driver.run_once()
        moved = {m['instance_uuid']: m for m in self.moves()}[
            first['instance_uuid']]
        self.assertEqual([first['planned_host']], list(moved['refused']))
        self.assertNotEqual(first['planned_host'], moved['planned_host'])

    def test_a_move_recorded_after_an_abort_is_cancelled(self):
        # A worker marked the move migrating; the abort came before it
        # recorded the migration.
        (move,) = drains.start_moves(self.db, DRAIN, lambda: MIGRATION)
        self.call('host_drain_abort', 'src')
        self.driver.run_once()
        (migration,) = migrations.get_all(self.db)
        self.assertEqual((move['migration_uuid'], 'cancelled'),
                         (migration.uuid, migration.status))
        self.driver.run_once()
        data = self.call('host_drain_show', drain_uuid=DRAIN)
        self.assertEqual(('aborted', 2), (data['status'],
                                          data['report']['cancelled']))


class OtherWorkerTest(test_drain.StartedDrainBase):
    """Issue 44 H1: each worker reserves the plan in its own cache and
    lets go of it whichever worker ended the drain or re-planned a move.
    """

    def setUp(self):
        super().setUp()
        self.other_cache, self.other = self.new_worker()
        self.driver.run_once()
        self.other.drains.run_once()
        self.assertEqual(self.planned(), self.reserved(self.other_cache))

    def test_a_drain_aborted_and_ended_elsewhere_is_released_here(self):
        self.call('host_drain_abort', 'src')
        self.driver.run_once()
        self.assertEqual('aborted', drains.get(self.db, DRAIN)['status'])
        self.assertEqual({}, self.reserved())
        self.other.drains.run_once()
        self.assertEqual({}, self.reserved(self.other_cache))

    def test_a_move_failed_elsewhere_at_the_drain_end_is_released(self):
        for move in self.moves():
            if move['status'] == 'pending':
                drains.cancel_pending(self.db, DRAIN, 'test')
            else:
                records.set_status(self.worker, move['migration_uuid'],
                                   'cancelled')
        drains.set_status(self.db, DRAIN, drains.FAILED,
                          list(drains.ACTIVE))
        self.other.drains.run_once()
        self.assertEqual({}, self.reserved(self.other_cache))

    def test_only_its_own_reservations_are_released(self):
        # A scheduled migration of the same guest reserved the same host
        # in that worker after the plan's reservation was made.
        (guest, host), *_ = self.planned().items()
        self.other_cache.release(host, guest)
        placed = self.conductor.cache.get(host).reservations[0].topology
        self.other_cache.reserve(host, guest, 'demo', placed)
        self.call('host_drain_abort', 'src')
        self.driver.run_once()
        self.other.drains.run_once()
        self.assertEqual({guest: host}, self.reserved(self.other_cache))

    def test_a_move_replanned_elsewhere_leaves_its_old_host(self):
        (migration,) = migrations.get_all(self.db)
        move = [m for m in self.moves()
                if m['migration_uuid'] == migration.uuid][0]
        old = move['planned_host']
        new = ({'dst1', 'dst2'} - {old}).pop()
        drains.replan_move(self.db, DRAIN, move['instance_uuid'],
                           migration.uuid, new,
                           move['planned_topology'], {old: 'refused'})
        self.other.drains.run_once()
        self.assertNotIn(move['instance_uuid'], {
            r.instance_uuid for r in self.other_cache.get(old).reservations})
