"""FitResult: read-only, deferred details made once, equality by meaning."""

import functools

from numamig.numa import result
from tests import base


class FitResultTest(base.TestCase):

    def _counted(self, value):
        calls = []

        def make():
            calls.append(1)
            return value
        return functools.partial(make), calls

    def test_deferred_reason_is_made_once_on_first_read(self):
        deferred, calls = self._counted("host cell 0 is full")
        outcome = result.FitResult(False, reason=deferred)
        self.assertEqual([], calls)
        self.assertEqual("host cell 0 is full", outcome.reason)
        self.assertEqual("host cell 0 is full", outcome.reason)
        self.assertEqual([1], calls)
        self.assertIsNone(outcome.placement)
        self.assertIsNone(outcome.topology)

    def test_deferred_placement_is_made_once(self):
        placement = object()
        deferred, calls = self._counted(placement)
        outcome = result.FitResult(True, placement=deferred)
        self.assertEqual([], calls)
        self.assertIs(placement, outcome.placement)
        self.assertIs(placement, outcome.placement)
        self.assertEqual([1], calls)
        self.assertIsNone(outcome.reason)

    def test_plain_values_are_kept(self):
        outcome = result.FitResult(False, reason="no")
        self.assertEqual("no", outcome.reason)

    def test_read_only(self):
        outcome = result.FitResult(False, reason="no")
        for name in ('fits', 'reason', 'placement', 'topology', '_reason'):
            self.assertRaises(AttributeError, setattr, outcome, name, 1)

    def test_equal_when_they_say_the_same(self):
        deferred, _ = self._counted("why")
        self.assertEqual(result.FitResult(False, reason="why"),
                         result.FitResult(False, reason=deferred))
        self.assertNotEqual(result.FitResult(False, reason="why"),
                            result.FitResult(False, reason="other"))
        self.assertNotEqual(result.FitResult(False, reason="why"), "why")
