"""Release 1's and release 2's schemas, and upgrading a release-1
database that holds data to release 2 in its one step."""

import datetime
import json

import sqlalchemy as sa

from numamig import exception
from numamig.db import compute_nodes
from numamig.db import memory_changes
from numamig.db import migration_satellites
from numamig.db import migration_threads
from numamig.db import migrations
from numamig.db import primitives
from numamig.db import queue
from numamig.db import revisions
from tests.functional.db import base
from tests.functional.db import schema_snapshot
from tests.unit.db import base as unit_base

WHEN = datetime.datetime(2026, 11, 20, 8, 30, 15, 123456)


def _insert_release_1_rows(db, instance_uuid, migration_uuid,
                           status='completed'):
    """An instance and a migration as a release-1 database held them.

    Written with plain SQL on release 1's tables: today's repositories
    know columns that release 1 lacks.
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
            status=status, memory_total=1 << 30,
            memory_processed=1 << 29, memory_remaining=7, disk_total=0,
            disk_processed=0, disk_remaining=0, error='a warning',
            refused_hosts='{"h1": "full"}', created_at=WHEN,
            updated_at=WHEN)).inserted_primary_key[0]
        for step in ('accepted', status):
            connection.execute(sa.insert(history).values(
                migration_id=row_id, status=step, changed_at=WHEN,
                detail=f'{step} at release 1'))


def _insert_report_row(db, host):
    """A host's report as release 1's columns hold it (plain SQL: today's
    repository writes release 2's columns too)."""
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


class ReleaseSchemaTestCase(base.ServerDBTestCase):
    """Each release's revision builds the schema that release has.

    The snapshots under schemas/ were written from databases synced with
    the revisions release 2 was developed in (0001 to 0014) before they
    were collapsed into one: release 2's one revision must build what
    they built, column for column, and release 1's must stay what
    release 1 shipped.
    """

    sync = False

    def _assert_schema(self, release):
        self.assertEqual(schema_snapshot.read(release, self.backend),
                         schema_snapshot.lines(self.db.engine))

    def test_release_1(self):
        self.assertEqual(revisions.RELEASE_1, self.db.sync('release-1'))
        self._assert_schema('release-1')

    def test_release_2_upgrades_release_1_in_one_step(self):
        self.db.sync(revisions.RELEASE_1)
        self.assertEqual(revisions.RELEASE_2, self.db.sync('release-2'))
        self._assert_schema('release-2')
        self.db.check_schema()


class UpgradeFromRelease1TestCase(base.ServerDBTestCase):
    """Rows written at release 1 survive release 2's revision and read
    back with release 2's defaults for what release 1 did not record."""

    sync = False

    def setUp(self):
        super().setUp()
        self.assertEqual(revisions.RELEASE_1, self.db.sync('release-1'))
        self.instance_uuid = unit_base.new_uuid()
        self.uuid = unit_base.new_uuid()

    def _upgrade(self):
        self.assertEqual(revisions.RELEASE_2, self.db.sync())

    def _set_status(self, status):
        with self.db.writer() as session:
            session.execute(sa.text(
                "UPDATE migrations SET status = :status WHERE uuid = "
                ":uuid"), {'status': status, 'uuid': self.uuid})

    def test_migration_row_survives_with_no_release_2_facts(self):
        _insert_release_1_rows(self.db, self.instance_uuid, self.uuid)
        self._upgrade()
        stored = migrations.get(self.db, self.uuid)
        self.assertEqual(
            (self.instance_uuid, 'src', 'dst', 'dst', 'completed', 1 << 30,
             1 << 29, 7, 'a warning', {'h1': 'full'}),
            (stored.instance_uuid, stored.source_host, stored.dest_host,
             stored.requested_host, stored.status, stored.memory_total,
             stored.memory_processed, stored.memory_remaining, stored.error,
             stored.refused_hosts))
        self.assertEqual(WHEN.replace(tzinfo=datetime.UTC),
                         stored.created_at)
        self.assertEqual(['accepted at release 1', 'completed at release 1'],
                         [h.detail for h in stored.history])
        self.assertFalse(stored.has_result)
        for name in migrations.RESULT_FIELDS:
            self.assertIsNone(getattr(stored, name), name)
        satellites = migration_satellites.get(
            self.db, self.uuid, ['reclaim', 'threads', 'prediction',
                                 'convergence', 'recovery'])
        self.assertEqual(([], {}), (satellites['reclaim'].entries,
                                    satellites['threads'].sides))
        self.assertEqual(
            (None, None, None),
            (satellites['convergence'].policy,
             satellites['convergence'].actions,
             satellites['recovery'].events))
        predicted = satellites['prediction']
        self.assertEqual(
            (None, None, None, None),
            (predicted.prediction, predicted.predicted_elapsed_ms,
             predicted.predicted_downtime_ms,
             predicted.sampled_dirty_rate))

    def test_upgraded_row_takes_a_result(self):
        _insert_release_1_rows(self.db, self.instance_uuid, self.uuid,
                               status='running')
        self._upgrade()
        stored = migrations.set_status(
            self.db, self.uuid, 'post-migrating',
            result={'elapsed_ms': 9, 'emulated': True, 'post_copy': False})
        self.assertEqual((9, True, False, None),
                         (stored.elapsed_ms, stored.emulated,
                          stored.post_copy, stored.downtime_ms))

    def test_release_1_migrations_are_admitted_not_waiting(self):
        # Release 1 started every migration at once.
        _insert_release_1_rows(self.db, self.instance_uuid, self.uuid,
                               status='accepted')
        self._upgrade()
        stored = migrations.get(self.db, self.uuid)
        self.assertEqual((0, WHEN.replace(tzinfo=datetime.UTC), False),
                         (stored.priority, stored.admitted_at,
                          stored.waiting))
        self.assertEqual({}, queue.positions(self.db))

    def test_admission_works_on_the_upgraded_schema(self):
        _insert_release_1_rows(self.db, self.instance_uuid, self.uuid)
        self._upgrade()
        waiting = migrations.create(self.db, unit_base.make_migration(
            self.instance_uuid, source_host='dst', priority=50),
            max_queued=5)
        limits = queue.Limits(total=1, per_source=1, per_dest=1, queued=5)
        self.assertEqual([waiting.uuid], queue.admit(self.db, limits, 1))

    def test_unleased_admitted_migration_stalls_by_age_only(self):
        _insert_release_1_rows(self.db, self.instance_uuid, self.uuid,
                               status='accepted')
        self._upgrade()
        updated = WHEN.replace(tzinfo=datetime.UTC)
        self.assertEqual([], queue.stalled(
            self.db, updated + datetime.timedelta(seconds=50), 100))
        self.assertEqual([self.uuid], queue.stalled(
            self.db, updated + datetime.timedelta(seconds=150), 100))

    def test_reports_written_before_are_read_then_numbers_grow(self):
        _insert_report_row(self.db, 'old-host')
        self._upgrade()
        reports, seen = compute_nodes.changed_since(self.db, -1)
        self.assertEqual((['old-host'], 0), ([r.host for r in reports], seen))
        compute_nodes.save_report(self.db, unit_base.make_report(
            host='new-host'))
        reports, later = compute_nodes.changed_since(self.db, seen)
        self.assertEqual((['new-host'], 1), ([r.host for r in reports],
                                             later))

    def test_hosts_reported_before_are_enabled_and_can_be_disabled(self):
        _insert_report_row(self.db, 'old')
        self._upgrade()
        self.assertEqual({}, compute_nodes.maintenance(self.db))
        compute_nodes.set_disabled(self.db, 'old', 'retired')
        self.assertEqual(['old'], list(compute_nodes.maintenance(self.db)))

    def test_queued_before_has_no_start_request_after(self):
        # The conductor never sends a release-1 row's start again (the
        # stalled-migration sweep ends it).
        _insert_release_1_rows(self.db, self.instance_uuid, self.uuid,
                               status='queued')
        self._upgrade()
        later = WHEN.replace(tzinfo=datetime.UTC) + datetime.timedelta(
            days=1)
        self.assertEqual([], migrations.queued_start_requests(self.db,
                                                              later))
        # Queued by release 2, it keeps its start request until it
        # leaves 'queued'.
        self._set_status('accepted')
        with self.db.writer() as session:
            migrations.set_status_in(session, self.uuid, 'queued',
                                     start_request={'kept': [1, 2]})
        later = datetime.datetime.now(datetime.UTC) + datetime.timedelta(
            seconds=5)
        self.assertEqual(
            [(self.uuid, {'kept': [1, 2]})],
            [(m.uuid, start) for m, start in
             migrations.queued_start_requests(self.db, later)])
        migrations.set_status(self.db, self.uuid, 'running')
        self.assertEqual([], migrations.queued_start_requests(self.db,
                                                              later))

    def test_upgraded_row_records_a_reclaim(self):
        _insert_release_1_rows(self.db, self.instance_uuid, self.uuid)
        self._upgrade()
        entry = {'host': 'h', 'host_node': 1, 'instance_uuid': self.uuid,
                 'cell': 0, 'before_mb': 512, 'after_mb': 256,
                 'current_mb': None, 'released_mb': 256, 'outcome': 'kept'}
        migration_satellites.set_reclaim(self.db, self.uuid, [entry])
        (stored,) = migration_satellites.get(
            self.db, self.uuid, ['reclaim'])['reclaim'].entries
        self.assertEqual(dict(entry, host_node='1', cell='0',
                              before_mb='512', after_mb='256',
                              released_mb='256'), stored)

    def test_upgraded_row_records_a_recovery_history(self):
        _insert_release_1_rows(self.db, self.instance_uuid, self.uuid,
                               status='running')
        self._upgrade()
        history = [{'event': 'link-lost', 'at': 'now', 'attempt': None,
                    'detail': None}]
        self.assertTrue(migration_satellites.record_recovery(
            self.db, self.uuid, history))
        self.assertEqual(history, migration_satellites.get(
            self.db, self.uuid, ['recovery'])['recovery'].events)

    def test_upgraded_row_records_where_its_threads_ran(self):
        _insert_release_1_rows(self.db, self.instance_uuid, self.uuid)
        self._upgrade()
        side = {'host': 'h', 'basis': 'none', 'cpus': [],
                'connections': None, 'threads': {'multifdrecv_0': [0, 1]}}
        self.assertTrue(migration_threads.record_threads(
            self.db, self.uuid, 'dest', side))
        self.assertEqual({'dest': side}, migration_satellites.get(
            self.db, self.uuid, ['threads'])['threads'].sides)

    def test_memory_changes_come_with_release_2(self):
        self._upgrade()
        uuid = unit_base.new_uuid()
        memory_changes.start(self.db, uuid, 'h', {'host': 'h', 'node': 1,
                                                'size_mb': 100,
                                                'exact': False})
        self.assertEqual('running', memory_changes.get(self.db,
                                                       uuid)['status'])


class DevelopmentRevisionTestCase(base.ServerDBTestCase):
    """A database synced to one of release 2's development steps (which
    no revision knows any more) is refused in one line: recreate it."""

    sync = False

    def test_sync_and_check_say_to_recreate(self):
        self.db.sync('release-1')
        with self.db.writer() as session:
            session.execute(sa.text(
                "UPDATE alembic_version SET version_num = '0007'"))
        for step in (self.db.sync, self.db.check_schema):
            exc = self.assertRaises(exception.DatabaseError, step)
            self.assertIn('schema revision 0007 is a development step of '
                          'release 2', str(exc))
            self.assertIn('recreate the database', str(exc))
            self.assertNotIn('\n', str(exc))
        self.assertEqual('0007', self.db.version())
