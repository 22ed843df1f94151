"""numamig-manage against a broker that is not there: a bounded answer."""

import os
import subprocess
import sys
import time

import fixtures

from tests import base


class UnreachableBrokerTest(base.TestCase):

    def test_ends_with_255_naming_the_broker(self):
        work = self.useFixture(fixtures.TempDir()).path
        config = os.path.join(work, 'numamig.conf')
        with open(config, 'w', encoding='utf-8') as handle:
            handle.write(f"[DEFAULT]\nstate_path = {work}\n"
                         f"transport_url = rabbit://guest:secret@127.0.0.1:1/"
                         f"\ncli_broker_retries = 1\n")
        started = time.monotonic()
        run = subprocess.run(
            [os.path.join(os.path.dirname(sys.executable), 'numamig-manage'),
             '--config-file', config, 'migration', 'abort',
             '7d3c1a7e-0c6c-4b8e-9f64-2d2a4a1b0c11', '--format', 'json'],
            capture_output=True, text=True, timeout=60)
        self.assertLess(time.monotonic() - started, 30)
        self.assertEqual(255, run.returncode, run.stderr)
        self.assertEqual(1, len(run.stderr.strip().splitlines()), run.stderr)
        self.assertIn('rabbit://guest:***@127.0.0.1:1/ after 2 attempts',
                      run.stderr)
        self.assertNotIn('secret', run.stdout + run.stderr)
        self.assertIn('"exit_code": 255', run.stdout)
