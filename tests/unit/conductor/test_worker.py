"""Tests of numamig.conductor.worker: what the conductor's flows get."""

import dataclasses
from unittest import mock

from numamig import releases
from numamig.conductor import worker
from numamig.db import queue
from tests.unit.conductor import base


class WorkerTest(base.ConductorTestCase):

    def test_the_manager_hands_its_own_parts_and_settings(self):
        parts = self.conductor.worker
        self.assertIs(self.db, parts.db)
        self.assertIs(self.conductor.cache, parts.cache)
        self.assertIs(self.compute_api, parts.compute_api)
        self.assertEqual((3, 5, None), (parts.migrate_max_retries,
                                        parts.check_timeout, parts.limits))
        self.assertIs(self.conductor.admission, parts.admission)
        self.assertTrue(parts.release.is_current)

    def test_an_end_reaches_the_manager(self):
        heard = []
        self.conductor.add_end_listener(heard.append)
        ended = mock.Mock(name='migration', uuid='m-1')
        self.conductor.worker.migration_ended(ended)
        self.assertEqual([ended], heard)

    def test_flows_cannot_change_it(self):
        self.assertRaises(dataclasses.FrozenInstanceError, setattr,
                          self.conductor.worker, 'check_timeout', 1)

    def test_defaults_and_a_fresh_cursor_each(self):
        made = [worker.Worker(
            db=None, cache=None, scheduler=None, compute_api=None,
            release=releases.RELEASES[1], migration_ended=None,
            migrate_max_retries=0, check_timeout=1) for _ in range(2)]
        self.assertEqual(-1, made[0].reports.seen)
        self.assertIsNot(made[0].reports, made[1].reports)
        self.assertIsInstance(made[0].admission, queue.Limits)
        self.assertFalse(made[0].enable_numa_live_migration_workaround)

    def test_no_endpoint_reaches_a_flow(self):
        for endpoint in ('live_migrate_instance', 'migration_abort',
                         'run_admitted', 'load_reports'):
            self.assertFalse(hasattr(self.conductor.worker, endpoint),
                             endpoint)
