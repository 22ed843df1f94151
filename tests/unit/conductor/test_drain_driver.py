"""The drain driver: the plan reserved (and rebuilt by a new worker),
renewed before it expires, moves followed to their ends, aborts."""

import datetime

from numamig import exception
from numamig.conductor import records
from numamig.db import drains
from numamig.db import instances
from numamig.db import migrations
from numamig.db import queue
from tests.unit.compute import base as cbase
from tests.unit.conductor import base

DRAIN = '6a1e0c3b-9f2d-4e7a-8b5c-1d2e3f4a5b6c'
MIGRATION = '7b2d4f6a-1c3e-4a5b-9d8f-0e1a2b3c4d5e'


class DrainDriverTestCase(base.ConductorTestCase):

    def setUp(self):
        super().setUp()
        self.guests = [cbase.instance(host='src', pins=pins)
                       for pins in ({0: 2, 1: 10}, {0: 3, 1: 11})]
        for guest in self.guests:
            instances.create(self.db, guest)
        self.started = self.call('host_drain_start', 'src', DRAIN, 1)
        self.driver = self.conductor.drains

    def reserved(self, cache=None):
        """{instance uuid: host} of the reservations a cache holds."""
        cache = cache or self.conductor.cache
        return {r.instance_uuid: host for host in self.HOSTS
                for r in cache.get(host).reservations}

    def planned(self):
        return {m['instance_uuid']: m['planned_host']
                for m in self.started['moves']}

    def moves(self):
        return drains.get(self.db, DRAIN)['moves']

    def test_the_start_disables_the_host_and_records_every_move(self):
        self.assertEqual(('running', False, 100), (
            self.started['status'], self.started['was_disabled'],
            self.started['priority']))
        self.assertEqual({g.uuid for g in self.guests}, set(self.planned()))
        self.assertTrue(self.call('host_drain_show', host='src')['uuid'],
                        DRAIN)
        self.assertEqual(f"drain {DRAIN}", records.compute_nodes.maintenance(
            self.db)['src'].reason)

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
        self.driver.run_once()
        (migration,) = migrations.get_all(self.db)
        queue.admit(self.db, self.conductor.admission, 1)
        migrations.set_dest_host(self.db, migration.uuid,
                                 migration.requested_host)
        for status in ('queued', 'running'):
            records.set_status(self.worker, migration.uuid, status)
        records.set_status(self.worker, migration.uuid, 'failed',
                           error='the copy broke')
        self.driver.run_once()
        first = self.moves()[0]
        self.assertEqual(('failed', 'the copy broke', 1),
                         (first['status'], first['error'],
                          first['attempts']))
        self.assertEqual('migrating', self.moves()[1]['status'])

    def test_abort_cancels_the_queued_and_asks_sources_only_if_told(self):
        self.driver.run_once()
        (migration,) = migrations.get_all(self.db)
        aborted = self.call('host_drain_abort', 'src')
        self.assertEqual('aborting', aborted['status'])
        self.assertEqual('cancelled', migrations.get(
            self.db, migration.uuid).status)
        self.compute_api.live_migration_abort.assert_not_called()
        self.driver.run_once()
        data = self.call('host_drain_show', drain_uuid=DRAIN)
        self.assertEqual(('aborted', 2), (data['status'],
                                          data['report']['cancelled']))
        self.assertEqual({}, self.reserved())
        exc = self.assertRaises(exception.DrainNotFound, self.call,
                                'host_drain_abort', 'src')
        # Before: "No drain of host src is active is recorded."
        self.assertEqual("Host src has no active drain to abort; 'host "
                         "drain show src' shows its last one.", str(exc))

    def test_abort_running_asks_the_source(self):
        self.driver.run_once()
        (migration,) = migrations.get_all(self.db)
        queue.admit(self.db, self.conductor.admission, 1)
        migrations.set_dest_host(self.db, migration.uuid,
                                 migration.requested_host)
        for status in ('queued', 'running'):
            records.set_status(self.worker, migration.uuid, status)
        self.call('host_drain_abort', 'src')
        self.compute_api.live_migration_abort.assert_not_called()
        self.call('host_drain_abort', 'src', abort_running=True)
        self.compute_api.live_migration_abort.assert_called_once()

    def test_a_drain_of_another_host_under_the_same_uuid_is_refused(self):
        error = self.assertRaises(exception.Invalid, self.call,
                                  'host_drain_start', 'dst1', DRAIN, 1)
        self.assertIn(f"drain {DRAIN} is a drain of src", str(error))

    def test_show_needs_one_of_host_and_uuid(self):
        for kwargs in ({}, {'host': 'src', 'drain_uuid': DRAIN}):
            self.assertRaises(exception.Invalid, self.call,
                              'host_drain_show', **kwargs)

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
