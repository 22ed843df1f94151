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
threads in /proc). 35-60 s on a 2-core machine (its load decides),
4-16 s of it starting the deployment. Skipped, with the reason printed,
only where root, unshare, libvirtd, QEMU or RabbitMQ are unavailable.
"""

from tests.functional.libvirt import deployed


class PostCopyResumeCommandTest(deployed.LocalLibvirtScenarioTestCase):

    def test_cut_paused_then_resumed_from_the_command_line(self):
        lines = self.run_scenario('postcopy-resume')
        # What the scenario went through, as it said it.
        for step in ('cut the link to', 'postcopy-paused:',
                     'restored the link to', '--wait: exit 0',
                     'resumed from the command line:'):
            self.assertTrue(any(step in line for line in lines),
                            f"{step!r} not in {lines}")
