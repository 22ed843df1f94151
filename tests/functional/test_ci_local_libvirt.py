"""numamig-ci --local-libvirt 2: the scenarios the real tier can express.

Two libvirtd hosts on this machine (1 NUMA node, 2 pCPUs), a conductor
and two compute agents as processes over RabbitMQ, TCG guests. A second,
shorter run goes on at the same time on the same machine, broker and
capability cache: both must pass, on hosts of their own, and leave no
process behind. Skipped, with the reason printed, only where root,
unshare, libvirtd, QEMU or RabbitMQ are unavailable.
"""

import os
import re
import subprocess
import sys

import fixtures
from lxml import etree

from numamig_ci import libvirt_hosts
from tests import base
from tests.fixtures import rpc as rpc_fixture

# What one NUMA node and two pCPUs can express (abort-paused too, left
# out to keep the run short: it aborts a copying migration as
# abort-copying does, after pausing the guest).
REAL_SCENARIOS = ('pins-recomputed', 'collocation', 'emulator-threads-share',
                  'iothreadpin', 'qemu-affinity', 'persistence', 'refusal',
                  'abort', 'abort-copying')
# The run beside it: short, but it creates, migrates and deletes guests.
BESIDE = ('pins-recomputed',)


class LocalLibvirtHarnessTest(base.TestCase):

    def setUp(self):
        super().setUp()
        reason = (libvirt_hosts.missing_requirements()
                  or rpc_fixture.rabbit_unreachable_reason())
        if reason:
            print(f"SKIP numamig-ci --local-libvirt: {reason}")
            self.skipTest(reason)
        self.top = self.useFixture(fixtures.TempDir()).path

    def start(self, name, scenarios):
        """Start a numamig-ci --local-libvirt 2 run keeping its state in
        a directory of its own; return (process, state dir, JUnit file)."""
        state = os.path.join(self.top, name)
        junit = os.path.join(self.top, f'{name}.xml')
        script = os.path.join(os.path.dirname(sys.executable), 'numamig-ci')
        argv = [script, '--local-libvirt', '2', '--junit', junit,
                '--state-dir', state]
        for scenario in scenarios:
            argv += ['--scenario', scenario]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        self.addCleanup(_reap, proc)
        return proc, state, junit

    def test_real_tier_scenarios_pass_beside_another_run(self):
        main, main_state, junit = self.start('main', REAL_SCENARIOS)
        beside, beside_state, _ = self.start('beside', BESIDE)
        beside_out = beside.communicate(timeout=300)[0]
        main_out = main.communicate(timeout=300)[0]
        self.assertEqual(0, main.returncode, main_out)
        self.assertEqual(0, beside.returncode, beside_out)
        self.assertIn(f'numamig-ci: {len(REAL_SCENARIOS)} passed, 0 failed, '
                      f'0 skipped', main_out)
        self.assertIn(f'numamig-ci: {len(BESIDE)} passed, 0 failed, '
                      f'0 skipped', beside_out)
        cases = etree.parse(junit).getroot().findall('testcase')
        self.assertEqual(sorted(REAL_SCENARIOS),
                         sorted(c.get('name') for c in cases))
        # Each run used hosts of its own.
        main_hosts, beside_hosts = _hosts(main_out), _hosts(beside_out)
        self.assertEqual(2, len(main_hosts), main_out)
        self.assertEqual(2, len(beside_hosts), beside_out)
        self.assertFalse(main_hosts & beside_hosts)
        # Every daemon, libvirtd and QEMU either run started is gone.
        for state in (main_state, beside_state):
            self.assertEqual([], _processes_using(state))
        # The capability cache both runs shared holds whole files only.
        caps = os.path.join(libvirt_hosts.CACHE_ROOT,
                            libvirt_hosts.QEMU_CAPS_DIR)
        for entry in os.listdir(caps):
            self.assertTrue(entry.endswith('.xml'), entry)
            etree.parse(os.path.join(caps, entry))


def _hosts(output):
    return set(re.findall(r' on (ci-[0-9a-f]+-\d+)', output))


def _processes_using(state_dir):
    """Processes whose command line or mounts name ``state_dir``: the
    daemons name their configuration file, each libvirtd (and its QEMU)
    has its host's directories bind-mounted."""
    # A bind mount's line gives its source relative to the source's
    # filesystem: match the part of the path that is unique to the run.
    unique = os.path.join(*state_dir.split(os.sep)[-2:])
    found = []
    for entry in os.listdir('/proc'):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f'/proc/{entry}/cmdline', 'rb') as f:
                text = f.read().decode(errors='replace')
            with open(f'/proc/{entry}/mountinfo') as f:
                text += f.read()
        except OSError:  # ended meanwhile
            continue
        if unique in text:
            found.append(f"{entry}: {text.split(chr(0))[0]}")
    return found


def _reap(proc):
    """Stop a run the test abandoned; numamig-ci tears its deployment
    down on SIGTERM."""
    if proc.poll() is None:
        proc.terminate()
        proc.communicate(timeout=120)
