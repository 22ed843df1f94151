"""Guest NUMA distances through real libvirt (issue 39 item 3).

numamig writes each guest cell's ``<distances>`` (the host distances
between the nodes the cells are placed on). Here the real library takes
that XML: the test driver stores it unchanged, and a real libvirtd +
QEMU starts a two-cell guest with it (QEMU's ``-numa dist`` read from
/proc) and live-migrates it. libvirt holds distances to be guest ABI: a
DEST_XML whose distances differ from the running guest's is refused
(the negative control), so the migration's DEST_XML keeps the running
ones while PERSIST_XML carries the destination's, which the guest's
next start on the destination uses (QEMU's command line then carries
them). This host has one NUMA node: both guest cells sit on node 0, and
the distances are the ones a placement on another host would write.
"""

import libvirt

from numamig import objects
from numamig.virt.libvirt import guest_parse
from numamig.virt.libvirt import migration_xml
from tests import base
from tests.fixtures import libvirt_daemons
from tests.functional.libvirt import real_hosts

UUID = '5a1e0000-d157-4000-8000-000000000039'
NAME = 'ci-distances'
SOURCE = {0: {0: 10, 1: 21}, 1: {0: 21, 1: 10}}
DESTINATION = {0: {0: 10, 1: 12}, 1: {0: 12, 1: 10}}
FLAGS = (libvirt.VIR_MIGRATE_LIVE | libvirt.VIR_MIGRATE_PEER2PEER
         | libvirt.VIR_MIGRATE_PERSIST_DEST
         | libvirt.VIR_MIGRATE_UNDEFINE_SOURCE)


def guest_xml(domain_type, table):
    """A diskless 2-cell, 2-vCPU guest of 128 MiB with ``table``."""
    arch = '' if domain_type == 'test' else " arch='x86_64'"
    balloon = '' if domain_type == 'test' else "<memballoon model='none'/>"
    base_xml = (
        f"<domain type='{domain_type}'><name>{NAME}</name><uuid>{UUID}"
        f"</uuid><memory unit='KiB'>131072</memory>"
        f"<vcpu placement='static'>2</vcpu>"
        f"<os><type{arch}>hvm</type></os><cpu><numa>"
        f"<cell id='0' cpus='0' memory='65536' unit='KiB'/>"
        f"<cell id='1' cpus='1' memory='65536' unit='KiB'/>"
        f"</numa></cpu><devices>{balloon}</devices></domain>")
    return migration_xml.get_updated_xml(base_xml, info(table))


def info(table):
    return objects.NUMAMigrateInfo(
        cpu_pins={0: {0}, 1: {1}}, cell_pins={0: {0}, 1: {0}},
        emulator_pins={0, 1}, cell_distances=table).validate()


def distances(xml):
    return guest_parse.extract_numa_info(xml).cell_distances


def qemu_distances(pid):
    """{(src, dst): val} of a QEMU's ``-numa dist`` arguments."""
    with open(f'/proc/{pid}/cmdline', 'rb') as f:
        argv = f.read().decode().split('\0')
    result = {}
    for arg in argv:
        if arg.startswith('dist,'):
            fields = dict(item.split('=') for item in arg[5:].split(','))
            result[int(fields['src']), int(fields['dst'])] = \
                int(fields['val'])
    return result


def as_pairs(table):
    return {(a, b): v for a, row in table.items() for b, v in row.items()}


class TestDriverDistancesTestCase(base.TestCase):

    def test_distances_round_trip(self):
        conn = libvirt.open('test:///default')
        self.addCleanup(conn.close)
        dom = conn.defineXML(guest_xml('test', DESTINATION))
        self.addCleanup(dom.undefine)
        self.assertEqual(DESTINATION, distances(dom.XMLDesc(0)))


class RealDistancesTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        root = real_hosts.start_root(self)
        self.src, self.dst = (
            self.useFixture(libvirt_daemons.LibvirtDaemon(name, root))
            for name in ('src', 'dst'))
        self.src_conn = libvirt.open(self.src.uri)
        self.addCleanup(self.src_conn.close)
        self.dst_conn = libvirt.open(self.dst.uri)
        self.addCleanup(self.dst_conn.close)

    def test_started_with_them_and_they_follow_on_the_next_start(self):
        dom = self.src_conn.defineXML(guest_xml('qemu', SOURCE))
        dom.create()
        running = dom.XMLDesc(libvirt.VIR_DOMAIN_XML_MIGRATABLE)
        self.assertEqual(SOURCE, distances(running))
        self.assertEqual(as_pairs(SOURCE),
                         qemu_distances(self.src.qemu_pid(NAME)))

        persistent = migration_xml.get_updated_xml(running,
                                                   info(DESTINATION))
        params = {libvirt.VIR_MIGRATE_PARAM_URI: 'tcp://127.0.0.1',
                  libvirt.VIR_MIGRATE_PARAM_DEST_XML: persistent,
                  libvirt.VIR_MIGRATE_PARAM_PERSIST_XML: persistent}
        # Negative control: the destination's distances as DEST_XML.
        exc = self.assertRaises(libvirt.libvirtError, dom.migrateToURI3,
                                self.dst.peer_uri, params, FLAGS)
        self.assertIn('distance', str(exc).lower())
        print(f"DEST_XML with other distances refused: {exc}")
        self.assertTrue(dom.isActive())

        params[libvirt.VIR_MIGRATE_PARAM_DEST_XML] = \
            migration_xml.with_running_distances(persistent, running)
        dom.migrateToURI3(self.dst.peer_uri, params, FLAGS)
        moved = self.dst_conn.lookupByUUIDString(UUID)
        # Live: what the guest booted with; persistent: the destination's.
        self.assertEqual(SOURCE, distances(moved.XMLDesc(0)))
        self.assertEqual(as_pairs(SOURCE),
                         qemu_distances(self.dst.qemu_pid(NAME)))
        self.assertEqual(DESTINATION, distances(
            moved.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)))

        # Its next start there: QEMU is given the destination's table.
        moved.destroy()
        moved.create()
        self.assertEqual(DESTINATION, distances(moved.XMLDesc(0)))
        self.assertEqual(as_pairs(DESTINATION),
                         qemu_distances(self.dst.qemu_pid(NAME)))
