"""Agents' reported usage against the records (numamig.audit.usage)."""

from unittest import mock

from numamig import fingerprint
from numamig.audit import pins
from numamig.audit import usage
from numamig.numa import usage as numa_usage
from tests import base
from tests.unit.db import base as db_base


def report_of(instances, host='src', extra=()):
    """A report counting ``instances`` and the topologies ``extra``
    (usage no record owns)."""
    topology = numa_usage.host_with_usage(
        usage.without_usage(db_base.make_host_topology()),
        [i.numa_topology for i in instances] + list(extra))
    pairs = sorted((i.project_id, i.uuid) for i in instances)
    return db_base.make_report(host, topology=topology,
                               fingerprint=fingerprint.compute(pairs))


class CompareTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.guest = db_base.make_instance('src')

    def test_report_as_recorded_is_clean(self):
        self.assertEqual([], usage.compare(report_of([self.guest]),
                                           [self.guest], []))

    def test_a_claim_held_here_counts_as_recorded(self):
        claimed = db_base.make_instance('elsewhere')
        claimed.migration_context = db_base.make_context(
            claimed, db_base.new_uuid(), dest_host='src')
        report = report_of([self.guest],
                           extra=[claimed.migration_context
                                  .new_numa_topology])
        report.fingerprint = fingerprint.compute(sorted(
            (i.project_id, i.uuid) for i in (self.guest, claimed)))
        self.assertEqual([], usage.compare(report, [self.guest], [claimed]))

    def test_pins_no_record_owns(self):
        stray = db_base.make_topology(db_base.new_uuid(), host_cell=1,
                                      pins={0: 6, 1: 7})
        found = usage.compare(report_of([self.guest], extra=[stray]),
                              [self.guest], [])
        kinds = {f.kind for f in found}
        self.assertEqual({pins.USAGE_UNOWNED}, kinds)
        self.assertIn('host cell 1: pCPUs 6-7 reported pinned, no guest or '
                      'claim recorded here holds them',
                      [f.detail for f in found])

    def test_pages_used_that_no_record_holds(self):
        report = report_of([self.guest])
        pool = report.topology.cells[1].mempages[-1]
        pool.used += 1
        (finding,) = usage.compare(report, [self.guest], [])
        self.assertEqual(pins.USAGE_UNOWNED, finding.kind)
        self.assertEqual(f"host cell 1: {pool.used} page(s) of "
                         f"{pool.size_kb} KiB reported used, the records "
                         f"hold {pool.used - 1}", finding.detail)

    def test_recorded_usage_not_reported_names_the_guest(self):
        found = usage.compare(report_of([]), [self.guest], [])
        cpus = [f for f in found if 'pCPUs' in f.detail]
        self.assertEqual(1, len(cpus), found)
        self.assertEqual(pins.USAGE_UNREPORTED, cpus[0].kind)
        self.assertIn('pCPUs 2-3 recorded as held (by '
                      f'{self.guest.uuid}), reported free', cpus[0].detail)
        self.assertEqual((self.guest.uuid,), cpus[0].instance_uuids)

    def test_same_usage_other_guests_is_told_by_the_fingerprint(self):
        report = report_of([self.guest])
        report.fingerprint = fingerprint.compute([('demo', 'someone')])
        (finding,) = usage.compare(report, [self.guest], [])
        self.assertEqual(pins.USAGE_UNOWNED, finding.kind)
        self.assertIn('differ from the 1 recorded here', finding.detail)


class HealTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.guest = db_base.make_instance('src')
        self.db = mock.Mock()
        records = mock.patch('numamig.db.instances.get_all',
                             return_value=[mock.Mock(instance=self.guest)])
        claims = mock.patch('numamig.db.instances.get_claims_on_host',
                            return_value=[])
        records.start(), claims.start()
        self.addCleanup(mock.patch.stopall)
        stray = db_base.make_topology(db_base.new_uuid(), host_cell=1,
                                      pins={0: 6, 1: 7})
        self.before = usage.of_host(self.db, report_of([self.guest],
                                                       extra=[stray]))

    def test_a_recompute_that_clears_it_heals_it(self):
        api = mock.Mock()
        api.host_refresh_usage.return_value = report_of([self.guest])
        healed, remaining = usage.heal(api, 'ctxt', self.db, self.before)
        self.assertEqual((self.before, []), (healed, remaining))
        api.host_refresh_usage.assert_called_once_with('ctxt', 'src')

    def test_what_the_fresh_report_still_shows_remains(self):
        api = mock.Mock()
        api.host_refresh_usage.side_effect = RuntimeError('agent down')
        healed, remaining = usage.heal(api, 'ctxt', self.db, self.before)
        self.assertEqual([], healed)
        self.assertEqual(len(self.before), len(remaining))
        self.assertIn('(not healed: agent down)', remaining[0].detail)
