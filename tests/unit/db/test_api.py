"""Database handle: URLs, SQLite settings, transactions, schema state."""

import os
import subprocess
import sys

import sqlalchemy as sa

from numamig import exception
from numamig.db import api
from numamig.db import instances
from numamig.db import schema
from tests import base
from tests.unit.db import base as unit_base


class DatabaseTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.path = os.path.join(self.conf.conf.state_path, 'a', 'b',
                                 'numamig.sqlite')
        self.db = api.Database(f'sqlite:///{self.path}')
        self.addCleanup(self.db.dispose)

    def test_missing_directory_is_created(self):
        self.db.sync()
        self.assertTrue(os.path.exists(self.path))

    def test_existing_only_creates_nothing(self):
        exc = self.assertRaises(exception.DatabaseError, api.Database,
                                f'sqlite:///{self.path}.other',
                                existing=True)
        self.assertIn(f"there is no database file {self.path}.other",
                      str(exc))
        self.assertFalse(os.path.exists(f'{self.path}.other'))
        self.db.sync()
        api.Database(f'sqlite:///{self.path}', existing=True).dispose()

    def test_default_url_is_under_state_path(self):
        db = api.Database.from_config(self.conf.conf)
        self.addCleanup(db.dispose)
        self.assertEqual(
            os.path.join(self.conf.conf.state_path, 'numamig.sqlite'),
            db.url.database)

    def test_sqlite_enforces_foreign_keys_and_waits_when_busy(self):
        with self.db.reader() as session:
            self.assertEqual(1, session.execute(
                sa.text('PRAGMA foreign_keys')).scalar())
            self.assertEqual(api.SQLITE_BUSY_TIMEOUT * 1000,
                             session.execute(
                                 sa.text('PRAGMA busy_timeout')).scalar())

    def test_sqlite_writes_ahead_and_commits_durably(self):
        # WAL lets readers and the writer overlap; FULL keeps a commit
        # through a power cut.
        with self.db.reader() as session:
            self.assertEqual('wal', session.execute(
                sa.text('PRAGMA journal_mode')).scalar())
            self.assertEqual(2, session.execute(
                sa.text('PRAGMA synchronous')).scalar())

    def _synchronous(self, db):
        self.addCleanup(db.dispose)
        with db.reader() as session:
            return (session.execute(sa.text('PRAGMA journal_mode')).scalar(),
                    session.execute(sa.text('PRAGMA synchronous')).scalar())

    def test_not_synchronous_is_normal_not_off(self):
        # NORMAL with a write-ahead log keeps commits through a crash of
        # the process and never corrupts; oslo.db's own choice, OFF,
        # could.
        db = api.Database(f'sqlite:///{self.path}.n',
                          sqlite_synchronous=False)
        self.assertEqual(('wal', 1), self._synchronous(db))

    def test_synchronous_follows_the_oslo_db_option(self):
        self.conf.config(group='database', sqlite_synchronous=False,
                         connection=f'sqlite:///{self.path}.c')
        self.assertEqual(('wal', 1), self._synchronous(
            api.Database.from_config(self.conf.conf)))
        self.conf.config(group='database', sqlite_synchronous=True)
        self.assertEqual(('wal', 2), self._synchronous(
            api.Database.from_config(self.conf.conf)))

    def test_a_not_synchronous_commit_survives_its_process(self):
        # What NORMAL promises: a commit is in the file for the next
        # process, with no checkpoint and no clean close in between.
        url = f'sqlite:///{self.path}.k'
        db = api.Database(url, sqlite_synchronous=False)
        self.addCleanup(db.dispose)
        db.sync()
        script = (
            "import sys, os, sqlalchemy as sa\n"
            "from numamig.db import api\n"
            "db = api.Database(sys.argv[1], sqlite_synchronous=False)\n"
            "with db.writer() as s:\n"
            "    s.execute(sa.text(\"UPDATE sequences SET value = 41 "
            "WHERE name = 'compute-node-reports'\"))\n"
            "os._exit(0)\n")
        subprocess.run([sys.executable, '-c', script, url], check=True,
                       timeout=60)
        with db.reader() as session:
            self.assertEqual(41, session.execute(sa.text(
                "SELECT value FROM sequences "
                "WHERE name = 'compute-node-reports'")).scalar())

    def test_writers_begin_immediate_readers_do_not(self):
        # A read-then-write transaction must hold the write lock from its
        # start on SQLite, or it can lose a race halfway through.
        begun = []
        sa.event.listen(self.db.engine, 'before_cursor_execute',
                        lambda conn, cursor, statement, *args: begun.append(
                            statement) if statement.startswith('BEGIN')
                        else None)
        with self.db.writer() as session:
            session.execute(sa.text('SELECT 1'))
        with self.db.reader() as session:
            session.execute(sa.text('SELECT 1'))
        self.assertEqual(['BEGIN IMMEDIATE', 'BEGIN'], begun)

    def test_sqlite_connections_are_kept_between_transactions(self):
        # oslo.db would open one per transaction (NullPool).
        self.assertIsInstance(self.db.engine.pool, sa.pool.QueuePool)
        with self.db.reader() as session:
            first = session.connection().connection.dbapi_connection
        with self.db.reader() as session:
            second = session.connection().connection.dbapi_connection
        self.assertIs(first, second)

    def test_duplicates_are_recognised_by_oslo_db(self):
        self.db.sync()
        instance = unit_base.make_instance()
        instances.create(self.db, instance)
        self.assertRaises(exception.RecordExists, instances.create,
                          self.db, instance)

    def test_writer_rolls_back_on_error(self):
        self.db.sync()
        with self.db.writer() as session:
            session.execute(sa.text('CREATE TABLE t (x INTEGER)'))

        def fail():
            with self.db.writer() as session:
                session.execute(sa.text('INSERT INTO t VALUES (1)'))
                raise RuntimeError('boom')
        self.assertRaises(RuntimeError, fail)
        with self.db.reader() as session:
            self.assertEqual(0, session.execute(
                sa.text('SELECT count(*) FROM t')).scalar())

    def test_bad_url(self):
        self.assertRaisesMessage(exception.DatabaseError, 'nonsense',
                                 api.Database, 'nonsense')

    def test_libpqs_multi_host_form_with_ports_says_what_to_write(self):
        # libpq reads host1:5432,host2:5433; SQLAlchemy does not: one
        # line naming the form it reads, and no password.
        exc = self.assertRaises(
            exception.DatabaseError, api.Database,
            'postgresql://u:secret@h1:5432,h2:5433/db'
            '?target_session_attrs=read-write')
        self.assertNotIn('\n', str(exc))
        self.assertNotIn('secret', str(exc))
        self.assertIn('?host=HOST1:PORT&host=HOST2:PORT', str(exc))
        # A password holding / ? or # is starred whole.
        exc = self.assertRaises(
            exception.DatabaseError, api.Database,
            'postgresql://u:se/c?r#t@h1:5432,h2:5433/db')
        self.assertIn("'postgresql://u:***@h1:5432,h2:5433/db'", str(exc))

    def test_unknown_driver(self):
        self.assertRaisesMessage(exception.DatabaseError, 'nosuchdb',
                                 api.Database, 'nosuchdb://x/y')

    def test_wait_until_reachable_retries_then_names_the_server(self):
        db = api.Database('postgresql+psycopg2://u@127.0.0.1:1/x')
        sleeps = []
        self.assertRaisesMessage(exception.DatabaseError, '127.0.0.1:1',
                                 db.wait_until_reachable, max_retries=2,
                                 interval=5, sleep=sleeps.append)
        self.assertEqual([5, 5], sleeps)

    def test_wait_until_reachable_returns_at_once_when_up(self):
        sleeps = []
        self.db.wait_until_reachable(max_retries=-1, sleep=sleeps.append)
        self.assertEqual([], sleeps)

    def test_unreachable_server_hides_the_password(self):
        db = api.Database('postgresql+psycopg2://u:secret@127.0.0.1:1/x')
        exc = self.assertRaises(exception.DatabaseError, db.version)
        self.assertNotIn('secret', str(exc))
        self.assertIn('127.0.0.1:1', str(exc))


class SchemaTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.db = api.Database(
            f'sqlite:///{self.conf.conf.state_path}/numamig.sqlite')
        self.addCleanup(self.db.dispose)

    def test_empty_database_has_no_version(self):
        self.assertIsNone(self.db.version())
        self.assertRaisesMessage(exception.DatabaseNotSynced, 'db sync',
                                 self.db.check_schema)

    def test_sync_reaches_head_and_is_idempotent(self):
        self.assertEqual(schema.head(), self.db.sync())
        self.assertEqual(schema.head(), self.db.sync())
        self.db.check_schema()

    def test_unknown_revision(self):
        self.assertRaisesMessage(exception.UnknownSchemaRevision, "'9999'",
                                 self.db.sync, '9999')
        self.assertIsNone(self.db.version())

    def test_revision_of_a_newer_release(self):
        self.db.sync()
        with self.db.writer() as session:
            session.execute(sa.text(
                "UPDATE alembic_version SET version_num = '9999'"))
        self.assertRaisesMessage(exception.DatabaseError, 'newer than',
                                 self.db.check_schema)

    def test_development_revision_is_refused_saying_to_recreate(self):
        self.db.sync('release-1')
        with self.db.writer() as session:
            session.execute(sa.text(
                "UPDATE alembic_version SET version_num = '0002'"))
        for step in (self.db.check_schema, self.db.sync):
            self.assertRaisesMessage(
                exception.DatabaseError,
                'schema revision 0002 is a development step of release 2',
                step)
        self.assertEqual('0002', self.db.version())

    def test_one_revision_per_release(self):
        from numamig.db import revisions
        self.assertEqual(('0001', 'release2'), revisions.REVISIONS)
        self.assertEqual(
            {'release-1': '0001', 'release-2': revisions.HEAD},
            revisions.RELEASE_ALIASES)
        # No development step's id may come back as a release's: a
        # database at that step would be taken for one of the release.
        self.assertEqual(set(), revisions.DEVELOPMENT & set(
            revisions.REVISIONS))
        self.assertIsNone(revisions.development_step(revisions.HEAD))

    def test_sync_to_a_release_alias(self):
        self.assertEqual('0001', self.db.sync('release-1'))
        self.assertEqual(schema.head(), self.db.sync('release-2'))

    def test_revision_list_is_alembics(self):
        # check_schema reads numamig.db.revisions instead of alembic's
        # scripts: a revision added without its entry there fails here.
        from numamig.db import revisions
        self.assertEqual(schema.known_revisions(),
                         list(revisions.REVISIONS))
        self.assertEqual(schema.head(), revisions.HEAD)

    def test_version_is_what_alembic_reads(self):
        from alembic.runtime import migration
        for target in ('0001', None):
            self.db.sync(target)
            with self.db.engine.connect() as connection:
                context = migration.MigrationContext.configure(connection)
                self.assertEqual(context.get_current_revision(),
                                 self.db.version())

    def test_several_recorded_revisions_are_refused(self):
        self.db.sync()
        with self.db.writer() as session:
            session.execute(sa.text(
                "INSERT INTO alembic_version VALUES ('0001')"))
        self.assertRaisesMessage(exception.DatabaseError, 'several',
                                 self.db.check_schema)

    def test_revisions_create_exactly_the_models(self):
        from alembic import autogenerate
        from alembic.runtime import migration

        from numamig.db import models
        self.db.sync()
        with self.db.engine.connect() as connection:
            context = migration.MigrationContext.configure(connection)
            diff = autogenerate.compare_metadata(context,
                                                 models.Base.metadata)
        self.assertEqual([], diff)


class OneLineReasonTest(base.TestCase):
    """libpq's multi-host errors are shown on one line."""

    def test_every_hosts_words_kept_once_on_one_line(self):
        text = ('connection to server at "127.0.0.1", port 1 failed: '
                'Connection refused\n\tIs the server running on that host '
                'and accepting TCP/IP connections?\nconnection to server at '
                '"127.0.0.1", port 2 failed: session is read-only\n\tIs the '
                'server running on that host and accepting TCP/IP '
                'connections?\n')
        reason = exception.one_line(text)
        self.assertNotIn('\n', reason)
        self.assertIn('port 1 failed: Connection refused', reason)
        self.assertIn('port 2 failed: session is read-only', reason)
        self.assertEqual(1, reason.count('Is the server running'))
