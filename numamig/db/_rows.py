"""Helpers the repository modules share: clock, messages, fresh reads."""

import datetime

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
    ``lock`` adds SELECT ... FOR UPDATE for a read-modify-write.

    :returns: the row, or None.
    """
    table = model.__table__
    query = sa.select(table).where(table.c.uuid == uuid)
    if lock:
        query = query.with_for_update()
    return session.execute(query).one_or_none()
