"""The walk of a scheduled placement's hosts: candidates, then the hosts
a reclaim would open, within one budget."""

from unittest import mock

from numamig.conductor.tasks import placement_reclaim
from numamig.conductor.tasks import placing
from tests import base


def _options(*hosts):
    return placement_reclaim.Options(
        tuple((mock.Mock(host=h), f"choice-{h}") for h in hosts), 'note')


class FirstTakerTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.asked = []
        self.answers = {}

    def try_one(self, host, choice, tries):
        """Answers from self.answers: a value takes, 'busy' is busy,
        nothing refuses."""
        self.asked.append((host, choice))
        answer = self.answers.get(host)
        if answer == 'busy':
            tries.busy.append(host)
            return None
        if answer is None:
            tries.attempts.append(host)
        return answer

    def test_first_candidate_taking_it_asks_no_reclaim(self):
        self.answers = {'a': 'took'}
        options = mock.Mock()
        tries = placing.first_taker(['a', 'b'], self.try_one, options)
        self.assertEqual('took', tries.answer)
        self.assertEqual([('a', None)], self.asked)
        options.assert_not_called()

    def test_reclaim_options_after_candidates_tried_hosts_excluded(self):
        self.answers = {'b': 'busy', 'c': 'took'}
        options = mock.Mock(return_value=_options('a', 'b', 'c'))
        tries = placing.first_taker(['a', 'b'], self.try_one, options)
        self.assertEqual('took', tries.answer)
        options.assert_called_once_with({'a', 'b'})
        # a and b were tried already: only c is asked with its choice.
        self.assertEqual([('a', None), ('b', None), ('c', 'choice-c')],
                         self.asked)

    def test_budget_counts_refusals_of_both_kinds_not_busy(self):
        self.answers = {'b': 'busy'}
        options = mock.Mock(return_value=_options('c', 'd'))
        tries = placing.first_taker(['a', 'b'], self.try_one, options,
                                    budget=2)
        self.assertIsNone(tries.answer)
        self.assertEqual(['a', 'c'], tries.attempts)
        self.assertEqual(['b'], tries.busy)
        self.assertFalse(tries.room())

    def test_budget_spent_on_candidates_asks_no_reclaim(self):
        options = mock.Mock()
        tries = placing.first_taker(['a', 'b', 'c'], self.try_one, options,
                                    budget=2)
        self.assertEqual(['a', 'b'], tries.attempts)
        options.assert_not_called()

    def test_no_reclaim_no_taker(self):
        tries = placing.first_taker(['a'], self.try_one)
        self.assertIsNone(tries.answer)
        self.assertEqual(['a'], tries.attempts)
        self.assertTrue(tries.room())
