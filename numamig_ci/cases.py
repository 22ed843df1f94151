"""Scenarios as testtools test cases: one case per scenario and backend.

Running scenarios as test cases gives the harness what test runners and
CI systems already understand: skips with a reason (``skipTest``), the
guests a scenario created deleted by a cleanup whatever happened
(``addCleanup``; a cleanup that fails makes the case an error), outcomes
and attachments that stream to subunit as they are, and JUnit through a
maintained writer. A scenario stays a plain function of a Session: the
case is the adapter.
"""

import unittest

import testtools
from testtools import content

from numamig_ci import results as ci_results
from numamig_ci import session as ci_session


def test_id(backend, scenario):
    """``numamig_ci.<backend>.<scenario>``: stestr, Zuul and Jenkins then
    group a vendor's runs per backend."""
    return f"numamig_ci.{backend}.{scenario}"


class WhiteboxCheckFailed(AssertionError):
    """Checks of a scenario did not hold (each in the ``failures`` detail)."""


class ScenarioTest(testtools.TestCase):
    """One scenario on one started backend.

    Details: ``failures`` (one line per check that did not hold, naming
    guest, host, element, expected and actual) and ``log`` (the
    scenario's progress lines); a skip carries its ``reason``.

    :param say: called with each progress line as the scenario runs.
    """

    failureException = WhiteboxCheckFailed

    def __init__(self, scenario, backend, say=None):
        super().__init__('test_scenario')
        self.scenario = scenario
        self.backend = backend
        self._say = say or (lambda line: None)
        self.log = []

    def id(self):
        return test_id(self.backend.name, self.scenario.name)

    def shortDescription(self):  # noqa: N802 - unittest's API
        return None

    def _progress(self, line):
        self.log.append(line)
        self._say(line)

    def test_scenario(self):
        missing = self.scenario.missing(self.backend)
        if missing:
            self.skipTest(missing)
        session = ci_session.Session(self.backend, say=self._progress)
        self.addCleanup(session.cleanup)
        self.addDetail('failures', _lines(lambda: session.failures))
        self.addDetail('log', _lines(lambda: self.log))
        try:
            self.scenario.func(session)
        except ci_results.ScenarioSkipped as exc:
            self.skipTest(exc.reason)
        if session.failures:
            raise self.failureException(str(session.failures[0]))


def _lines(items):
    """A text detail read when it is reported, not when it is added."""
    return content.Content(
        content.UTF8_TEXT,
        lambda: ['\n'.join(str(i) for i in items()).encode('utf-8')])


def suite(backend, scenarios, say=None):
    """The cases of ``scenarios`` on ``backend``, in the order given."""
    return unittest.TestSuite(
        [ScenarioTest(s, backend, say=say) for s in scenarios])
