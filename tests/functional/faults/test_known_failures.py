"""The fault suite's own judgement: which problems are known failures.

A known failure must never hide a new one: a round counts as known only
when each of its problems is one of KNOWN_FAILURES, for the fault that
causes it.
"""

from tests import base
from tests.functional.faults import rounds
from tests.functional.faults import test_faults

QUEUED_H1 = 'migration m1 of i1 still queued (source h1, destination h2)'
QUEUED_H2 = 'migration m1 of i1 still queued (source h2, destination h1)'
QUEUED_END = 'migration m1 ended queued without an error saying why'
RAW = ('migration m1 ended failed with an error naming only a message '
       'ID: Timed out waiting for a reply to message ID 1')
SHARED = 'live XML on h1: pCPUs 3 are pinned by 2 guests: a, b'


def _known(fault, problems, killed=None):
    result = rounds.RoundResult(fault, False, problems=tuple(problems),
                                killed=killed)
    return rounds._known(result, test_faults.KNOWN_FAILURES)


class KnownFailuresTest(base.TestCase):

    def test_start_lost_with_the_killed_source(self):
        self.assertIn('start-lost-with-killed-source', _known(
            'kill-source-at-queued', [QUEUED_H1, QUEUED_END], 'h1'))

    def test_queued_on_another_source_is_new(self):
        self.assertIsNone(_known('kill-source-at-queued', [QUEUED_H2],
                                 'h1'))

    def test_start_lost_with_the_killed_conductor(self):
        self.assertIn('start-lost-with-killed-conductor', _known(
            'kill-conductor-at-queued', [QUEUED_H2, 'settled 40.0 s']))

    def test_raw_timeout_known_only_after_an_agent_kill(self):
        self.assertIn('timeout-to-killed-agent-unexplained',
                      _known('kill-dest-at-running', [RAW], 'h1'))
        self.assertIsNone(_known('cut-broker-5s', [RAW]))

    def test_one_new_problem_makes_the_round_new(self):
        self.assertIsNone(_known('kill-dest-at-running', [RAW, SHARED],
                                 'h1'))

    def test_a_clean_round_is_not_a_known_failure(self):
        self.assertIsNone(_known('kill-dest-at-running', [], 'h1'))
