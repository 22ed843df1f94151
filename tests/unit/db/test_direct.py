"""numamig.db.direct reads the columns the models define, as their
types give them, from the URL SQLAlchemy would connect to."""

import sqlalchemy as sa

from numamig.db import direct
from numamig.db import models
from numamig.objects import migration_satellites as satellites
from tests import base

# How each model column type is read (direct's kinds).
KINDS = {models.UTCDateTime: direct.TIME, models.JSONText: direct.JSON,
         sa.Boolean: direct.BOOL}


def _kind(column):
    for model_type, kind in KINDS.items():
        if isinstance(column.type, model_type):
            return kind
    return direct.PLAIN


class TableMapTestCase(base.TestCase):
    """A column added to, renamed in or retyped in a model that a read
    selects from fails here until direct.TABLES (or UNREAD) says how it
    is read: the fast read would otherwise miss or misread it."""

    def test_every_column_is_read_as_its_type_or_named_unread(self):
        for table, columns in direct.TABLES.items():
            model = models.Base.metadata.tables[table]
            self.assertEqual(
                {c.name for c in model.columns},
                set(columns) | set(direct.UNREAD[table]), table)
            self.assertEqual(
                {name: _kind(model.columns[name]) for name in columns},
                columns, table)
            self.assertEqual(set(), set(columns) & set(direct.UNREAD[table]))

    def test_the_migration_columns_are_those_the_repository_reads(self):
        from numamig.db import migrations
        read = {'uuid', 'instance_uuid', 'source_host', 'dest_host',
                'requested_host', 'status', 'error', 'priority',
                'admitted_at', 'memory_reclaim', 'migration_threads',
                'migration_devices',
                'created_at', 'updated_at', 'refused_hosts'} | set(
            migrations.PROGRESS_FIELDS + migrations.RESULT_FIELDS +
            satellites.CONVERGENCE_FIELDS + satellites.PREDICTION_FIELDS +
            satellites.RECOVERY_FIELDS)
        self.assertEqual(read | {'id'}, set(direct.TABLES['migrations']))


URLS = [
    'sqlite:////var/lib/numamig/numamig.sqlite',
    'sqlite:///relative/numamig.sqlite',
    'postgresql+psycopg2://numamig:s%40cret@db.example:5432/numamig',
    'postgresql+psycopg2://numamig:pw@127.0.0.1/numamig?sslmode=require'
    '&connect_timeout=5',
    'mysql+pymysql://root@127.0.0.1:3306/test?charset=utf8mb4',
    'mysql+pymysql://a%20b:c%3Ad@[::1]:3306/db',
    'mysql+pymysql://numamig@localhost/numamig%2Fx',
    'postgresql://numamig@db/numamig',
]


class UrlTestCase(base.TestCase):

    def test_parsed_and_shown_as_sqlalchemy_does(self):
        for text in URLS:
            theirs = sa.engine.make_url(text)
            ours = direct.parse_url(text)
            self.assertEqual(
                (theirs.drivername, theirs.username, theirs.password,
                 theirs.host, theirs.port, theirs.database,
                 dict(theirs.query)),
                (ours.drivername, ours.username, ours.password, ours.host,
                 ours.port, ours.database, ours.query), text)
            self.assertEqual(theirs.render_as_string(hide_password=True),
                             ours.safe, text)

    def test_what_it_does_not_serve_is_left_to_numamig_db(self):
        # Another driver (a bare postgresql:// is psycopg 3 to
        # SQLAlchemy 2), an option SQLAlchemy would convert, an
        # in-memory database, a URL SQLAlchemy refuses.
        for text in ('postgresql://numamig@db/numamig',
                     'mysql://root@127.0.0.1/test',
                     'mariadb+pymysql://root@127.0.0.1/test',
                     'mysql+pymysql://root@h/test?ssl_ca=/x.pem',
                     'sqlite://', 'sqlite:///:memory:', 'not a url'):
            self.assertIsNone(direct.connect(text), text)

    def test_a_driver_not_installed_is_left_to_numamig_db(self):
        import sys
        from unittest import mock
        with mock.patch.dict(sys.modules, {'psycopg2': None}):
            self.assertIsNone(direct.connect(
                'postgresql+psycopg2://numamig@127.0.0.1:9/numamig'))

    def test_a_missing_sqlite_file_is_said_as_before(self):
        from numamig import exception
        from numamig.db import api
        path = self.useFixture(base.fixtures.TempDir()).path
        url = f'sqlite:///{path}/none.sqlite'
        with self.assertRaises(exception.DatabaseError) as theirs:
            api.Database(url, existing=True)
        with self.assertRaises(exception.DatabaseError) as ours:
            direct.connect(url)
        self.assertEqual(str(theirs.exception), str(ours.exception))


class ReportVersionsTestCase(base.TestCase):

    def test_the_current_versions_are_read_directly(self):
        # A version bump of a stored report's class fails here until
        # direct._host_report reads the new version's primitive (older
        # ones stay listed: the rows they were written in remain).
        from numamig import objects
        for name, versions in direct.REPORT_VERSIONS.items():
            self.assertIn(getattr(objects, name).VERSION, versions, name)

    def test_another_version_is_left_to_numamig_db(self):
        from numamig.db import primitives
        from tests.unit.db import base as db_base
        now = direct.datetime.datetime.now(direct.datetime.UTC)
        stored = primitives.dump(db_base.make_report('h'))
        self.assertEqual('h', direct._host_report(stored, now).host)
        cell = stored['numamig_object.data']['topology'][
            'numamig_object.data']['cells'][0]
        cell['numamig_object.version'] = '1.9'
        self.assertIsNone(direct._host_report(stored, now))
