"""The real tier's shaped migration link and drain guests.

A destination host runs in a network namespace behind a veth pair whose
source end is shaped by tc (numamig_ci.shaped_link); a guest whose
memory the drain kernel wrote migrates through numamig's driver. Proven
here, on the kernel's and libvirt's own figures: the link gives the rate
it was shaped to, the guest's memory was really written (the migration
sends all of it, not zero-page flags), and the stream crossed the link
(the qdisc counted its bytes) at no more than its rate. Skips, saying
why, where the machine cannot run libvirtd hosts or network namespaces.
"""

import os
import re
import time

from testtools import content

from numamig import objects
from numamig.virt.libvirt import driver
from numamig_ci import libvirt_hosts
from numamig_ci import shaped_link
from tests import base
from tests import libvirt_settings
from tests.fixtures import libvirt_daemons
from tests.fixtures import libvirt_guests as guests
from tests.functional.libvirt import real_hosts

MIB = 1024 * 1024
MEMORY_MB = 64
RATE_MIB = 48
GUEST = f'5a1e0000-aaaa-4bbb-8c0d-{os.getpid():012x}'
WRITE_WAIT_S = 60


def placement(pcpu):
    return guests.topology(
        guests.cell(0, host_cell=0, vcpus=[0], pins={0: pcpu},
                    memory_mb=MEMORY_MB, cpu_policy='dedicated'),
        instance_uuid=None)


class ShapedLinkTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.root = real_hosts.start_root(self)
        reason = shaped_link.missing_requirements()
        if reason:
            # tools/dev.sh installs what this needs: a missing part is a
            # broken install, not an opt-in.
            self.fail(reason)
        self.link = shaped_link.ShapedLink(f'{os.getpid() % 10**8}',
                                           RATE_MIB)
        self.addCleanup(self.link.down)
        self.link.up()

    def driver(self, daemon, name, inbound_addr):
        settings = libvirt_settings.host(
            host=name, uri=daemon.uri, virt_type='qemu',
            cpu_dedicated_set=frozenset({0, 1}), reserved_host_memory_mb=0,
            migration=libvirt_settings.migration(
                inbound_addr=inbound_addr, libvirtd_port=daemon.port,
                progress_interval_s=0.2))
        drv = driver.LibvirtDriver(settings)
        self.addCleanup(drv.cleanup_host)
        drv.init_host(name)
        return drv

    def sent_bytes(self):
        """Bytes the link's token bucket has sent so far."""
        found = re.search(r'Sent (\d+) bytes', self.link.qdisc_stats())
        return int(found.group(1))

    def test_a_written_guest_crosses_the_link_at_its_rate(self):
        goodput = self.link.goodput(seconds=2)
        # TCP payload under the rate of the packets (headers), not over.
        self.assertTrue(0.8 * RATE_MIB <= goodput <= RATE_MIB, goodput)
        src = self.useFixture(libvirt_daemons.LibvirtDaemon('src',
                                                            self.root))
        dst = self.useFixture(libvirt_daemons.LibvirtDaemon(
            'dst', self.root, netns=self.link.netns,
            listen_addr=self.link.inner_addr, port=16509,
            migration_port_min=49152))
        source = self.driver(src, 'src', '127.0.0.1')
        dest = self.driver(dst, 'dst', self.link.inner_addr)
        kernel = os.path.join(self.root, 'drain.bin')
        with open(kernel, 'wb') as f:
            f.write(libvirt_hosts.drain_kernel(MEMORY_MB - 2)[0])
        source.spawn(
            objects.Instance(uuid=GUEST, name='drain-guest', vcpus=1,
                             memory_mb=MEMORY_MB), placement(0),
            base_xml="<domain type='qemu'><os><type arch='x86_64'>hvm"
                     f"</type><kernel>{kernel}</kernel></os><devices>"
                     "<memballoon model='none'/></devices></domain>")
        self.wait_written(source, MEMORY_MB - 2)
        info = dest.build_migrate_info(placement(1),
                                       dest.get_host_topology())
        connect_uri, migration_uri = dest.migration_target()
        data = objects.LiveMigrateData(
            instance_uuid=GUEST, source_host='src', dest_host='dst',
            migration_uuid='5a1e0000-aaaa-4bbb-8ccc-00000000d001',
            dest_connect_uri=connect_uri, migration_uri=migration_uri)
        before = self.sent_bytes()
        started = time.monotonic()
        result = source.live_migrate(
            GUEST, source.get_destination_xml(GUEST, info), data)
        wall = time.monotonic() - started
        crossed = self.sent_bytes() - before
        self.assertIn(GUEST, dest.list_guests())
        # Written from 2 MiB to the top: a zero guest sends < 2 MiB.
        self.assertGreater(result.memory_processed, (MEMORY_MB - 6) * MIB)
        self.assertGreaterEqual(crossed, result.memory_processed)
        self.assertGreaterEqual(wall, 0.9 * crossed / MIB / RATE_MIB)
        self.addDetailUniqueName('figures', content.text_content(
            f"goodput {goodput:.1f} MiB/s; {result.memory_processed / MIB:.1f}"
            f" MiB in {wall:.2f} s, {crossed / MIB:.1f} MiB crossed"))

    def wait_written(self, drv, top_mib):
        dom = drv._conn.lookupByUUIDString(GUEST)
        last = (top_mib << 20) - 4096
        deadline = time.monotonic() + WRITE_WAIT_S
        while int.from_bytes(dom.memoryPeek(last, 4, 2), 'little') != last:
            self.assertLess(time.monotonic(), deadline,
                            "the drain kernel did not write its memory")
            time.sleep(0.2)


