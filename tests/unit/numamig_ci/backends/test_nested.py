"""The nested backend's agent restarts (no machine is booted here)."""

import types

import fixtures

from numamig.objects import service as service_obj
from numamig_ci import exception as ci_exception
from numamig_ci.backends import nested
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
