"""The fault suite's own judgement: which problems are known failures.

A known failure must never hide a new one: a round counts as known only
when each of its problems is one of the known failures given, for the
fault that causes it.
"""

import re

from tests import base
from tests.functional.faults import rounds
from tests.functional.faults import test_faults

QUEUED_H1 = 'migration m1 of i1 still queued (source h1, destination h2)'
QUEUED_H2 = 'migration m1 of i1 still queued (source h2, destination h1)'
SHARED = 'live XML on h1: pCPUs 3 are pinned by 2 guests: a, b'


def _queued_on_killed(result, problem):
    found = re.match(r"migration \S+ of \S+ still queued \(source (\S+),",
                     problem)
    return found is not None and found.group(1) == result.killed


KNOWN = (rounds.KnownFailure('queued-on-killed', 'an example',
                             _queued_on_killed),)


def _known(fault, problems, killed=None, known=KNOWN):
    result = rounds.RoundResult(fault, False, problems=tuple(problems),
                                killed=killed)
    return rounds._known(result, known)


class KnownFailuresTest(base.TestCase):

    def test_a_problem_the_failure_explains(self):
        self.assertIn('queued-on-killed', _known(
            'kill-source-at-queued', [QUEUED_H1], 'h1'))

    def test_the_same_problem_elsewhere_is_new(self):
        self.assertIsNone(_known('kill-source-at-queued', [QUEUED_H2],
                                 'h1'))

    def test_one_new_problem_makes_the_round_new(self):
        self.assertIsNone(_known('kill-source-at-queued',
                                 [QUEUED_H1, SHARED], 'h1'))

    def test_a_clean_round_is_not_a_known_failure(self):
        self.assertIsNone(_known('kill-source-at-queued', [], 'h1'))

    def test_the_fixed_failures_are_known_no_more(self):
        # A start request lost with a killed source or conductor, and a
        # raw timeout from a killed agent: each now fails its round.
        for fault, problems, killed in (
                ('kill-source-at-queued', [QUEUED_H1], 'h1'),
                ('kill-conductor-at-queued',
                 [QUEUED_H2, 'settled 40.0 s after the fault cleared'],
                 None),
                ('kill-dest-at-running',
                 ['migration m1 ended failed with an error naming only a '
                  'message ID: Timed out waiting for a reply to message '
                  'ID 1'], 'h1')):
            self.assertIsNone(_known(fault, problems, killed,
                                     known=test_faults.KNOWN_FAILURES))
