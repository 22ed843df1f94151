"""Where outcomes go: human progress, a subunit v2 stream, JUnit XML.

Each is a test result the scenario cases (numamig_ci.cases) report to,
through one ``testtools.MultiTestResult``: the human reporter prints a
line per progress step and a verdict per scenario, the subunit stream is
python-subunit's own, and the JUnit file is written by junitparser.
"""

import time

import junitparser
import subunit
import testtools

LABELS = ('PASS', 'FAIL', 'ERROR', 'SKIP')


def detail_text(details, name):
    """The text of detail ``name``, or '' when absent or empty."""
    if not details or name not in details:
        return ''
    return details[name].as_text().strip()


def skip_reason(reason, details):
    return reason or detail_text(details, 'reason')


class _Timed(testtools.TestResult):
    """Counts outcomes by label and times each case."""

    def __init__(self):
        super().__init__()
        self.counts = dict.fromkeys(LABELS, 0)
        self._started = 0.0

    def startTest(self, test):  # noqa: N802 - unittest's API
        super().startTest(test)
        self._started = time.monotonic()

    def elapsed(self):
        return time.monotonic() - self._started

    def addSuccess(self, test, details=None):  # noqa: N802
        super().addSuccess(test, details=details)
        self.counts['PASS'] += 1
        self.verdict('PASS', test, '')

    def addFailure(self, test, err=None, details=None):  # noqa: N802
        super().addFailure(test, err=err, details=details)
        self.counts['FAIL'] += 1
        self.verdict('FAIL', test, detail_text(details, 'failures'))

    def addError(self, test, err=None, details=None):  # noqa: N802
        super().addError(test, err=err, details=details)
        self.counts['ERROR'] += 1
        text = '\n'.join(t for t in (detail_text(details, 'failures'),
                                     detail_text(details, 'traceback'))
                         if t)
        self.verdict('ERROR', test, text)

    def addSkip(self, test, reason=None, details=None):  # noqa: N802
        super().addSkip(test, reason=reason, details=details)
        self.counts['SKIP'] += 1
        self.verdict('SKIP', test, skip_reason(reason, details))

    def verdict(self, label, test, text):
        """One case ended with ``label``; ``text`` says why (or '')."""


class HumanReporter(_Timed):
    """Progress lines and a verdict per scenario, then a closing count."""

    def __init__(self, stream, total=0):
        super().__init__()
        self.stream = stream
        self.total = total
        self.index = 0

    def _write(self, text):
        self.stream.write(text + '\n')
        self.stream.flush()

    def warn(self, text):
        self._write(f"WARNING: {text}")

    def startTest(self, test):  # noqa: N802
        super().startTest(test)
        self.index += 1
        self._write(f"[{self.index}/{self.total}] {test.id()}")

    def progress(self, line):
        self._write(f"    {line}")

    def verdict(self, label, test, text):
        self._write(f"  {label} {test.scenario.name} "
                    f"({self.elapsed():.1f} s)")
        for line in text.splitlines():
            self._write(f"    {line}")

    def stopTestRun(self):  # noqa: N802
        super().stopTestRun()
        self._write(
            f"numamig-ci: {self.counts['PASS']} passed, "
            f"{self.counts['FAIL'] + self.counts['ERROR']} failed, "
            f"{self.counts['SKIP']} skipped")


class JUnitReporter(_Timed):
    """One JUnit ``<testsuite>`` (junitparser), written when the run ends."""

    def __init__(self, path, backend):
        super().__init__()
        self.path = path
        self.suite = junitparser.TestSuite(f'numamig-ci.{backend}')
        self._backend = backend
        self._log = ''

    def addSuccess(self, test, details=None):  # noqa: N802
        self._log = detail_text(details, 'log')
        super().addSuccess(test, details=details)

    def addFailure(self, test, err=None, details=None):  # noqa: N802
        self._log = detail_text(details, 'log')
        super().addFailure(test, err=err, details=details)

    def addError(self, test, err=None, details=None):  # noqa: N802
        self._log = detail_text(details, 'log')
        super().addError(test, err=err, details=details)

    def verdict(self, label, test, text):
        case = junitparser.TestCase(test.scenario.name,
                                    classname=f'numamig_ci.{self._backend}',
                                    time=round(self.elapsed(), 3))
        first = text.splitlines()[0] if text else ''
        outcome = {'FAIL': lambda: junitparser.Failure(
                       first, type_='WhiteboxCheckFailed'),
                   'ERROR': lambda: junitparser.Error(first),
                   'SKIP': lambda: junitparser.Skipped(first)}.get(label)
        if outcome:
            result = outcome()
            if label != 'SKIP':
                result.text = text
            case.result = [result]
        if self._log and label != 'SKIP':
            case.system_out = self._log
        self._log = ''
        self.suite.add_testcase(case)

    def stopTestRun(self):  # noqa: N802
        super().stopTestRun()
        self.suite.update_statistics()
        self.suite.write(self.path, pretty=True)


def subunit_reporter(stream):
    """python-subunit's v2 writer, taking the cases' results."""
    return testtools.ExtendedToStreamDecorator(
        subunit.StreamResultToBytes(stream))
