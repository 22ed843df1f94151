"""The agent's count of its migration guard's decisions, read from the
guard's log, and the events it tells of them."""

from unittest import mock

import fixtures

from numamig import exception
from numamig.compute import events
from numamig.compute import guard_decisions
from numamig.virt.libvirt import guard
from tests import base


def verdict(action, uuid='6b0e7c8a-1f4e-4d2b-8a3c-5e9f0d1c2b3a'):
    return guard.Verdict(action, uuid, f"sample reason of {action}")


class GuardDecisionsTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.log = self.useFixture(fixtures.TempDir()).join('guard.log')
        self.settings = mock.Mock(log_file=self.log)
        self.driver = mock.Mock()
        self.driver.read_guard_log.side_effect = \
            lambda position=None: guard.read_log(self.log, position)
        self.events = events.Events()
        self.told = []
        self.events.listeners.append(self.told.extend)
        self.decisions = guard_decisions.GuardDecisions(
            'compute-2', self.driver, self.events)

    def append(self, action, guest='guest-1'):
        self.assertIsNone(guard.append_log(self.settings, guest,
                                           verdict(action)))

    def test_counts_what_follows_the_first_look_and_tells_changes(self):
        self.append(guard.REFUSED, 'before-the-agent')
        self.decisions.poll()
        for action in (guard.UNCHANGED, guard.REWRITTEN, guard.REFUSED,
                       guard.REFUSED):
            self.append(action)
        self.decisions.poll()
        self.assertEqual({'unchanged': 1, 'rewritten': 1, 'refused': 2},
                         self.decisions.counts())
        self.assertEqual(['rewritten', 'refused', 'refused'],
                         [e.record.action for e in self.told])
        first = self.told[0]
        self.assertEqual(events.GUARD_DECISION, first.kind)
        self.assertEqual(
            ('compute-2', 'guest-1', 'sample reason of rewritten'),
            (first.record.host, first.record.guest, first.record.reason))
        # Read once: a second look finds nothing new.
        self.assertEqual([], self.decisions.poll())
        self.assertEqual(4, sum(self.decisions.counts().values()))

    def test_an_unreadable_log_is_logged_once_and_read_again(self):
        self.decisions.poll()
        self.driver.read_guard_log.side_effect = exception.HypervisorError(
            host='compute-2', action="read the migration guard's log",
            reason='Permission denied')
        logged = self.useFixture(fixtures.FakeLogger())
        self.assertEqual([], self.decisions.poll())
        self.assertEqual([], self.decisions.poll())
        self.assertEqual(1, logged.output.count('not counted'))
        self.driver.read_guard_log.side_effect = \
            lambda position=None: guard.read_log(self.log, position)
        self.append(guard.REFUSED)
        self.assertEqual(['refused'],
                         [e.action for e in self.decisions.poll()])
        self.assertIn('read again', logged.output)

    def test_no_guard_log_counts_nothing(self):
        self.driver.read_guard_log.side_effect = None
        self.driver.read_guard_log.return_value = ([], None)
        self.decisions.poll()
        self.decisions.poll()
        self.assertEqual(dict.fromkeys(guard_decisions.ACTIONS, 0),
                         self.decisions.counts())
        self.assertEqual(guard.ACTIONS, guard_decisions.ACTIONS)


