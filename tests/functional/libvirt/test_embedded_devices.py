"""The embedded tier with a passed-through PCI device: the real libvirt
library's test driver.

The test driver has no hot-unplug or hot-plug (measured here, so that a
libvirt that gains them makes this fail and the emulation go); its hosts
read a guest's devices from its XML and label the unplug and plug
emulated (the plug redefines and restarts the process-less test guest
holding the function). What is real: the migration XML the source builds
carries no device, and the guest the destination defines from it holds
none until the destination plugs its own.
"""

import libvirt
from lxml import etree

from numamig.virt.libvirt import hostdev_xml
from tests import base
from tests.fixtures import libvirt_embedded
from tests.fixtures import libvirt_guests as guests
from tests.functional.libvirt import test_embedded

_HOSTDEV = """<hostdev mode='subsystem' type='pci' managed='yes'><source>
<address domain='0x0000' bus='0x81' slot='0x00' function='0x0'/></source>
</hostdev>"""
_BASE = f"""<domain type='test'><name>guest-1</name><os><type>hvm</type></os>
<devices>{_HOSTDEV}</devices></domain>"""


class EmbeddedDevicesTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        shared = test_embedded.SHARED
        self.src = self.useFixture(libvirt_embedded.EmbeddedHost(
            'hostA', 'numa-2cell-a.xml', cpu_shared_set=shared)).driver
        self.dst = self.useFixture(libvirt_embedded.EmbeddedHost(
            'hostB', 'numa-2cell-b.xml', cpu_shared_set=shared)).driver
        self.instance = guests.instance(vcpus=3, memory_mb=1024)
        self.src.spawn(self.instance, test_embedded._source_topology(),
                       base_xml=_BASE)

    def test_the_test_driver_cannot_hot_plug(self):
        dom = self.src._lookup(guests.UUID)
        for call in (dom.detachDeviceFlags, dom.attachDeviceFlags):
            exc = self.assertRaises(libvirt.libvirtError, call, _HOSTDEV,
                                    libvirt.VIR_DOMAIN_AFFECT_LIVE)
            self.assertEqual(libvirt.VIR_ERR_NO_SUPPORT,
                             exc.get_error_code())

    def test_migration_carries_no_device(self):
        self.assertEqual(['0000:81:00.0'],
                         self.src.assigned_devices(guests.UUID))
        detached = self.src.detach_devices(guests.UUID, 5)
        self.assertEqual(['0000:81:00.0'], [d['address'] for d in detached])
        info = self.dst.build_migrate_info(
            test_embedded._claimed_topology(), self.dst.get_host_topology())
        dest_xml = self.src.get_destination_xml(guests.UUID, info)
        self.assertEqual([], hostdev_xml.assigned_devices(
            etree.fromstring(dest_xml)))
        self.dst.accept_emulated_migration(guests.UUID, dest_xml)
        self.assertEqual([], self.dst.assigned_devices(guests.UUID))
        # Emulated: the destination's function written into the test
        # guest, restarted, so its live XML holds it; asked again (a
        # redelivered arrival), nothing new is plugged.
        self.assertEqual(['0000:82:00.0'], self.dst.attach_devices(
            guests.UUID, [('nic', '0000:82:00.0', 0)]))
        self.assertEqual(['0000:82:00.0'],
                         self.dst.assigned_devices(guests.UUID))
        self.assertEqual([], self.dst.attach_devices(
            guests.UUID, [('nic', '0000:82:00.0', 0)]))
        self.assertEqual([], self.src.reattach_devices(guests.UUID,
                                                        detached))
