"""The lexicographically first perfect matching against brute force."""

import itertools

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from numamig.numa import matching
from tests import base


def _brute_force(adjacency, hosts):
    for perm in itertools.permutations(range(hosts), len(adjacency)):
        if all(h in adjacency[g] for g, h in enumerate(perm)):
            return list(perm)
    return None


class MatchingTest(base.TestCase):

    def test_first_choice_kept_when_rest_can_match(self):
        chosen, _ = matching.first_perfect_matching([[0, 1], [0, 1]], 2)
        self.assertEqual([0, 1], chosen)

    def test_first_guest_gives_way_when_needed(self):
        # Guest 1 fits host 0 only, so guest 0 must take host 1.
        chosen, _ = matching.first_perfect_matching([[0, 1], [0]], 2)
        self.assertEqual([1, 0], chosen)

    def test_displaced_guest_reroutes_through_a_chain(self):
        adjacency = [[0, 1, 2], [1, 0], [0, 2]]
        chosen, _ = matching.first_perfect_matching(adjacency, 3)
        self.assertEqual(_brute_force(adjacency, 3), chosen)

    def test_hall_violation_is_reported(self):
        chosen, violation = matching.first_perfect_matching(
            [[0], [0], [0, 1, 2]], 3)
        self.assertIsNone(chosen)
        self.assertEqual(({0, 1}, {0}), violation)

    @settings(max_examples=400, deadline=None)
    @given(st.integers(1, 6).flatmap(lambda hosts: st.tuples(
        st.just(hosts),
        st.lists(st.sets(st.integers(0, hosts - 1)), min_size=1,
                 max_size=hosts))))
    def test_equals_permutation_search(self, case):
        hosts, sets = case
        adjacency = [sorted(s) for s in sets]
        expected = _brute_force(adjacency, hosts)
        chosen, violation = matching.first_perfect_matching(adjacency,
                                                            hosts)
        self.assertEqual(expected, chosen)
        if expected is None:
            guests, reach = violation
            self.assertLess(len(reach), len(guests))
            for guest in guests:
                self.assertLessEqual(set(adjacency[guest]), reach)
