"""Tests of the migration guard's decision (guard.decide)."""

import copy
import dataclasses

import testscenarios

from numamig import exception
from numamig.virt.libvirt import guard
from numamig.virt.libvirt import guard_claims
from numamig.virt.libvirt import guest_parse
from numamig.virt.libvirt import migration_xml
from tests.unit.virt.libvirt import guard_base as gb
from tests.unit.virt.libvirt.guard_base import GUEST
from tests.unit.virt.libvirt.guard_base import NOW

load_tests = testscenarios.load_tests_apply_scenarios


class RewriteTest(gb.GuardTestCase):

    def test_an_old_sources_copy_is_rewritten_to_the_claim(self):
        self.publish()
        verdict = guard.decide(gb.source_xml(), self.settings, now=NOW)
        self.assertEqual(guard.REWRITTEN, verdict.action)
        info = guest_parse.extract_numa_info(verdict.xml)
        self.assertEqual({0: {6}, 1: {7}, 2: {14}, 3: {15}}, info.cpu_pins)
        self.assertEqual({0: {1}, 1: {0}}, info.cell_pins)
        self.assertEqual({4, 12}, info.emulator_pins)
        self.assertEqual({0: 2048, 1: 2048}, info.pagesizes)
        self.assertEqual({1}, info.sched_vcpus)

    def test_what_it_changed_is_named(self):
        self.publish()
        verdict = guard.decide(gb.source_xml(), self.settings, now=NOW)
        changed = {part: (before, after)
                   for part, before, after in verdict.changes}
        self.assertEqual(('cpuset=2', 'cpuset=6'), changed['vcpupin 0'])
        self.assertEqual(('mode=strict nodeset=0', 'mode=strict nodeset=1'),
                         changed['memnode 0'])
        self.assertEqual(('cpuset=0-1', 'cpuset=4,12'),
                         changed['emulatorpin'])
        self.assertNotIn('vcpusched', changed)
        self.assertIn(gb.MIGRATION, verdict.describe())
        self.assertIn('vcpupin 3: cpuset=11 -> cpuset=15',
                      verdict.describe())

    def test_the_claims_distances_reach_the_persistent_xml_only(self):
        # The claims file carries the destination's distances; an
        # incoming (live) XML keeps the guest's own (guest ABI: libvirt
        # refuses others), a persistent definition gets the claim's.
        table = {0: {0: 10, 1: 12}, 1: {0: 12, 1: 10}}
        self.publish({GUEST: gb.claim(cell_distances=table)})
        verdict = guard.decide(gb.source_xml(), self.settings, now=NOW)
        self.assertEqual(guard.REWRITTEN, verdict.action)
        self.assertNotIn('distances 0', [c[0] for c in verdict.changes])
        self.assertEqual({}, guest_parse.extract_numa_info(
            verdict.xml).cell_distances)
        _, placements = guard_claims.read(self.claims_file, 60, now=NOW)
        persistent = guard.against_claim(
            migration_xml.parse_domain(verdict.xml), GUEST, 'dst',
            placements[GUEST])
        changed = {part: (before, after)
                   for part, before, after in persistent.changes}
        self.assertEqual({'distances 0': ('(none)', '0=10 1=12'),
                          'distances 1': ('(none)', '0=12 1=10')}, changed)
        self.assertEqual(table, guest_parse.extract_numa_info(
            persistent.xml).cell_distances)

    def test_a_rewritten_xml_passes_unchanged(self):
        self.publish()
        rewritten = guard.decide(gb.source_xml(), self.settings,
                                 now=NOW).xml
        verdict = guard.decide(rewritten, self.settings, now=NOW)
        self.assertEqual(guard.UNCHANGED, verdict.action)
        self.assertIsNone(verdict.xml)
        self.assertIn('matches the claim of migration', verdict.reason)

    def test_a_guest_without_claim_passes(self):
        self.publish({'another-guest': gb.claim()})
        verdict = guard.decide(gb.source_xml(), self.settings, now=NOW)
        self.assertEqual(guard.UNCHANGED, verdict.action)
        self.assertIn('holds no move claim', verdict.reason)

    def test_the_input_document_is_left_alone(self):
        doc = migration_xml.parse_domain(gb.source_xml())
        before = copy.deepcopy(doc)
        guard.against_claim(doc, GUEST, 'dst', gb.claim())
        self.assertEqual(guard.numa_parts(before), guard.numa_parts(doc))


class RefuseTest(gb.GuardTestCase):

    def _refused(self, placement):
        self.publish({GUEST: placement})
        verdict = guard.decide(gb.source_xml(), self.settings, now=NOW)
        self.assertEqual(guard.REFUSED, verdict.action)
        self.assertIsNone(verdict.xml)
        return verdict.reason

    def test_another_guest_cell_count(self):
        reason = self._refused(gb.claim(
            cell_pins={0: [1]}, pagesizes={0: 2048},
            cpu_pins={0: [6], 1: [7], 2: [14], 3: [15]}))
        self.assertIn("the guest has 2 NUMA cell(s) [0, 1], the claim "
                      "places 1 [0]", reason)

    def test_another_page_size(self):
        reason = self._refused(gb.claim(pagesizes={0: 1048576, 1: 2048}))
        self.assertIn("guest cell 0 is backed by 2048 KiB pages, the claim "
                      "took 1048576 KiB pages", reason)

    def test_small_pages_claimed_for_a_huge_page_guest(self):
        reason = self._refused(gb.claim(pagesizes={}))
        self.assertIn("backed by 2048 KiB pages, the claim took 4 KiB",
                      reason)

    def test_another_vcpu_count(self):
        reason = self._refused(gb.claim(cpu_pins={0: [6], 1: [7]}))
        self.assertIn("the guest has vCPUs 0-3, the claim pins 0-1", reason)

    def test_the_reason_names_the_claim(self):
        reason = self._refused(gb.claim(pagesizes={}))
        self.assertIn(f"claim of migration {gb.MIGRATION} on dst", reason)


class UnknownClaimsTest(gb.GuardTestCase):
    """Missing, stale, malformed claims: pass (default) or refuse."""

    scenarios = [
        ('pass', {'when_unknown': guard.PASS,
                  'action': guard.UNCHANGED}),
        ('refuse', {'when_unknown': guard.REFUSE,
                    'action': guard.REFUSED}),
    ]

    def _decide(self, xml=None):
        settings = dataclasses.replace(self.settings,
                                       when_unknown=self.when_unknown)
        verdict = guard.decide(xml or gb.source_xml(), settings, now=NOW)
        self.assertEqual(self.action, verdict.action)
        self.assertIsNone(verdict.xml)
        self.assertIn('claims unknown', verdict.reason)
        return verdict.reason

    def test_missing_file(self):
        self.assertIn('does not exist', self._decide())

    def test_stale_file(self):
        self.publish(written_at=NOW - 61)
        reason = self._decide()
        self.assertIn('written 61 s ago, more than 60 s', reason)
        self.assertIn('agent of dst is not running', reason)

    def test_file_of_another_format(self):
        with open(self.claims_file, 'w') as f:
            f.write('{"version": 2, "host": "dst", "written_at": 0, '
                    '"claims": {}}')
        self.assertIn('format version 2', self._decide())

    def test_file_that_is_not_json(self):
        with open(self.claims_file, 'w') as f:
            f.write('{"version": 1,')
        self.assertIn('is not a numamig claims file', self._decide())

    def test_malformed_claim(self):
        with open(self.claims_file, 'w') as f:
            f.write('{"version": 1, "host": "dst", "written_at": %f, '
                    '"claims": {"%s": {"cpu_pins": 3}}}' % (NOW, GUEST))
        self.assertIn('malformed claim', self._decide())

    def test_unparsable_xml(self):
        self.publish()
        self.assertIn('not XML', self._decide('<domain'))


class SettingsTest(gb.GuardTestCase):

    def test_unknown_policy_is_refused(self):
        self.assertRaisesMessage(
            exception.InvalidConfiguration, "'ignore' is not one of pass, "
            "refuse", dataclasses.replace, self.settings,
            when_unknown='ignore')

    def test_non_positive_age_is_refused(self):
        self.assertRaises(exception.InvalidConfiguration,
                          dataclasses.replace, self.settings, max_age_s=0)


class LogTest(gb.GuardTestCase):
    """The guard's log: every decision appended, read forward by the
    agent from where it last stopped."""

    def setUp(self):
        super().setUp()
        import fixtures
        self.log = self.useFixture(fixtures.TempDir()).join('guard.log')
        self.logged = dataclasses.replace(self.settings, log_file=self.log)

    def decide_and_log(self, guest='guest-1'):
        verdict = guard.decide(gb.source_xml(), self.logged, now=NOW)
        self.assertIsNone(guard.append_log(self.logged, guest, verdict))
        return verdict

    def test_a_first_read_starts_at_the_end_then_reads_what_follows(self):
        self.publish()
        self.decide_and_log('before')
        entries, position = guard.read_log(self.log)
        self.assertEqual([], entries)
        verdict = self.decide_and_log('after')
        entries, position = guard.read_log(self.log, position)
        self.assertEqual([('after', guard.REWRITTEN, GUEST)],
                         [(e.guest, e.action, e.instance_uuid)
                          for e in entries])
        self.assertEqual(verdict.describe(),
                         f"{entries[0].action} {GUEST}: {entries[0].reason}")
        self.assertEqual(([], position), guard.read_log(self.log, position))

    def test_a_log_made_after_the_first_read_is_read_from_its_start(self):
        entries, position = guard.read_log(self.log)
        self.assertEqual([], entries)
        self.decide_and_log()  # no claim published: passed unchanged
        entries, _position = guard.read_log(self.log, position)
        self.assertEqual([guard.UNCHANGED], [e.action for e in entries])

    def test_a_rotated_log_is_read_from_its_start(self):
        self.decide_and_log('old')
        _entries, position = guard.read_log(self.log)
        import os
        os.rename(self.log, self.log + '.1')
        self.decide_and_log('new')
        entries, _position = guard.read_log(self.log, position)
        self.assertEqual(['new'], [e.guest for e in entries])

    def test_a_half_written_line_waits_and_foreign_lines_are_skipped(self):
        _entries, position = guard.read_log(self.log)
        verdict = guard.decide(gb.source_xml(), self.logged, now=NOW)
        line = guard.log_line('guest-1', verdict)
        with open(self.log, 'a') as f:
            f.write("an operator's note\n" + line[:20])
        entries, position = guard.read_log(self.log, position)
        self.assertEqual([], entries)
        with open(self.log, 'a') as f:
            f.write(line[20:])
        entries, position = guard.read_log(self.log, position)
        self.assertEqual(['guest-1'], [e.guest for e in entries])

    def test_no_log_file_hands_the_line_back(self):
        verdict = guard.decide(gb.source_xml(), self.settings, now=NOW)
        unlogged = dataclasses.replace(self.settings, log_file=None)
        line = guard.append_log(unlogged, 'guest-1', verdict)
        self.assertIn('incoming migration of guest-1: unchanged', line)
