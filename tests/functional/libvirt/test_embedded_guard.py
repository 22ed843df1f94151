"""The embedded tier's migration guard: LibvirtDriver on the test driver.

An emulated migration passes the XML through the guard as libvirt passes
a real one through the hook. Hosts as in test_embedded::

    hostA: guest on cell 0, vCPU 0 -> 1, vCPU 1 -> 9 (sent verbatim)
    hostB: its claim on cell 1, vCPU 0 -> 5, vCPU 1 -> 13
"""

import json
import os

import fixtures

from numamig import exception
from tests import base
from tests import libvirt_settings
from tests.fixtures import libvirt_embedded
from tests.fixtures import libvirt_guests as guests
from tests.functional.libvirt import test_embedded as te

MIGRATION = '5a1e0000-aaaa-4bbb-8ccc-00000000c001'


class EmbeddedGuardTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.logs = self.useFixture(fixtures.FakeLogger(name='numamig'))
        directory = self.useFixture(fixtures.TempDir()).path
        self.settings = libvirt_settings.guard(
            hook_path=None,
            claims_file=os.path.join(directory, 'claims.json'))
        self.src = self.useFixture(libvirt_embedded.EmbeddedHost(
            'hostA', 'numa-2cell-a.xml', cpu_shared_set=te.SHARED)).driver
        self.dst = self.useFixture(libvirt_embedded.EmbeddedHost(
            'hostB', 'numa-2cell-b.xml', cpu_shared_set=te.SHARED,
            migration_guard=self.settings)).driver
        self.src.spawn(guests.instance(vcpus=3, memory_mb=1024),
                       te._source_topology())
        self.verbatim = self.src.get_destination_xml(guests.UUID, None)

    def _claims(self):
        with open(self.settings.claims_file) as f:
            return json.load(f)['claims']

    def test_on_and_publishing_from_the_start(self):
        self.assertEqual('on', self.dst.migration_guard_state())
        self.assertEqual({}, self._claims())
        self.assertEqual('off', self.src.migration_guard_state())

    def test_published_claim_is_the_placement_the_source_would_write(self):
        self.dst.publish_move_claims(
            {guests.UUID: (MIGRATION, te._claimed_topology())})
        published = self._claims()[guests.UUID]
        self.assertEqual(MIGRATION, published['migration'])
        self.assertEqual({'0': [5], '1': [13], '2': [4, 12]},
                         published['cpu_pins'])
        self.assertEqual({'0': [1]}, published['cell_pins'])

    def test_verbatim_xml_is_placed_as_claimed(self):
        self.dst.publish_move_claims(
            {guests.UUID: (MIGRATION, te._claimed_topology())})
        self.dst.accept_emulated_migration(guests.UUID, self.verbatim)
        self.assertEqual(
            guests.canonical(te._claimed_topology()),
            guests.canonical(self.dst.get_guest_topology(guests.UUID)))
        self.assertIn('migration guard, incoming migration of guest-1 '
                      '(emulated): rewritten', self.logs.output)
        self.assertIsNone(self.dst.check_arrival(
            guests.UUID, MIGRATION, te._claimed_topology()))

    def test_without_claim_the_xml_passes_and_the_arrival_says_so(self):
        self.dst.accept_emulated_migration(guests.UUID, self.verbatim)
        self.assertEqual(
            guests.canonical(te._source_topology()),
            guests.canonical(self.dst.get_guest_topology(guests.UUID)))
        self.assertIn('holds no move claim', self.logs.output)
        mismatch = self.dst.check_arrival(guests.UUID, MIGRATION,
                                          te._claimed_topology())
        self.assertIn('vcpupin 0: cpuset=1 -> cpuset=5', mismatch)

    def test_irreconcilable_claim_refuses_and_defines_nothing(self):
        claimed = te._claimed_topology()
        claimed.cells[0].pagesize = 1048576
        self.dst.publish_move_claims({guests.UUID: (MIGRATION, claimed)})
        exc = self.assertRaises(exception.HypervisorError,
                                self.dst.accept_emulated_migration,
                                guests.UUID, self.verbatim)
        self.assertIn('numamig migration guard: cannot be reconciled with '
                      f'the claim of migration {MIGRATION} on hostB: guest '
                      'cell 0 is backed by 2048 KiB pages, the claim took '
                      '1048576 KiB pages', str(exc))
        self.assertEqual({}, self.dst.list_guests())

    def test_unwritable_claims_file_reports_failed(self):
        os.chmod(os.path.dirname(self.settings.claims_file), 0o500)
        self.addCleanup(os.chmod, os.path.dirname(self.settings.claims_file),
                        0o700)
        if os.geteuid() == 0:
            # root writes anywhere: make the path a directory instead.
            os.chmod(os.path.dirname(self.settings.claims_file), 0o700)
            os.remove(self.settings.claims_file)
            os.mkdir(self.settings.claims_file)
        self.dst.publish_move_claims({})
        self.assertEqual('failed', self.dst.migration_guard_state())
        self.assertIn('cannot publish the move claims', self.logs.output)
