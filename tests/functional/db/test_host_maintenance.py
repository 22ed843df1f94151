"""Hosts disabled for maintenance, on PostgreSQL, MariaDB and SQLite."""

import datetime

from numamig import exception
from numamig.db import compute_nodes
from tests.functional.db import base
from tests.unit.db import base as unit_base


class HostMaintenanceTestCase(base.ServerDBTestCase):

    def setUp(self):
        super().setUp()
        compute_nodes.save_report(self.db, unit_base.make_report('cn1'))
        compute_nodes.save_report(self.db, unit_base.make_report('cn2'))

    def test_disable_then_enable(self):
        self.assertEqual({}, compute_nodes.maintenance(self.db))
        state = compute_nodes.set_disabled(self.db, 'cn1', 'new DIMMs')
        self.assertTrue(state.disabled)
        stored = compute_nodes.maintenance(self.db)
        self.assertEqual(['cn1'], list(stored))
        self.assertEqual(('new DIMMs', state.disabled_at),
                         (stored['cn1'].reason, stored['cn1'].disabled_at))
        self.assertFalse(compute_nodes.set_enabled(self.db, 'cn1').disabled)
        self.assertEqual({}, compute_nodes.maintenance(self.db))

    def test_disabling_again_keeps_since_when_and_takes_the_reason(self):
        first = compute_nodes.set_disabled(self.db, 'cn1', 'firmware')
        again = compute_nodes.set_disabled(self.db, 'cn1', 'firmware, v2')
        self.assertEqual(first.disabled_at, again.disabled_at)
        self.assertEqual('firmware, v2',
                         compute_nodes.maintenance(self.db)['cn1'].reason)
        self.assertIsInstance(first.disabled_at, datetime.datetime)

    def test_a_report_does_not_enable_the_host(self):
        compute_nodes.save_report(self.db, unit_base.make_report('cn2'))
        compute_nodes.set_disabled(self.db, 'cn2', 'rack move')
        compute_nodes.save_report(self.db, unit_base.make_report(
            'cn2', reported_at=datetime.datetime.now(datetime.UTC)))
        self.assertEqual(['cn2'], list(compute_nodes.maintenance(self.db)))

    def test_unknown_host(self):
        for change in (lambda: compute_nodes.set_disabled(self.db, 'nope',
                                                          'x'),
                       lambda: compute_nodes.set_enabled(self.db, 'nope')):
            self.assertRaises(exception.HostNotFound, change)
        self.assertEqual({}, compute_nodes.maintenance(self.db))
