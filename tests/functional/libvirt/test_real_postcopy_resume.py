"""The real tier: a post-copy cut for good, then ``numamig-manage
migration resume --wait`` run as a command.

numamig-ci's ``postcopy-resume`` scenario (numamig_ci.scenarios.postcopy)
on its local-libvirt backend: two real libvirtd hosts, a conductor and
two compute agents as processes over RabbitMQ, TCG guests. The link to
the destination is cut during a real post-copy and stays down until the
source's recovery gives up (postcopy-paused, both halves of the guest as
libvirt reports them); then the console script, a process of its own,
asks the conductor to resume it, and the guest ends on the destination
with the destination's pins (live and persistent XML, QEMU's vCPU
threads in /proc). About 60 s on a 2-core machine, half of it starting
the deployment. Skipped, with the reason printed, only where root,
unshare, libvirtd, QEMU or RabbitMQ are unavailable.
"""

import time

import fixtures

from numamig_ci import libvirt_hosts
from numamig_ci import session as ci_session
from numamig_ci.backends import local_libvirt
from numamig_ci.scenarios import registry
from tests import base
from tests.fixtures import rpc as rpc_fixture


class LocalLibvirtScenarioTestCase(base.TestCase):
    """A started numamig-ci local-libvirt backend of two hosts; ``run``
    runs a scenario on it and fails with its failures and progress."""

    def setUp(self):
        super().setUp()
        reason = (libvirt_hosts.missing_requirements()
                  or rpc_fixture.rabbit_unreachable_reason())
        if reason:
            print(f"SKIP real libvirt deployment: {reason}")
            self.skipTest(reason)
        state = self.useFixture(fixtures.TempDir()).path
        started = time.monotonic()
        self.backend = local_libvirt.LocalLibvirtBackend(2, state_dir=state)
        self.addCleanup(self.backend.stop)
        self.backend.start()
        self.started_s = time.monotonic() - started

    def run_scenario(self, name):
        """Run scenario ``name``; return its progress lines."""
        lines = []
        session = ci_session.Session(self.backend, say=lines.append)
        self.addCleanup(session.cleanup)
        started = time.monotonic()
        registry.SCENARIOS[name].func(session)
        lines.append(f"deployment started in {self.started_s:.1f} s, "
                     f"scenario ran {time.monotonic() - started:.1f} s")
        print('\n'.join(lines))
        self.assertEqual([], [str(f) for f in session.failures],
                         '\n'.join(lines))
        return lines


class PostCopyResumeCommandTest(LocalLibvirtScenarioTestCase):

    def test_cut_paused_then_resumed_from_the_command_line(self):
        lines = self.run_scenario('postcopy-resume')
        # What the scenario went through, as it said it.
        for step in ('cut the link to', 'postcopy-paused:',
                     'restored the link to', '--wait: exit 0',
                     'resumed from the command line:'):
            self.assertTrue(any(step in line for line in lines),
                            f"{step!r} not in {lines}")
