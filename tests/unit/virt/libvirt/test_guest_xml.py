"""Tests of guest domain XML generation and of parsing it back."""

from lxml import etree
import testscenarios

from numamig import exception
from numamig import objects
from numamig.virt.libvirt import guest_parse
from numamig.virt.libvirt import guest_xml
from tests import base
from tests.fixtures import libvirt_guests as guests

load_tests = testscenarios.load_tests_apply_scenarios

NS = {'n': guest_xml.METADATA_NS}


def _placed():
    """Guest cell 0 dedicated on host cell 1, cell 1 floating on 0."""
    topo = guests.topology(
        guests.cell(0, host_cell=1, vcpus=[0, 1], pins={0: 5, 1: 13},
                    pagesize=1048576, cpuset_reserved={6},
                    realtime_vcpus={1}, cpu_policy='mixed',
                    cpu_thread_policy='prefer'),
        guests.cell(1, host_cell=0, vcpus=[2, 3], pagesize=1048576,
                    cpu_policy='mixed', cpu_thread_policy='prefer'),
        emulator_threads_policy='isolate')
    info = objects.NUMAMigrateInfo(
        cpu_pins={0: {5}, 1: {13}, 2: {0}, 3: {0}},
        cell_pins={0: {1}, 1: {0}}, emulator_pins={6}, sched_vcpus={1},
        sched_priority=1, pagesizes={0: 1048576, 1: 1048576},
        floating_cpus={0})
    return topo, info


class BuildDomainXMLTestCase(base.TestCase):

    scenarios = [
        ('test', {'dtype': 'test', 'arch': None, 'balloon': 0}),
        ('qemu', {'dtype': 'qemu', 'arch': True, 'balloon': 1}),
        ('kvm', {'dtype': 'kvm', 'arch': True, 'balloon': 1}),
    ]

    def test_skeleton_identity_and_size(self):
        topo, info = _placed()
        doc = etree.fromstring(guest_xml.build_domain_xml(
            guests.instance(), topo, info, self.dtype))
        self.assertEqual(self.dtype, doc.get('type'))
        self.assertEqual('guest-1', doc.findtext('name'))
        self.assertEqual(guests.UUID, doc.findtext('uuid'))
        self.assertEqual('2097152', doc.findtext('memory'))
        self.assertEqual('4', doc.findtext('vcpu'))
        self.assertEqual(self.arch, doc.find('os/type').get('arch') and True)
        self.assertEqual(self.balloon, len(doc.findall('devices/memballoon')))
        # A diskless guest: numamig creates no disk.
        self.assertEqual([], doc.findall('devices/disk'))


class NUMAPartsTestCase(base.TestCase):

    def test_numa_cells_and_metadata(self):
        topo, info = _placed()
        doc = etree.fromstring(guest_xml.build_domain_xml(
            guests.instance(), topo, info, 'kvm'))
        self.assertEqual(
            [{'id': '0', 'cpus': '0-1', 'memory': '1048576', 'unit': 'KiB'},
             {'id': '1', 'cpus': '2-3', 'memory': '1048576', 'unit': 'KiB'}],
            [dict(c.attrib) for c in doc.iterfind('cpu/numa/cell')])
        meta = doc.find('metadata/n:numa', NS)
        self.assertEqual({'pinned_vcpus': '0-1', 'cpu_policy': 'mixed',
                          'cpu_thread_policy': 'prefer',
                          'emulator_threads_policy': 'isolate'},
                         dict(meta.attrib))

    def test_created_with_its_cells_distances(self):
        # Creation goes through the migration pipeline: the guest is
        # told the distances of its placement from its first boot.
        topo, info = _placed()
        info.cell_distances = {0: {0: 10, 1: 21}, 1: {0: 21, 1: 10}}
        doc = etree.fromstring(guest_xml.build_domain_xml(
            guests.instance(), topo, info, 'kvm'))
        self.assertEqual(
            [[('0', '10'), ('1', '21')], [('0', '21'), ('1', '10')]],
            [[(s.get('id'), s.get('value'))
              for s in cell.iterfind('distances/sibling')]
             for cell in doc.iterfind('cpu/numa/cell')])

    def test_created_holding_the_claimed_functions(self):
        # The guest holds what its host's claim records from its first
        # boot: one managed <hostdev> per function, a base XML's own
        # <hostdev> of the same function not doubled.
        topo, info = _placed()
        topo.pci_devices = [
            objects.InstancePCIDevice(alias='vf', address='0000:81:02.1',
                                      host_node=1, guest_cell=0),
            objects.InstancePCIDevice(alias='vf', address='0000:81:02.0',
                                      host_node=1, guest_cell=0)]
        base_xml = guest_xml.build_domain_xml(guests.instance(), None, None,
                                              'kvm')
        base = etree.fromstring(base_xml)
        base.find('devices').append(etree.fromstring(
            "<hostdev mode='subsystem' type='pci' managed='yes'><source>"
            "<address domain='0x0000' bus='0x81' slot='0x02' "
            "function='0x1'/></source></hostdev>"))
        for source in (None, etree.tostring(base, encoding='unicode')):
            doc = etree.fromstring(guest_xml.build_domain_xml(
                guests.instance(), topo, info, 'kvm', source))
            found = sorted(
                (a.get('bus'), a.get('slot'), a.get('function'))
                for a in doc.iterfind('devices/hostdev/source/address'))
            self.assertEqual([('0x81', '0x02', '0x0'),
                              ('0x81', '0x02', '0x1')], found, source)
            self.assertEqual({'yes'}, {h.get('managed') for h in
                                       doc.iterfind('devices/hostdev')})

    def test_round_trip(self):
        topo, info = _placed()
        xml = guest_xml.build_domain_xml(guests.instance(), topo, info, 'kvm')
        self.assertEqual(guests.canonical(topo),
                         guests.canonical(guest_parse.parse_guest_topology(
                             xml)))
        self.assertEqual(guests.info_data(info), guests.info_data(
            guest_parse.extract_numa_info(xml)))

    def test_non_numa_guest(self):
        xml = guest_xml.build_domain_xml(guests.instance(), None, None,
                                         'qemu')
        doc = etree.fromstring(xml)
        self.assertIsNone(doc.find('cpu'))
        self.assertIsNone(doc.find('cputune'))
        self.assertIsNone(doc.find('metadata'))
        self.assertIsNone(guest_parse.parse_guest_topology(xml))

    def test_base_xml_parts_kept_numa_parts_replaced(self):
        topo, info = _placed()
        base_xml = """<domain type='kvm'>
          <name>old</name>
          <metadata>
            <numamig:numa xmlns:numamig='%s' pinned_vcpus='0-7'/>
          </metadata>
          <vcpu>8</vcpu>
          <os><type arch='x86_64'>hvm</type><kernel>/k.bin</kernel></os>
          <cpu mode='host-model'><numa><cell id='0' cpus='0-7'
              memory='1' unit='GiB'/></numa></cpu>
          <devices><serial type='pty'/></devices>
        </domain>""" % guest_xml.METADATA_NS
        doc = etree.fromstring(guest_xml.build_domain_xml(
            guests.instance(), topo, info, 'qemu', base_xml=base_xml))
        self.assertEqual('qemu', doc.get('type'))
        self.assertEqual('guest-1', doc.findtext('name'))
        self.assertEqual('/k.bin', doc.findtext('os/kernel'))
        self.assertEqual('host-model', doc.find('cpu').get('mode'))
        self.assertEqual(1, len(doc.findall('devices/serial')))
        self.assertEqual(2, len(doc.findall('cpu/numa/cell')))
        self.assertEqual(['0-1'], [m.get('pinned_vcpus') for m in
                                   doc.iterfind('metadata/n:numa', NS)])

    def test_base_xml_not_a_domain(self):
        self.assertRaisesMessage(
            exception.DomainXMLError, 'root element is <network>',
            guest_xml.build_domain_xml, guests.instance(), None, None,
            'kvm', base_xml='<network/>')


# A guest numamig did not create: no metadata, other units, a page pool
# without nodeset, realtime vCPUs split per vCPU as libvirt writes them.
FOREIGN_XML = """<domain type='kvm'>
  <name>adopted</name>
  <uuid>5a1e0000-aaaa-4bbb-8ccc-000000000002</uuid>
  <memoryBacking><hugepages><page size='2' unit='M'/></hugepages>
  </memoryBacking>
  <vcpu placement='static'>4</vcpu>
  <cputune>
    <vcpupin vcpu='0' cpuset='4'/>
    <vcpupin vcpu='1' cpuset='5'/>
    <vcpupin vcpu='2' cpuset='0'/>
    <vcpupin vcpu='3' cpuset='0'/>
    <emulatorpin cpuset='0'/>
    <vcpusched vcpus='0' scheduler='fifo' priority='2'/>
    <vcpusched vcpus='1' scheduler='other'/>
  </cputune>
  <numatune><memnode cellid='0' mode='strict' nodeset='1'/></numatune>
  <cpu><numa><cell id='0' cpus='0-3' memory='2' unit='GiB'/></numa></cpu>
</domain>
"""


class ParseForeignGuestTestCase(base.TestCase):

    def test_heuristic_dedicated_vcpus(self):
        topo = guest_parse.parse_guest_topology(FOREIGN_XML)
        (cell,) = topo.cells
        # vCPUs 2 and 3 share pCPU 0: floating, not dedicated.
        self.assertEqual({0, 1}, cell.pcpuset)
        self.assertEqual({2, 3}, cell.cpuset)
        self.assertEqual({0: 4, 1: 5}, cell.cpu_pinning)
        self.assertEqual('mixed', cell.cpu_policy)
        self.assertEqual(1, cell.host_cell)
        self.assertEqual(2048, cell.memory_mb)
        self.assertEqual(2048, cell.pagesize)
        self.assertEqual({0}, cell.realtime_vcpus)
        self.assertIsNone(cell.cpuset_reserved)

    def test_extract_info(self):
        info = guest_parse.extract_numa_info(FOREIGN_XML)
        self.assertEqual({0: {1}}, info.cell_pins)
        self.assertEqual({0}, info.emulator_pins)
        self.assertEqual(2, info.sched_priority)
        self.assertIsNone(info.floating_cpus)

    def test_extract_info_malformed(self):
        xml = FOREIGN_XML.replace("nodeset='1'/>", "nodeset='1-2'/>")
        self.assertRaisesMessage(
            exception.DomainXMLError, 'Domain XML of adopted: malformed',
            guest_parse.extract_numa_info, xml)


class ParseMalformedTestCase(base.TestCase):

    scenarios = [
        ('memnode_two_nodes',
         {'old': "nodeset='1'/>", 'new': "nodeset='0-1'/>",
          'fragment': 'binds to nodes [0, 1], not one'}),
        ('bad_cpus',
         {'old': "cpus='0-3'", 'new': "cpus='x'",
          'fragment': 'malformed NUMA part'}),
        ('bad_unit',
         {'old': "unit='GiB'", 'new': "unit='parsec'",
          'fragment': "unknown memory unit 'parsec'"}),
    ]

    def test_topology(self):
        xml = FOREIGN_XML.replace(self.old, self.new)
        self.assertRaisesMessage(exception.DomainXMLError, self.fragment,
                                 guest_parse.parse_guest_topology, xml)
