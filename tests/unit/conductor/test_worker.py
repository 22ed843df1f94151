"""Tests of numamig.conductor.worker: what the conductor's flows get."""

import dataclasses
import operator
from unittest import mock

from numamig import releases
from numamig.conductor import worker
from tests.unit.conductor import base


class WorkerTest(base.ConductorTestCase):

    def test_the_manager_hands_its_own_parts_and_settings(self):
        parts = self.conductor.worker
        self.assertIs(self.db, parts.db)
        self.assertIs(self.conductor.cache, parts.cache)
        self.assertIs(self.compute_api, parts.compute_api)
        # The production default, and the test's override.
        self.assertEqual((3, 5), (parts.settings.migrate_max_retries,
                                  parts.settings.check_timeout))
        self.assertIs(self.conductor.admission, parts.settings.admission)
        self.assertTrue(parts.release.is_current)

    def test_an_end_reaches_the_manager(self):
        heard = []
        self.conductor.add_end_listener(heard.append)
        ended = mock.Mock(name='migration', uuid='m-1')
        self.conductor.worker.migration_ended(ended)
        self.assertEqual([ended], heard)

    def test_flows_cannot_change_it(self):
        self.assertRaises(dataclasses.FrozenInstanceError, setattr,
                          self.conductor.worker, 'settings', None)
        self.assertRaises(dataclasses.FrozenInstanceError, setattr,
                          self.conductor.worker.settings, 'check_timeout',
                          1)
        self.assertRaises(TypeError, operator.setitem,
                          self.conductor.worker.settings.migration_policies,
                          'x', None)

    def test_a_fresh_cursor_each(self):
        made = [worker.Worker(
            db=None, cache=None, scheduler=None, compute_api=None,
            release=releases.RELEASES[1], migration_ended=None,
            settings=self.conductor.worker.settings) for _ in range(2)]
        self.assertEqual(-1, made[0].reports.seen)
        self.assertIsNot(made[0].reports, made[1].reports)

    def test_settings_are_required(self):
        # No default to drift from the options' (conductor.settings).
        self.assertRaises(TypeError, worker.Worker, db=None, cache=None,
                          scheduler=None, compute_api=None,
                          release=releases.RELEASES[1],
                          migration_ended=None)

    def test_no_endpoint_reaches_a_flow(self):
        for endpoint in ('live_migrate_instance', 'migration_abort',
                         'run_admitted', 'load_reports'):
            self.assertFalse(hasattr(self.conductor.worker, endpoint),
                             endpoint)
