"""Reporters, exit codes and the scenario table of numamig-ci."""

import io
import os

import fixtures
from lxml import etree
import subunit
import testtools

from numamig_ci import reporters
from numamig_ci import results
from numamig_ci import runner
from numamig_ci.scenarios import registry
from tests import base

FAILURE = results.Failure('guest-1', 'host-b', "live <vcpupin vcpu='0'>",
                          '5', '1')
RESULTS = [
    results.ScenarioResult('pins-recomputed', results.FAILED, 1.5,
                           failures=[FAILURE]),
    results.ScenarioResult('multi-node', results.SKIPPED, 0.0,
                           reason='no hosts with two NUMA nodes'),
    results.ScenarioResult('persistence', results.PASSED, 2.0),
]


def _report(reporter):
    for result in RESULTS:
        reporter.start(reporters.test_id('embedded', result.name))
        reporter.stop(result)
    reporter.close(RESULTS)


class ReportersTest(base.TestCase):

    def test_human_names_guest_host_element_values(self):
        out = io.StringIO()
        _report(reporters.HumanReporter(out, total=3))
        text = out.getvalue()
        self.assertIn("FAIL pins-recomputed (1.5 s)", text)
        self.assertIn("guest guest-1 on host host-b: live <vcpupin "
                      "vcpu='0'>: expected 5, actual 1", text)
        self.assertIn("SKIP multi-node", text)
        self.assertTrue(text.rstrip().endswith(
            "numamig-ci: 1 passed, 1 failed, 1 skipped"))

    def test_junit(self):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path, 'j')
        _report(reporters.JUnitReporter(path, 'embedded'))
        suite = etree.parse(path).getroot()
        self.assertEqual(('3', '1', '0', '1'), tuple(
            suite.get(k) for k in ('tests', 'failures', 'errors',
                                   'skipped')))
        failure = suite.find("testcase[@name='pins-recomputed']/failure")
        self.assertEqual(str(FAILURE), failure.get('message'))
        self.assertEqual('no hosts with two NUMA nodes', suite.find(
            "testcase[@name='multi-node']/skipped").get('message'))

    def test_subunit_v2_stream_reads_back(self):
        stream = io.BytesIO()
        _report(reporters.SubunitReporter(stream, 'embedded'))
        summary = testtools.StreamSummary()
        summary.startTestRun()
        subunit.ByteStreamToStreamResult(io.BytesIO(stream.getvalue())).run(
            summary)
        summary.stopTestRun()
        self.assertEqual(3, summary.testsRun)
        self.assertEqual(['numamig_ci.embedded.pins-recomputed'],
                         [t.id() for t, _ in summary.errors +
                          summary.failures])
        self.assertEqual(['numamig_ci.embedded.multi-node'],
                         [t.id() for t, _ in summary.skipped])


class ExitCodeTest(base.TestCase):

    def test_failure_fails(self):
        self.assertEqual(1, runner.exit_code(RESULTS))

    def test_skips_pass_unless_named(self):
        passing = RESULTS[1:]
        self.assertEqual(0, runner.exit_code(passing))
        self.assertEqual(1, runner.exit_code(passing, skips_fail=True))

    def test_nothing_passed_fails(self):
        self.assertEqual(1, runner.exit_code(RESULTS[1:2]))
        self.assertEqual(1, runner.exit_code([]))


class RegistryTest(base.TestCase):

    def test_unknown_scenario_is_named(self):
        exc = self.assertRaises(KeyError, registry.select, ['nope'])
        self.assertIn('unknown scenario(s) nope', exc.args[0])

    def test_missing_features_are_the_skip_reason(self):
        from numamig_ci.scenarios import memory  # noqa: F401 (registers)

        class Backend:
            name = 'local-libvirt'
            features = frozenset({'qemu_threads'})
        reason = registry.SCENARIOS['huge-pages'].missing(Backend)
        self.assertEqual("the local-libvirt backend has no hosts with huge "
                         "page pools, no hosts with at least two NUMA "
                         "nodes", reason)
        self.assertIsNone(registry.SCENARIOS['persistence'].missing(Backend))
