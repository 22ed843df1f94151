"""numamig-ci --local-libvirt 2: the scenarios the real tier can express.

Two libvirtd hosts on this machine (1 NUMA node, 2 pCPUs), a conductor
and two compute agents as processes over RabbitMQ, TCG guests. Skipped,
with the reason printed, only where root, unshare, libvirtd, QEMU or
RabbitMQ are unavailable.
"""

import os
import subprocess
import sys

import fixtures
from lxml import etree

from numamig.ci import libvirt_hosts
from tests import base
from tests.fixtures import rpc as rpc_fixture

# What one NUMA node and two pCPUs can express.
REAL_SCENARIOS = ('pins-recomputed', 'collocation', 'emulator-threads-share',
                  'iothreadpin', 'qemu-affinity', 'persistence', 'refusal')


class LocalLibvirtHarnessTest(base.TestCase):

    def setUp(self):
        super().setUp()
        reason = (libvirt_hosts.missing_requirements()
                  or rpc_fixture.rabbit_unreachable_reason())
        if reason:
            print(f"SKIP numamig-ci --local-libvirt: {reason}")
            self.skipTest(reason)

    def test_real_tier_scenarios_pass(self):
        junit = self.useFixture(fixtures.TempDir()).path + '/ci.xml'
        script = os.path.join(os.path.dirname(sys.executable), 'numamig-ci')
        argv = [script, '--local-libvirt', '2', '--junit', junit]
        for name in REAL_SCENARIOS:
            argv += ['--scenario', name]
        run = subprocess.run(argv, capture_output=True, text=True,
                             timeout=300)
        self.assertEqual(0, run.returncode, run.stdout + run.stderr)
        self.assertIn(f'numamig-ci: {len(REAL_SCENARIOS)} passed, 0 failed, '
                      f'0 skipped', run.stdout)
        cases = etree.parse(junit).getroot().findall('testcase')
        self.assertEqual(sorted(REAL_SCENARIOS),
                         sorted(c.get('name') for c in cases))
        # Every libvirtd the run started is gone.
        leftover = subprocess.run(['pgrep', '-f', 'ci-real-'],
                                  capture_output=True, text=True)
        self.assertEqual('', leftover.stdout.strip())
