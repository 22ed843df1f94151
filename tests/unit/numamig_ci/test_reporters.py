"""Scenario cases, reporters, exit codes and the table of numamig-ci."""

import io
import os
from unittest import mock

import fixtures
from lxml import etree
import subunit
import testtools

from numamig_ci import cases
from numamig_ci import reporters
from numamig_ci import results
from numamig_ci import runner
from numamig_ci.scenarios import registry
from tests import base

FAILURE = results.Failure('guest-1', 'host-b', "live <vcpupin vcpu='0'>",
                          '5', '1')


def _fails(session):
    session.say('migrated guest-1')
    session.failures.append(FAILURE)


def _breaks(session):
    raise RuntimeError('the conductor went away')


def _passes(session):
    session.say('all held')


SCENARIOS = {
    'pins-recomputed': registry.Scenario('pins-recomputed', 'x', (), _fails),
    'multi-node': registry.Scenario('multi-node', 'x', ('multi_node',),
                                    _passes),
    'persistence': registry.Scenario('persistence', 'x', (), _passes),
    'concurrency': registry.Scenario('concurrency', 'x', (), _breaks),
}


def _backend():
    backend = mock.Mock(name='backend', features=frozenset())
    backend.name = 'embedded'
    backend.warnings.return_value = ['hosts have the same CPU sets']
    return backend


def _run(names, others=(), skips_fail=False):
    """(human text, exit code, backend) of running ``names``."""
    out = io.StringIO()
    backend = _backend()
    human = reporters.HumanReporter(out, total=len(names))
    tally = runner.run(backend, [SCENARIOS[n] for n in names], human,
                       others)
    return out.getvalue(), runner.exit_code(tally, skips_fail), backend


class ScenarioCaseTest(base.TestCase):

    def test_id_groups_by_backend(self):
        case = cases.ScenarioTest(SCENARIOS['persistence'], _backend())
        self.assertEqual('numamig_ci.embedded.persistence', case.id())

    def test_guests_are_deleted_whatever_happened(self):
        for name in ('pins-recomputed', 'persistence', 'concurrency'):
            _text, _code, backend = _run([name])
            backend.refresh.assert_called_once_with()

    def test_a_failing_cleanup_makes_an_error(self):
        backend = _backend()
        backend.refresh.side_effect = RuntimeError('libvirtd is gone')
        tally = runner.run(backend, [SCENARIOS['persistence']],
                           reporters.HumanReporter(io.StringIO()))
        self.assertEqual(1, len(tally.errors))


class ReportersTest(base.TestCase):

    NAMES = ['pins-recomputed', 'multi-node', 'persistence', 'concurrency']

    def test_human_names_guest_host_element_values(self):
        text, _code, _backend = _run(self.NAMES)
        self.assertIn("WARNING: hosts have the same CPU sets", text)
        self.assertIn("[1/4] numamig_ci.embedded.pins-recomputed", text)
        self.assertIn("    migrated guest-1", text)
        self.assertIn("  FAIL pins-recomputed", text)
        self.assertIn("guest guest-1 on host host-b: live <vcpupin "
                      "vcpu='0'>: expected 5, actual 1", text)
        self.assertIn("  SKIP multi-node", text)
        self.assertIn("no hosts with at least two NUMA nodes", text)
        self.assertIn("  ERROR concurrency", text)
        self.assertIn("RuntimeError: the conductor went away", text)
        self.assertTrue(text.rstrip().endswith(
            "numamig-ci: 1 passed, 2 failed, 1 skipped"))

    def test_junit(self):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path, 'j')
        _run(self.NAMES, [reporters.JUnitReporter(path, 'embedded')])
        suite = etree.parse(path).getroot()
        self.assertEqual('testsuite', suite.tag)
        self.assertEqual(('4', '1', '1', '1'), tuple(
            suite.get(k) for k in ('tests', 'failures', 'errors',
                                   'skipped')))
        failure = suite.find("testcase[@name='pins-recomputed']/failure")
        self.assertEqual(str(FAILURE), failure.get('message'))
        self.assertIn('migrated guest-1', suite.find(
            "testcase[@name='pins-recomputed']/system-out").text)
        self.assertIn('two NUMA nodes', suite.find(
            "testcase[@name='multi-node']/skipped").get('message'))

    def test_subunit_v2_stream_reads_back(self):
        stream = io.BytesIO()
        _run(self.NAMES, [reporters.subunit_reporter(stream)])
        summary = testtools.StreamSummary()
        summary.startTestRun()
        subunit.ByteStreamToStreamResult(io.BytesIO(stream.getvalue())).run(
            summary)
        summary.stopTestRun()
        self.assertEqual(4, summary.testsRun)
        self.assertEqual(['numamig_ci.embedded.concurrency',
                          'numamig_ci.embedded.pins-recomputed'],
                         sorted(t.id() for t, _ in summary.errors +
                                summary.failures))
        self.assertEqual(['numamig_ci.embedded.multi-node'],
                         [t.id() for t, _ in summary.skipped])


class ExitCodeTest(base.TestCase):

    def test_failure_fails(self):
        self.assertEqual(1, _run(['persistence', 'pins-recomputed'])[1])

    def test_error_fails(self):
        self.assertEqual(1, _run(['persistence', 'concurrency'])[1])

    def test_skips_pass_unless_named(self):
        passing = ['multi-node', 'persistence']
        self.assertEqual(0, _run(passing)[1])
        self.assertEqual(1, _run(passing, skips_fail=True)[1])

    def test_nothing_passed_fails(self):
        self.assertEqual(1, _run(['multi-node'])[1])
        self.assertEqual(1, _run([])[1])


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

    def test_every_required_feature_has_a_skip_reason(self):
        from numamig_ci.backends import base as backend_base
        import numamig_ci.scenarios  # noqa: F401 (registers them all)
        required = {feature for scenario in registry.SCENARIOS.values()
                    for feature in scenario.requires}
        self.assertEqual(set(), required - set(backend_base.FEATURES))
