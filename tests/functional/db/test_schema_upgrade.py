"""Upgrading a database that holds data, revision by revision."""

import datetime
import json

import sqlalchemy as sa

from numamig.db import compute_nodes
from numamig.db import migration_recovery
from numamig.db import migration_threads
from numamig.db import migrations
from numamig.db import primitives
from numamig.db import queue
from tests.functional.db import base
from tests.unit.db import base as unit_base

WHEN = datetime.datetime(2026, 11, 20, 8, 30, 15, 123456)


def _insert_0001_rows(db, instance_uuid, migration_uuid):
    """An instance and a finished migration as a 0001 database held them.

    Written with plain SQL on the 0001 tables: today's repositories know
    columns that 0001 lacks.
    """
    meta = sa.MetaData()
    instances = sa.Table('instances', meta, autoload_with=db.engine)
    table = sa.Table('migrations', meta, autoload_with=db.engine)
    history = sa.Table('migration_status_history', meta,
                       autoload_with=db.engine)
    with db.engine.begin() as connection:
        connection.execute(sa.insert(instances).values(
            uuid=instance_uuid, revision=1, name='guest',
            project_id='demo', host='dst', vcpus=2, memory_mb=1024,
            extra_specs='{}', image_properties='{}', power_state='running',
            created_at=WHEN, updated_at=WHEN))
        row_id = connection.execute(sa.insert(table).values(
            uuid=migration_uuid, instance_uuid=instance_uuid,
            source_host='src', dest_host='dst', requested_host='dst',
            status='completed', memory_total=1 << 30,
            memory_processed=1 << 29, memory_remaining=7, disk_total=0,
            disk_processed=0, disk_remaining=0, error='a warning',
            refused_hosts='{"h1": "full"}', created_at=WHEN,
            updated_at=WHEN)).inserted_primary_key[0]
        for status in ('accepted', 'completed'):
            connection.execute(sa.insert(history).values(
                migration_id=row_id, status=status, changed_at=WHEN,
                detail=f'{status} before 0002'))


def _insert_report_row(db, host):
    """A host's report as the columns of the revision the database is at
    hold it (plain SQL: today's repository writes later columns)."""
    report = unit_base.make_report(host=host)
    table = sa.Table('compute_nodes', sa.MetaData(), autoload_with=db.engine)
    with db.engine.begin() as connection:
        connection.execute(sa.insert(table).values(
            host=host, hypervisor_uri=report.hypervisor_uri,
            hypervisor_type=report.hypervisor_type,
            service_version=report.service_version,
            fingerprint=report.fingerprint,
            reported_at=report.reported_at.replace(tzinfo=None),
            report=json.dumps(primitives.dump(report)),
            created_at=WHEN, updated_at=WHEN))


class UpgradeTo0002TestCase(base.ServerDBTestCase):

    sync = False

    def test_migration_row_survives(self):
        self.assertEqual('0001', self.db.sync('0001'))
        instance_uuid = unit_base.new_uuid()
        migration_uuid = unit_base.new_uuid()
        _insert_0001_rows(self.db, instance_uuid, migration_uuid)

        self.assertEqual('0002', self.db.sync('0002'))
        self.db.sync()
        stored = migrations.get(self.db, migration_uuid)
        self.assertEqual(
            (instance_uuid, 'src', 'dst', 'dst', 'completed', 1 << 30,
             1 << 29, 7, 'a warning', {'h1': 'full'}),
            (stored.instance_uuid, stored.source_host, stored.dest_host,
             stored.requested_host, stored.status, stored.memory_total,
             stored.memory_processed, stored.memory_remaining, stored.error,
             stored.refused_hosts))
        self.assertEqual(WHEN.replace(tzinfo=datetime.UTC),
                         stored.created_at)
        self.assertEqual(['accepted before 0002', 'completed before 0002'],
                         [h.detail for h in stored.history])
        self.assertFalse(stored.has_result)
        for name in migrations.RESULT_FIELDS:
            self.assertIsNone(getattr(stored, name), name)

    def test_upgraded_row_takes_a_result(self):
        self.db.sync('0001')
        instance_uuid = unit_base.new_uuid()
        migration_uuid = unit_base.new_uuid()
        _insert_0001_rows(self.db, instance_uuid, migration_uuid)
        self.db.sync()
        with self.db.writer() as session:
            session.execute(sa.text(
                "UPDATE migrations SET status = 'running' WHERE uuid = "
                ":uuid"), {'uuid': migration_uuid})
        stored = migrations.set_status(
            self.db, migration_uuid, 'post-migrating',
            result={'elapsed_ms': 9, 'emulated': True, 'post_copy': False})
        self.assertEqual((9, True, False, None),
                         (stored.elapsed_ms, stored.emulated,
                          stored.post_copy, stored.downtime_ms))


class UpgradeTo0003TestCase(base.ServerDBTestCase):
    """Rows written before the admission queue read as admitted."""

    sync = False

    def test_earlier_migrations_are_not_taken_as_waiting(self):
        self.db.sync('0001')
        instance_uuid = unit_base.new_uuid()
        done_uuid = unit_base.new_uuid()
        _insert_0001_rows(self.db, instance_uuid, done_uuid)
        self.db.sync('0002')
        with self.db.writer() as session:
            session.execute(sa.text(
                "UPDATE migrations SET status = 'accepted' WHERE uuid = "
                ":uuid"), {'uuid': done_uuid})
        self.assertEqual('0003', self.db.sync('0003'))
        self.db.sync()   # the models are the head's: read through them
        stored = migrations.get(self.db, done_uuid)
        self.assertEqual((0, WHEN.replace(tzinfo=datetime.UTC), False),
                         (stored.priority, stored.admitted_at,
                          stored.waiting))
        self.assertEqual({}, queue.positions(self.db))

    def test_admission_works_on_the_upgraded_schema(self):
        self.db.sync('0002')
        self.db.sync()
        instance_uuid = unit_base.new_uuid()
        _insert_0001_rows(self.db, instance_uuid, unit_base.new_uuid())
        waiting = migrations.create(self.db, unit_base.make_migration(
            instance_uuid, source_host='dst', priority=50), max_queued=5)
        limits = queue.Limits(total=1, per_source=1, per_dest=1, queued=5)
        self.assertEqual([waiting.uuid], queue.admit(self.db, limits, 1))


class UpgradeTo0004TestCase(base.ServerDBTestCase):
    """Reports stored before change numbers are read by every worker."""

    sync = False

    def test_reports_written_before_are_read_then_numbers_grow(self):
        self.db.sync('0003')
        _insert_report_row(self.db, 'old-host')
        self.assertEqual('0004', self.db.sync('0004'))
        # Today's repository reads the columns later revisions add.
        self.db.sync()
        reports, seen = compute_nodes.changed_since(self.db, -1)
        self.assertEqual((['old-host'], 0), ([r.host for r in reports], seen))
        compute_nodes.save_report(self.db, unit_base.make_report(
            host='new-host'))
        reports, later = compute_nodes.changed_since(self.db, seen)
        self.assertEqual((['new-host'], 1), ([r.host for r in reports],
                                             later))


class UpgradeTo0005TestCase(base.ServerDBTestCase):
    """Migrations admitted before leases are judged by their age."""

    sync = False

    def test_unleased_admitted_migration_stalls_by_age_only(self):
        self.db.sync('0001')
        instance_uuid, old_uuid = unit_base.new_uuid(), unit_base.new_uuid()
        _insert_0001_rows(self.db, instance_uuid, old_uuid)
        self.db.sync('0004')
        with self.db.writer() as session:
            session.execute(sa.text(
                "UPDATE migrations SET status = 'accepted' WHERE uuid = "
                ":uuid"), {'uuid': old_uuid})
        self.assertEqual('0005', self.db.sync('0005'))
        updated = WHEN.replace(tzinfo=datetime.UTC)
        self.assertEqual([], queue.stalled(
            self.db, updated + datetime.timedelta(seconds=50), 100))
        self.assertEqual([old_uuid], queue.stalled(
            self.db, updated + datetime.timedelta(seconds=150), 100))


class UpgradeTo0006TestCase(base.ServerDBTestCase):
    """Hosts that reported before maintenance states are enabled."""

    sync = False

    def test_hosts_reported_before_are_enabled_and_can_be_disabled(self):
        self.db.sync('0005')
        _insert_report_row(self.db, 'old')
        self.assertEqual('0006', self.db.sync('0006'))
        self.assertEqual({}, compute_nodes.maintenance(self.db))
        compute_nodes.set_disabled(self.db, 'old', 'retired')
        self.assertEqual(['old'], list(compute_nodes.maintenance(self.db)))


class UpgradeTo0010TestCase(base.ServerDBTestCase):
    """Migrations queued before start requests were kept have none: the
    conductor never sends theirs again (the sweep ends them)."""

    sync = False

    def test_queued_before_has_no_start_request_after(self):
        self.db.sync('0001')
        instance_uuid, old_uuid = unit_base.new_uuid(), unit_base.new_uuid()
        _insert_0001_rows(self.db, instance_uuid, old_uuid)
        self.db.sync('0006')
        with self.db.writer() as session:
            session.execute(sa.text(
                "UPDATE migrations SET status = 'queued' WHERE uuid = "
                ":uuid"), {'uuid': old_uuid})
        self.assertEqual('0010', self.db.sync('0010'))
        # Today's code reads the columns of later revisions too.
        self.db.sync()
        later = WHEN.replace(tzinfo=datetime.UTC) + datetime.timedelta(
            days=1)
        self.assertEqual([], migrations.queued_start_requests(self.db,
                                                              later))
        # Queued by today's code, it keeps its start request until it
        # leaves 'queued'.
        with self.db.writer() as session:
            session.execute(sa.text(
                "UPDATE migrations SET status = 'accepted' WHERE uuid = "
                ":uuid"), {'uuid': old_uuid})
            migrations.set_status_in(session, old_uuid, 'queued',
                                     start_request={'kept': [1, 2]})
        later = datetime.datetime.now(datetime.UTC) + datetime.timedelta(
            seconds=5)
        self.assertEqual(
            [(old_uuid, {'kept': [1, 2]})],
            [(m.uuid, start) for m, start in
             migrations.queued_start_requests(self.db, later)])
        migrations.set_status(self.db, old_uuid, 'running')
        self.assertEqual([], migrations.queued_start_requests(self.db,
                                                              later))


class UpgradeTo0012TestCase(base.ServerDBTestCase):
    """Migrations recorded before 0012 read back with nothing reclaimed;
    the column takes what a placement reclaim records."""

    sync = False

    def test_rows_before_read_back_without_reclaim(self):
        self.db.sync('0001')
        instance_uuid, old_uuid = unit_base.new_uuid(), unit_base.new_uuid()
        _insert_0001_rows(self.db, instance_uuid, old_uuid)
        self.db.sync('0010')
        self.assertEqual('0012', self.db.sync('0012'))
        self.db.sync()
        self.assertIsNone(migrations.get(self.db, old_uuid).memory_reclaim)
        entry = {'host': 'h', 'host_node': 1, 'instance_uuid': old_uuid,
                 'cell': 0, 'before_mb': 512, 'after_mb': 256,
                 'current_mb': None, 'released_mb': 256, 'outcome': 'kept'}
        migrations.set_memory_reclaim(self.db, old_uuid, [entry])
        (stored,) = migrations.get(self.db, old_uuid).memory_reclaim
        self.assertEqual(dict(entry, host_node='1', cell='0',
                              before_mb='512', after_mb='256',
                              released_mb='256'), stored)


class UpgradeTo0013TestCase(base.ServerDBTestCase):
    """Migrations recorded before the post-copy recovery history read
    back with none, and can record one after the upgrade."""

    sync = False

    def test_rows_from_before_have_no_history_then_record_one(self):
        self.db.sync('0001')
        instance_uuid, old_uuid = unit_base.new_uuid(), unit_base.new_uuid()
        _insert_0001_rows(self.db, instance_uuid, old_uuid)
        self.db.sync('0010')
        with self.db.writer() as session:
            session.execute(sa.text(
                "UPDATE migrations SET status = 'running' WHERE uuid = "
                ":uuid"), {'uuid': old_uuid})
        self.assertEqual('0013', self.db.sync('0013'))
        # Read by today's code, which also knows the later columns.
        self.db.sync()
        self.assertIsNone(migrations.get(self.db,
                                         old_uuid).postcopy_recovery)
        history = [{'event': 'link-lost', 'at': 'now', 'attempt': None,
                    'detail': None}]
        self.assertTrue(migration_recovery.record_recovery(self.db, old_uuid,
                                                   history))
        self.assertEqual(history, migrations.get(
            self.db, old_uuid).postcopy_recovery)


class UpgradeTo0014TestCase(base.ServerDBTestCase):
    """Migrations recorded before migration_threads read back with none,
    and can record where their threads ran after the upgrade."""

    sync = False

    def test_rows_from_before_have_none_then_record_both_sides(self):
        self.db.sync('0001')
        instance_uuid, old_uuid = unit_base.new_uuid(), unit_base.new_uuid()
        _insert_0001_rows(self.db, instance_uuid, old_uuid)
        self.assertEqual('0013', self.db.sync('0013'))
        self.assertEqual('0014', self.db.sync('0014'))
        self.assertIsNone(migrations.get(self.db,
                                         old_uuid).migration_threads)
        side = {'host': 'h', 'basis': 'none', 'cpus': [],
                'connections': None, 'threads': {'multifdrecv_0': [0, 1]}}
        self.assertTrue(migration_threads.record_threads(
            self.db, old_uuid, 'dest', side))
        self.assertEqual({'dest': side}, migrations.get(
            self.db, old_uuid).migration_threads)
