"""The nested backend's agent restarts (no machine is booted here)."""

import types

import fixtures

from numamig.objects import service as service_obj
from numamig_ci import exception as ci_exception
from numamig_ci.backends import nested
from numamig_ci.results import ScenarioSkipped
from tests import base


class AsReleaseTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.backend = nested.NestedBackend(
            state_dir=self.useFixture(fixtures.TempDir()).path)
        self.host = self.backend.deployment.host_names[0]
        self.restarts = []
        self.backend.deployment.restart_agent = \
            lambda host, extra: self.restarts.append((host, extra))
        self.backend.deployment.alive = lambda: None
        self.versions = []

        def reports(timeout, since=None, procs_alive=None):
            version = self.versions.pop(0) if self.versions else 1
            return {self.host: types.SimpleNamespace(
                service_version=version)}
        self.backend.wait_for_reports = reports

    def test_old_release_inside_current_release_after(self):
        current = service_obj.SERVICE_VERSION
        # A report the agent sent before it stopped comes first.
        self.versions = [current, 1]
        with self.backend.as_release(self.host, 1):
            self.assertEqual(
                [(self.host, '[testing]\npretend_service_version = 1\n')],
                self.restarts)
            self.assertEqual([], self.versions)
            self.versions = [current]
        self.assertEqual((self.host, ''), self.restarts[-1])
        self.assertEqual(2, len(self.restarts))

    def test_back_to_the_current_release_after_a_failure(self):
        self.versions = [1]

        def run():
            with self.backend.as_release(self.host, 1):
                self.versions = [service_obj.SERVICE_VERSION]
                raise ValueError('scenario failed')
        self.assertRaises(ValueError, run)
        self.assertEqual((self.host, ''), self.restarts[-1])

    def test_no_report_in_that_version_is_bounded(self):
        self.backend.start_timeout_s = 0
        self.versions = [service_obj.SERVICE_VERSION] * 3
        self.assertRaisesMessage(
            ci_exception.CIDeploymentError,
            'did not report service version 1 within 0 s',
            self.backend._restart_agent, self.host, 'x', 1)


class AgentsOnHostsTest(base.TestCase):
    """Every compute agent moved into the machine for a block."""

    def setUp(self):
        super().setUp()
        self.backend = nested.NestedBackend(
            state_dir=self.useFixture(fixtures.TempDir()).path)
        deployment = self.backend.deployment
        self.backend.hosts = dict.fromkeys(deployment.host_names)
        self.calls = []
        deployment.stop_agents = \
            lambda names: self.calls.append(('stop', list(names)))
        deployment.move_agents = lambda names, inside, extra: \
            self.calls.append(('move', list(names), inside, extra))
        deployment.alive = lambda: None
        self.waits = []

        def reports(timeout, since=None, procs_alive=None):
            # Only reports from agents started after the stop count.
            self.waits.append(since)
            self.assertEqual('stop', self.calls[-2][0])
            return {}
        self.backend.wait_for_reports = reports

    def test_inside_for_the_block_here_after_it(self):
        names = list(self.backend.hosts)
        with self.backend.agents_on_hosts('[libvirt]\nx = 1\n') as took:
            self.assertEqual([('stop', names),
                              ('move', names, True, '[libvirt]\nx = 1\n')],
                             self.calls)
            self.assertGreaterEqual(took, 0)
        self.assertEqual([('stop', names), ('move', names, False, '')],
                         self.calls[2:])
        self.assertEqual(2, len(self.waits))
        self.assertTrue(all(self.waits))

    def test_back_here_after_a_failure(self):
        def run():
            with self.backend.agents_on_hosts():
                raise ValueError('scenario failed')
        self.assertRaises(ValueError, run)
        self.assertEqual(('move', list(self.backend.hosts), False, ''),
                         self.calls[-1])

    def test_left_inside_when_the_run_is_torn_down(self):
        # The deployment's stop ends them there: no minute-long move
        # back out while a CI job is being cancelled.
        def run():
            with self.backend.agents_on_hosts():
                raise KeyboardInterrupt('signal 15')
        self.assertRaises(KeyboardInterrupt, run)
        self.assertEqual(2, len(self.calls))

    def test_no_report_from_inside_names_where(self):
        def silent(timeout, since=None, procs_alive=None):
            raise ci_exception.CIDeploymentError(what='hosts',
                                                 reason='no report')
        self.backend.wait_for_reports = silent
        self.assertRaisesMessage(
            ci_exception.CIDeploymentError,
            'compute agents started inside their machine',
            self.backend.agents_on_hosts().__enter__)

    def test_skipped_with_the_reason_the_machine_gives(self):
        self.backend.deployment.guard_unavailable = 'Python 3.9 inside'
        self.assertRaisesMessage(ScenarioSkipped, 'Python 3.9 inside',
                                 self.backend.agents_on_hosts().__enter__)
        self.assertEqual([], self.calls)
