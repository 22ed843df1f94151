"""The real tier: numamig-ci's ``policy-finish`` scenario
(numamig_ci.scenarios.convergence) on a deployment of processes.

A migration that cannot converge by itself is requested under the
``finish`` policy through the conductor over RabbitMQ; what the source
agent recorded is held against what libvirt and QEMU saw (each downtime
step as QEMU's maximum downtime, QEMU's vCPU throttle after
auto-converge, the source suspended for post-copy), and the guest must
end on the destination with its new pins. The shipped policies at the
driver level, with their completion timeouts and observe-only:
test_real_policies. ``policy-never-pause`` runs the same code under
another name (numamig-ci --local-libvirt 2 --scenario
policy-never-pause). 50-90 s on a 2-core machine: numamig samples a
job once a second (its shortest progress interval), so passes are judged
stalled only now and then and the policy needs 25-40 passes.
"""

from tests.functional.libvirt import deployed


class PolicyFinishScenarioTest(deployed.LocalLibvirtScenarioTestCase):

    def test_finish_escalates_a_stalled_migration_to_post_copy(self):
        lines = self.run_scenario('policy-finish')
        self.assertTrue(any('numamig recorded:' in line for line in lines),
                        lines)
