"""Tests of the migration XML rewrite pipeline."""

import hypothesis
from hypothesis import strategies as st
from lxml import etree
import testscenarios

from numamig import exception
from numamig import objects
from numamig.virt.libvirt import guest_parse
from numamig.virt.libvirt import guest_xml
from numamig.virt.libvirt import migration_xml
from tests import base
from tests.fixtures import libvirt_guests as guests

load_tests = testscenarios.load_tests_apply_scenarios

# A source domain as libvirt returns it, with parts numamig must keep.
SOURCE_XML = """<domain type='kvm' id='7'>
  <name>guest-1</name>
  <uuid>5a1e0000-aaaa-4bbb-8ccc-000000000001</uuid>
  <metadata>
    <other:thing xmlns:other='http://example.com/other'>keep</other:thing>
  </metadata>
  <memory unit='KiB'>2097152</memory>
  <currentMemory unit='KiB'>2097152</currentMemory>
  <memoryBacking>
    <hugepages>
      <page size='1048576' unit='KiB' nodeset='0'/>
      <page size='2048' unit='KiB' nodeset='1'/>
    </hugepages>
    <locked/>
  </memoryBacking>
  <vcpu placement='static' cpuset='0-1'>4</vcpu>
  <iothreads>1</iothreads>
  <cputune>
    <shares>4096</shares>
    <vcpupin vcpu='0' cpuset='2'/>
    <vcpupin vcpu='1' cpuset='3'/>
    <vcpupin vcpu='2' cpuset='0-1'/>
    <vcpupin vcpu='3' cpuset='0-1'/>
    <emulatorpin cpuset='0-1'/>
    <iothreadpin iothread='1' cpuset='0-1'/>
    <vcpusched vcpus='0' scheduler='rr' priority='3'/>
    <vcpusched vcpus='1' scheduler='rr' priority='3'/>
  </cputune>
  <numatune>
    <memory mode='strict' nodeset='0-1'/>
    <memnode cellid='0' mode='preferred' nodeset='0'/>
    <memnode cellid='1' mode='strict' nodeset='1'/>
  </numatune>
  <os><type arch='x86_64' machine='pc-q35-7.2'>hvm</type></os>
  <cpu mode='host-passthrough'>
    <topology sockets='2' cores='2' threads='1'/>
    <numa>
      <cell id='0' cpus='0-1' memory='1048576' unit='KiB'/>
      <cell id='1' cpus='2-3' memory='1048576' unit='KiB'/>
    </numa>
  </cpu>
  <devices><memballoon model='none'/></devices>
</domain>
"""


def _info(**kwargs):
    values = {'cpu_pins': {0: {12}, 1: {13}, 2: {4, 5}, 3: {4, 5}},
              'cell_pins': {0: {3}, 1: {2}},
              'emulator_pins': {4, 5},
              'sched_vcpus': {0, 1}, 'sched_priority': 5,
              'pagesizes': {0: 1048576, 1: 2048},
              'floating_cpus': {4, 5}}
    values.update(kwargs)
    return objects.NUMAMigrateInfo(**values).validate()


def _rewrite(**kwargs):
    return etree.fromstring(
        migration_xml.get_updated_xml(SOURCE_XML, _info(**kwargs)))


def _attrs(doc, path):
    return [dict(el.attrib) for el in doc.iterfind(path)]


class RewriteTestCase(base.TestCase):

    def test_every_numa_part_rewritten(self):
        doc = _rewrite()
        self.assertEqual(
            [{'vcpu': '0', 'cpuset': '12'}, {'vcpu': '1', 'cpuset': '13'},
             {'vcpu': '2', 'cpuset': '4-5'}, {'vcpu': '3', 'cpuset': '4-5'}],
            _attrs(doc, 'cputune/vcpupin'))
        self.assertEqual([{'cpuset': '4-5'}],
                         _attrs(doc, 'cputune/emulatorpin'))
        self.assertEqual([{'iothread': '1', 'cpuset': '4-5'}],
                         _attrs(doc, 'cputune/iothreadpin'))
        # The source's scheduler is kept, the priority is the new one.
        self.assertEqual(
            [{'vcpus': '0-1', 'scheduler': 'rr', 'priority': '5'}],
            _attrs(doc, 'cputune/vcpusched'))
        self.assertEqual([{'mode': 'strict', 'nodeset': '2-3'}],
                         _attrs(doc, 'numatune/memory'))
        self.assertEqual(
            [{'cellid': '0', 'mode': 'preferred', 'nodeset': '3'},
             {'cellid': '1', 'mode': 'strict', 'nodeset': '2'}],
            _attrs(doc, 'numatune/memnode'))
        self.assertEqual('4-5', doc.find('vcpu').get('cpuset'))

    def test_everything_else_preserved(self):
        doc, src = _rewrite(), etree.fromstring(SOURCE_XML)
        for path in ('name', 'uuid', 'memory', 'os/type', 'cpu/topology',
                     'cpu/numa', 'devices', 'cputune/shares', 'iothreads',
                     'memoryBacking/locked'):
            self.assertEqual(etree.tostring(src.find(path)),
                             etree.tostring(doc.find(path)), path)
        self.assertEqual('keep', doc.find(
            'metadata/{http://example.com/other}thing').text)
        self.assertEqual({'type': 'kvm', 'id': '7'}, dict(doc.attrib))

    def test_input_text_unchanged_and_rewrite_is_idempotent(self):
        once = migration_xml.get_updated_xml(SOURCE_XML, _info())
        twice = migration_xml.get_updated_xml(once, _info())
        self.assertEqual(once, twice)

    def test_page_sizes_regrouped_by_size(self):
        doc = _rewrite(pagesizes={0: 2048, 1: 2048})
        self.assertEqual([{'size': '2048', 'unit': 'KiB', 'nodeset': '0-1'}],
                         _attrs(doc, 'memoryBacking/hugepages/page'))

    def test_no_pages_removes_hugepages_keeps_backing(self):
        doc = _rewrite(pagesizes={})
        self.assertIsNone(doc.find('memoryBacking/hugepages'))
        self.assertIsNotNone(doc.find('memoryBacking/locked'))

    def test_no_floating_cpus_removes_cpuset(self):
        doc = _rewrite(floating_cpus=None)
        self.assertNotIn('cpuset', doc.find('vcpu').attrib)

    def test_no_emulator_pins_removes_emulator_and_iothread_pins(self):
        doc = _rewrite(emulator_pins=set())
        self.assertEqual([], _attrs(doc, 'cputune/emulatorpin'))
        self.assertEqual([], _attrs(doc, 'cputune/iothreadpin'))

    def test_no_realtime_removes_vcpusched(self):
        doc = _rewrite(sched_vcpus=set(), sched_priority=None)
        self.assertEqual([], _attrs(doc, 'cputune/vcpusched'))

    def test_guest_without_cputune_or_numatune_gets_them(self):
        src = etree.fromstring(SOURCE_XML)
        for tag in ('cputune', 'numatune', 'memoryBacking', 'iothreads'):
            src.remove(src.find(tag))
        out = etree.fromstring(migration_xml.get_updated_xml(
            etree.tostring(src), _info()))
        self.assertEqual(4, len(out.findall('cputune/vcpupin')))
        self.assertEqual([], _attrs(out, 'cputune/iothreadpin'))
        self.assertEqual(2, len(out.findall('numatune/memnode')))
        self.assertEqual('fifo', out.find('cputune/vcpusched').get(
            'scheduler'))
        self.assertEqual(2, len(out.findall('memoryBacking/hugepages/page')))

    def test_non_numa_guest_loses_numatune_and_empty_cputune(self):
        src = etree.fromstring(SOURCE_XML)
        src.find('cpu').remove(src.find('cpu/numa'))
        out = etree.fromstring(migration_xml.get_updated_xml(
            etree.tostring(src), objects.NUMAMigrateInfo()))
        self.assertIsNone(out.find('numatune'))
        self.assertEqual(['shares'], [el.tag for el in out.find('cputune')])


def _rows(doc):
    """{guest cell: {sibling: value}} of the rewritten <distances>."""
    return {int(cell.get('id')): {int(s.get('id')): int(s.get('value'))
                                  for s in cell.iterfind('distances/sibling')}
            for cell in doc.iterfind('cpu/numa/cell')}


# Guest cells 0 and 1 on host nodes 3 and 2 of a host whose table reads
# 3 -> 2 as 12 and 2 -> 3 as 13 (asymmetric: each direction as told).
DISTANCES = {0: {0: 10, 1: 12}, 1: {0: 13, 1: 10}}


class DistancesTestCase(base.TestCase):
    """Item 3 of issue 39: the guest is told its cells' distances."""

    def test_distances_written_per_cell(self):
        doc = _rewrite(cell_distances=DISTANCES)
        self.assertEqual(DISTANCES, _rows(doc))
        # One <distances> per cell, its siblings in id order.
        for cell in doc.iterfind('cpu/numa/cell'):
            self.assertEqual(1, len(cell.findall('distances')))
            self.assertEqual(['0', '1'], [s.get('id') for s in cell.iterfind(
                'distances/sibling')])

    def test_the_sources_distances_are_replaced(self):
        source = migration_xml.get_updated_xml(
            SOURCE_XML, _info(cell_distances={0: {0: 10, 1: 32},
                                              1: {0: 32, 1: 10}}))
        doc = etree.fromstring(migration_xml.get_updated_xml(
            source, _info(cell_distances=DISTANCES)))
        self.assertEqual(DISTANCES, _rows(doc))

    def test_not_told_removes_the_sources_distances(self):
        # They describe where the cells were, not where they go.
        source = migration_xml.get_updated_xml(
            SOURCE_XML, _info(cell_distances=DISTANCES))
        doc = etree.fromstring(migration_xml.get_updated_xml(
            source, _info()))
        self.assertEqual({0: {}, 1: {}}, _rows(doc))
        self.assertIsNone(doc.find('cpu/numa/cell/distances'))

    def test_distances_go_before_a_cells_cache(self):
        # libvirt's schema: <distances> first, then <cache>.
        with_cache = SOURCE_XML.replace(
            "<cell id='0' cpus='0-1' memory='1048576' unit='KiB'/>",
            "<cell id='0' cpus='0-1' memory='1048576' unit='KiB'>"
            "<cache level='3' associativity='direct' policy='writeback'>"
            "<size value='10' unit='KiB'/><line value='8' unit='B'/>"
            "</cache></cell>")
        doc = etree.fromstring(migration_xml.get_updated_xml(
            with_cache, _info(cell_distances=DISTANCES)))
        self.assertEqual(['distances', 'cache'],
                         [el.tag for el in doc.find('cpu/numa/cell')])

    def test_idempotent_and_read_back(self):
        once = migration_xml.get_updated_xml(
            SOURCE_XML, _info(cell_distances=DISTANCES))
        self.assertEqual(once, migration_xml.get_updated_xml(
            once, _info(cell_distances=DISTANCES)))
        self.assertEqual(DISTANCES,
                         guest_parse.extract_numa_info(once).cell_distances)

    def test_live_rewrite_keeps_the_running_distances(self):
        # DEST_XML: what the guest runs with (guest ABI); PERSIST_XML:
        # the destination's, for its next start.
        running = migration_xml.get_updated_xml(
            SOURCE_XML, _info(cell_distances={0: {0: 10, 1: 32},
                                              1: {0: 32, 1: 10}}))
        live = etree.fromstring(migration_xml.get_updated_xml(
            running, _info(cell_distances=DISTANCES), live=True))
        self.assertEqual({0: {0: 10, 1: 32}, 1: {0: 32, 1: 10}}, _rows(live))
        # Everything else is the destination's all the same.
        self.assertEqual([{'mode': 'strict', 'nodeset': '2-3'}],
                         _attrs(live, 'numatune/memory'))

    def test_with_running_distances(self):
        persistent = migration_xml.get_updated_xml(
            SOURCE_XML, _info(cell_distances=DISTANCES))
        for running_table in ({0: {0: 10, 1: 32}, 1: {0: 32, 1: 10}}, {}):
            running = migration_xml.get_updated_xml(
                SOURCE_XML, _info(cell_distances=running_table))
            live = migration_xml.with_running_distances(persistent, running)
            self.assertEqual(running_table, guest_parse.extract_numa_info(
                live).cell_distances)
            # Only the distances differ from the persistent XML.
            self.assertEqual(
                migration_xml.get_updated_xml(persistent, _info()),
                migration_xml.get_updated_xml(live, _info()))
        # Nothing to change: the very text comes back.
        self.assertIs(persistent, migration_xml.with_running_distances(
            persistent, persistent))

    def test_a_table_not_numamigs_reads_back_as_none(self):
        # A remote 10 (Linux would ignore the whole SLIT) or a partial
        # table: not carried, so a rewrite without distances drops it.
        for rows in ({0: {0: 10, 1: 10}, 1: {0: 10, 1: 10}},
                     {0: {0: 10, 1: 21}, 1: {}}):
            text = SOURCE_XML
            for cell, row in rows.items():
                siblings = ''.join(f"<sibling id='{o}' value='{v}'/>"
                                   for o, v in row.items())
                cpus = '0-1' if cell == 0 else '2-3'
                old = (f"<cell id='{cell}' cpus='{cpus}' "
                       f"memory='1048576' unit='KiB'")
                text = text.replace(
                    old + '/>', old + f"><distances>{siblings}</distances>"
                    f"</cell>")
            self.assertEqual(
                {}, guest_parse.extract_numa_info(text).cell_distances)


class ShapeMismatchTestCase(base.TestCase):

    scenarios = [
        ('cell_guest_lacks',
         {'info': {'cell_pins': {0: {1}, 1: {0}, 2: {3}}},
          'fragment': 'places guest cells [0, 1, 2] but the guest has '
                      'cells [0, 1]'}),
        ('cell_info_lacks',
         {'info': {'cell_pins': {0: {1}}, 'pagesizes': {0: 2048}},
          'fragment': 'places guest cells [0] but'}),
        ('vcpu_guest_lacks',
         {'info': {'cpu_pins': {0: {1}, 1: {3}, 4: {2}}},
          'fragment': 'pins for vCPUs [4], the guest has vCPUs 0-3'}),
        ('distances_of_cells_guest_lacks',
         {'info': {'cell_pins': {0: {1}, 1: {0}, 2: {3}},
                   'cell_distances': {c: {o: 10 if o == c else 20
                                          for o in (0, 1, 2)}
                                      for c in (0, 1, 2)}},
          'fragment': 'places guest cells [0, 1, 2] but'}),
        ('realtime_vcpu_guest_lacks',
         {'info': {'cpu_pins': {}, 'sched_vcpus': {9}},
          'fragment': 'realtime scheduling for vCPUs [9]'}),
    ]

    def test_rejected_with_domain_named(self):
        exc = self.assertRaisesMessage(
            exception.DomainXMLError, self.fragment,
            migration_xml.get_updated_xml, SOURCE_XML, _info(**self.info))
        self.assertIn('Domain XML of guest-1', str(exc))

    def test_page_sizes_for_missing_cell(self):
        info = objects.NUMAMigrateInfo(cell_pins={0: {0}, 1: {1}, 5: {2}},
                                       pagesizes={5: 2048})
        doc = etree.fromstring(SOURCE_XML)
        before = etree.tostring(doc)
        self.assertRaises(exception.DomainXMLError,
                          migration_xml.apply_numa_info, doc, info)
        # Shape is checked before any step: the document is untouched.
        self.assertEqual(before, etree.tostring(doc))


class MalformedTestCase(base.TestCase):

    scenarios = [
        ('not_xml', {'xml': '<domain>', 'fragment': 'not XML'}),
        ('not_domain', {'xml': '<network/>',
                        'fragment': 'root element is <network>'}),
        ('no_vcpu', {'xml': '<domain><name>x</name></domain>',
                     'fragment': "<vcpu> is None"}),
    ]

    def test_rejected(self):
        self.assertRaisesMessage(
            exception.DomainXMLError, self.fragment,
            migration_xml.get_updated_xml, self.xml,
            objects.NUMAMigrateInfo())


class RewritePropertyTestCase(base.TestCase):
    """For any guest and any destination that fits its shape, the
    rewritten XML reads back as exactly the destination's placement."""

    @hypothesis.settings(max_examples=150, deadline=None)
    @hypothesis.given(st.data())
    def test_rewrite_reads_back_as_destination(self, data):
        inst, topo = data.draw(guests.guests())
        source_info = data.draw(guests.destinations(topo))
        dest_info = data.draw(guests.destinations(topo))
        source = guest_xml.build_domain_xml(inst, topo, source_info, 'kvm')
        rewritten = migration_xml.get_updated_xml(source, dest_info)

        self.assertEqual(guests.info_data(dest_info),
                         guests.info_data(
                             guest_parse.extract_numa_info(rewritten)))
        parsed = guest_parse.parse_guest_topology(rewritten)
        for cell in parsed.cells:
            self.assertEqual(dest_info.cell_pins[cell.id], {cell.host_cell})
            self.assertEqual(dest_info.pagesizes.get(cell.id),
                             cell.pagesize)
        # The guest is told the destination's distances, or none.
        self.assertEqual(dest_info.cell_distances, _rows(
            etree.fromstring(rewritten)) if dest_info.cell_distances
            else {})
        if not dest_info.cell_distances:
            self.assertIsNone(etree.fromstring(rewritten).find(
                'cpu/numa/cell/distances'))
            self.assertEqual(
                {v: p for v, p in dest_info.cpu_pins.items()
                 if v in cell.pcpuset},
                {v: {p} for v, p in cell.cpu_pinning.items()})
        # What the guest is (cells, vCPUs, memory, which are dedicated)
        # does not change with where it runs.
        self.assertEqual(
            [(c.id, c.cpuset, c.pcpuset, c.memory_mb) for c in topo.cells],
            [(c.id, c.cpuset, c.pcpuset, c.memory_mb)
             for c in parsed.cells])


class Issue17RegressionTestCase(base.TestCase):
    """What the XML corpus (tests/fixtures/domains) found."""

    def _guest(self, vcpu, extra=''):
        return (f"<domain><name>g</name>{vcpu}{extra}<cpu><numa>"
                f"<cell id='0' cpus='0-1' memory='1048576' unit='KiB'/>"
                f"</numa></cpu></domain>")

    def _rewrite(self, xml, **kwargs):
        values = {'cpu_pins': {}, 'cell_pins': {0: {1}},
                  'emulator_pins': {4, 5}, 'floating_cpus': {4, 5}}
        values.update(kwargs)
        return etree.fromstring(migration_xml.get_updated_xml(
            xml, objects.NUMAMigrateInfo(**values).validate()))

    def test_iothreads_without_pins_get_the_emulator_pins(self):
        doc = self._rewrite(self._guest(
            "<vcpu placement='static'>2</vcpu>", '<iothreads>2</iothreads>'))
        self.assertEqual([{'iothread': '1', 'cpuset': '4-5'},
                          {'iothread': '2', 'cpuset': '4-5'}],
                         _attrs(doc, 'cputune/iothreadpin'))

    def test_iothread_ids_named_and_filled_as_libvirt_does(self):
        doc = self._rewrite(self._guest(
            "<vcpu>2</vcpu>", "<iothreads>3</iothreads><iothreadids>"
            "<iothread id='2'/><iothread id='7'/></iothreadids><cputune>"
            "<iothreadpin iothread='9' cpuset='0'/></cputune>"))
        # The stale pin of a thread the guest lacks is gone (libvirt
        # refuses it); thread 1 is the one libvirt adds.
        self.assertEqual(['1', '2', '7'], [
            el.get('iothread') for el in doc.iterfind('cputune/iothreadpin')])

    def test_no_emulator_pins_no_iothread_pins(self):
        doc = self._rewrite(self._guest(
            "<vcpu>2</vcpu>", '<iothreads>1</iothreads>'),
            emulator_pins=set())
        self.assertIsNone(doc.find('cputune'))

    def test_auto_placement_becomes_static_with_the_cpuset(self):
        doc = self._rewrite(self._guest("<vcpu placement='auto'>2</vcpu>"))
        self.assertEqual({'placement': 'static', 'cpuset': '4-5'},
                         dict(doc.find('vcpu').attrib))

    def test_auto_placement_kept_without_floating_cpus(self):
        doc = self._rewrite(self._guest("<vcpu placement='auto'>2</vcpu>"),
                            cpu_pins={0: {6}, 1: {7}}, floating_cpus=None)
        self.assertEqual({'placement': 'auto'}, dict(doc.find('vcpu').attrib))

    def test_malformed_iothreads_refused(self):
        self.assertRaises(exception.DomainXMLError, self._rewrite,
                          self._guest("<vcpu>2</vcpu>",
                                      '<iothreads>two</iothreads>'))
