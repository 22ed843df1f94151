"""audit.pins.audit_host on XML numamig writes, changed one way per test."""

from numamig.audit import pins
from tests import base
from tests.unit.cmd import cli_base
from tests.unit.db import base as db_base


def guest(pcpus, recorded=True, uuid=None, host_cell=0):
    instance = cli_base.make_instance('h1', uuid=uuid or db_base.new_uuid())
    instance.numa_topology.cells[0].cpu_pinning = dict(enumerate(pcpus))
    instance.numa_topology.cells[0].host_cell = host_cell
    xml = cli_base.domain_xml(instance)
    return pins.Guest(instance.uuid, instance.name, xml=xml,
                      instance=instance if recorded else None)


class AuditHostTest(base.TestCase):

    def audit(self, *guests):
        return pins.audit_host('h1', db_base.make_host_topology(),
                               list(guests))

    def test_clean_host(self):
        found = self.audit(guest([2, 3]), guest([6, 7], host_cell=1))
        self.assertEqual([], found)

    def test_overlap_with_an_unknown_guest(self):
        found = self.audit(guest([2, 3]), guest([3, 2], recorded=False))
        self.assertEqual([pins.SHARED_PCPU], [f.kind for f in found])
        self.assertIn('pCPUs 2-3 are pinned by 2 guests', found[0].detail)

    def test_pin_outside_dedicated_set(self):
        entry = guest([2, 3], recorded=False)
        xml = entry.xml.replace('<vcpupin vcpu="0" cpuset="2"/>',
                                '<vcpupin vcpu="0" cpuset="0"/>')
        self.assertNotEqual(entry.xml, xml)
        found = self.audit(pins.Guest(entry.uuid, entry.name, xml=xml))
        self.assertEqual([pins.OUTSIDE_DEDICATED], [f.kind for f in found])
        self.assertIn('0->0', found[0].detail)

    def test_recorded_on_another_host(self):
        entry = guest([2, 3])
        entry.instance.host = 'h2'
        found = self.audit(entry)
        self.assertEqual([pins.XML_DIFFERS], [f.kind for f in found])
        self.assertIn('recorded on h2', found[0].detail)

    def test_emulator_threads_on_dedicated_cpus(self):
        entry = guest([2, 3], recorded=False)
        xml = entry.xml.replace('<emulatorpin cpuset="0-1,4-5"/>',
                                '<emulatorpin cpuset="6"/>')
        self.assertNotEqual(entry.xml, xml)
        found = self.audit(pins.Guest(entry.uuid, entry.name, xml=xml))
        self.assertEqual([pins.EMULATOR_WRONG_SET], [f.kind for f in found])

    def test_missing_xml(self):
        found = self.audit(pins.Guest('u', 'g', error='host down'))
        self.assertEqual([pins.UNREADABLE_XML], [f.kind for f in found])
        self.assertIn('host down', found[0].detail)
