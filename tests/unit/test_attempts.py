"""numamig.attempts: growing shares of a retried request's wait."""

from numamig import attempts
from tests import base


class AttemptSharesTest(base.TestCase):

    def test_attempts_wait_growing_shares_of_the_whole(self):
        # A request lost with a broker restart costs the first share.
        self.assertEqual([6, 12, 18, 24], attempts.attempt_shares(60, 4))
        self.assertEqual([10, 20, 30], attempts.attempt_shares(60, 3))
        self.assertEqual([1, 1, 1, 2], attempts.attempt_shares(5, 4))
