"""The metrics aggregates against the same numbers counted in Python."""

import datetime
import random

from numamig.db import compute_nodes
from numamig.db import instances
from numamig.db import metrics
from numamig.db import migration_satellites
from numamig.db import migrations
from numamig.db import models
from numamig.objects import fields as nm_fields
from tests.fixtures import database
from tests.unit.db import base

STATUS = nm_fields.MigrationStatus
POLICIES = (None, 'balanced', 'finish', 'never_pause')
BOUNDS_MS = [1000, 2500, 5000, 10000, 60000]


class AggregatesTest(base.DBTestCase):

    def setUp(self):
        super().setUp()
        self.rng = random.Random(20261128)
        self.made = []
        self.rates = {}
        self.policies = {}
        for _ in range(6):
            uuid = instances.create(self.db, base.make_instance()) \
                .instance.uuid
            for _ in range(self.rng.randrange(1, 12)):
                # The policy: MigrationConvergence's, same row.
                policy = self.rng.choice(POLICIES)
                made = migrations.create(self.db, self.random(uuid),
                                         policy=policy)
                self.made.append(made)
                self.policies[made.uuid] = policy
                # The rate the pre-flight prediction sampled: its
                # satellite record (MigrationPrediction), same row.
                self.rates[made.uuid] = self.rng.choice([None, 12345678])
                migration_satellites.set_prediction(
                    self.db, made.uuid,
                    {'sampled_dirty_rate': self.rates[made.uuid]})

    def random(self, instance_uuid):
        status = self.rng.choice(STATUS.ALL)
        ended = status == STATUS.COMPLETED
        maybe = (lambda top: self.rng.choice(
            [None, self.rng.randrange(top)])) if ended else (lambda _: None)
        total = self.rng.randrange(1, 2**34)
        processed = self.rng.randrange(total)
        return base.make_migration(
            instance_uuid, status=status,
            dest_host=self.rng.choice(['dst-a', 'dst-b']),
            elapsed_ms=maybe(90000), downtime_ms=maybe(3000),
            memory_total=total, memory_processed=processed,
            memory_remaining=total - processed)

    def test_counts_by_status_and_policy(self):
        expected = {}
        for m in self.made:
            key = (m.status, self.policies[m.uuid] or '')
            expected[key] = expected.get(key, 0) + 1
        found = {(s, p): n for s, p, n in
                 metrics.migration_counts(self.db)}
        self.assertEqual(expected, found)

    def test_timing_buckets(self):
        for column in ('elapsed_ms', 'downtime_ms'):
            values = [getattr(m, column) for m in self.made
                      if m.status == STATUS.COMPLETED and
                      getattr(m, column) is not None]
            found = metrics.timing_buckets(self.db, column, BOUNDS_MS)
            self.assertEqual(
                metrics.Buckets([sum(v <= b for v in values)
                                 for b in BOUNDS_MS], len(values),
                                sum(values)), found, column)

    def test_empty_history(self):
        empty = self.useFixture(database.SQLiteDatabase()).db
        self.assertEqual(metrics.Buckets([0] * 5, 0, 0),
                         metrics.timing_buckets(empty, 'elapsed_ms',
                                                BOUNDS_MS))
        self.assertEqual([], metrics.migration_counts(empty))
        self.assertEqual((0, None), metrics.queue(
            empty, datetime.datetime.now(datetime.UTC)))

    def test_in_flight_are_those_being_copied(self):
        copying = [m for m in self.made if m.status in STATUS.IN_PROGRESS
                   and m.status not in (STATUS.ACCEPTED, STATUS.QUEUED)]
        self.assertTrue(copying)
        found = metrics.in_flight(self.db)
        self.assertEqual(sorted(m.uuid for m in copying),
                         sorted(r.uuid for r in found))
        by_uuid = {m.uuid: m for m in copying}
        for row in found:
            made = by_uuid[row.uuid]
            self.assertEqual(
                (made.memory_total, made.memory_processed,
                 made.memory_remaining, self.rates[made.uuid] or 0),
                (row.memory_total, row.memory_processed,
                 row.memory_remaining, row.dirty_rate))

    def test_queue_and_its_oldest_wait(self):
        waiting = [m for m in self.made
                   if m.status in (STATUS.ACCEPTED, STATUS.QUEUED)]
        self.assertTrue(waiting)
        stored = [migrations.get(self.db, m.uuid) for m in waiting]
        now = datetime.datetime.now(datetime.UTC) + \
            datetime.timedelta(seconds=30)
        count, oldest = metrics.queue(self.db, now)
        self.assertEqual(len(waiting), count)
        if stored:
            first = min(m.created_at for m in stored)
            self.assertAlmostEqual((now - first).total_seconds(), oldest,
                                   places=3)

    def test_reports_read_back(self):
        compute_nodes.save_report(self.db, base.make_report('h1'))
        self.assertEqual(['h1'], [r.host for r in
                                  compute_nodes.get_all(self.db)])

    def test_moves_of_active_drains_only(self):
        from numamig.db import drains

        def drain(host, kind, moves):
            uuid = base.new_uuid()
            drains.create(self.db, {
                'uuid': uuid, 'host': host, 'parallel': 1, 'priority': 0,
                'was_disabled': False, 'options': {}, 'kind': kind},
                [{'instance_uuid': base.new_uuid(), 'name': f'g{i}',
                  'planned_host': 'dst', 'planned_topology': None}
                 for i in range(moves)])
            return uuid
        drain('h1', drains.DRAIN, 3)
        drain('h2', drains.DEFRAGMENT, 2)
        ended = drain('h3', drains.DRAIN, 4)
        with self.db.writer() as session:
            session.execute(models.Drain.__table__.update().where(
                models.Drain.uuid == ended).values(status=drains.COMPLETED))
        self.assertEqual(
            sorted([('h1', drains.DRAIN, drains.PENDING, 3),
                    ('h2', drains.DEFRAGMENT, drains.PENDING, 2)]),
            sorted(metrics.drain_moves(self.db)))
