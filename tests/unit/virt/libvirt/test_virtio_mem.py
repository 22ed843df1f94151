"""virtio-mem devices in guest XML: written, rewritten, read back."""

from lxml import etree

from numamig import exception
from numamig import objects
from numamig.virt.libvirt import guest_parse
from numamig.virt.libvirt import guest_xml
from numamig.virt.libvirt import migration_xml
from numamig.virt.libvirt import virtio_mem
from tests import base
from tests.fixtures import libvirt_guests as guests

_DEVICE = {'virtio_mem_size_mb': 512, 'virtio_mem_block_kb': 2048,
           'virtio_mem_requested_mb': 256}


def _placed(pagesize=None, devices=(0, 1)):
    """Two floating guest cells of 256 MiB on host cells 1 and 0."""
    topo = guests.topology(*[
        guests.cell(i, host_cell=1 - i, vcpus=[i], memory_mb=256,
                    pagesize=pagesize, **(_DEVICE if i in devices else {}))
        for i in (0, 1)])
    info = objects.NUMAMigrateInfo(
        cpu_pins={0: {0}, 1: {1}}, cell_pins={0: {1}, 1: {0}},
        emulator_pins={0, 1},
        pagesizes={0: pagesize, 1: pagesize} if pagesize else {},
        floating_cpus={0, 1})
    return topo, info


def _build(**kwargs):
    topo, info = _placed(**kwargs)
    xml = guest_xml.build_domain_xml(
        guests.instance(vcpus=2, memory_mb=512), topo, info, 'qemu')
    return xml, migration_xml.parse_domain(xml)


class WriteTest(base.TestCase):

    def test_one_device_per_cell_backed_by_its_host_node(self):
        _, doc = _build()
        devices = virtio_mem.device_elements(doc)
        self.assertEqual({0: ('1', '524288', '2048', '262144'),
                          1: ('0', '524288', '2048', '262144')},
                         {cell: (el.findtext('source/nodemask'),
                                 el.findtext('target/size'),
                                 el.findtext('target/block'),
                                 el.findtext('target/requested'))
                          for cell, el in devices.items()})
        self.assertEqual([None, None], [el.find('source/pagesize')
                                        for el in devices.values()])

    def test_memory_counts_the_devices(self):
        _, doc = _build()
        # Boot 512 MiB + 2 x 512 MiB devices; 2 x 256 MiB plugged.
        self.assertEqual(('1572864', '1048576', '1572864', '2'),
                         (doc.findtext('memory'),
                          doc.findtext('currentMemory'),
                          doc.findtext('maxMemory'),
                          doc.find('maxMemory').get('slots')))

    def test_page_size_of_the_cell(self):
        _, doc = _build(pagesize=2048)
        self.assertEqual(['2048', '2048'], [
            el.findtext('source/pagesize')
            for el in virtio_mem.device_elements(doc).values()])

    def test_cells_without_a_device(self):
        _, doc = _build(devices=(1,))
        self.assertEqual([1], list(virtio_mem.device_elements(doc)))
        self.assertEqual('1', doc.find('maxMemory').get('slots'))
        _, doc = _build(devices=())
        self.assertIsNone(doc.find('maxMemory'))
        self.assertEqual('524288', doc.findtext('memory'))

    def test_parsed_back_with_the_devices(self):
        xml, _ = _build(pagesize=2048)
        topo, _ = _placed(pagesize=2048)
        self.assertEqual(guests.canonical(topo), guests.canonical(
            guest_parse.parse_guest_topology(xml)))
        parsed = guest_parse.parse_guest_topology(xml)
        self.assertEqual([(512, 2048, 256, None)] * 2, [
            (c.virtio_mem_size_mb, c.virtio_mem_block_kb,
             c.virtio_mem_requested_mb, c.virtio_mem_current_mb)
            for c in parsed.cells])


class RewriteTest(base.TestCase):

    def _live(self):
        """The built guest as libvirt reports it running: current,
        alias, address."""
        xml, doc = _build()
        for cell, el in virtio_mem.device_elements(doc).items():
            current = etree.SubElement(el.find('target'), 'current',
                                       unit='KiB')
            current.text = str(131072 * (cell + 1))
            etree.SubElement(el, 'alias', name=f'virtiomem{cell}')
        return etree.tostring(doc, encoding='unicode')

    def test_moves_nodemask_and_page_size_keeps_the_rest(self):
        info = objects.NUMAMigrateInfo(
            cpu_pins={0: {4}, 1: {5}}, cell_pins={0: {2}, 1: {3}},
            emulator_pins={4, 5}, pagesizes={0: 1048576, 1: 1048576},
            floating_cpus={4, 5})
        before = migration_xml.parse_domain(self._live())
        after = migration_xml.parse_domain(
            migration_xml.get_updated_xml(self._live(), info))
        moved = virtio_mem.device_elements(after)
        self.assertEqual({0: ('2', '1048576', 'virtiomem0'),
                          1: ('3', '1048576', 'virtiomem1')},
                         {cell: (el.findtext('source/nodemask'),
                                 el.findtext('source/pagesize'),
                                 el.find('alias').get('name'))
                          for cell, el in moved.items()})
        self.assertEqual(virtio_mem.read_devices(before, migration_xml.kib),
                         virtio_mem.read_devices(after, migration_xml.kib))
        self.assertEqual({0: 128, 1: 256}, {
            cell: fields['virtio_mem_current_mb'] for cell, fields in
            virtio_mem.read_devices(after, migration_xml.kib).items()})

    def test_back_to_small_pages_drops_the_page_size(self):
        _, doc = _build(pagesize=2048)
        info = objects.NUMAMigrateInfo(
            cpu_pins={0: {0}, 1: {1}}, cell_pins={0: {0}, 1: {1}},
            emulator_pins={0, 1}, floating_cpus={0, 1})
        after = migration_xml.parse_domain(migration_xml.get_updated_xml(
            etree.tostring(doc, encoding='unicode'), info))
        self.assertEqual([None, None], [
            el.find('source/pagesize')
            for el in virtio_mem.device_elements(after).values()])

    def test_device_of_a_cell_the_guest_lacks_is_refused(self):
        xml, doc = _build()
        # A third device naming guest cell 2: the XML is left unchanged.
        extra = etree.fromstring(etree.tostring(
            virtio_mem.device_elements(doc)[1]))
        extra.find('target/node').text = '2'
        doc.find('devices').append(extra)
        text = etree.tostring(doc, encoding='unicode')
        _, info = _placed()
        exc = self.assertRaises(exception.DomainXMLError,
                                migration_xml.get_updated_xml, text, info)
        self.assertIn('virtio-mem devices of guest cells [2]', str(exc))

    def test_two_devices_for_one_cell_are_refused(self):
        xml, doc = _build()
        virtio_mem.device_elements(doc)[1].find('target/node').text = '0'
        _, info = _placed()
        exc = self.assertRaises(
            exception.DomainXMLError, migration_xml.get_updated_xml,
            etree.tostring(doc, encoding='unicode'), info)
        self.assertIn('two virtio-mem devices for guest cell 0', str(exc))
