"""Records of virtio-mem memory changes, keyed by the client's uuid.

Public API::

    start(db, uuid, host, request) -> (row dict, created)
    finish(db, uuid, status, plan, result) -> row dict
    get(db, uuid) -> row dict or None

A row dict has 'uuid', 'host', 'status', 'request', 'plan', 'result'.
"""

from oslo_db import exception as db_exc
import sqlalchemy as sa

from numamig.db import _rows
from numamig.db import models

# PARTIAL: some guests refused (their error in the result), others not.
RUNNING, DONE, PARTIAL, FAILED = 'running', 'done', 'partial', 'failed'


def start(db, uuid, host, request):
    """Record a change as running, unless ``uuid`` is recorded already.

    :returns: (the row, True) when recorded now; (the recorded row,
        False) for a request delivered again.
    """
    now = _rows.utcnow()
    try:
        with db.writer() as session:
            session.add(models.MemoryChange(
                uuid=uuid, host=host, status=RUNNING, request=request,
                created_at=now, updated_at=now))
            session.flush()
            _rows.note_change(session, _rows.MEMORY_CHANGE, {
                'uuid': uuid, 'host': host, 'status': RUNNING,
                'request': request, 'plan': None, 'result': None})
    except db_exc.DBDuplicateEntry:
        return get(db, uuid), False
    return get(db, uuid), True


def finish(db, uuid, status, plan, result):
    """Record how a change ended (status DONE, PARTIAL or FAILED)."""
    with db.writer() as session:
        changed = session.execute(sa.update(models.MemoryChange).where(
            models.MemoryChange.uuid == uuid).values(
            status=status, plan=plan, result=result,
            updated_at=_rows.utcnow()))
        if changed.rowcount:
            row = session.get(models.MemoryChange, uuid,
                              populate_existing=True)
            _rows.note_change(session, _rows.MEMORY_CHANGE, _as_dict(row))
    return get(db, uuid)


def get(db, uuid):
    with db.reader() as session:
        row = session.get(models.MemoryChange, uuid)
        return None if row is None else _as_dict(row)


def _as_dict(row):
    return {'uuid': row.uuid, 'host': row.host, 'status': row.status,
            'request': row.request, 'plan': row.plan, 'result': row.result}
