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

    def _paused_half_here(self, claimed_pcpus):
        """A guest recorded on h2 whose postcopy-paused migration holds a
        claim on h1 (this host), whose XML runs pCPUs 2-3."""
        from numamig import objects
        entry = guest([2, 3])
        instance = entry.instance
        claimed = instance.numa_topology.obj_clone()
        claimed.cells[0].cpu_pinning = dict(enumerate(claimed_pcpus))
        old = instance.numa_topology.obj_clone()
        old.cells[0].cpu_pinning = {0: 6, 1: 7}
        instance.host = 'h2'
        instance.numa_topology = old
        instance.migration_context = objects.MigrationContext(
            instance_uuid=instance.uuid, migration_uuid=db_base.new_uuid(),
            source_host='h2', dest_host='h1', old_numa_topology=old,
            new_numa_topology=claimed)
        return entry

    def test_paused_half_on_its_claimed_pins_is_no_finding(self):
        # A postcopy-paused guest occupies both hosts: here, the pins
        # its migration claimed.
        self.assertEqual([], self.audit(self._paused_half_here([2, 3])))

    def test_paused_half_off_its_claim_is_found(self):
        found = self.audit(self._paused_half_here([2, 10]))
        self.assertEqual([pins.XML_DIFFERS], [f.kind for f in found])
        self.assertNotIn('recorded on', found[0].detail)

    def test_paused_half_and_another_guest_on_one_pcpu_overlap(self):
        found = self.audit(self._paused_half_here([2, 3]),
                           guest([3, 2], recorded=False))
        self.assertIn(pins.SHARED_PCPU, [f.kind for f in found])

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
