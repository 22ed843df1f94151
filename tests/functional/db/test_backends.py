"""The schema and the repositories on real PostgreSQL and MariaDB."""

import datetime
import time

from alembic import autogenerate
from alembic.runtime import migration as alembic_migration
from oslo_db import exception as db_exception
import sqlalchemy as sa

from numamig import exception
from numamig.db import api
from numamig.db import compute_nodes
from numamig.db import instances
from numamig.db import migrations
from numamig.db import models
from numamig.db import schema
from tests import base as nm_base
from tests.fixtures import database
from tests.functional.db import base
from tests.unit.db import base as unit_base


class SchemaTestCase(base.ServerDBTestCase):

    sync = False

    def test_sync_from_empty_is_idempotent(self):
        self.assertIsNone(self.db.version())
        self.assertRaises(exception.DatabaseNotSynced, self.db.check_schema)
        self.assertEqual(schema.head(), self.db.sync())
        self.assertEqual(schema.head(), self.db.sync())
        self.db.check_schema()

    def test_revisions_create_exactly_the_models(self):
        self.db.sync()
        with self.db.engine.connect() as connection:
            context = alembic_migration.MigrationContext.configure(
                connection)
            diff = autogenerate.compare_metadata(context,
                                                 models.Base.metadata)
        self.assertEqual([], diff)


class SessionSettingsTestCase(base.ServerDBTestCase):
    """What numamig adds to oslo.db's engine on a server."""

    # How each backend keeps concurrent workers apart: read committed on
    # a server; on SQLite, write-ahead logging (readers never wait for
    # the writer) with writers serialized by BEGIN IMMEDIATE.
    _ISOLATION = {
        'postgresql': ('SHOW transaction_isolation', 'READ-COMMITTED'),
        'mysql': ('SELECT @@session.tx_isolation', 'READ-COMMITTED'),
        'sqlite': ('PRAGMA journal_mode', 'WAL'),
    }

    def test_transactions_isolated_as_numamig_sets(self):
        query, expected = self._ISOLATION[self.backend]
        with self.db.reader() as session:
            level = session.execute(sa.text(query)).scalar()
        self.assertEqual(expected, level.upper().replace(' ', '-'))

    def test_duplicate_is_recognised_by_oslo_db(self):
        instance = unit_base.make_instance()
        instances.create(self.db, instance)
        self.assertRaises(exception.RecordExists, instances.create,
                          self.db, instance)


class RoundTripTestCase(base.ServerDBTestCase):

    def test_instance_with_claim(self):
        instance = instances.create(self.db,
                                    unit_base.make_instance()).instance
        migration = migrations.create(
            self.db, unit_base.make_migration(instance.uuid))
        context = unit_base.make_context(instance, migration.uuid)
        record = instances.set_migration_context(self.db, instance.uuid,
                                                 context)
        self.assertEqual(context, record.instance.migration_context)
        self.assertEqual(record, instances.get(self.db, instance.uuid))
        self.assertEqual([instance.uuid], [
            r.instance.uuid
            for r in instances.get_claims_on_host(self.db, 'dst')])

    def test_status_history_keeps_microsecond_order(self):
        instance = instances.create(self.db,
                                    unit_base.make_instance()).instance
        migration = migrations.create(
            self.db, unit_base.make_migration(instance.uuid))
        for status in ('queued', 'preparing', 'running', 'post-migrating',
                       'completed'):
            migrations.set_status(self.db, migration.uuid, status)
        history = migrations.get(self.db, migration.uuid).history
        self.assertEqual(['accepted', 'queued', 'preparing', 'running',
                          'post-migrating', 'completed'],
                         [h.status for h in history])
        times = [h.changed_at for h in history]
        self.assertEqual(sorted(times), times)

    def test_report_keeps_microseconds(self):
        when = datetime.datetime(2026, 5, 6, 7, 8, 9, 123456,
                                 tzinfo=datetime.UTC)
        report = unit_base.make_report(reported_at=when)
        self.assertEqual(report, compute_nodes.save_report(self.db, report))
        self.assertEqual(when, compute_nodes.get(self.db, 'src').reported_at)

    def test_foreign_key_cascade(self):
        instance = instances.create(self.db,
                                    unit_base.make_instance()).instance
        migration = migrations.create(
            self.db, unit_base.make_migration(instance.uuid))
        instances.destroy(self.db, instance.uuid)
        self.assertRaises(exception.MigrationNotFound, migrations.get,
                          self.db, migration.uuid)


# How the server's end of the session shows at the stuck client's next
# statement (oslo.db's filters translate the driver's error).
TERMINATED = (sa.exc.DBAPIError, db_exception.DBError)


class IdleInTransactionTestCase(nm_base.TestCase):
    """PostgreSQL ends a numamig session left idle inside a transaction
    (its conductor cut off from the database mid-transaction), so that
    the row locks it held do not hold every other conductor up."""

    def setUp(self):
        super().setUp()
        database.server_or_skip(self, 'postgresql')
        self.url = self.useFixture(database.ServerDatabase(
            'postgresql')).url

    def _database(self, seconds):
        db = api.Database(self.url, idle_in_transaction_timeout=seconds)
        self.addCleanup(db.dispose)
        return db

    def test_set_on_every_connection(self):
        with self._database(3).reader() as session:
            self.assertEqual('3s', session.execute(sa.text(
                'SHOW idle_in_transaction_session_timeout')).scalar())

    def test_zero_leaves_the_servers_setting(self):
        with self._database(0).reader() as session:
            self.assertEqual('0', session.execute(sa.text(
                'SHOW idle_in_transaction_session_timeout')).scalar())

    def test_a_lock_held_by_an_idle_transaction_is_freed(self):
        stuck, other = self._database(1), self._database(1)
        instance = instances.create(stuck, unit_base.make_instance())
        uuid = instance.instance.uuid
        connection = stuck.engine.connect()
        self.addCleanup(connection.close)
        # A conductor that locked a row and then went silent.
        transaction = connection.begin()
        connection.execute(sa.text(
            'SELECT id FROM instances WHERE uuid = :uuid FOR UPDATE'),
            {'uuid': uuid})
        started = time.monotonic()
        with other.writer() as session:
            # Without the timeout the lock would be held for good: fail
            # after 10 s rather than hang.
            session.execute(sa.text("SET LOCAL lock_timeout = '10s'"))
            session.execute(sa.text(
                "UPDATE instances SET name = 'moved on' WHERE uuid = "
                ":uuid"), {'uuid': uuid})
        self.assertLess(time.monotonic() - started, 10)
        self.assertRaises(TERMINATED, transaction.commit)
