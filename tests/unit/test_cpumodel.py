"""Tests of numamig.cpumodel: which hosts can run a guest's CPU, baselines."""

from numamig import cpumodel
from numamig import objects
from tests import base


def _host(**kw):
    fields = {'arch': 'x86_64', 'vendor': 'Intel', 'model': 'Skylake-Client',
              'features': ['vmx'], 'host_model': 'Skylake-Client',
              'host_model_features': ['ss', 'vmx'],
              'host_model_disabled': ['mpx'],
              'custom_models': ['Broadwell', 'Skylake-Client', 'qemu64'],
              'model_blockers': {'Icelake-Server': ['avx512vbmi', 'pku']}}
    fields.update(kw)
    return objects.HostCPU(**fields)


def _guest(mode, model=None, features=(), disabled=()):
    return cpumodel.GuestCPU(mode, model, frozenset(features),
                             frozenset(disabled))


class CompatibilityTest(base.TestCase):

    def test_host_without_cpu_is_unknown_never_refused(self):
        answer = cpumodel.compatibility(
            _guest('custom', 'Icelake-Server'), None)
        self.assertIsNone(answer.runs)
        self.assertFalse(answer.refused)

    def test_guest_without_cpu_mode_runs_anywhere(self):
        self.assertTrue(cpumodel.compatibility(cpumodel.GuestCPU(),
                                               _host()).runs)
        self.assertTrue(cpumodel.compatibility(None, _host()).runs)

    def test_passthrough_needs_the_same_model(self):
        answer = cpumodel.compatibility(
            _guest('host-passthrough', 'Icelake-Server', ['vmx']), _host())
        self.assertTrue(answer.refused)
        self.assertIn('needs host CPU model Icelake-Server', answer.reason)
        self.assertIn('Skylake-Client', answer.reason)

    def test_passthrough_names_the_missing_features(self):
        answer = cpumodel.compatibility(
            _guest('host-passthrough', 'Skylake-Client',
                   ['vmx', 'avx512f', 'pku']), _host())
        self.assertTrue(answer.refused)
        self.assertEqual(('avx512f', 'pku'), answer.missing)
        self.assertIn('avx512f, pku', answer.reason)

    def test_passthrough_same_cpu_runs(self):
        self.assertTrue(cpumodel.compatibility(
            _guest('host-passthrough', 'Skylake-Client', ['vmx']),
            _host()).runs)

    def test_custom_model_not_usable_names_its_blockers(self):
        answer = cpumodel.compatibility(
            _guest('custom', 'Icelake-Server'), _host())
        self.assertTrue(answer.refused)
        self.assertEqual(('avx512vbmi', 'pku'), answer.missing)
        self.assertEqual("CPU model Icelake-Server is not usable here: "
                         "missing features: avx512vbmi, pku", answer.reason)

    def test_custom_model_unknown_to_the_host(self):
        answer = cpumodel.compatibility(_guest('custom', 'Zen9'), _host())
        self.assertTrue(answer.refused)
        self.assertIn('unknown to this host', answer.reason)

    def test_custom_usable_model_runs(self):
        self.assertTrue(cpumodel.compatibility(
            _guest('custom', 'Broadwell', ['ss']), _host()).runs)

    def test_feature_the_host_disables_is_refused(self):
        answer = cpumodel.compatibility(
            _guest('custom', 'Broadwell', ['mpx']), _host())
        self.assertEqual(('mpx',), answer.missing)

    def test_same_model_unlisted_feature_is_missing(self):
        answer = cpumodel.compatibility(
            _guest('host-model', 'Skylake-Client', ['ss', 'avx512f']),
            _host())
        self.assertTrue(answer.refused)
        self.assertEqual(('avx512f',), answer.missing)

    def test_other_model_unlisted_feature_is_not_refused_on_doubt(self):
        # Broadwell's own features are not listed: libvirt decides.
        self.assertTrue(cpumodel.compatibility(
            _guest('custom', 'Broadwell', ['avx2']), _host()).runs)

    def test_host_without_domain_capabilities_judges_by_features(self):
        host = _host(host_model=None, host_model_features=[],
                     host_model_disabled=[], custom_models=[],
                     model_blockers={})
        self.assertTrue(cpumodel.compatibility(
            _guest('custom', 'Icelake-Server', ['pku']), host).runs)


class BaselineTest(base.TestCase):

    def test_common_host_model_and_common_features(self):
        rich = _host(host_model_features=['avx512f', 'ss', 'vmx'],
                     custom_models=['Broadwell', 'Icelake-Server',
                                    'Skylake-Client'])
        poor = _host(model='Broadwell', host_model='Broadwell',
                     features=[], host_model_features=['ss'],
                     custom_models=['Broadwell', 'qemu64'])
        answer = cpumodel.baseline({'rich': rich, 'poor': poor})
        self.assertEqual('Broadwell', answer.model)
        self.assertEqual(('ss',), answer.features)
        self.assertEqual(('Broadwell',), answer.common_models)
        # What it names runs on both.
        guest = _guest('custom', answer.model, answer.features)
        for host in (rich, poor):
            self.assertTrue(cpumodel.compatibility(guest, host).runs)

    def test_disabled_anywhere_is_left_out(self):
        one = _host(host_model_features=['mpx', 'ss'],
                    host_model_disabled=[])
        answer = cpumodel.baseline({'a': one, 'b': _host()})
        self.assertNotIn('mpx', answer.features)

    def test_no_common_model(self):
        answer = cpumodel.baseline({
            'a': _host(custom_models=['A']), 'b': _host(custom_models=['B'])})
        self.assertIsNone(answer.model)
        self.assertEqual('no custom model is usable on all of them',
                         answer.note)

    def test_hosts_without_domain_capabilities_are_named(self):
        blind = _host(host_model=None, host_model_features=[],
                      custom_models=[])
        answer = cpumodel.baseline({'a': _host(), 'test-1': blind})
        self.assertIsNone(answer.model)
        self.assertEqual("no domain capabilities (host-model, usable "
                         "models) reported by test-1; libvirt's test driver "
                         "has none", answer.note)

    def test_host_without_cpu_is_an_error(self):
        with self.assertRaisesRegex(ValueError, 'no CPU reported by old'):
            cpumodel.baseline({'a': _host(), 'old': None})
        with self.assertRaises(ValueError):
            cpumodel.baseline({})
