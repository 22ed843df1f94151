"""The embedded deployment's waits: woken by the conductor, not polled."""

import threading
import time
from unittest import mock

import fixtures

from numamig import embedded
from numamig import exception
from tests import base


def _migration(status, uuid='m-1'):
    return mock.Mock(uuid=uuid, status=status)


class WaitForMigrationTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.dep = embedded.EmbeddedDeployment([], state_dir=self.useFixture(
            fixtures.TempDir()).path)
        self.statuses = ['running']
        self.dep.api = mock.Mock()
        self.dep.api.migration_get.side_effect = \
            lambda ctxt, uuid: _migration(self.statuses[-1], uuid)

    def test_an_end_heard_wakes_the_wait_at_once(self):
        def end_later():
            time.sleep(0.1)
            self.statuses.append('completed')
            self.dep.ends.heard(_migration('completed'))
        threading.Thread(target=end_later).start()
        started = time.monotonic()
        migration = self.dep.wait_for_migration('m-1', timeout=30)
        self.assertEqual('completed', migration.status)
        self.assertLess(time.monotonic() - started, embedded.SAFETY_LOOK_S)
        # One look before, one after the end: no polling in between.
        self.assertEqual(2, self.dep.api.migration_get.call_count)

    def test_another_migration_ending_does_not_wake_it(self):
        self.dep.ends.event_for('m-1')
        self.dep.ends.heard(_migration('completed', uuid='m-2'))
        self.assertFalse(self.dep.ends.event_for('m-1').is_set())

    def test_times_out_naming_the_status(self):
        with mock.patch.object(embedded, 'SAFETY_LOOK_S', 0.01):
            self.assertRaisesMessage(
                exception.MigrationError, 'm-1 still running after 0.05 s',
                self.dep.wait_for_migration, 'm-1', timeout=0.05)
        self.assertEqual({}, self.dep.ends._events)
