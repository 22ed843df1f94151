"""Reads of the conductor's database through the DB-API driver alone.

``numamig-manage migration show`` and ``migration list`` read a few rows
and exit. Through numamig.db's repositories they paid, before reading
anything, for SQLAlchemy (~12x a bare interpreter's start on the
development machine), oslo.db and the versioned objects they build
(which load oslo.messaging, ~18x): a read took ~15x a bare interpreter,
its SELECTs a few milliseconds of it (issue 43). Here the same rows are
read with the driver SQLAlchemy itself would have used (``sqlite3``,
``psycopg2``, ``pymysql``) and plain SELECTs, and handed back as plain
records the commands' views read like the objects.

What stays the same as through numamig.db.api.Database, and is tested
on the three databases (tests/functional/db/test_direct_reads.py):

* the URL: ``[database] connection`` parsed as SQLAlchemy parses it
  (``parse_url``) and shown, in messages, as it shows it (password
  hidden); a URL this module does not serve exactly as SQLAlchemy would
  (another driver, options it would convert, an in-memory database) is
  not served here: ``connect`` returns None and the caller reads
  through numamig.db as before;
* the errors: a missing SQLite file, a server that refuses the
  connection, a schema at another revision: the same DatabaseError or
  DatabaseNotSynced with the same words;
* the schema check: alembic's ``alembic_version`` table read directly,
  judged by numamig.db.revisions as ``Database.check_schema`` judges;
* the values: timestamps aware UTC, JSON documents decoded, booleans as
  booleans, as the models' column types (numamig.db.models) give them.

The tables and columns read are named once, in TABLES; a unit test
(tests/unit/db/test_direct.py) compares it with the models, so a column
added to, renamed in or retyped in a model fails it until this module
says whether and how it reads it.
"""

import datetime
import json
import os
import re
from urllib import parse

from numamig import exception
from numamig.db import revisions

# How a column's value is read: as the driver gives it (PLAIN), or as the
# model's column type turns it (numamig.db.models: UTCDateTime, JSONText,
# Boolean).
PLAIN, TIME, JSON, BOOL = 'plain', 'time', 'json', 'bool'

# {table: {column: kind}}: every column of a table a read selects.
TABLES = {
    'migrations': {
        'id': PLAIN, 'uuid': PLAIN, 'instance_uuid': PLAIN,
        'source_host': PLAIN, 'dest_host': PLAIN, 'requested_host': PLAIN,
        'status': PLAIN, 'error': PLAIN, 'priority': PLAIN,
        'created_at': TIME, 'updated_at': TIME, 'admitted_at': TIME,
        'memory_total': PLAIN, 'memory_processed': PLAIN,
        'memory_remaining': PLAIN, 'disk_total': PLAIN,
        'disk_processed': PLAIN, 'disk_remaining': PLAIN,
        'refused_hosts': JSON,
        'elapsed_ms': PLAIN, 'downtime_ms': PLAIN, 'emulated': BOOL,
        'post_copy': BOOL, 'paused': BOOL,
        'convergence_policy': PLAIN, 'convergence_actions': JSON,
        'prediction': PLAIN, 'predicted_elapsed_ms': PLAIN,
        'predicted_downtime_ms': PLAIN, 'sampled_dirty_rate': PLAIN,
        'memory_reclaim': JSON, 'postcopy_recovery': JSON,
        'migration_threads': JSON, 'migration_devices': JSON,
    },
    'migration_status_history': {
        'migration_id': PLAIN, 'status': PLAIN, 'changed_at': TIME,
        'detail': PLAIN,
    },
    'compute_nodes': {
        'host': PLAIN, 'reported_at': TIME, 'report': JSON,
        'disabled_at': TIME, 'disabled_reason': PLAIN,
    },
    'instances': {
        'host': PLAIN,
    },
}
# Columns of those tables no read shows, named so that the unit test
# can tell a column forgotten here from one left out on purpose.
UNREAD = {
    # The conductor's own bookkeeping of a migration in flight.
    'migrations': ('lease_expires_at', 'lease_holder', 'start_request'),
    'migration_status_history': ('id',),
    # The report's own copies of its scalars are read (as the
    # ComputeNodeReport the repository returned), not the columns'.
    'compute_nodes': ('id', 'hypervisor_uri', 'hypervisor_type',
                      'service_version', 'fingerprint', 'change_seq',
                      'created_at', 'updated_at'),
    # A host's guests are counted, not shown.
    'instances': ('id', 'uuid', 'revision', 'name', 'project_id', 'vcpus',
                  'memory_mb', 'extra_specs', 'image_properties',
                  'numa_topology', 'migration_context', 'migration_uuid',
                  'claim_host', 'power_state', 'task_state', 'created_at',
                  'updated_at'),
}
# The versioned objects a host's report is stored as, by the versions
# whose primitives ``host_reports`` reads (numamig.objects; a unit test
# keeps each the class's current version). A report stored at any other
# version is read through numamig.db, which knows how to load it.
# HostNUMATopology and HostNUMACell 1.1 only add fields host list does
# not read (PCI devices, sockets).
REPORT_VERSIONS = {'ComputeNodeReport': ('1.0', '1.1'),
                   'HostNUMATopology': ('1.0', '1.1'),
                   'HostNUMACell': ('1.0', '1.1'),
                   'NUMAPagesTopology': ('1.0',)}
# The JSON columns whose model field turns every value of every entry
# into a string (ListOfDictOfNullableStringsField) or every item into one
# (ListOfStringsField), as the objects the repositories return did.
_STRING_ENTRIES = ('memory_reclaim', 'postcopy_recovery')
_STRING_ITEMS = ('convergence_actions',)

# SQLAlchemy's URL grammar (sqlalchemy.engine.url._parse_url).
_URL = re.compile(r"""
    (?P<name>[\w+]+)://
    (?:(?P<username>[^:/]*)(?::(?P<password>[^@]*))?@)?
    (?:(?:\[(?P<ipv6host>[^/?]+)\]|(?P<ipv4host>[^/:?]+))?
       (?::(?P<port>[^/?]*))?)?
    (?:/(?P<database>[^?]*))?
    (?:\?(?P<query>.*))?
    """, re.X)

# drivername -> backend, for the drivers served here: SQLAlchemy's
# default for sqlite, the ones named explicitly for the servers (a bare
# postgresql:// or mysql:// means another driver to SQLAlchemy 2; its
# mariadb:// dialect is not the one oslo.db sets up as MySQL's).
_DRIVERS = {'sqlite': 'sqlite', 'sqlite+pysqlite': 'sqlite',
            'postgresql+psycopg2': 'postgresql',
            'mysql+pymysql': 'mysql'}
# URL query options passed on to the driver as SQLAlchemy passes them
# (strings, unchanged); a URL with any other is left to SQLAlchemy.
_PASSED_OPTIONS = {'sqlite': (), 'postgresql': (
    'sslmode', 'sslrootcert', 'sslcert', 'sslkey', 'connect_timeout',
    'application_name', 'client_encoding', 'options', 'keepalives',
    'keepalives_idle', 'keepalives_interval', 'keepalives_count',
    'tcp_user_timeout', 'target_session_attrs'),
    'mysql': ('charset',)}

# Seconds a reader waits for a SQLite writer, as Database's connections.
SQLITE_BUSY_TIMEOUT = 30


class Url:
    """``[database] connection`` as SQLAlchemy's URL holds it."""

    def __init__(self, drivername, username, password, host, port,
                 database, query):
        self.drivername = drivername
        self.username = username
        self.password = password
        self.host = host
        self.port = port
        self.database = database
        self.query = query

    @property
    def backend(self):
        return _DRIVERS.get(self.drivername)

    @property
    def safe(self):
        """As ``URL.render_as_string(hide_password=True)`` shows it."""
        text = self.drivername + '://'
        if self.username is not None:
            text += parse.quote(self.username, safe=' +')
            if self.password is not None:
                text += ':***'
            text += '@'
        if self.host is not None:
            text += f'[{self.host}]' if ':' in self.host else self.host
        if self.port is not None:
            text += f':{self.port}'
        if self.database is not None:
            text += '/' + parse.quote(self.database, safe=' +/')
        if self.query:
            text += '?' + '&'.join(
                f'{parse.quote_plus(k)}={parse.quote_plus(v)}'
                for k, v in sorted(self.query.items()))
        return text


def parse_url(text):
    """The Url of ``text``, or None where SQLAlchemy would refuse it or
    read it otherwise than this module can (a repeated query option)."""
    found = _URL.match(text or '')
    if found is None:
        return None
    parts = found.groupdict()
    query = {}
    if parts['query'] is not None:
        for key, value in parse.parse_qsl(parts['query']):
            if key in query:
                return None
            query[key] = value
    for name in ('username', 'password', 'database'):
        if parts[name] is not None:
            parts[name] = parse.unquote(parts[name])
    port = parts['port'] or None
    if port is not None:
        if not port.isdigit():
            return None
        port = int(port)
    return Url(parts['name'], parts['username'], parts['password'],
               parts['ipv4host'] or parts['ipv6host'], port,
               parts['database'], query)


def connect(connection_url, libpq_bounds=None):
    """A Reader of the database, schema checked; None where this module
    does not serve the URL (read through numamig.db.api then).

    :param libpq_bounds: PostgreSQL: libpq parameters bounding a wait on
        a silent server, as numamig.db.api.Database takes them (the
        URL's own values win).

    :raises DatabaseError: the SQLite file is missing, the server cannot
        be reached, the schema is unusable.
    :raises DatabaseNotSynced: the schema is not at this release's.
    """
    url = parse_url(connection_url)
    if url is None or url.backend is None or \
            set(url.query) - set(_PASSED_OPTIONS[url.backend]):
        return None
    if url.backend == 'sqlite':
        path = _sqlite_path(url)
        if path is None:
            return None
        reader = Reader(url, _open_sqlite(url, path))
    else:
        try:
            reader = Reader(url, _open_postgresql(url, libpq_bounds)
                            if url.backend == 'postgresql' else
                            _open_mysql(url))
        except ImportError:
            # The driver is not installed: numamig.db says so as it
            # always did.
            return None
    try:
        reader.check_schema()
    except BaseException:
        reader.close()
        raise
    return reader


def _sqlite_path(url):
    """The file's absolute path; None for an in-memory or URI database
    (never a conductor's, left to numamig.db)."""
    path = url.database
    if not path or path == ':memory:' or path.startswith('file:'):
        return None
    return os.path.abspath(path)


def _open_sqlite(url, path):
    # As Database(existing=True): a reading command creates nothing.
    if not os.path.exists(path):
        raise exception.DatabaseError(
            url=url.safe,
            reason=f"there is no database file {path}; [database] "
                   f"connection must name the conductor's database "
                   f"(read from /etc/numamig/numamig.conf or "
                   f"--config-file)")
    import sqlite3
    try:
        connection = sqlite3.connect(url.database)
        connection.execute(
            f'PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT * 1000}')
    except sqlite3.OperationalError as exc:
        raise exception.DatabaseError(url=url.safe,
                                      reason=exception.one_line(exc)) \
            from exc
    return connection


def _open_postgresql(url, libpq_bounds=None):
    import psycopg2
    # SQLAlchemy's psycopg2 dialect and oslo.db's defaults; the bounds as
    # Database adds them.
    options = {'client_encoding': 'utf8', **(libpq_bounds or {}),
               **url.query}
    for name, key in (('host', 'host'), ('port', 'port'),
                      ('username', 'user'), ('password', 'password'),
                      ('database', 'dbname')):
        value = getattr(url, name)
        if value is not None:
            options[key] = value
    try:
        return psycopg2.connect(**options)
    except psycopg2.OperationalError as exc:
        raise exception.DatabaseError(url=url.safe,
                                      reason=exception.one_line(exc)) \
            from exc


def _open_mysql(url):
    import pymysql
    # SQLAlchemy's pymysql dialect and oslo.db's default charset.
    options = {'charset': 'utf8', **url.query}
    for name, key in (('host', 'host'), ('port', 'port'),
                      ('username', 'user'), ('password', 'password'),
                      ('database', 'database')):
        value = getattr(url, name)
        if value is not None:
            options[key] = value
    try:
        return pymysql.connect(**options)
    except pymysql.OperationalError as exc:
        raise exception.DatabaseError(url=url.safe,
                                      reason=exception.one_line(exc)) \
            from exc


class Record:
    """A row as the commands' views read an object: attributes, and
    ``get(name, default)``."""

    def __init__(self, values):
        self.__dict__.update(values)

    def get(self, name, default=None):
        return self.__dict__.get(name, default)

    def __setattr__(self, name, value):
        self.__dict__[name] = value


class MigrationRecord(Record):
    """A migration as ``numamig.objects.Migration`` shows it."""


class Reader:
    """One connection, read with plain SELECTs; close() it."""

    def __init__(self, url, connection):
        self.url = url
        self.connection = connection
        # sqlite3 takes ?, the two server drivers %s.
        self.mark = '?' if url.backend == 'sqlite' else '%s'

    @property
    def safe_url(self):
        return self.url.safe

    def close(self):
        self.connection.close()

    def _rows(self, statement, params=()):
        cursor = self.connection.cursor()
        try:
            cursor.execute(statement.replace('?', self.mark), params)
            return cursor.fetchall()
        finally:
            cursor.close()

    def check_schema(self):
        """As Database.check_schema, from alembic_version read directly."""
        revisions.check(self._revision(), self.safe_url)

    def _revision(self):
        if not self._rows(_HAS_TABLE[self.url.backend],
                          (revisions.VERSION_TABLE,)):
            return None
        found = [row[0] for row in self._rows(
            f'SELECT version_num FROM {revisions.VERSION_TABLE}')]
        return revisions.single(found, self.safe_url)

    def migrations(self, uuid=None, instance_uuid=None, status=None):
        """MigrationRecords, oldest first, with their histories.

        :raises MigrationNotFound: ``uuid`` names none.
        """
        where, params = [], []
        for column, value in (('uuid', uuid),
                              ('instance_uuid', instance_uuid),
                              ('status', status)):
            if value is not None:
                where.append(f'{column} = ?')
                params.append(value)
        clause = f" WHERE {' AND '.join(where)}" if where else ''
        columns = TABLES['migrations']
        rows = [self._values(columns, row) for row in self._rows(
            f"SELECT {', '.join(columns)} FROM migrations{clause} "
            f"ORDER BY id", params)]
        if uuid is not None and not rows:
            raise exception.MigrationNotFound(migration_uuid=uuid)
        history = {values['id']: [] for values in rows}
        changes = TABLES['migration_status_history']
        for row in self._rows(
                f"SELECT {', '.join(changes)} FROM migration_status_history "
                f"WHERE migration_id IN (SELECT id FROM migrations{clause}) "
                f"ORDER BY changed_at, id", params):
            change = Record(self._values(changes, row))
            history[change.migration_id].append(change)
        return [MigrationRecord(dict(values, history=history[values['id']]))
                for values in rows]

    def _values(self, columns, row):
        return {name: _convert(kind, name, value) for (name, kind), value
                in zip(columns.items(), row, strict=True)}

    def queue_positions(self):
        """{uuid: place in the admission queue, 1 being next} of every
        waiting migration (numamig.db.queue.positions)."""
        rows = self._rows(
            "SELECT uuid FROM migrations WHERE status = ? AND admitted_at "
            "IS NULL ORDER BY priority DESC, id", (_WAITING,))
        return {row[0]: place for place, row in enumerate(rows, start=1)}

    def queue_position(self, uuid):
        """The place in line of one waiting migration, or None
        (numamig.db.queue.position): a count, however long the queue."""
        rows = self._rows(
            "SELECT id, priority FROM migrations WHERE uuid = ? AND "
            "status = ? AND admitted_at IS NULL", (uuid, _WAITING))
        if not rows:
            return None
        row_id, priority = rows[0]
        return self._rows(
            "SELECT COUNT(*) FROM migrations WHERE status = ? AND "
            "admitted_at IS NULL AND (priority > ? OR (priority = ? AND "
            "id <= ?))", (_WAITING, priority, priority, row_id))[0][0]

    def host_reports(self):
        """[(HostReport, Maintenance or None)] of every host, by name;
        None where a report is stored at a version not in
        REPORT_VERSIONS (read through numamig.db then)."""
        columns = TABLES['compute_nodes']
        found = []
        for row in self._rows(f"SELECT {', '.join(columns)} FROM "
                              f"compute_nodes ORDER BY host"):
            values = self._values(columns, row)
            report = _host_report(values['report'], values['reported_at'])
            if report is None:
                return None
            maintenance = None
            if values['disabled_at'] is not None:
                maintenance = Maintenance(values['host'],
                                          values['disabled_at'],
                                          values['disabled_reason'])
            found.append((report, maintenance))
        return found

    def instance_counts(self):
        """{host: number of instances recorded on it}."""
        return dict(self._rows(
            "SELECT host, COUNT(*) FROM instances GROUP BY host"))

    def require_host(self, host):
        """:raises HostNotFound: no compute host of that name reported."""
        if not self._rows("SELECT host FROM compute_nodes WHERE host = ?",
                          (host,)):
            raise exception.HostNotFound(host=host)


# A migration waits for admission while 'accepted' with no admitted_at
# (numamig.db.queue.WAITING).
_WAITING = 'accepted'

# Whether a table exists, where SQLAlchemy's inspector looks for it:
# the database file; the schemas on PostgreSQL's search path; the
# connection's database on MySQL/MariaDB.
_HAS_TABLE = {
    'sqlite': "SELECT name FROM sqlite_master WHERE type = 'table' AND "
              "name = ?",
    'postgresql': "SELECT c.relname FROM pg_catalog.pg_class c WHERE "
                  "c.relname = ? AND c.relkind IN ('r', 'p', 'v', 'm', "
                  "'f') AND pg_catalog.pg_table_is_visible(c.oid)",
    'mysql': "SELECT table_name FROM information_schema.tables WHERE "
             "table_schema = DATABASE() AND table_name = ?",
}


def _convert(kind, name, value):
    if value is None or kind == PLAIN:
        return value
    if kind == TIME:
        if isinstance(value, str):
            value = datetime.datetime.fromisoformat(value)
        return value.replace(tzinfo=datetime.UTC)
    if kind == BOOL:
        return bool(value)
    value = json.loads(value)
    if name in _STRING_ENTRIES:
        return [{key: None if item is None else str(item)
                 for key, item in entry.items()} for entry in value]
    if name in _STRING_ITEMS:
        return [str(item) for item in value]
    return value


class Maintenance:
    """numamig.db.compute_nodes.Maintenance: disabled since when, why."""

    def __init__(self, host, disabled_at, reason):
        self.host = host
        self.disabled_at = disabled_at
        self.reason = reason


def _data(primitive, name):
    """The fields of a stored object primitive of class ``name``; None
    for another class or a version not in REPORT_VERSIONS."""
    if not isinstance(primitive, dict) or \
            primitive.get('numamig_object.name') != name or \
            primitive.get('numamig_object.version') not in \
            REPORT_VERSIONS[name]:
        return None
    return primitive.get('numamig_object.data')


def _host_report(primitive, reported_at):
    """The report as host list reads a ComputeNodeReport: its scalars,
    and per cell its id, dedicated and pinned pCPUs and page pools.
    None where a primitive is not one REPORT_VERSIONS names."""
    report = _data(primitive, 'ComputeNodeReport')
    topology = _data(report and report.get('topology'), 'HostNUMATopology')
    if topology is None:
        return None
    cells = []
    for cell_primitive in topology.get('cells', []):
        cell = _data(cell_primitive, 'HostNUMACell')
        if cell is None:
            return None
        pools = [_data(pool, 'NUMAPagesTopology')
                 for pool in cell.get('mempages', [])]
        if None in pools:
            return None
        pcpuset = set(cell.get('pcpuset', ()))
        cells.append(Record({
            'id': cell['id'], 'pcpuset': pcpuset,
            'free_pcpus': pcpuset - set(cell.get('pinned_cpus', ())),
            'mempages': [Record({
                'size_kb': pool['size_kb'], 'total': pool['total'],
                'free': pool['total'] - pool.get('used', 0) -
                pool.get('reserved', 0)}) for pool in pools]}))
    return Record({
        'host': report['host'], 'hypervisor_uri': report['hypervisor_uri'],
        'hypervisor_type': report.get('hypervisor_type', 'qemu'),
        'service_version': report['service_version'],
        # The column, exact: the primitive has whole seconds.
        'reported_at': reported_at,
        'topology': Record({'cells': cells})})
