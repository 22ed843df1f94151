"""Tests of numamig.virt.libvirt.cpu: libvirt's CPU XML to numamig's."""

from unittest import mock

import libvirt

from numamig import cpumodel
from numamig.virt.libvirt import cpu
from tests import base

CAPS = """<capabilities><host><cpu>
  <arch>x86_64</arch><model>Skylake-Client-IBRS</model><vendor>Intel</vendor>
  <feature name='vmx'/><feature name='ss'/><feature name='vmx'/>
  <pages unit='KiB' size='4'/>
</cpu></host></capabilities>"""

DOMCAPS = """<domainCapabilities><cpu>
  <mode name='host-passthrough' supported='yes'/>
  <mode name='host-model' supported='yes'>
    <model fallback='forbid'>Skylake-Client-IBRS</model>
    <vendor>Intel</vendor>
    <feature policy='require' name='ss'/>
    <feature policy='require' name='vmx'/>
    <feature policy='disable' name='mpx'/>
  </mode>
  <mode name='custom' supported='yes'>
    <model usable='yes' vendor='unknown'>qemu64</model>
    <model usable='yes' vendor='Intel'>Broadwell</model>
    <model usable='no' vendor='Intel'>Icelake-Server</model>
    <model usable='no' vendor='Intel'>Cooperlake</model>
    <blockers model='Icelake-Server'>
      <feature name='pku'/><feature name='avx512vbmi'/>
    </blockers>
  </mode>
</cpu></domainCapabilities>"""


class HostCPUTest(base.TestCase):

    def test_host_and_domain_capabilities(self):
        host = cpu.host_cpu(CAPS, DOMCAPS)
        self.assertEqual(('x86_64', 'Intel', 'Skylake-Client-IBRS'),
                         (host.arch, host.vendor, host.model))
        self.assertEqual(['ss', 'vmx'], host.features)
        self.assertEqual('Skylake-Client-IBRS', host.host_model)
        self.assertEqual(['ss', 'vmx'], host.host_model_features)
        self.assertEqual(['mpx'], host.host_model_disabled)
        self.assertEqual(['Broadwell', 'qemu64'], host.custom_models)
        self.assertEqual({'Icelake-Server': ['avx512vbmi', 'pku'],
                          'Cooperlake': []}, host.model_blockers)

    def test_test_driver_has_host_capabilities_only(self):
        conn = libvirt.open('test:///default')
        self.addCleanup(conn.close)
        host = cpu.host_cpu(conn.getCapabilities())
        self.assertEqual('i686', host.arch)
        # Its <features><pae/> are not CPU model features.
        self.assertEqual([], host.features)
        self.assertIsNone(host.host_model)
        self.assertEqual([], host.custom_models)

    def test_same_report_twice_is_the_same_text(self):
        # Reports that say the same must be equal (content digests).
        one, two = cpu.host_cpu(CAPS, DOMCAPS), cpu.host_cpu(CAPS, DOMCAPS)
        self.assertEqual(one.obj_to_primitive(), two.obj_to_primitive())


class GuestCPUTest(base.TestCase):

    def _guest(self, cpu_xml, host=None):
        return cpu.guest_cpu(f"<domain>{cpu_xml}</domain>", host)

    def test_no_cpu_element_is_the_default_model(self):
        self.assertIsNone(self._guest('').mode)
        self.assertIsNone(self._guest("<cpu><numa/></cpu>").mode)

    def test_custom_with_features(self):
        guest = self._guest(
            "<cpu mode='custom' match='exact'><model>Broadwell</model>"
            "<feature policy='require' name='ss'/>"
            "<feature policy='force' name='pcid'/>"
            "<feature policy='disable' name='mpx'/>"
            "<feature policy='optional' name='x2apic'/></cpu>")
        self.assertEqual(cpumodel.GuestCPU(
            'custom', 'Broadwell', frozenset({'ss', 'pcid'}),
            frozenset({'mpx'})), guest)

    def test_host_model_expanded(self):
        guest = self._guest(
            "<cpu mode='host-model'><model fallback='forbid'>Skylake-Client"
            "</model><feature policy='require' name='vmx'/></cpu>")
        self.assertEqual(('host-model', 'Skylake-Client'),
                         (guest.mode, guest.model))
        self.assertEqual({'vmx'}, guest.features)

    def test_passthrough_is_this_hosts_cpu(self):
        host = cpu.host_cpu(CAPS, DOMCAPS)
        guest = self._guest("<cpu mode='host-passthrough'/>", host)
        self.assertEqual(('host-passthrough', 'Skylake-Client-IBRS'),
                         (guest.mode, guest.model))
        self.assertEqual({'ss', 'vmx'}, guest.features)

    def test_comparison_xml(self):
        text = cpu.guest_cpu_xml(cpumodel.GuestCPU(
            'custom', 'Broadwell', frozenset({'ss'}), frozenset({'mpx'})))
        # No <arch>: libvirt refuses one beside match.
        self.assertEqual(
            "<cpu mode=\"custom\" match=\"exact\">"
            "<model fallback=\"forbid\">Broadwell</model>"
            "<feature policy=\"require\" name=\"ss\"/>"
            "<feature policy=\"disable\" name=\"mpx\"/></cpu>", text)


def _error(code, message):
    exc = libvirt.libvirtError(message)
    exc.err = (code, 0, message, 0, None, None, None, 0, 0)
    return exc


class CompareTest(base.TestCase):

    GUEST = cpumodel.GuestCPU('custom', 'Icelake-Server',
                              frozenset({'pku'}))

    def test_test_driver_cannot_compare(self):
        conn = libvirt.open('test:///default')
        self.addCleanup(conn.close)
        self.assertIsNone(cpu.compare(conn, self.GUEST))

    def test_incompatible_names_the_features(self):
        conn = mock.Mock()
        conn.compareHypervisorCPU.side_effect = _error(
            libvirt.VIR_ERR_CPU_INCOMPATIBLE,
            "the CPU is incompatible with host CPU: Host CPU does not "
            "provide required features: pku, avx512vbmi")
        answer = cpu.compare(conn, self.GUEST, 'x86_64', 'qemu')
        self.assertTrue(answer.refused)
        self.assertEqual(('avx512vbmi', 'pku'), answer.missing)
        self.assertIn('does not provide required features: pku',
                      answer.reason)
        conn.compareHypervisorCPU.assert_called_once_with(
            None, 'x86_64', None, 'qemu', cpu.guest_cpu_xml(self.GUEST),
            libvirt.VIR_CONNECT_COMPARE_CPU_FAIL_INCOMPATIBLE)

    def test_compatible(self):
        conn = mock.Mock()
        conn.compareHypervisorCPU.return_value = \
            libvirt.VIR_CPU_COMPARE_SUPERSET
        self.assertTrue(cpu.compare(conn, self.GUEST).runs)

    def test_guest_without_model_is_not_compared(self):
        conn = mock.Mock()
        self.assertTrue(cpu.compare(conn, cpumodel.GuestCPU()).runs)
        conn.compareHypervisorCPU.assert_not_called()


class DriverCompareTest(base.TestCase):
    """The destination's precheck: the reported CPU's certain refusal,
    completed by libvirt's comparison where it names no feature."""

    GUEST = cpumodel.GuestCPU('custom', 'EPYC', frozenset({'sha-ni'}))

    def _driver(self, host_cpu, libvirt_says):
        from numamig.virt.libvirt import driver as lv_driver
        drv = object.__new__(lv_driver.LibvirtDriver)
        drv._host_cpu = host_cpu
        drv._settings = mock.Mock(is_test_driver=False, virt_type='kvm')
        conn = mock.Mock()
        conn.compareHypervisorCPU.side_effect = libvirt_says
        drv._connection = lambda: conn
        drv.host_cpu = lambda: host_cpu
        return drv, conn

    def _host(self, blockers):
        from numamig import objects
        return objects.HostCPU(arch='x86_64', model='Opteron_G2',
                               host_model='qemu64',
                               custom_models=['qemu64'],
                               model_blockers=blockers)

    def test_unusable_model_without_blockers_gets_libvirts_features(self):
        drv, conn = self._driver(self._host({'EPYC': []}), _error(
            libvirt.VIR_ERR_CPU_INCOMPATIBLE,
            "the CPU is incompatible with host CPU: Host CPU does not "
            "provide required features: sha-ni, rdseed"))
        answer = drv.compare_guest_cpu(self.GUEST)
        self.assertTrue(answer.refused)
        self.assertEqual(('rdseed', 'sha-ni'), answer.missing)
        self.assertIn('CPU model EPYC is not usable here: libvirt: ',
                      answer.reason)

    def test_named_blockers_need_no_comparison(self):
        drv, conn = self._driver(self._host({'EPYC': ['sha-ni']}), None)
        answer = drv.compare_guest_cpu(self.GUEST)
        self.assertEqual(('sha-ni',), answer.missing)
        conn.compareHypervisorCPU.assert_not_called()

    def test_refusal_kept_when_libvirt_names_nothing(self):
        drv, _conn = self._driver(
            self._host({'EPYC': []}),
            lambda *a: libvirt.VIR_CPU_COMPARE_SUPERSET)
        answer = drv.compare_guest_cpu(self.GUEST)
        self.assertTrue(answer.refused)
        self.assertEqual('CPU model EPYC is not usable here', answer.reason)
