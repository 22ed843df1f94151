"""A migration's satellite records (numamig.objects.migration_satellites).

They are kept in the migration's own row (``migrations.memory_reclaim``,
``migrations.migration_threads``), not in tables of their own: the
columns are release 2's (one baseline revision, unchanged), a status
change that carries one is still one UPDATE of one row, and no read of a
migration joins anything. What moved is the object boundary: the
migration's core record (numamig.db.migrations) no longer reads or
writes these columns, and each satellite is read here, as its own
object, only where someone asks for it. Public API::

    get(db, uuid, names) -> {name: object}
    set_reclaim(db, uuid, entries) -> MigrationReclaim

(Where the threads ran is written by numamig.db.migration_threads.)
"""

import sqlalchemy as sa

from numamig import exception
from numamig.db import _rows
from numamig.db import models
from numamig.objects import migration_satellites as satellites

_T = models.Migration.__table__
# Satellite name -> (its column, how the object is built from it).
_COLUMNS = {
    'reclaim': ('memory_reclaim', lambda uuid, value: satellites.
                MigrationReclaim(migration_uuid=uuid, entries=value or [])),
    'threads': ('migration_threads', lambda uuid, value: satellites.
                MigrationThreads(migration_uuid=uuid, sides=value or {})),
}


def get(db, uuid, names):
    """The satellites ``names`` (keys of SATELLITES) of migration ``uuid``.

    :returns: {name: object}; an object with nothing recorded is empty.
    :raises Invalid: a name is not a satellite (nothing read).
    :raises MigrationNotFound:
    :raises StoredRecordInvalid: a stored value the object refuses.
    """
    names = tuple(names)
    unknown = sorted(set(names) - set(_COLUMNS))
    if unknown:
        raise exception.Invalid(
            reason=f"no satellite record {', '.join(unknown)} of a "
                   f"migration (known: {', '.join(sorted(_COLUMNS))})")
    with db.reader() as session:
        row = session.connection().execute(
            sa.select(*(_T.c[_COLUMNS[n][0]] for n in names)).where(
                _T.c.uuid == uuid)).one_or_none() if names else \
            _rows.fresh_by_uuid(session, models.Migration, uuid)
    if row is None:
        raise exception.MigrationNotFound(migration_uuid=uuid)
    found = {}
    for name in names:
        column, build = _COLUMNS[name]
        try:
            found[name] = build(uuid, getattr(row, column)).validate()
        except (exception.ObjectValidationError, ValueError,
                TypeError) as exc:
            raise exception.StoredRecordInvalid(
                table='migrations', key=uuid, column=column,
                reason=str(exc)) from exc
    return found


def set_reclaim(db, uuid, entries):
    """Record what was reclaimed from other guests to place migration
    ``uuid``'s guest, replacing what was recorded.

    :param entries: dicts of MEMORY_RECLAIM_KEYS (values stored as text).
    :returns: the MigrationReclaim recorded.
    :raises ObjectValidationError: entries the object refuses; nothing
        changed.
    :raises MigrationNotFound:
    """
    reclaim = satellites.MigrationReclaim(
        migration_uuid=uuid,
        entries=[{k: None if v is None else str(v) for k, v in e.items()}
                 for e in entries]).validate()
    with db.writer() as session:
        result = _rows.run(session, sa.update(_T).where(
            _T.c.uuid == uuid).values(updated_at=_rows.utcnow(),
                                      memory_reclaim=reclaim.entries))
        if result.rowcount != 1:
            raise exception.MigrationNotFound(migration_uuid=uuid)
    return reclaim
