"""CPU models on a real libvirtd: what an agent reports and how its
precheck judges a guest's CPU (libvirt's compareHypervisorCPU).

The same driver calls an agent makes: init_host reads the host and
domain capabilities, compare_guest_cpu is the destination's precheck.
The machine's own CPU decides which models are usable, so the tests pick
their models from what this libvirtd reports.
"""

from numamig import cpumodel
from numamig import embedded
from numamig.virt.libvirt import cpu
from tests import base
from tests.fixtures import libvirt_daemons
from tests.functional.libvirt import real_hosts


class RealCPUTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        daemon = self.useFixture(libvirt_daemons.LibvirtDaemon(
            'cpu', real_hosts.start_root(self)))
        self.driver = embedded.HostDefinition(
            'cpu', uri=daemon.uri, virt_type='qemu').driver(
                self.useFixture(base.fixtures.TempDir()).path)
        self.driver.init_host('cpu')
        self.addCleanup(self.driver.cleanup_host)
        self.cpu = self.driver.host_cpu()

    def test_report_carries_host_and_domain_capabilities(self):
        self.assertEqual('x86_64', self.cpu.arch)
        self.assertTrue(self.cpu.model)
        self.assertTrue(self.cpu.host_model)
        self.assertIn('qemu64', self.cpu.custom_models)
        self.assertTrue(self.cpu.model_blockers,
                        "TCG cannot run every model: some are not usable")

    def test_usable_model_runs(self):
        answer = self.driver.compare_guest_cpu(
            cpumodel.GuestCPU('custom', 'qemu64'))
        self.assertTrue(answer.runs, answer.reason)

    def test_model_libvirt_cannot_run_is_refused_naming_features(self):
        # A model the domain capabilities call not usable, that libvirt's
        # comparison refuses with the features it lacks (the reported
        # CPU alone refuses it too, without naming features where this
        # libvirt lists no blockers: ask libvirt directly for the names).
        model = sorted(self.cpu.model_blockers)[0]
        guest = cpumodel.GuestCPU('custom', model)
        self.assertTrue(self.driver.compare_guest_cpu(guest).refused)
        answer = cpu.compare(self.driver._connection(), guest,
                             self.cpu.arch, 'qemu')
        self.assertTrue(answer.refused)
        self.assertIn('does not provide required features', answer.reason)
        self.assertTrue(answer.missing, answer.reason)

    def test_feature_beyond_the_host_is_refused_by_libvirt(self):
        # A feature of the same model that the TCG host lacks: one that
        # a not-usable model needs (libvirt names it) on top of qemu64.
        model = sorted(self.cpu.model_blockers)[0]
        missing = cpu.compare(self.driver._connection(),
                              cpumodel.GuestCPU('custom', model),
                              self.cpu.arch, 'qemu').missing
        guest = cpumodel.GuestCPU('custom', 'qemu64', frozenset(missing[:1]))
        answer = self.driver.compare_guest_cpu(guest)
        self.assertTrue(answer.refused)
        self.assertEqual(missing[:1], answer.missing)

    def test_baseline_features_run_here_on_a_common_model(self):
        answer = cpumodel.baseline({'cpu': self.cpu})
        self.assertTrue(answer.features)
        # Under TCG the host-model (a model of the machine's CPU) may not
        # be usable as a custom model: then no model is chosen, and the
        # features every host reports run on any common model.
        model = answer.model or 'qemu64'
        self.assertIn(model, answer.common_models)
        guest = cpumodel.GuestCPU('custom', model,
                                  frozenset(answer.features))
        verdict = self.driver.compare_guest_cpu(guest)
        self.assertTrue(verdict.runs, verdict.reason)
