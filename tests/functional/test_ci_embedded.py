"""numamig-ci on the embedded tier: every scenario passes, and a driver
that copies the source XML is caught.

The passing run goes through the installed console script, over
RabbitMQ when it is up (fake:// costs ~50 ms per call otherwise); the
broken run is in-process so the test can break the driver.
"""

import io
import os
import subprocess
import sys

import fixtures
from lxml import etree

from numamig_ci import cmd as cmd_ci
from tests import base
from tests.fixtures import rpc as rpc_fixture

RABBIT = 'rabbit://guest:guest@127.0.0.1:5672/'


def _transport():
    return 'fake://' if rpc_fixture.rabbit_unreachable_reason() else RABBIT


class EmbeddedHarnessTest(base.TestCase):

    def test_every_scenario_passes(self):
        out = self.useFixture(fixtures.TempDir()).path
        junit, stream = f'{out}/ci.xml', f'{out}/ci.subunit'
        script = os.path.join(os.path.dirname(sys.executable), 'numamig-ci')
        run = subprocess.run(
            [script, '--embedded', '--transport-url', _transport(),
             '--junit', junit, '--subunit', stream],
            capture_output=True, text=True, timeout=240)
        self.assertEqual(0, run.returncode, run.stdout + run.stderr)
        # Skipped: the four needing real QEMU; guard-old-source,
        # drain-huge-pages and defragment-node (the hosts' kernel, read
        # from inside: --nested); postcopy-resume, policy-finish and
        # policy-never-pause (a real job held and its link cut);
        # migration-threads (agents on their hosts' own kernel);
        # virtio-mem-per-node (a guest kernel on a multi-node host);
        # nearest-pair (distance tables read from the hosts' kernel);
        # cpu-model-generations (two CPU generations under KVM);
        # cpu-power-hotplug and locality-watch (agents on their hosts'
        # own kernel); device-move, device-stuck and vf-move (assignable
        # PCI functions in two nested machines).
        self.assertIn('numamig-ci: 17 passed, 0 failed, 19 skipped',
                      run.stdout)
        suite = etree.parse(junit).getroot()
        self.assertEqual(('36', '0', '0', '19'), tuple(
            suite.get(k) for k in ('tests', 'failures', 'errors',
                                   'skipped')))
        stats = subprocess.run(
            [os.path.join(os.path.dirname(sys.executable), 'subunit-stats')],
            stdin=open(stream, 'rb'), capture_output=True, text=True)
        self.assertIn('Passed tests:', stats.stdout)
        self.assertIn('17', stats.stdout.split('Passed tests:')[1]
                      .splitlines()[0])


class StestrTest(base.TestCase):
    """The scenarios as stestr runs them (numamig_ci.suite)."""

    def test_stestr_runs_the_scenarios(self):
        work = self.useFixture(fixtures.TempDir()).path
        bindir = os.path.dirname(sys.executable)
        top = subprocess.run([os.path.join(bindir, 'numamig-ci'),
                              '--suite-top'], capture_output=True,
                             text=True, check=True).stdout.strip()
        env = dict(os.environ, NUMAMIG_CI_ARGS=(
            '--embedded --transport-url fake:// --scenario persistence '
            '--scenario pins-recomputed --scenario qemu-affinity'))
        run = subprocess.run(
            [os.path.join(bindir, 'stestr'), '--top-dir', top,
             '--test-path', os.path.join(top, 'numamig_ci', 'suite'),
             'run', '--concurrency', '1'],
            cwd=work, env=env, capture_output=True, text=True, timeout=240)
        self.assertEqual(0, run.returncode, run.stdout + run.stderr)
        self.assertIn('numamig_ci.embedded.persistence', run.stdout)
        self.assertRegex(run.stdout, r'Passed: 2\b')
        self.assertRegex(run.stdout, r'Skipped: 1\b')


class BrokenDriverTest(base.TestCase):
    """A source that sends its own XML instead of the rewritten one."""

    def test_copied_xml_fails_with_the_element_named(self):
        self.useFixture(fixtures.MonkeyPatch(
            'numamig.virt.libvirt.driver.LibvirtDriver.get_destination_xml',
            lambda drv, uuid, info: drv.get_domain_xml(uuid)))
        out = io.StringIO()
        code = cmd_ci.main(['--embedded', '--transport-url', _transport(),
                            '--scenario', 'pins-recomputed',
                            '--scenario', 'collocation'], stdout=out)
        text = out.getvalue()
        self.assertEqual(cmd_ci.EXIT_FAILED, code, text)
        self.assertIn('FAIL pins-recomputed', text)
        self.assertIn('FAIL collocation', text)
        self.assertRegex(
            text, r"guest ci-mover-\w+ on host host-b: live "
                  r"<vcpupin vcpu='0'>: expected \d+, actual \d+")
        self.assertRegex(
            text, r"live <emulatorpin>: expected 1,4,9,12, actual "
                  r"0,4,8,12")
        self.assertIn('numamig-ci: 0 passed, 2 failed, 0 skipped', text)
