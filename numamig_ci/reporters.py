"""Where results go: human progress, a subunit v2 stream, JUnit XML.

Every reporter sees ``start(scenario_id)``, ``progress(line)`` and
``stop(result)`` per scenario and ``close(results)`` at the end. Test ids
are ``numamig_ci.<backend>.<scenario>`` so that stestr, Zuul and Jenkins
group a vendor's runs per backend.
"""

import datetime
import xml.etree.ElementTree as ET

from numamig_ci import results as ci_results


def test_id(backend, scenario):
    return f"numamig_ci.{backend}.{scenario}"


class HumanReporter:
    """Progress lines and a verdict per scenario, then a closing count."""

    LABELS = {ci_results.PASSED: 'PASS', ci_results.FAILED: 'FAIL',
              ci_results.SKIPPED: 'SKIP', ci_results.ERROR: 'ERROR'}

    def __init__(self, stream, total=0):
        self.stream = stream
        self.total = total
        self.index = 0

    def _write(self, text):
        self.stream.write(text + '\n')
        self.stream.flush()

    def warn(self, text):
        self._write(f"WARNING: {text}")

    def start(self, scenario_id):
        self.index += 1
        self._write(f"[{self.index}/{self.total}] {scenario_id}")

    def progress(self, line):
        self._write(f"    {line}")

    def stop(self, result):
        self._write(f"  {self.LABELS[result.status]} {result.name} "
                    f"({result.duration_s:.1f} s)")
        for line in result.details().splitlines():
            self._write(f"    {line}")

    def close(self, results):
        counts = {s: sum(1 for r in results if r.status == s)
                  for s in self.LABELS}
        self._write(
            f"numamig-ci: {counts[ci_results.PASSED]} passed, "
            f"{counts[ci_results.FAILED] + counts[ci_results.ERROR]} "
            f"failed, {counts[ci_results.SKIPPED]} skipped")


class SubunitReporter:
    """A subunit v2 stream (``subunit2pyunit``, ``stestr load`` read it)."""

    STATUS = {ci_results.PASSED: 'success', ci_results.FAILED: 'fail',
              ci_results.SKIPPED: 'skip', ci_results.ERROR: 'fail'}

    def __init__(self, stream, backend):
        import subunit
        self.stream = stream
        self.backend = backend
        self.output = subunit.StreamResultToBytes(stream)
        self.output.startTestRun()

    def start(self, scenario_id):
        self.output.status(test_id=scenario_id, test_status='inprogress',
                           timestamp=_now())

    def progress(self, line):
        pass

    def stop(self, result):
        kwargs = {}
        details = result.details()
        if details:
            name = 'reason' if result.status == ci_results.SKIPPED \
                else 'traceback'
            kwargs = {'file_name': name, 'file_bytes': details.encode(),
                      'mime_type': 'text/plain; charset=utf8'}
        self.output.status(test_id=test_id(self.backend, result.name),
                           test_status=self.STATUS[result.status],
                           timestamp=_now(), eof=True, **kwargs)

    def close(self, results):
        self.output.stopTestRun()
        self.stream.flush()


class JUnitReporter:
    """One JUnit XML ``<testsuite>`` written when the run ends."""

    def __init__(self, path, backend):
        self.path = path
        self.backend = backend

    def start(self, scenario_id):
        pass

    def progress(self, line):
        pass

    def stop(self, result):
        pass

    def close(self, results):
        suite = ET.Element('testsuite', {
            'name': f'numamig-ci.{self.backend}',
            'tests': str(len(results)),
            'failures': str(_count(results, ci_results.FAILED)),
            'errors': str(_count(results, ci_results.ERROR)),
            'skipped': str(_count(results, ci_results.SKIPPED)),
            'time': f"{sum(r.duration_s for r in results):.3f}"})
        for result in results:
            case = ET.SubElement(suite, 'testcase', {
                'classname': f'numamig_ci.{self.backend}',
                'name': result.name, 'time': f"{result.duration_s:.3f}"})
            _outcome(case, result)
            if result.log:
                ET.SubElement(case, 'system-out').text = '\n'.join(
                    result.log)
        ET.indent(suite)
        ET.ElementTree(suite).write(self.path, encoding='utf-8',
                                    xml_declaration=True)


def _outcome(case, result):
    if result.status == ci_results.SKIPPED:
        ET.SubElement(case, 'skipped', message=result.reason)
    elif result.status == ci_results.FAILED:
        first = str(result.failures[0]) if result.failures else ''
        ET.SubElement(case, 'failure', message=first,
                      type='WhiteboxCheckFailed').text = result.details()
    elif result.status == ci_results.ERROR:
        ET.SubElement(case, 'error', message=result.reason.splitlines()[0]
                      if result.reason else '').text = result.details()


def _count(results, status):
    return sum(1 for r in results if r.status == status)


def _now():
    return datetime.datetime.now(datetime.UTC)
