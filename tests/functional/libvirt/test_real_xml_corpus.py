"""The XML corpus on a real libvirtd + QEMU host (a subset).

The embedded tier (test_xml_corpus) runs every corpus guest through the
libvirt test driver, which stores XML but starts nothing. Here the
guests that need neither huge pages nor realtime scheduling (this host
has no huge page pool, and TCG vCPU threads under SCHED_FIFO can starve
a 2-core machine) are rewritten for this host (one NUMA node, pCPUs
0-1), defined and started by one real libvirtd; the running guest's XML
must read back as the destination, and its vCPU threads must be
allowed only the pCPUs written for them.
"""

import libvirt

from numamig import cpuspec
from numamig import objects
from numamig.virt.libvirt import guest_parse
from numamig.virt.libvirt import migration_xml
from tests import base
from tests.fixtures import libvirt_daemons
from tests.functional.libvirt import real_hosts
from tests.functional.libvirt import test_xml_corpus as corpus_tests

MEMORY_KIB = 65536


def runnable(xml):
    """Whether this host can start the guest (see the module docstring)."""
    doc = migration_xml.parse_domain(xml)
    return doc.find('memoryBacking/hugepages') is None and \
        doc.find('cputune/vcpusched') is None


def destination_here(xml):
    """The guest's destination on this 1-node, 2-pCPU host."""
    doc = migration_xml.parse_domain(xml)
    source = guest_parse.extract_numa_info(xml)
    vcpus = set(range(migration_xml.vcpu_count(doc)))
    return objects.NUMAMigrateInfo(
        cpu_pins={v: {v % 2} for v in source.cpu_pins},
        cell_pins={c: {0} for c in migration_xml.guest_cell_ids(doc)},
        emulator_pins={0, 1}, sched_vcpus=set(), pagesizes={},
        floating_cpus={0, 1} if vcpus - set(source.cpu_pins) else None,
    ).validate()


def for_qemu(xml):
    """The rewritten guest as TCG runs it here: small, default machine,
    no host CPU model, no devices but a disabled balloon."""
    doc = migration_xml.parse_domain(corpus_tests.for_test_driver(xml))
    doc.set('type', 'qemu')
    doc.find('os/type').set('arch', 'x86_64')
    # A corpus domain may boot a guest kernel of its own tier (virtio-mem's
    # does); here the firmware's boot, which needs nothing on disk, does.
    os_el = doc.find('os')
    for tag in ('kernel', 'initrd', 'cmdline', 'dtb'):
        for el in os_el.findall(tag):
            os_el.remove(el)
    cells = doc.findall('cpu/numa/cell')
    for cell in cells:
        cell.set('memory', str(MEMORY_KIB // len(cells)))
        cell.set('unit', 'KiB')
    for tag in ('memory', 'currentMemory'):
        el = doc.find(tag)
        if el is not None:
            el.text, el.attrib['unit'] = str(MEMORY_KIB), 'KiB'
    devices = doc.find('devices')
    if devices is not None:
        doc.remove(devices)
    migration_xml.etree.SubElement(migration_xml.etree.SubElement(
        doc, 'devices'), 'memballoon', model='none')
    return migration_xml.etree.tostring(doc, encoding='unicode')


class RealCorpusTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.daemon = self.useFixture(libvirt_daemons.LibvirtDaemon(
            'dst', real_hosts.start_root(self)))
        self.conn = libvirt.open(self.daemon.uri)
        self.addCleanup(self.conn.close)

    def test_subset_starts_with_the_destination_placement(self):
        subset = [(n, x) for n, x in corpus_tests.corpus() if runnable(x)]
        self.assertGreaterEqual(len(subset), 4)
        for name, xml in subset:
            info = destination_here(xml)
            dom = self.conn.defineXML(for_qemu(
                migration_xml.get_updated_xml(xml, info)))
            self.addCleanup(dom.undefine)
            dom.create()
            self.addCleanup(dom.destroy)
            self.assertEqual(info, guest_parse.extract_numa_info(
                dom.XMLDesc(0)), name)
            self.assertEqual(
                self._allowed(info, dom), libvirt_daemons.vcpu_thread_affinity(
                    self.daemon.qemu_pid(dom.name())), name)

    @staticmethod
    def _allowed(info, dom):
        vcpus = range(dom.vcpusFlags(libvirt.VIR_DOMAIN_VCPU_LIVE))
        return {v: cpuspec.format_cpu_spec(
            info.cpu_pins.get(v) or info.floating_cpus) for v in vcpus}
