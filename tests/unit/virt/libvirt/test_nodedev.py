"""libvirt PCI node devices -> HostPCIDevices (virt/libvirt/nodedev.py).

The XML is shaped as ``virsh nodedev-dumpxml`` writes it on a host with an
Intel X710 (a PF with SR-IOV VFs) and a plain function whose platform
gives no NUMA node (sysfs -1).
"""

from numamig import exception
from numamig.numa import pci
from numamig.virt.libvirt import nodedev
from tests import base

PF = """<device>
  <name>pci_0000_81_00_0</name>
  <path>/sys/devices/pci0000:80/0000:80:03.0/0000:81:00.0</path>
  <parent>pci_0000_80_03_0</parent>
  <driver>
    <name>i40e</name>
  </driver>
  <capability type='pci'>
    <class>0x020000</class>
    <domain>0</domain>
    <bus>129</bus>
    <slot>0</slot>
    <function>0</function>
    <product id='0x1572'>Ethernet Controller X710 for 10GbE SFP+</product>
    <vendor id='0x8086'>Intel Corporation</vendor>
    <capability type='virt_functions' maxCount='64'>
      <address domain='0x0000' bus='0x81' slot='0x02' function='0x0'/>
      <address domain='0x0000' bus='0x81' slot='0x02' function='0x1'/>
    </capability>
    <iommuGroup number='52'>
      <address domain='0x0000' bus='0x81' slot='0x00' function='0x0'/>
    </iommuGroup>
    <numa node='1'/>
    <pci-express>
      <link validity='cap' port='0' speed='8' width='8'/>
      <link validity='sta' speed='8' width='8'/>
    </pci-express>
  </capability>
</device>
"""

VF = """<device>
  <name>pci_0000_81_02_1</name>
  <path>/sys/devices/pci0000:80/0000:80:03.0/0000:81:02.1</path>
  <parent>pci_0000_80_03_0</parent>
  <driver>
    <name>vfio-pci</name>
  </driver>
  <capability type='pci'>
    <class>0x020000</class>
    <domain>0</domain>
    <bus>129</bus>
    <slot>2</slot>
    <function>1</function>
    <product id='0x154c'>Ethernet Virtual Function 700 Series</product>
    <vendor id='0x8086'>Intel Corporation</vendor>
    <capability type='phys_function'>
      <address domain='0x0000' bus='0x81' slot='0x00' function='0x0'/>
    </capability>
    <iommuGroup number='117'>
      <address domain='0x0000' bus='0x81' slot='0x02' function='0x1'/>
    </iommuGroup>
    <numa node='1'/>
  </capability>
</device>
"""

PLAIN_NO_NODE = """<device>
  <name>pci_0000_05_00_0</name>
  <parent>pci_0000_00_1c_0</parent>
  <capability type='pci'>
    <class>0x030200</class>
    <domain>0</domain>
    <bus>5</bus>
    <slot>0</slot>
    <function>0</function>
    <product id='0x20B5'>GA100 [A100 PCIe 80GB]</product>
    <vendor id='0x10DE'>NVIDIA Corporation</vendor>
    <numa node='-1'/>
  </capability>
</device>
"""

NOT_PCI = """<device>
  <name>net_eth0_52_54_00_12_34_56</name>
  <parent>pci_0000_00_03_0</parent>
  <capability type='net'>
    <interface>eth0</interface>
    <address>52:54:00:12:34:56</address>
  </capability>
</device>
"""


class ParseTest(base.TestCase):

    def test_pf_vf_and_plain_function(self):
        pf = nodedev.parse_pci_device(PF)
        vf = nodedev.parse_pci_device(VF)
        plain = nodedev.parse_pci_device(PLAIN_NO_NODE)
        self.assertEqual(('0000:81:00.0', '8086', '1572', 'type-PF', None,
                          1),
                         (pf.address, pf.vendor_id, pf.product_id,
                          pf.dev_type, pf.parent_addr, pf.numa_node))
        self.assertEqual(('0000:81:02.1', '154c', 'type-VF', '0000:81:00.0',
                          1),
                         (vf.address, vf.product_id, vf.dev_type,
                          vf.parent_addr, vf.numa_node))
        self.assertEqual(('0000:05:00.0', '10de', '20b5', 'type-PCI', None),
                         (plain.address, plain.vendor_id, plain.product_id,
                          plain.dev_type, plain.numa_node))
        for device in (pf, vf, plain):
            device.validate()
        self.assertIsNone(nodedev.parse_pci_device(NOT_PCI))

    def test_malformed_is_named(self):
        self.assertRaisesMessage(
            exception.CapabilitiesError, 'node device pci_0000_81_02_1',
            nodedev.parse_pci_device, VF.replace("<vendor id='0x8086'>",
                                                 "<vendor>"), 'hostA')
        self.assertRaisesMessage(exception.CapabilitiesError, 'not XML',
                                 nodedev.parse_pci_device, '<device>')


class AssignableTest(base.TestCase):

    def test_only_admitted_functions_in_address_order(self):
        texts = [VF, PF, PLAIN_NO_NODE, NOT_PCI]
        specs = pci.parse_device_spec(['{"vendor_id": "8086"}'])
        found = nodedev.assignable_devices(texts, specs, {0, 1})
        self.assertEqual(['0000:81:00.0', '0000:81:02.1'],
                         [d.address for d in found])
        self.assertEqual([], nodedev.assignable_devices(texts, (), {0, 1}))
        every = pci.parse_device_spec(['{}'])
        self.assertEqual(3, len(nodedev.assignable_devices(texts, every,
                                                           {0, 1})))

    def test_a_node_the_host_lacks_is_reported_as_unknown(self):
        specs = pci.parse_device_spec(['{"product_id": "154c"}'])
        found = nodedev.assignable_devices([VF], specs, {0})
        self.assertEqual([None], [d.numa_node for d in found])
