"""Run selected scenarios on a started backend, as test cases.

Each scenario is a ``numamig_ci.cases.ScenarioTest``: it passes when
every check held, fails when one did not, is skipped when the backend
cannot express it (with the reason) and errs when it could not reach its
checks. The guests a scenario created are deleted before the next one
starts, whatever happened.
"""

import testtools

from numamig_ci import cases


def run(backend, scenarios, human, others=()):
    """Run ``scenarios`` on ``backend``, reporting to ``human`` (a
    reporters.HumanReporter, which also prints their progress) and to
    ``others`` (test results: subunit, JUnit).

    :returns: a testtools.TestResult holding every outcome (``exit_code``
        reads it).
    """
    for warning in backend.warnings():
        human.warn(warning)
    tally = testtools.TestResult()
    result = testtools.MultiTestResult(human, tally, *others)
    result.startTestRun()
    try:
        cases.suite(backend, scenarios, say=human.progress).run(result)
    finally:
        result.stopTestRun()
    return tally


def exit_code(tally, skips_fail=False):
    """0 only when a scenario passed and none failed.

    :param skips_fail: count skipped scenarios as failed (scenarios named
        on the command line must run); otherwise a scenario the backend
        cannot express is reported skipped without failing the run.
    """
    skipped = sum(len(tests) for tests in tally.skip_reasons.values())
    passed = tally.testsRun - len(tally.failures) - len(tally.errors) - \
        skipped
    if passed <= 0 or tally.failures or tally.errors:
        return 1
    return 1 if skips_fail and skipped else 0
