"""What the device-move scenario reads: the guest's PCI bus from its
console, the host functions of a domain XML."""

import fixtures
from lxml import etree

from numamig_ci.backends import nested
from numamig_ci.scenarios import devices
from tests import base

LINE = ('PCI 0000:00:00.0=8086:1237 0000:00:01.0=8086:7000 '
        '0000:00:02.0=8086:10d3\n')
WITHOUT = 'PCI 0000:00:00.0=8086:1237 0000:00:01.0=8086:7000\n'


class BusLinesTest(base.TestCase):

    def test_each_complete_line_is_one_bus(self):
        buses = devices.bus_lines('VMEM 0=210752\n' + LINE + WITHOUT
                                  + 'PCI 0000:00:00.0=80')
        self.assertEqual(2, len(buses))
        self.assertEqual('8086:10d3', buses[0]['0000:00:02.0'])
        self.assertNotIn('8086:10d3', buses[1].values())

    def test_slot_of_the_device_or_none(self):
        buses = devices.bus_lines(LINE + WITHOUT)
        self.assertEqual('0000:00:02.0', devices.guest_slot(buses[0]))
        self.assertIsNone(devices.guest_slot(buses[1]))

    def test_wait_gives_the_last_bus_once_done(self):
        console = self.useFixture(fixtures.TempDir()).join('console')
        with open(console, 'w') as f:
            f.write(WITHOUT + LINE)
        bus, _ = devices.wait_bus(console, 1, lambda b: devices.DEVICE_IDS
                                  in b.values())
        self.assertEqual('0000:00:02.0', devices.guest_slot(bus))
        self.assertIsNone(devices.wait_bus(
            console, 0, lambda b: devices.DEVICE_IDS not in b.values()))


class FunctionsOfTest(base.TestCase):

    def test_host_addresses_of_hostdevs_only(self):
        xml = """<domain><devices>
          <hostdev mode='subsystem' type='pci' managed='yes'><source>
            <address domain='0x0000' bus='0x81' slot='0x00' function='0x0'/>
          </source><address type='pci' domain='0x0000' bus='0x00'
            slot='0x02' function='0x0'/></hostdev>
          <serial type='file'><source path='/x'/></serial>
        </devices></domain>"""
        self.assertEqual(['0000:81:00.0'], devices.functions_of(xml))
        self.assertEqual([], devices.functions_of(
            '<domain><devices/></domain>'))


class GuestKernelWithDeviceTest(base.TestCase):

    def test_hostdevs_given_as_managed_pci_functions(self):
        doc = etree.fromstring(nested.with_guest_kernel(
            "<domain type='qemu'><devices/></domain>", '/k', '/i', 'quiet',
            '/c', kvm=1, hostdevs=['0000:81:00.0']).encode())
        (hostdev,) = doc.findall('devices/hostdev')
        self.assertEqual(('subsystem', 'pci', 'yes'), tuple(
            hostdev.get(k) for k in ('mode', 'type', 'managed')))
        self.assertEqual(['0000:81:00.0'], devices.functions_of(
            etree.tostring(doc, encoding='unicode')))
