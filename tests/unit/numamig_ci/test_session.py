"""numamig_ci.session: waiting for a host's reports to match its records."""

from unittest import mock

import fixtures

from numamig_ci import session
from numamig_ci.results import Failure
from tests import base

STALE = Failure('(all guests)', 'h-1', 'reported usage: node 0 pinned_cpus',
                'the union of its guests\' pins none', '0')


class WaitUsageRecordedTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.backend = mock.Mock(hosts={'h-1': mock.Mock()})
        self.backend.reports.return_value = {'h-1': mock.Mock()}
        self.lines = []
        self.s = session.Session(self.backend, say=self.lines.append)
        self.useFixture(fixtures.MockPatch('time.sleep'))
        self.check = self.useFixture(fixtures.MockPatch(
            'numamig_ci.checks.check_usage')).mock

    def test_waits_for_the_recompute_then_says_so(self):
        self.check.side_effect = [[STALE], [STALE], []]
        waited = self.s.wait_usage_recorded('h-1', 'usage dropped')
        self.assertIsNotNone(waited)
        # A fresh report was awaited before each comparison.
        self.assertEqual(3, self.backend.refresh.call_count)
        self.assertEqual([], self.s.failures)
        self.assertEqual(1, len(self.lines))
        self.assertIn('h-1: usage dropped after', self.lines[0])

    def test_still_stale_at_the_deadline_is_a_failure(self):
        self.check.return_value = [STALE]
        clock = iter(range(0, 1000, 10))
        self.useFixture(fixtures.MockPatch('time.monotonic',
                                           side_effect=lambda: next(clock)))
        self.assertIsNone(self.s.wait_usage_recorded(
            'h-1', 'usage dropped', timeout=30))
        self.assertEqual(1, len(self.s.failures))
        self.assertIn('not usage dropped within 30 s',
                      str(self.s.failures[0]))
        self.assertEqual([], self.lines)
