"""Run selected scenarios on a started backend and report each one.

A scenario ends PASSED when every check held, FAILED when one did not,
SKIPPED when the backend cannot express it (with the reason) and ERROR
when it could not reach its checks. The guests a scenario created are
deleted before the next one starts, whatever happened.
"""

import time
import traceback

from oslo_log import log as logging

from numamig_ci import reporters as ci_reporters
from numamig_ci import results as ci_results
from numamig_ci import session as ci_session

LOG = logging.getLogger(__name__)


def run(backend, scenarios, reporters):
    """Run ``scenarios`` on ``backend``; return their ScenarioResults."""
    results = []
    for warning in backend.warnings():
        LOG.warning("numamig-ci: %s", warning)
        for reporter in reporters:
            if hasattr(reporter, 'warn'):
                reporter.warn(warning)
    for scenario in scenarios:
        for reporter in reporters:
            reporter.start(ci_reporters.test_id(backend.name, scenario.name))
        result = run_one(backend, scenario, reporters)
        results.append(result)
        for reporter in reporters:
            reporter.stop(result)
    for reporter in reporters:
        reporter.close(results)
    return results


def run_one(backend, scenario, reporters):
    """Run one scenario and clean up after it; return its result."""
    started = time.monotonic()
    result = ci_results.ScenarioResult(scenario.name, ci_results.PASSED)
    missing = scenario.missing(backend)
    if missing:
        result.status, result.reason = ci_results.SKIPPED, missing
        return result

    def say(line):
        result.log.append(line)
        for reporter in reporters:
            reporter.progress(line)
    session = ci_session.Session(backend, say=say)
    try:
        scenario.func(session)
    except ci_results.ScenarioSkipped as exc:
        result.status, result.reason = ci_results.SKIPPED, exc.reason
    except Exception as exc:
        LOG.exception("numamig-ci: scenario %s broke", scenario.name)
        result.status = ci_results.ERROR
        result.reason = (f"{type(exc).__name__}: {exc}\n"
                         f"{traceback.format_exc()}")
    finally:
        _cleanup(session, result)
    result.failures = list(session.failures)
    if result.failures and result.status != ci_results.ERROR:
        result.status = ci_results.FAILED
    result.duration_s = time.monotonic() - started
    return result


def _cleanup(session, result):
    try:
        session.cleanup()
    except Exception as exc:
        LOG.exception("numamig-ci: clean-up after %s failed", result.name)
        if result.status in (ci_results.PASSED, ci_results.SKIPPED):
            result.status = ci_results.ERROR
            result.reason = f"clean-up failed: {type(exc).__name__}: {exc}"


def exit_code(results, skips_fail=False):
    """0 only when every scenario passed.

    :param skips_fail: count skipped scenarios as failed (scenarios named
        on the command line must run); otherwise a scenario the backend
        cannot express is reported skipped without failing the run.
    """
    if not results or not any(r.status == ci_results.PASSED
                              for r in results):
        return 1
    allowed = (ci_results.PASSED,) if skips_fail else (
        ci_results.PASSED, ci_results.SKIPPED)
    return 0 if all(r.status in allowed for r in results) else 1
