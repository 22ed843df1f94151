"""The shipped dashboard and alert rules name only metrics the daemons
export (etc/numamig/monitoring/)."""

import json
import os
import re

import yaml

from numamig.compute import metrics as compute_metrics
from numamig.conductor import metrics as conductor_metrics
from numamig.db import compute_nodes
from tests import base
from tests.fixtures import database
from tests.unit.compute import base as cbase
from tests.unit.db import base as dbase

TOP = os.path.join(os.path.dirname(__file__), '..', '..')
MONITORING = os.path.join(TOP, 'etc', 'numamig', 'monitoring')
NAME = re.compile(r'\bnumamig_[a-z_]+\b')
# What Prometheus' exposition adds to a family's name.
SUFFIXES = {'counter': ('_total',),
            'histogram': ('_bucket', '_count', '_sum')}


class MonitoringFilesTest(base.TestCase):

    def exported(self):
        db = self.useFixture(database.SQLiteDatabase()).db
        compute_nodes.save_report(db, dbase.make_report('h1'))
        collectors = conductor_metrics.collectors(db) + \
            compute_metrics.collectors(cbase.manager())
        names = {'numamig_metrics_collector_up'}
        for collector in collectors:
            for family in collector.families():
                suffixes = SUFFIXES.get(family.type, ('',))
                names.update(family.name + s for s in suffixes)
        return names

    def named(self, text):
        return set(NAME.findall(text))

    def test_alert_rules(self):
        with open(os.path.join(MONITORING, 'numamig-alerts.yaml')) as f:
            rules = yaml.safe_load(f)
        exprs = [r['expr'] for g in rules['groups'] for r in g['rules']]
        self.assertTrue(exprs)
        named = set().union(*(self.named(e) for e in exprs))
        self.assertEqual(set(), named - self.exported())

    def test_dashboard(self):
        with open(os.path.join(MONITORING, 'numamig-dashboard.json')) as f:
            dashboard = json.load(f)
        exprs = [t['expr'] for p in dashboard['panels']
                 for t in p['targets']]
        self.assertTrue(exprs)
        named = set().union(*(self.named(e) for e in exprs))
        self.assertEqual(set(), named - self.exported())

    def test_a_misnamed_metric_is_caught(self):
        self.assertEqual({'numamig_host_cell_cpus'},
                         self.named('numamig_host_cell_cpus > 1') -
                         self.exported())
