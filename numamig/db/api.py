"""The conductor's database handle: oslo.db transactions, schema state.

``Database(connection_url)`` is what services hold; the repository
modules (``numamig.db.instances``, ``migrations``, ``compute_nodes``) take
it as their first argument. Each repository call runs in its own
transaction that is committed before the call returns, so a write the
caller was told about survives a crash of the caller.

SQLite: the file's directory is created if missing, foreign keys are
enforced, a busy timeout makes concurrent writers wait instead of failing,
write transactions start with ``BEGIN IMMEDIATE`` so that a
read-then-write transaction cannot lose a race halfway through, and the
log is write-ahead; oslo.db's ``[database] sqlite_synchronous`` chooses
what a commit waits for (see ``SQLITE_SYNCHRONOUS``).
PostgreSQL and MySQL/MariaDB run at READ COMMITTED, where a conditional
UPDATE re-checks its WHERE clause against the latest committed row.
"""

import contextlib
import os
import time
import types

from oslo_db import exception as db_exc
from oslo_db.sqlalchemy import enginefacade
from oslo_log import log as logging
import sqlalchemy as sa
from sqlalchemy import exc as sa_exc

from numamig import exception
from numamig import filemodes
from numamig.db import _rows
from numamig.db import libpq

LOG = logging.getLogger(__name__)

# Seconds a SQLite writer waits for another one before giving up.
SQLITE_BUSY_TIMEOUT = 30

# SQLite's synchronous level by oslo.db's ``sqlite_synchronous``. True:
# FULL, every commit waits for the log to reach the disk, so it survives
# a power cut (measured on the development machine's virtual disk: 4 ms
# a commit, p90 8 ms, most of a migration's database time). False:
# NORMAL, not oslo.db's OFF: with a write-ahead log, NORMAL syncs only at
# checkpoints, keeps every commit through a crash of numamig's own
# processes and never corrupts the file; a power cut or an OS crash may
# lose the last commits. (OFF could corrupt it.)
SQLITE_SYNCHRONOUS = {True: 'FULL', False: 'NORMAL'}

# oslo.db errors that mean the server (or the database on it) is not
# there: not the caller's bug, so they are named, not traced.
_UNREACHABLE = (db_exc.DBConnectionError, db_exc.DBNonExistentDatabase)


class Database:
    """One numamig database, through oslo.db's enginefacade.

    Each Database has its own transaction context (a process may hold
    several, as the embedded tier and the tests do). The engine is
    oslo.db's: its pool settings come from ``[database]``, its exception
    filters turn driver errors into oslo.db's types (so duplicates and
    lost connections are recognised by error code, not by message), and
    its SQLite set-up emits BEGIN itself; numamig adds to it a busy
    timeout, write-ahead logging and ``BEGIN IMMEDIATE`` for writers.

    :param connection_url: SQLAlchemy URL, e.g. ``sqlite:////var/lib/x``,
        ``postgresql+psycopg2://user@host/db``, ``mysql+pymysql://...``.
    :param existing: open only a database that exists: a SQLite file
        is neither created nor its directory (the reading commands,
        which must change nothing).
    :param sqlite_synchronous: whether a SQLite commit waits for the
        disk (``SQLITE_SYNCHRONOUS``); other databases ignore it.
    :param idle_in_transaction_timeout: PostgreSQL: seconds after which
        the server ends a session of this Database left idle inside a
        transaction (its client stopped or lost its network holding
        row locks); None or 0: the server's setting.
    :param libpq_bounds: PostgreSQL: {libpq parameter: value} bounding
        how long a client waits on a silent server (keepalives,
        tcp_user_timeout; numamig.db.libpq); a
        parameter the URL's query names itself keeps the URL's value.
        Not shown in the URL messages print.
    :raises DatabaseError: if the URL cannot be parsed or its driver is
        not installed (nothing is connected yet), or with ``existing``
        when the SQLite file is not there.
    """

    def __init__(self, connection_url, existing=False,
                 sqlite_synchronous=True, idle_in_transaction_timeout=None,
                 libpq_bounds=None):
        self.sqlite_synchronous = bool(sqlite_synchronous)
        self.idle_in_transaction_timeout = idle_in_transaction_timeout
        try:
            self.url = sa.engine.make_url(connection_url)
        except sa_exc.ArgumentError as exc:
            raise exception.DatabaseError(
                url=repr(connection_url), reason=str(exc)) from exc
        if existing:
            self._require_sqlite_file()
        else:
            self._make_sqlite_directory()
        self._context = enginefacade.transaction_context()
        # Connecting (and retrying) is wait_until_reachable's job, with
        # the operator's [database] max_retries; here nothing connects.
        # thread_checkin (a sleep(0) at every connection check-in, for
        # eventlet's sake) costs ~90 us a transaction and numamig runs
        # on native threads.
        self._context.configure(
            connection=self._engine_url(libpq_bounds).render_as_string(
                hide_password=False),
            sqlite_fk=True, max_retries=0, thread_checkin=False)
        self.engine = self._start_engine()
        # Callables given [_rows.Change] after every committed
        # transaction that changed a migration's status, a drain, a
        # move or a host's maintenance (the conductor's notifications);
        # each must return at once and never raise.
        self.change_listeners = []

    @classmethod
    def from_config(cls, conf, existing=False):
        """Open the database named by ``[database] connection``, with
        ``[database] sqlite_synchronous`` and
        ``idle_in_transaction_timeout``."""
        return cls(conf.database.connection, existing=existing,
                   sqlite_synchronous=conf.database.sqlite_synchronous,
                   idle_in_transaction_timeout=(
                       conf.database.idle_in_transaction_timeout),
                   libpq_bounds=libpq.bounds(conf.database))

    def _engine_url(self, libpq_bounds):
        """The URL the engine connects by: PostgreSQL's with the libpq
        bounds its query does not name (the driver passes the query to
        libpq as connection parameters)."""
        if not libpq_bounds or \
                self.url.get_backend_name() != 'postgresql':
            return self.url
        return self.url.update_query_dict(
            {key: str(value) for key, value in libpq_bounds.items()
             if key not in self.url.query})

    @property
    def safe_url(self):
        """The URL with its password hidden, for messages and logs."""
        return self.url.render_as_string(hide_password=True)

    @property
    def is_sqlite(self):
        return self.url.get_backend_name() == 'sqlite'

    def _sqlite_path(self):
        path = self.url.database if self.is_sqlite else None
        if path and path != ':memory:' and not path.startswith('file:'):
            return os.path.abspath(path)
        return None

    def _require_sqlite_file(self):
        path = self._sqlite_path()
        if path and not os.path.exists(path):
            raise exception.DatabaseError(
                url=self.safe_url,
                reason=f"there is no database file {path}; [database] "
                       f"connection must name the conductor's database "
                       f"(read from /etc/numamig/numamig.conf or "
                       f"--config-file)")

    def _make_sqlite_directory(self):
        """Create the SQLite file's directory and the file itself with
        numamig.filemodes' modes: SQLite would create the file with the
        umask's (usually 0644, every record readable by every user)."""
        path = self._sqlite_path()
        if path:
            filemodes.make_directory(os.path.dirname(path))
            filemodes.create(path, filemodes.DATABASE_MODE)

    def _start_engine(self):
        self._context.append_on_engine_create(self._prepare_engine)
        try:
            return self._context.writer.get_engine()
        except (sa_exc.ArgumentError, sa_exc.NoSuchModuleError,
                ImportError) as exc:
            raise exception.DatabaseError(url=self.safe_url,
                                          reason=str(exc)) from exc

    def _prepare_engine(self, engine):
        """Add numamig's settings to the engine oslo.db just created."""
        if self.is_sqlite:
            sa.event.listen(engine, 'connect', _sqlite_on_connect(
                SQLITE_SYNCHRONOUS[self.sqlite_synchronous]))
            _listen_first(engine, 'begin', _sqlite_on_begin)
            _pool_connections(engine)
            return
        statement = _READ_COMMITTED.get(self.url.get_backend_name())
        if statement:
            statements = [statement]
            if self.url.get_backend_name() == 'postgresql' and \
                    self.idle_in_transaction_timeout:
                # A session left inside a transaction by a conductor cut
                # off from the database would hold its row locks (the
                # admission lock among them) until the server's TCP
                # keepalives give up on it: hours, with every conductor
                # waiting behind it.
                statements.append(
                    f"SET SESSION idle_in_transaction_session_timeout = "
                    f"{int(self.idle_in_transaction_timeout * 1000)}")
            sa.event.listen(engine, 'connect', _read_committed(*statements))

    @contextlib.contextmanager
    def reader(self):
        """A session for reads, in a transaction of its own."""
        with self._guard(), self._context.reader.using(
                types.SimpleNamespace()) as session:
            yield session

    @contextlib.contextmanager
    def writer(self):
        """A session whose writes are committed when the block ends.

        Any exception rolls everything back and propagates.
        """
        changes = None
        with self._guard(), self._context.writer.using(
                types.SimpleNamespace()) as session:
            if self.is_sqlite:
                # Tell _sqlite_on_begin before the transaction starts.
                session.connection(execution_options={'numamig_write': True})
            yield session
            changes = session.info.pop(_rows.CHANGES, None)
        # Committed: only now may anyone hear of them.
        if changes:
            for listener in self.change_listeners:
                listener(changes)

    @contextlib.contextmanager
    def _guard(self):
        # A server that is gone is not a bug of the caller: say which
        # database could not be reached instead of a driver traceback.
        try:
            yield
        except _UNREACHABLE as exc:
            raise exception.DatabaseError(
                url=self.safe_url, reason=_reason(exc)) from exc
        except sa_exc.OperationalError as exc:
            # oslo.db's filters do not know every driver's wording of a
            # refused connection; an error with no statement is one.
            if exc.connection_invalidated or exc.statement is None:
                raise exception.DatabaseError(
                    url=self.safe_url,
                    reason=exception.one_line(exc.orig)) from exc
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
        from numamig.db import revisions
        return revisions.current(self)

    def check_schema(self):
        """Raise DatabaseNotSynced unless the schema is at the newest.

        Services call this at start, so that they never run against a
        schema that lacks their tables or columns. It reads the revision
        list ``numamig.db.revisions`` keeps, not alembic's scripts, so
        that a reading command does not load alembic.
        """
        from numamig.db import revisions
        revisions.check(self.version(), self.safe_url)

    def dispose(self):
        """Close every pooled connection."""
        self._context.dispose_pool()


def _sqlite_on_connect(synchronous):
    """The per-connection settings: a busy timeout, write-ahead logging
    (readers no longer wait for a writer's commit, nor a writer for
    readers, and a commit appends to one log instead of writing a
    rollback journal) and ``synchronous`` (an in-memory database ignores
    both)."""
    def on_connect(dbapi_connection, connection_record):
        cursor = dbapi_connection.cursor()
        cursor.execute(
            f'PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT * 1000}')
        cursor.execute('PRAGMA journal_mode = WAL')
        cursor.execute(f'PRAGMA synchronous = {synchronous}')
        cursor.close()
    return on_connect


def _sqlite_on_begin(connection):
    # A writer takes the write lock at BEGIN, so that a read-then-write
    # transaction cannot lose a race halfway through. oslo.db's own
    # listener sees the marker and emits no second BEGIN (its BEGIN, a
    # compiled text statement, also costs a reader ~40 us more).
    if 'in_transaction' in connection.info:
        return
    if connection.get_execution_options().get('numamig_write'):
        connection.exec_driver_sql('BEGIN IMMEDIATE')
    else:
        connection.exec_driver_sql('BEGIN')
    connection.info['in_transaction'] = True


def _listen_first(engine, name, listener):
    """Run ``listener`` before the engine's other ``name`` listeners.

    oslo.db emits a plain BEGIN on SQLite unless one was emitted already;
    numamig's must come first for a writer's BEGIN IMMEDIATE to win.
    (``insert=True`` does not reorder an engine's listeners.)
    """
    others = list(getattr(engine.dispatch, name))
    for other in others:
        sa.event.remove(engine, name, other)
    sa.event.listen(engine, name, listener)
    for other in others:
        sa.event.listen(engine, name, other)


def _pool_connections(engine):
    """Keep SQLite connections open between transactions.

    oslo.db gives a SQLite file a NullPool: a new connection, its
    PRAGMAs and listeners for every transaction. Measured here, that
    makes a read 2.9x and a write 1.9x as slow as with SQLAlchemy's own
    pool, on the control plane's critical path. The replacement keeps
    the listeners already registered (oslo.db's and numamig's).
    """
    if not isinstance(engine.pool, sa.pool.NullPool):
        return
    nullpool = engine.pool
    engine.pool = sa.pool.QueuePool(
        nullpool._creator, dialect=nullpool._dialect,
        _dispatch=nullpool.dispatch)
    nullpool.dispose()


# READ COMMITTED (PostgreSQL's default, not MySQL's): a conditional
# UPDATE then re-checks its WHERE clause against the latest committed row.
_READ_COMMITTED = {
    'postgresql': 'SET SESSION CHARACTERISTICS AS TRANSACTION '
                  'ISOLATION LEVEL READ COMMITTED',
    'mysql': 'SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED',
}


def _read_committed(*statements):
    def on_connect(dbapi_connection, connection_record):
        cursor = dbapi_connection.cursor()
        for statement in statements:
            cursor.execute(statement)
        cursor.close()
        if not getattr(dbapi_connection, 'autocommit', True):
            dbapi_connection.commit()
    return on_connect


def _reason(exc):
    """The driver's own words, without oslo.db's wrapping."""
    inner = getattr(exc, 'inner_exception', None)
    return exception.one_line(getattr(inner, 'orig', None) or inner or exc)
