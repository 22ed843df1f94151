"""virtio-mem on the real tier: a real guest kernel, a real libvirtd.

Always on: Debian's kernel package is fetched once (~75 MB, cached in
tests.fixtures.vmem_guest.CACHE, ~15 s) and booted under TCG; the three
tests take about 70 s on two busy cores. A kernel that cannot be had
fails them with the reason (the README's test command runs where Debian's
packages can be fetched). This machine has one host NUMA node, so the
guest has one node: what is shown for real is the resize through
libvirt (the LIVE device XML), ``current`` following ``requested`` on
libvirt's size-change events, the guest's MemTotal moving by exactly the
change, the device's host memory bound to its node (``numa_maps``), and
the deadline for a guest without the driver. Several nodes are the
other tiers' (unit, embedded).
"""

import os
import re
import time

from numamig.virt.libvirt import driver
from tests import base
from tests import libvirt_settings
from tests.fixtures import libvirt_daemons
from tests.fixtures import libvirt_guests as guests
from tests.fixtures import vmem_guest
from tests.functional.libvirt import real_hosts

GUEST = '5a1e0000-aaaa-4bbb-8ccc-00000000e018'
NO_DRIVER = '5a1e0000-aaaa-4bbb-8ccc-00000000e019'
BOOT_S = 180


def _topology():
    return guests.topology(
        guests.cell(0, host_cell=0, vcpus=[0], pins={0: 0}, memory_mb=256,
                    cpu_policy='dedicated', virtio_mem_size_mb=512,
                    virtio_mem_block_kb=2048, virtio_mem_requested_mb=256),
        instance_uuid=None)


def _guest_kernel(test):
    """(kernel, initrd) of the guest, or the test fails saying why."""
    try:
        return vmem_guest.build()
    except vmem_guest.Unavailable as exc:
        test.fail(f"no guest kernel with the virtio_mem driver: {exc}")


class RealVirtioMemTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.root = real_hosts.start_root(self)
        self.kernel, self.initrd = _guest_kernel(self)
        self.daemon = self.useFixture(libvirt_daemons.LibvirtDaemon(
            'vmem', self.root))
        settings = libvirt_settings.host(
            host='vmem', uri=self.daemon.uri, virt_type='qemu',
            cpu_dedicated_set=frozenset({0, 1}), reserved_host_memory_mb=0,
            migration=libvirt_settings.migration(
                inbound_addr='127.0.0.1', libvirtd_port=self.daemon.port))
        self.driver = driver.LibvirtDriver(settings)
        self.addCleanup(self.driver.cleanup_host)
        self.driver.init_host('vmem')

    def spawn(self, uuid, name, extra=''):
        serial = os.path.join(self.root, f'{name}.console')
        self.driver.spawn(
            guests.instance(1, 256, name, uuid), _topology(),
            base_xml=vmem_guest.base_xml(self.kernel, self.initrd, serial,
                                         extra))
        return serial

    def guest_node0_kb(self, serial):
        """The guest's node 0 MemTotal of its last console line."""
        with open(serial, errors='replace') as f:
            found = re.findall(r'VMEM 0=(\d+)', f.read())
        return int(found[-1]) if found else None

    def wait_console(self, serial, expected_kb, limit_s=30):
        # The guest prints every second; a test-only wait on its console.
        end = time.monotonic() + limit_s
        while time.monotonic() < end:
            if self.guest_node0_kb(serial) == expected_kb:
                return
            time.sleep(0.5)
        self.fail(f"guest node 0 MemTotal {self.guest_node0_kb(serial)} "
                  f"kB, expected {expected_kb}")

    def test_resize_follows_in_the_guest_and_on_the_host(self):
        serial = self.spawn(GUEST, 'vmem-guest')
        current, reached = self.driver.resize_virtio_mem(GUEST, {0: 256},
                                                         BOOT_S)
        self.assertEqual(({0: 256}, True), (current, reached))
        time.sleep(2)
        plugged = self.guest_node0_kb(serial)
        self.assertIsNotNone(plugged, "the guest printed no VMEM line")
        # The device's host memory is bound to its node (nodemask 0).
        pid = self.daemon.qemu_pid('vmem-guest')
        with open(f'/proc/{pid}/numa_maps') as f:
            self.assertIn('bind:0', f.read())
        # Shrink: current follows, the guest loses exactly 192 MiB.
        started = time.monotonic()
        current, reached = self.driver.resize_virtio_mem(GUEST, {0: 64}, 60)
        elapsed = time.monotonic() - started
        self.assertEqual(({0: 64}, True), (current, reached))
        print(f"shrink 256 -> 64 MiB: current followed in {elapsed:.1f} s")
        self.wait_console(serial, plugged - 192 * 1024)
        # Give back.
        current, reached = self.driver.resize_virtio_mem(GUEST, {0: 256},
                                                         60)
        self.assertEqual(({0: 256}, True), (current, reached))
        self.wait_console(serial, plugged)

    def test_guest_without_the_driver_meets_the_deadline(self):
        self.spawn(NO_DRIVER, 'vmem-nodriver', extra='novmem')
        started = time.monotonic()
        current, reached = self.driver.resize_virtio_mem(NO_DRIVER, {0: 128},
                                                         5)
        self.assertEqual(({0: 0}, False), (current, reached))
        self.assertLess(time.monotonic() - started, 30)


class RealVirtioMemMigrationTestCase(real_hosts.RealHostsTestCase):
    """A guest with a virtio-mem device, resized, live-migrates between
    two real libvirtd hosts with the rewritten XML: on the destination
    its device keeps requested and current, backed by the claimed node,
    and can still be resized there."""

    def setUp(self):
        self.vmem_kernel, self.vmem_initrd = _guest_kernel(self)
        super().setUp()

    def test_devices_keep_their_sizes_across_migration(self):
        serial = os.path.join(self.root, 'mig.console')
        self.drivers['src'].spawn(
            guests.instance(1, 256, 'guest-1', real_hosts.GUEST),
            _topology(), base_xml=vmem_guest.base_xml(
                self.vmem_kernel, self.vmem_initrd, serial))
        src, dst = self.drivers['src'], self.drivers['dst']
        self.assertEqual(({0: 256}, True), src.resize_virtio_mem(
            real_hosts.GUEST, {0: 256}, BOOT_S))
        self.assertEqual(({0: 128}, True), src.resize_virtio_mem(
            real_hosts.GUEST, {0: 128}, 60))
        claimed = _topology()
        claimed.cells[0].cpu_pinning = {0: 1}
        claimed.cells[0].virtio_mem_requested_mb = 128
        info = dst.build_migrate_info(claimed, dst.get_host_topology())
        dest_xml = src.get_destination_xml(real_hosts.GUEST, info)
        src.live_migrate(real_hosts.GUEST, dest_xml, self.migrate_data(),
                         lambda sample: None)
        self.assertNotIn(real_hosts.GUEST, src.list_guests())
        for persistent in (False, True):
            xml = dst.get_domain_xml(real_hosts.GUEST,
                                     persistent=persistent)
            self.assertIn('<nodemask>0</nodemask>', xml)
            self.assertIn("<requested unit='KiB'>131072</requested>", xml)
        self.assertIn("<current unit='KiB'>131072</current>",
                      dst.get_domain_xml(real_hosts.GUEST))
        self.assertEqual(({0: 64}, True), dst.resize_virtio_mem(
            real_hosts.GUEST, {0: 64}, 60))
