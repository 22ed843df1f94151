"""Compute node records: each host's last report."""

import datetime

from numamig import exception
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
