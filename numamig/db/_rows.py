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
    """Read one row by uuid, bypassing the session's identity map.

    populate_existing: a row read before an UPDATE in the same session
    must not be served stale. ``lock`` adds SELECT ... FOR UPDATE for a
    read-modify-write.

    :returns: the row, or None.
    """
    query = sa.select(model).where(model.uuid == uuid)
    if lock:
        query = query.with_for_update()
    return session.scalars(
        query.execution_options(populate_existing=True)).one_or_none()
