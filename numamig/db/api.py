"""The conductor's database handle: engine, transactions, schema state.

``Database(connection_url)`` is what services hold; the repository
modules (``numamig.db.instances``, ``migrations``, ``compute_nodes``) take
it as their first argument. Each repository call runs in its own
transaction that is committed before the call returns, so a write the
caller was told about survives a crash of the caller.

SQLite: the file's directory is created if missing, foreign keys are
enforced, a busy timeout makes concurrent writers wait instead of failing,
and write transactions start with ``BEGIN IMMEDIATE`` so that a
read-then-write transaction cannot lose a race halfway through.
PostgreSQL and MySQL/MariaDB run at READ COMMITTED, where a conditional
UPDATE re-checks its WHERE clause against the latest committed row.
"""

import contextlib
import os
import time

from oslo_log import log as logging
import sqlalchemy as sa
from sqlalchemy import exc as sa_exc
from sqlalchemy import orm

from numamig import exception

LOG = logging.getLogger(__name__)

# Seconds a SQLite writer waits for another one before giving up.
SQLITE_BUSY_TIMEOUT = 30


class Database:
    """A connection pool to one numamig database.

    :param connection_url: SQLAlchemy URL, e.g. ``sqlite:////var/lib/x``,
        ``postgresql+psycopg2://user@host/db``, ``mysql+pymysql://...``.
    :raises DatabaseError: if the URL cannot be parsed or its driver is
        not installed (nothing is connected yet).
    """

    def __init__(self, connection_url):
        try:
            self.url = sa.engine.make_url(connection_url)
        except sa_exc.ArgumentError as exc:
            raise exception.DatabaseError(
                url=repr(connection_url), reason=str(exc)) from exc
        self.engine = self._create_engine()
        self._sessions = orm.sessionmaker(self.engine,
                                          expire_on_commit=False)
        self._write_sessions = orm.sessionmaker(
            self.engine.execution_options(numamig_write=True),
            expire_on_commit=False)

    @classmethod
    def from_config(cls, conf):
        """Open the database named by ``[database] connection``."""
        return cls(conf.database.connection)

    @property
    def safe_url(self):
        """The URL with its password hidden, for messages and logs."""
        return self.url.render_as_string(hide_password=True)

    @property
    def is_sqlite(self):
        return self.url.get_backend_name() == 'sqlite'

    def _create_engine(self):
        try:
            if self.is_sqlite:
                return self._create_sqlite_engine()
            return sa.create_engine(self.url, pool_pre_ping=True,
                                    isolation_level='READ COMMITTED')
        except (sa_exc.ArgumentError, sa_exc.NoSuchModuleError,
                ImportError) as exc:
            raise exception.DatabaseError(url=self.safe_url,
                                          reason=str(exc)) from exc

    def _create_sqlite_engine(self):
        path = self.url.database
        if path and path != ':memory:' and not path.startswith('file:'):
            directory = os.path.dirname(os.path.abspath(path))
            os.makedirs(directory, exist_ok=True)
        engine = sa.create_engine(
            self.url, connect_args={'timeout': SQLITE_BUSY_TIMEOUT})
        sa.event.listen(engine, 'connect', _sqlite_on_connect)
        sa.event.listen(engine, 'begin', _sqlite_on_begin)
        return engine

    @contextlib.contextmanager
    def reader(self):
        """A session for reads; rolled back at the end."""
        with self._guard(), self._sessions() as session:
            with session.begin():
                yield session

    @contextlib.contextmanager
    def writer(self):
        """A session whose writes are committed when the block ends.

        Any exception rolls everything back and propagates.
        """
        with self._guard(), self._write_sessions() as session:
            with session.begin():
                yield session

    @contextlib.contextmanager
    def _guard(self):
        # A server that is gone is not a bug of the caller: say which
        # database could not be reached instead of a driver traceback.
        try:
            yield
        except sa_exc.OperationalError as exc:
            if exc.connection_invalidated or _is_connect_error(exc):
                raise exception.DatabaseError(
                    url=self.safe_url, reason=str(exc.orig)) from exc
            raise

    def wait_until_reachable(self, max_retries=0, interval=2.0,
                             sleep=time.sleep):
        """Connect once, retrying while the server is not up yet.

        Services call this at start with ``[database] max_retries`` so
        that a conductor started with its database does not die first.

        :param max_retries: further attempts after the first; -1 forever.
        :raises DatabaseError: after the last failed attempt.
        """
        attempt = 0
        while True:
            try:
                with self._guard(), self.engine.connect():
                    return
            except exception.DatabaseError as exc:
                if 0 <= max_retries <= attempt:
                    raise
                attempt += 1
                LOG.warning("Database not reachable (attempt %d): %s",
                            attempt, exc)
                sleep(interval)

    def sync(self, revision=None):
        """Upgrade the schema to ``revision`` (default: the newest).

        :returns: the revision the database is at afterwards.
        :raises UnknownSchemaRevision: for a revision this release lacks.
        """
        from numamig.db import schema
        return schema.upgrade(self, revision)

    def version(self):
        """Return the schema revision, or None for an empty database."""
        from numamig.db import schema
        return schema.current(self)

    def check_schema(self):
        """Raise DatabaseNotSynced unless the schema is at the newest.

        Services call this at start, so that they never run against a
        schema that lacks their tables or columns.
        """
        from numamig.db import schema
        current, head = self.version(), schema.head()
        if current is not None and current not in schema.known_revisions():
            raise exception.DatabaseError(
                url=self.safe_url,
                reason=f"schema revision {current} is newer than this "
                       f"release knows (up to {head}); upgrade numamig")
        if current != head:
            raise exception.DatabaseNotSynced(
                url=self.safe_url, current=current or 'none', head=head)

    def dispose(self):
        """Close every pooled connection."""
        self.engine.dispose()


def _sqlite_on_connect(dbapi_connection, connection_record):
    # Let SQLAlchemy's 'begin' event emit BEGIN itself (pysqlite would
    # otherwise delay it to the first write, outside our control).
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute('PRAGMA foreign_keys = ON')
    cursor.execute(f'PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT * 1000}')
    # Write-ahead logging: readers no longer wait for a writer's commit,
    # nor a writer for readers, and a commit writes one log instead of
    # a rollback journal; synchronous stays FULL, so a committed change
    # survives a power cut. (An in-memory database ignores it.)
    cursor.execute('PRAGMA journal_mode = WAL')
    cursor.close()


def _sqlite_on_begin(connection):
    if connection.get_execution_options().get('numamig_write'):
        connection.exec_driver_sql('BEGIN IMMEDIATE')
    else:
        connection.exec_driver_sql('BEGIN')


def _is_connect_error(exc):
    text = str(exc.orig).lower()
    return any(marker in text for marker in (
        'could not connect', "can't connect", 'connection refused',
        'unknown database', 'does not exist', 'unable to open database'))
