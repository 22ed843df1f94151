"""The conductor's metric families, read from a real SQLite database."""

import datetime

from prometheus_client import core
from prometheus_client import exposition
from prometheus_client import parser

from numamig.conductor import metrics
from numamig.db import compute_nodes
from numamig.db import instances
from numamig.db import migration_satellites
from numamig.db import migrations
from numamig.objects import fields as nm_fields
from tests import base
from tests.fixtures import database
from tests.unit.db import base as dbase

STATUS = nm_fields.MigrationStatus
NOW = datetime.datetime(2026, 1, 2, 3, 5, 5, 678901, tzinfo=datetime.UTC)


class Registry:
    """prometheus_client's exposition of ``collector``, parsed back:
    what Prometheus would read."""

    def __init__(self, collector):
        self.collector = collector

    def collect(self):
        return self.collector.families()

    def samples(self):
        registry = core.CollectorRegistry(auto_describe=False)
        registry.register(self)
        text = exposition.generate_latest(registry).decode()
        return {(s.name, tuple(sorted(s.labels.items()))): s.value
                for f in parser.text_string_to_metric_families(text)
                for s in f.samples}


class MigrationCollectorTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.db = self.useFixture(database.SQLiteDatabase()).db
        self.instance = instances.create(
            self.db, dbase.make_instance()).instance.uuid

    def made(self, sampled_dirty_rate=None, convergence_policy=None,
             **values):
        # The policy is MigrationConvergence's, recorded with it.
        made = migrations.create(self.db, dbase.make_migration(
            self.instance, dest_host='dst', **values),
            policy=convergence_policy)
        if sampled_dirty_rate is not None:
            # The prediction's sample: MigrationPrediction, same row.
            migration_satellites.set_prediction(
                self.db, made.uuid,
                {'sampled_dirty_rate': sampled_dirty_rate})
        return made

    def samples(self):
        # An hour after the records were made: the oldest waited that.
        later = datetime.datetime.now(datetime.UTC) + \
            datetime.timedelta(hours=1)
        return Registry(metrics.MigrationCollector(
            self.db, clock=lambda: later)).samples()

    def test_outcomes_statuses_and_every_status_present(self):
        self.made(status=STATUS.COMPLETED, convergence_policy='finish')
        self.made(status=STATUS.COMPLETED, convergence_policy='finish')
        self.made(status=STATUS.FAILED)
        self.made(status=STATUS.QUEUED, convergence_policy='balanced')
        found = self.samples()
        self.assertEqual(2.0, found[('numamig_migrations_ended_total', (
            ('outcome', 'completed'), ('policy', 'finish')))])
        self.assertEqual(1.0, found[('numamig_migrations_ended_total', (
            ('outcome', 'failed'), ('policy', '')))])
        self.assertEqual(1.0, found[('numamig_migrations_in_progress', (
            ('policy', 'balanced'), ('status', 'queued')))])
        self.assertEqual(0.0, found[('numamig_migrations_ended_total', (
            ('outcome', 'cancelled'), ('policy', '')))])
        self.assertEqual(0.0, found[('numamig_migrations_in_progress', (
            ('policy', ''), ('status', 'running')))])

    def test_duration_and_downtime_histograms(self):
        for elapsed, downtime in ((800, 20), (4000, 300), (70000, None)):
            self.made(status=STATUS.COMPLETED, elapsed_ms=elapsed,
                      downtime_ms=downtime)
        self.made(status=STATUS.FAILED, elapsed_ms=100)
        found = self.samples()

        def bucket(name, le):
            return found[(name + '_bucket', (('le', le),))]
        duration = 'numamig_migration_duration_seconds'
        self.assertEqual(1.0, bucket(duration, '1.0'))
        self.assertEqual(2.0, bucket(duration, '5.0'))
        self.assertEqual(2.0, bucket(duration, '60.0'))
        self.assertEqual(3.0, bucket(duration, '+Inf'))
        self.assertEqual(3.0, found[(duration + '_count', ())])
        self.assertAlmostEqual(74.8, found[(duration + '_sum', ())])
        downtime = 'numamig_migration_downtime_seconds'
        self.assertEqual(1.0, bucket(downtime, '0.025'))
        self.assertEqual(2.0, bucket(downtime, '0.5'))
        self.assertEqual(2.0, found[(downtime + '_count', ())])

    def test_migrations_being_copied_and_the_queue(self):
        copying = self.made(status=STATUS.RUNNING, memory_total=1000,
                            memory_processed=600, memory_remaining=400,
                            sampled_dirty_rate=50)
        self.made(status=STATUS.QUEUED)
        found = self.samples()
        labels = (('dest_host', 'dst'), ('migration', copying.uuid),
                  ('source_host', 'src'))
        self.assertEqual(600.0, found[
            ('numamig_migration_memory_processed_bytes', labels)])
        self.assertEqual(400.0, found[
            ('numamig_migration_memory_remaining_bytes', labels)])
        self.assertEqual(1000.0, found[
            ('numamig_migration_memory_total_bytes', labels)])
        self.assertEqual(50.0, found[
            ('numamig_migration_dirty_rate_bytes_per_second', labels)])
        self.assertEqual(1.0, found[
            ('numamig_admission_queue_migrations', ())])
        self.assertAlmostEqual(3600, found[
            ('numamig_admission_queue_oldest_wait_seconds', ())], delta=60)


class HostCollectorTest(base.TestCase):

    def test_cells_pcpus_pages_memory_age_and_maintenance(self):
        db = self.useFixture(database.SQLiteDatabase()).db
        report = dbase.make_report('h1')
        report.topology.cells[0].pinned_cpus = {2}
        report.topology.cells[1].mempages[1].reserved = 1
        compute_nodes.save_report(db, report)
        compute_nodes.save_report(db, dbase.make_report('h2'))
        compute_nodes.set_disabled(db, 'h2', 'maintenance')
        found = Registry(metrics.HostCollector(db, clock=lambda: NOW)) \
            .samples()

        def cell(name, host, node, **labels):
            key = dict(labels, host=host, cell=str(node))
            return found[(name, tuple(sorted(key.items())))]
        self.assertEqual(1.0, cell('numamig_host_cell_pcpus', 'h1', 0,
                                   state='pinned'))
        self.assertEqual(1.0, cell('numamig_host_cell_pcpus', 'h1', 0,
                                   state='free'))
        self.assertEqual(2.0, cell('numamig_host_cell_pcpus', 'h1', 0,
                                   state='shared'))
        self.assertEqual(2.0, cell('numamig_host_cell_pcpus', 'h1', 1,
                                   state='free'))
        one_g = str(2**30)
        self.assertEqual(1.0, cell('numamig_host_cell_pages', 'h1', 1,
                                   page_size_bytes=one_g, state='used'))
        self.assertEqual(2.0, cell('numamig_host_cell_pages', 'h1', 1,
                                   page_size_bytes=one_g, state='free'))
        self.assertEqual(1.0, cell('numamig_host_cell_pages', 'h1', 1,
                                   page_size_bytes=one_g, state='reserved'))
        self.assertEqual(8192.0 * 2**20, cell(
            'numamig_host_cell_memory_bytes', 'h1', 0, state='total'))
        self.assertEqual(60.0, found[('numamig_host_report_age_seconds',
                                      (('host', 'h1'),))])
        self.assertEqual(0.0, found[('numamig_host_disabled',
                                     (('host', 'h1'),))])
        self.assertEqual(1.0, found[('numamig_host_disabled',
                                     (('host', 'h2'),))])


class ClaimAuditCollectorTest(base.TestCase):

    def test_a_claim_outliving_its_migration_counts_on_its_host(self):
        db = self.useFixture(database.SQLiteDatabase()).db
        instance = instances.create(db, dbase.make_instance()).instance
        migration = migrations.create(db, dbase.make_migration(
            instance.uuid, dest_host='dst'))
        instances.set_migration_context(
            db, instance.uuid, dbase.make_context(instance, migration.uuid))

        def leaked():
            return {k: v for k, v in Registry(
                metrics.ClaimAuditCollector(db)).samples().items()
                if k[0] == 'numamig_leaked_claims'}
        # Held by a migration in progress: not leaked.
        self.assertEqual({}, leaked())
        migrations.set_status(db, migration.uuid, 'error')
        self.assertEqual(
            {('numamig_leaked_claims', (('host', 'dst'),)): 1.0}, leaked())


class CollectorsTest(base.TestCase):

    def test_every_family_name_follows_prometheus_conventions(self):
        db = self.useFixture(database.SQLiteDatabase()).db
        for collector in metrics.collectors(db):
            for family in collector.families():
                self.assertTrue(family.name.startswith('numamig_'),
                                family.name)
                self.assertRegex(family.name, r'^[a-z_]+$')
                if family.type == 'counter':
                    self.assertFalse(family.name.endswith('_total'),
                                     'prometheus_client adds _total')
