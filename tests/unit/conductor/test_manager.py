"""ConductorManager's own state: when its sweeps may trust leases."""

import datetime
from unittest import mock

from oslo_utils import timeutils

from numamig import exception
from numamig.conductor import records
from numamig.db import migrations
from numamig.db import queue
from tests.unit.compute import base as cbase
from tests.unit.conductor import base


class FakeExecutor:
    lease_s = 15
    holder = "fake-conductor:1"

    def held(self):
        return frozenset()

    def wake(self):
        pass


class StalledSweepTest(base.ConductorTestCase):

    def setUp(self):
        super().setUp()
        instance = self.create_instance()
        self.migration = migrations.create(self.db, cbase.migration(
            instance), max_queued=10)
        # Admitted by a worker that died at once: its lease lapses in 1 s.
        queue.admit(self.db, self.conductor.admission, 1, lease_s=1)
        self.conductor.executor = FakeExecutor()
        self.clock = timeutils.utcnow(with_timezone=True)
        timeutils.set_time_override(self.clock)
        self.addCleanup(timeutils.clear_time_override)

    def advance(self, seconds):
        self.clock += datetime.timedelta(seconds=seconds)
        timeutils.set_time_override(self.clock)

    def status(self):
        return migrations.get(self.db, self.migration.uuid).status

    def test_leases_count_once_the_database_answered_for_a_lease(self):
        self.advance(5)
        self.assertEqual([], self.conductor.end_stalled_migrations(None))
        self.advance(10)
        self.assertEqual([], self.conductor.end_stalled_migrations(None))
        self.assertEqual('accepted', self.status())
        self.advance(5)
        (ended,) = self.conductor.end_stalled_migrations(None)
        self.assertEqual(('error', self.migration.uuid),
                         (ended.status, ended.uuid))

    def test_a_database_outage_restarts_the_wait(self):
        self.conductor.end_stalled_migrations(None)
        self.advance(20)
        down = exception.DatabaseError(url='db', reason='refused')
        with mock.patch.object(records, 'end_stalled_migrations',
                               side_effect=down):
            self.assertRaises(exception.DatabaseError,
                              self.conductor.end_stalled_migrations, None)
        self.advance(1)
        self.assertEqual([], self.conductor.end_stalled_migrations(None))
        self.advance(15)
        self.assertEqual(1, len(self.conductor.end_stalled_migrations(None)))


class MigrationWaitTest(base.ConductorTestCase):

    def setUp(self):
        super().setUp()
        self.migration = migrations.create(self.db, cbase.migration(
            self.create_instance()), max_queued=10)

    def test_answers_at_once_what_the_caller_has_not_seen(self):
        got = self.conductor.migration_wait(
            None, self.migration.uuid, 'running', 0, timeout=30)
        self.assertEqual(('accepted', self.migration.uuid),
                         (got.status, got.uuid))

    def test_unchanged_until_its_timeout(self):
        got = self.conductor.migration_wait(
            None, self.migration.uuid, 'accepted', 0, timeout=0.1)
        self.assertEqual('accepted', got.status)

    def test_refuses_a_timeout_that_is_not_a_number(self):
        for bad in ('10', None, True, [1]):
            self.assertRaises(exception.Invalid, self.call,
                              'migration_wait', self.migration.uuid,
                              'accepted', 0, bad)

    def test_unknown_migration_is_not_found(self):
        self.assertRaises(exception.MigrationNotFound, self.call,
                          'migration_wait',
                          '00000000-0000-4000-8000-000000000001',
                          'accepted', 0, 1)
