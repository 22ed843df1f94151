"""The rewrite pipeline on guests as releases and tools define them.

Nova broke twice on guests an older release created (iothreadpin not
rewritten, then a fix that assumed the element existed), and libvirt
refuses ``<iothreadpin>`` for an I/O thread the guest lacks. Each domain
of the corpus (tests/fixtures/domains, one comment per file naming its
origin) is rewritten for a destination shaped after it, parsed back, and
defined by the libvirt test driver through the real library; what
libvirt keeps must still be the destination's placement.

The destination of a guest: its cells swap host nodes, each vCPU the
source pins moves to pCPU 20 + vCPU, the others float on 0-1, emulator
and I/O threads go to 8-9, realtime vCPUs keep their scheduler with
priority 7, and page sizes stay (2M per cell for ``<hugepages/>``).
"""

import os

import libvirt
from lxml import etree
import testscenarios

from numamig import cpuspec
from numamig import objects
from numamig.virt.libvirt import guest_parse
from numamig.virt.libvirt import migration_xml
from numamig.virt.libvirt import virtio_mem
from tests import base

load_tests = testscenarios.load_tests_apply_scenarios

CORPUS_DIR = os.path.abspath(os.path.join(
    os.path.dirname(__file__), '..', '..', 'fixtures', 'domains'))
EMULATOR_PINS = {8, 9}
FLOATING = {0, 1}
PIN_OFFSET = 20
PRIORITY = 7
DEFAULT_PAGE_KB = 2048


def corpus():
    """(file name, XML text) of every corpus domain, sorted."""
    found = []
    for name in sorted(os.listdir(CORPUS_DIR)):
        if name.endswith('.xml'):
            with open(os.path.join(CORPUS_DIR, name)) as f:
                found.append((name, f.read()))
    return found


def destination_for(xml):
    """The NUMAMigrateInfo of a destination shaped after the guest."""
    source = guest_parse.extract_numa_info(xml)
    doc = migration_xml.parse_domain(xml)
    cells = sorted(migration_xml.guest_cell_ids(doc))
    vcpus = set(range(migration_xml.vcpu_count(doc)))
    pagesizes = source.pagesizes
    if not pagesizes and doc.find('memoryBacking/hugepages') is not None:
        pagesizes = dict.fromkeys(cells, DEFAULT_PAGE_KB)
    return objects.NUMAMigrateInfo(
        cpu_pins={v: {PIN_OFFSET + v} for v in source.cpu_pins},
        cell_pins={cell: {cells[-1 - i]} for i, cell in enumerate(cells)},
        emulator_pins=EMULATOR_PINS,
        sched_vcpus=source.sched_vcpus,
        sched_priority=PRIORITY if source.sched_vcpus else None,
        pagesizes=pagesizes,
        floating_cpus=FLOATING if vcpus - set(source.cpu_pins) else None,
    ).validate()


def for_test_driver(xml):
    """The domain as the test driver takes it: its own type, and no
    machine or CPU model it lacks (none of them is a NUMA part)."""
    doc = migration_xml.parse_domain(xml)
    doc.set('type', 'test')
    doc.attrib.pop('id', None)
    for attr in ('arch', 'machine'):
        doc.find('os/type').attrib.pop(attr, None)
    cpu = doc.find('cpu')
    for attr in ('mode', 'match', 'check', 'migratable'):
        cpu.attrib.pop(attr, None)
    for child in cpu.findall('model'):
        cpu.remove(child)
    return etree.tostring(doc, encoding='unicode')


# What the steps own: removed from both sides before comparing the rest.
_NUMA_PARTS = ('cputune/vcpupin', 'cputune/emulatorpin',
               'cputune/iothreadpin', 'cputune/vcpusched', 'numatune',
               'memoryBacking/hugepages',
               "devices/memory[@model='virtio-mem']/source/nodemask",
               "devices/memory[@model='virtio-mem']/source/pagesize")


def without_numa_parts(xml):
    doc = migration_xml.parse_domain(xml)
    doc.find('vcpu').attrib.pop('cpuset', None)
    doc.find('vcpu').attrib.pop('placement', None)
    for path in _NUMA_PARTS:
        for el in doc.findall(path):
            el.getparent().remove(el)
    for tag in ('cputune', 'memoryBacking'):
        el = doc.find(tag)
        if el is not None and len(el) == 0:
            doc.remove(el)
    etree.indent(doc)
    return etree.tostring(doc, encoding='unicode')


class CorpusRewriteTestCase(base.TestCase):
    """Every corpus guest, rewritten for its destination."""

    scenarios = [(name, {'xml': xml}) for name, xml in corpus()]

    def setUp(self):
        super().setUp()
        self.info = destination_for(self.xml)
        self.rewritten = migration_xml.get_updated_xml(self.xml, self.info)

    def test_reads_back_as_the_destination(self):
        self.assertEqual(self.info,
                         guest_parse.extract_numa_info(self.rewritten))

    def test_libvirt_defines_it_and_keeps_the_placement(self):
        conn = libvirt.open('test:///default')
        self.addCleanup(conn.close)
        dom = conn.defineXML(for_test_driver(self.rewritten))
        self.addCleanup(dom.undefine)
        self.assertEqual(self.info,
                         guest_parse.extract_numa_info(dom.XMLDesc(0)))

    def test_every_iothread_runs_with_the_emulator_threads(self):
        doc = migration_xml.parse_domain(self.rewritten)
        pins = {int(el.get('iothread')): cpuspec.parse_cpu_spec(
                    el.get('cpuset'))
                for el in doc.iterfind('cputune/iothreadpin')}
        self.assertEqual(int(doc.findtext('iothreads') or 0), len(pins))
        # Which ids exist, libvirt checks when it defines the guest.
        self.assertEqual(dict.fromkeys(migration_xml.iothread_ids(doc),
                                       EMULATOR_PINS), pins)

    def test_everything_else_is_kept(self):
        self.assertEqual(without_numa_parts(self.xml),
                         without_numa_parts(self.rewritten))

    def test_virtio_mem_devices_follow_their_guest_cell(self):
        # Each device is backed by its cell's destination node and page
        # size; its sizes, alias and address travel unchanged.
        before = migration_xml.parse_domain(self.xml)
        after = migration_xml.parse_domain(self.rewritten)
        devices = virtio_mem.device_elements(after)
        self.assertEqual(set(virtio_mem.device_elements(before)),
                         set(devices))
        for cell, el in devices.items():
            self.assertEqual(
                (cpuspec.format_cpu_spec(self.info.cell_pins[cell]),
                 self.info.pagesizes.get(cell)),
                (el.findtext('source/nodemask'),
                 int(el.findtext('source/pagesize'))
                 if el.find('source/pagesize') is not None else None))
            self.assertEqual(
                etree.tostring(virtio_mem.device_elements(before)[cell]
                               .find('target')),
                etree.tostring(el.find('target')))
        self.assertEqual(virtio_mem.read_devices(before, migration_xml.kib),
                         virtio_mem.read_devices(after, migration_xml.kib))

    def test_rewrite_is_idempotent(self):
        self.assertEqual(self.rewritten, migration_xml.get_updated_xml(
            self.rewritten, self.info))


def _units(doc):
    """How many vCPUs, I/O threads and guest cells the guest has."""
    return {'vcpu': migration_xml.vcpu_count(doc),
            'iothread': len(migration_xml.iothread_ids(doc)),
            'cell': len(migration_xml.guest_cell_ids(doc)), None: 1}


# What each step writes -> the unit it is written per (None: one at most).
_WRITTEN = {
    'vcpu[@cpuset]': None,
    'cputune/vcpupin': 'vcpu',
    'cputune/emulatorpin': None,
    'cputune/iothreadpin': 'iothread',
    'cputune/vcpusched': 'vcpu',
    'numatune/memnode': 'cell',
    'memoryBacking/hugepages/page': 'cell',
    "devices/memory[@model='virtio-mem']/source/nodemask": 'cell',
}


class CorpusCoverageTest(base.TestCase):
    """The corpus holds every written element missing, present once and
    present per unit (vCPU, I/O thread, guest cell)."""

    scenarios = [(path, {'path': path, 'unit': unit})
                 for path, unit in sorted(_WRITTEN.items())]

    def test_missing_once_and_per_unit(self):
        shapes = set()
        for _name, xml in corpus():
            doc = migration_xml.parse_domain(xml)
            count, units = len(doc.findall(self.path)), _units(doc)
            if count == 0:
                shapes.add('missing')
            if count == 1:
                shapes.add('once')
            if count == units[self.unit] > 1:
                shapes.add('per unit')
        expected = {'missing', 'once'} | (
            {'per unit'} if self.unit else set())
        self.assertEqual(expected, shapes)
