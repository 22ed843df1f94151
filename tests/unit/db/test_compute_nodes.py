"""Compute node records: each host's last report."""

import datetime
from unittest import mock

from numamig import exception
from numamig import fingerprint
from numamig import objects
from numamig.db import compute_nodes
from tests.unit.db import base

T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


class ComputeNodesTestCase(base.DBTestCase):

    def test_round_trip_keeps_topology_and_microseconds(self):
        report = base.make_report()
        stored = compute_nodes.save_report(self.db, report)
        self.assertEqual(report, stored)
        self.assertEqual(678901, stored.reported_at.microsecond)
        self.assertEqual(1, stored.topology.cell(1).pages_of(1048576).used)

    def test_newer_report_replaces(self):
        compute_nodes.save_report(self.db, base.make_report(reported_at=T0))
        later = T0 + datetime.timedelta(seconds=10)
        compute_nodes.save_report(self.db, base.make_report(
            reported_at=later, fingerprint='pfp0v0019e0420efb37746c6'))
        stored = compute_nodes.get(self.db, 'src')
        self.assertEqual(later, stored.reported_at)
        self.assertEqual('pfp0v0019e0420efb37746c6', stored.fingerprint)

    def test_older_report_is_ignored(self):
        compute_nodes.save_report(self.db, base.make_report(reported_at=T0))
        stored = compute_nodes.save_report(self.db, base.make_report(
            reported_at=T0 - datetime.timedelta(seconds=1),
            service_version=1))
        self.assertEqual((T0, 2), (stored.reported_at,
                                   stored.service_version))

    def test_invalid_report_keeps_the_stored_one(self):
        compute_nodes.save_report(self.db, base.make_report(reported_at=T0))
        bad = base.make_report(reported_at=T0 + datetime.timedelta(1),
                               fingerprint='md5:abc')
        self.assertRaises(exception.ObjectValidationError,
                          compute_nodes.save_report, self.db, bad)
        self.assertEqual(T0, compute_nodes.get(self.db, 'src').reported_at)

    def test_get_all_reported_since(self):
        compute_nodes.save_report(self.db, base.make_report(
            host='old', reported_at=T0))
        compute_nodes.save_report(self.db, base.make_report(
            host='new', reported_at=T0 + datetime.timedelta(minutes=5)))
        self.assertEqual(['new', 'old'], [
            r.host for r in compute_nodes.get_all(self.db)])
        self.assertEqual(['new'], [r.host for r in compute_nodes.get_all(
            self.db, reported_since=T0 + datetime.timedelta(minutes=1))])

    def test_unknown_host(self):
        self.assertRaisesMessage(exception.HostNotFound, 'nohost',
                                 compute_nodes.get, self.db, 'nohost')

    def test_delete(self):
        compute_nodes.save_report(self.db, base.make_report())
        self.assertTrue(compute_nodes.delete(self.db, 'src'))
        self.assertFalse(compute_nodes.delete(self.db, 'src'))
        self.assertRaises(exception.HostNotFound, compute_nodes.get,
                          self.db, 'src')


class ChangedSinceTestCase(base.DBTestCase):

    def save(self, host, seconds=0):
        return compute_nodes.save_report(self.db, base.make_report(
            host=host, reported_at=T0 + datetime.timedelta(seconds=seconds)))

    def test_only_reports_written_after_the_number(self):
        self.save('a')
        self.save('b')
        reports, seen = compute_nodes.changed_since(self.db, -1)
        self.assertEqual(['a', 'b'], [r.host for r in reports])
        self.assertEqual(([], seen), compute_nodes.changed_since(self.db,
                                                                 seen))
        self.save('b', seconds=10)
        reports, later = compute_nodes.changed_since(self.db, seen)
        self.assertEqual([('b', T0 + datetime.timedelta(seconds=10))],
                         [(r.host, r.reported_at) for r in reports])
        self.assertGreater(later, seen)

    def test_an_ignored_older_report_changes_nothing_read(self):
        self.save('a', seconds=10)
        _, seen = compute_nodes.changed_since(self.db, -1)
        self.save('a', seconds=0)
        self.assertEqual([], compute_nodes.changed_since(self.db, seen)[0])

    def test_only_wanted_reports_are_read_whole(self):
        for host in ('a', 'b', 'c'):
            self.save(host)
        with mock.patch.object(compute_nodes, '_report_from',
                               wraps=compute_nodes._report_from) as load:
            reports, _ = compute_nodes.changed_since(
                self.db, -1, newer_than=lambda host, at, seq: host == 'b')
        self.assertEqual(['b'], [r.host for r in reports])
        self.assertEqual(1, load.call_count)

    def changes(self, number=-1):
        with self.db.reader() as session:
            return compute_nodes.changes_since_in(session, number)[0]

    def test_changes_are_built_only_when_asked(self):
        for host in ('a', 'b'):
            self.save(host)
        with mock.patch.object(compute_nodes, '_report_from',
                               wraps=compute_nodes._report_from) as load:
            changes = self.changes()
            self.assertEqual(0, load.call_count)
            report = changes[1].load()
        self.assertEqual(1, load.call_count)
        self.assertEqual(['a', 'b'], [c.host for c in changes])
        self.assertEqual('b', report.host)
        self.assertEqual(changes[1].reported_at, report.reported_at)

    def test_the_digest_leaves_out_only_the_time(self):
        first = base.make_report(host='a')
        saved, = compute_nodes.save_reports_reading_guests(self.db, [first])
        change, = self.changes()
        # The digest the writer computed is the one a reader computes.
        self.assertEqual(saved.digest, change.digest)
        later = base.make_report(host='a', reported_at=first.reported_at +
                                 datetime.timedelta(seconds=60))
        again, = compute_nodes.save_reports_reading_guests(self.db, [later])
        self.assertEqual(saved.digest, again.digest)
        self.assertNotEqual(first.reported_at, self.changes()[0].reported_at)
        other = base.make_report(
            host='a', reported_at=later.reported_at +
            datetime.timedelta(seconds=60),
            fingerprint=fingerprint.compute([('p', 'some-guest')]))
        changed, = compute_nodes.save_reports_reading_guests(self.db,
                                                             [other])
        self.assertNotEqual(saved.digest, changed.digest)
        self.assertEqual(changed.digest, self.changes()[0].digest)

    def test_reports_with_the_same_cpu_have_the_same_digest(self):
        """A host's CPU, read anew for each report, changes no digest
        unless the CPU changed (the scheduler then rebuilds nothing)."""
        def report(at, features):
            return base.make_report(host='a', reported_at=at,
                                    cpu=_host_cpu(features))
        first = report(base.make_report().reported_at, ['ss', 'vmx'])
        saved, = compute_nodes.save_reports_reading_guests(self.db, [first])
        at = first.reported_at + datetime.timedelta(seconds=60)
        again, = compute_nodes.save_reports_reading_guests(
            self.db, [report(at, ['ss', 'vmx'])])
        self.assertEqual(saved.digest, again.digest)
        changed, = compute_nodes.save_reports_reading_guests(
            self.db, [report(at + datetime.timedelta(seconds=60), ['ss'])])
        self.assertNotEqual(saved.digest, changed.digest)
        self.assertEqual(['ss'], compute_nodes.get(self.db, 'a').cpu
                         .host_model_features)

    def test_reports_differing_in_locality_only_have_the_same_digest(self):
        """The locality watch's view, new at every look, changes no
        digest: the scheduler rebuilds nothing for it; it is stored."""
        from numamig import objects

        def report(at, share):
            return base.make_report(
                host='a', reported_at=at, locality=objects.HostLocality(
                    policy='report', remote_share=share, guests=[
                        objects.GuestLocality(
                            instance_uuid='g', memory_mb={0: 1, 1: 3},
                            remote_share=share, state='local')]))
        at = base.make_report().reported_at
        saved, = compute_nodes.save_reports_reading_guests(
            self.db, [report(at, 0.25)])
        again, = compute_nodes.save_reports_reading_guests(
            self.db, [report(at + datetime.timedelta(seconds=60), 0.75)])
        self.assertEqual(saved.digest, again.digest)
        self.assertEqual(0.75, compute_nodes.get(self.db, 'a').locality
                         .remote_share)
        self.assertNotEqual(saved.digest, compute_nodes.content_digest(
            '{"x": 1}'))

    def test_a_digest_without_locality_is_unchanged(self):
        text = '{"host": "a", "locality": {"y": [1, {"z": "}"}]}, "x": 2}'
        self.assertEqual(compute_nodes.content_digest(
            '{"host": "a", "locality": null, "x": 2}'),
            compute_nodes.content_digest(text))
        self.assertNotEqual(compute_nodes.content_digest(text),
                            compute_nodes.content_digest(
                                text.replace('"x": 2', '"x": 3')))

    def test_a_digest_ignores_changed_field_order_and_time(self):
        one = ('{"numamig_object.changes": ["host", "topology"], '
               '"reported_at": "2026-01-02T03:04:05Z", "x": 1}')
        two = ('{"numamig_object.changes": ["topology", "host"], '
               '"reported_at": "2026-01-02T03:05:05Z", "x": 1}')
        three = two.replace('"x": 1', '"x": 2')
        self.assertEqual(compute_nodes.content_digest(one),
                         compute_nodes.content_digest(two))
        self.assertNotEqual(compute_nodes.content_digest(two),
                            compute_nodes.content_digest(three))

    def test_a_stored_report_is_not_read_back(self):
        report = base.make_report()
        with mock.patch.object(compute_nodes, 'get') as get:
            self.assertIs(report, compute_nodes.save_report(self.db, report))
        get.assert_not_called()


class SaveBatchTestCase(base.DBTestCase):
    """Several hosts' reports in one transaction: as each saved alone."""

    def report(self, host, seconds=0):
        return base.make_report(
            host=host, reported_at=T0 + datetime.timedelta(seconds=seconds))

    def test_consecutive_numbers_in_order_and_guests_read(self):
        compute_nodes.save_report(self.db, self.report('b', seconds=10))
        _, seen = compute_nodes.changed_since(self.db, -1)
        saved = compute_nodes.save_reports_reading_guests(
            self.db, [self.report('a'), self.report('b'),
                      self.report('c', seconds=5)])
        # b's report is older than the stored one: kept out, the stored
        # one answered; a and c take the next numbers in order.
        self.assertEqual([None], [s.change_seq for s in saved[1:2]])
        self.assertEqual(T0 + datetime.timedelta(seconds=10),
                         saved[1].report.reported_at)
        numbers = [saved[0].change_seq, saved[2].change_seq]
        self.assertEqual([seen + 1, seen + 3], numbers)
        self.assertEqual([[], [], []], [s.guests for s in saved])
        reports, later = compute_nodes.changed_since(self.db, seen)
        self.assertEqual(['a', 'c'], [r.host for r in reports])
        self.assertEqual(seen + 3, later)

    def test_an_invalid_report_stores_none_of_the_batch(self):
        bad = self.report('bad')
        bad.topology.cells[0].cpuset = {-1}
        self.assertRaises(exception.ObjectValidationError,
                          compute_nodes.save_reports_reading_guests,
                          self.db, [self.report('a'), bad])
        self.assertEqual([], compute_nodes.get_all(self.db))

    def test_one_report_per_host(self):
        self.assertRaises(ValueError,
                          compute_nodes.save_reports_reading_guests,
                          self.db, [self.report('a'), self.report('a', 1)])


def _host_cpu(features):
    # Built anew, field by field in another order, as each report is.
    return objects.HostCPU(
        model_blockers={'Icelake-Server': ['pku']},
        custom_models=['Broadwell', 'qemu64'], host_model='Broadwell',
        host_model_features=features, arch='x86_64', model='Broadwell')
