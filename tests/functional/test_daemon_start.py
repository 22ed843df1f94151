"""The daemons, started as operators start them, with operators' mistakes."""

import os
import subprocess
import sys

import fixtures

from tests import base

BIN = os.path.dirname(sys.executable)


class StartFailureTest(base.TestCase):

    def _start(self, daemon, config):
        work = self.useFixture(fixtures.TempDir()).path
        path = os.path.join(work, 'numamig.conf')
        with open(path, 'w', encoding='utf-8') as handle:
            handle.write(config.format(work=work))
        return subprocess.run([os.path.join(BIN, daemon), '--config-file',
                               path], capture_output=True, text=True,
                              timeout=60)

    def assert_one_line(self, run, fragment):
        self.assertEqual(2, run.returncode, run.stdout + run.stderr)
        lines = run.stderr.strip().splitlines()
        self.assertEqual(1, len(lines), run.stderr)
        self.assertIn(fragment, lines[0])
        self.assertNotIn('Traceback', run.stdout + run.stderr)

    def test_bad_number(self):
        for daemon in ('numamig-conductor', 'numamig-compute'):
            run = self._start(daemon, "[DEFAULT]\nstate_path = {work}\n"
                                      "report_interval = zero\n")
            self.assert_one_line(
                run, f"{daemon} cannot start: Invalid configuration option "
                     f"[DEFAULT] report_interval")

    def test_unsynced_database(self):
        run = self._start('numamig-conductor',
                          "[DEFAULT]\nstate_path = {work}\n"
                          "transport_url = fake://\n")
        self.assert_one_line(run, "run 'numamig-manage db sync'")
