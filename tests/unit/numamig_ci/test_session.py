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


class SnapshotCompareTest(base.TestCase):
    """A usage differing from the snapshot fails, saying what the
    records hold and whether it settled back."""

    BEFORE = {1: (frozenset({6}), {2048: 8})}
    LEAKED = {1: (frozenset({6, 7}), {2048: 12})}

    def setUp(self):
        super().setUp()
        self.backend = mock.Mock(hosts={'h-1': mock.Mock()})
        self.s = session.Session(self.backend, say=lambda line: None)
        self.s.api = mock.Mock()
        self.s.api.instance_get_claims_on_host.return_value = []
        self.s.record = mock.Mock(return_value={})
        self.useFixture(fixtures.MockPatch('numamig_ci.domain.parse'))
        self.useFixture(fixtures.MockPatch('numamig_ci.session.usage_of',
                                           side_effect=lambda t: t))
        self.snapshots = session.Snapshots(self.s)
        self.before = session.Snapshot('h-0', {}, '', '',
                                       {'h-1': self.BEFORE})

    def _after(self, usage):
        return session.Snapshot('h-0', {}, '', '', {'h-1': usage})

    def _reports(self, *usages):
        self.backend.reports.side_effect = [
            {'h-1': mock.Mock(topology=u)} for u in usages]

    def test_as_before_passes(self):
        with mock.patch.object(self.snapshots, 'take',
                               return_value=self._after(self.BEFORE)):
            self.snapshots.compare(mock.Mock(), self.before)
        self.assertEqual([], self.s.failures)
        self.backend.reports.assert_not_called()

    def test_usage_that_settles_back_still_fails_saying_so(self):
        self._reports(self.LEAKED, self.BEFORE)
        with mock.patch.object(self.snapshots, 'take',
                               return_value=self._after(self.LEAKED)):
            self.snapshots.compare(mock.Mock(), self.before)
        (failure,) = self.s.failures
        self.assertIn('claims in the records then: none', str(failure))
        self.assertIn('reported as before again', str(failure))

    def test_usage_that_stays_says_so_and_names_the_records_claims(self):
        holder = mock.Mock()
        holder.name = 'ci-refused'
        holder.migration_context.migration_uuid = 'm-1'
        self.s.api.instance_get_claims_on_host.return_value = [holder]
        clock = iter(range(0, 1000, 5))
        self.useFixture(fixtures.MockPatch(
            'time.monotonic', side_effect=lambda: next(clock)))
        self.backend.reports.return_value = {
            'h-1': mock.Mock(topology=self.LEAKED)}
        with mock.patch.object(self.snapshots, 'take',
                               return_value=self._after(self.LEAKED)):
            self.snapshots.compare(mock.Mock(), self.before)
        (failure,) = self.s.failures
        self.assertIn('ci-refused (migration m-1)', str(failure))
        self.assertIn('still so 20 s later', str(failure))
