"""Tests of how long a source keeps asking for a change to be recorded."""

import oslo_messaging as messaging

from numamig import exception
from numamig.compute import patience
from tests import base


def _database_out():
    return exception.DatabaseError(url='postgresql://db', reason='gone')


class AttemptTimeoutTest(base.TestCase):

    def test_a_third_of_the_whole_wait(self):
        self.assertEqual(20, patience.attempt_timeout(60))
        self.assertEqual(patience.DEFAULT_RPC_TIMEOUT_S // patience.ATTEMPTS,
                         patience.attempt_timeout(None))

    def test_never_below_a_second(self):
        self.assertEqual(1, patience.attempt_timeout(1))


class AskingTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.now = 0.0
        self.pauses = []

        def sleep(seconds):
            self.pauses.append(seconds)
            self.now += seconds
        self.asking = patience.Asking('host-a', 'm-1', 'recording running',
                                      timeout=10, clock=lambda: self.now,
                                      sleep=sleep)

    def test_lost_answers_asked_again_then_raised(self):
        for _ in range(patience.ATTEMPTS - 1):
            self.asking.again(messaging.MessagingTimeout())
        self.assertTrue(self.asking.retried)
        self.assertRaises(messaging.MessagingTimeout, self.asking.again,
                          messaging.MessagingTimeout())
        self.assertEqual([], self.pauses)

    def test_each_lost_answer_waits_a_longer_share(self):
        waits = [self.asking.timeout()]
        for _ in range(patience.ATTEMPTS - 1):
            self.asking.again(messaging.MessagingTimeout())
            waits.append(self.asking.timeout())
        # A reply lost with a broker restart costs the first, 5 s; all
        # together wait the whole (ATTEMPTS x 10 s).
        self.assertEqual([5, 10, 15], waits)
        self.assertEqual(patience.ATTEMPTS * 10, sum(waits))

    def test_a_database_outage_does_not_shorten_the_next_wait(self):
        first = self.asking.timeout()
        self.asking.again(_database_out())
        self.assertEqual(first, self.asking.timeout())

    def test_database_outage_paused_doubling_until_the_whole_wait(self):
        raised = None
        while raised is None:
            try:
                self.asking.again(_database_out())
            except exception.DatabaseError as exc:
                raised = exc
        self.assertEqual([0.5, 1.0, 2.0, 4.0, 4.0], self.pauses[:5])
        # All the attempts together: ATTEMPTS x 10 s, the last pause cut.
        self.assertEqual(patience.ATTEMPTS * 10, self.now)

    def test_a_schema_mismatch_is_not_waited_out(self):
        stale = exception.DatabaseNotSynced(url='u', current='1', head='2')
        self.assertRaises(exception.DatabaseNotSynced, self.asking.again,
                          stale)
        self.assertEqual([], self.pauses)

    def test_other_errors_raised_at_once(self):
        self.assertRaises(exception.MigrationError, self.asking.again,
                          exception.MigrationError(reason='no'))
        self.assertFalse(self.asking.retried)
