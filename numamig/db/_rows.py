"""Helpers the repository modules share: clock, messages, fresh reads."""

import datetime
import functools
import typing

import sqlalchemy as sa


def utcnow():
    """Now, aware UTC: the timestamp every repository write records."""
    return datetime.datetime.now(datetime.UTC)


def none_or(value):
    """Render an optional key for a message ('none' when absent)."""
    return 'none' if value is None else value


def fresh_by_uuid(session, model, uuid, lock=False):
    """Read one row by uuid as a plain row (its columns by name), never
    an ORM instance.

    Callers only read the row's columns: the ORM's entity loading and
    identity map cost more CPU than the statement itself (the rows of a
    migration's records are read about ten times per migration), and a
    plain row is never served stale from the session after an UPDATE.
    The statement is built once per table (``prebuilt``). ``lock`` adds
    SELECT ... FOR UPDATE for a read-modify-write.

    :returns: the row, or None.
    """
    return session.connection().execute(
        _by_uuid(model.__table__, lock), {'uuid': uuid}).one_or_none()


@functools.cache
def _by_uuid(table, lock):
    query = sa.select(table).where(table.c.uuid == sa.bindparam('uuid'))
    return query.with_for_update() if lock else query


def prebuilt(build):
    """Build a Core statement once, on first use, and keep it.

    The statements of a migration's critical path run a few dozen times a
    migration; building one (expressions, then SQLAlchemy's cache key for
    its compiled form) costs 100-400 us of CPU, running a built one with
    bind parameters through ``session.connection()`` about a fifth of
    that (measured per statement on SQLite). ``build`` takes no
    arguments and uses ``sa.bindparam`` for every value that varies; the
    statement is run with ``run``.
    """
    return functools.cache(build)


def run(session, statement, params=None):
    """Run a Core statement on the session's connection, in its
    transaction, skipping the ORM's execution layer."""
    return session.connection().execute(statement, params or {})


# Where a write transaction collects the changes it made that numamig
# tells the world of (session.info); numamig.db.api.Database hands them
# to its change listeners once the transaction committed.
CHANGES = 'numamig_changes'
MIGRATION = 'migration'
DRAIN = 'drain'
DRAIN_MOVE = 'drain-move'
HOST = 'host'
MEMORY_CHANGE = 'memory-change'
LIVE_MIGRATABLE = 'live-migratable'
DEVICES_VERIFIED = 'devices-verified'


class Change(typing.NamedTuple):
    """One committed change: its ``kind`` (MIGRATION, DRAIN, DRAIN_MOVE,
    HOST, MEMORY_CHANGE), the record as written (a Migration; a drain's,
    a move's or a memory change's dict; a host's Maintenance), the
    detail recorded with it and, for a migration, the satellite records
    its notification carries ({name: object}, read from the same row)."""

    kind: str
    record: object
    detail: object = None
    satellites: object = None


def note_change(session, kind, record, detail=None, satellites=None):
    """Record, in ``session``'s transaction, a change to tell of once it
    commits."""
    session.info.setdefault(CHANGES, []).append(Change(
        kind, record, detail, satellites))


def note_status_change(session, migration, detail, satellites=None):
    """``migration`` (the Migration as written) reached its status;
    ``satellites``: {name: object} of its satellite records the
    notification carries (MigrationPayload.prediction's)."""
    note_change(session, MIGRATION, migration, detail, satellites)
