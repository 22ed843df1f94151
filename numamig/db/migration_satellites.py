"""A migration's satellite records (numamig.objects.migration_satellites).

They are kept in the migration's own row (``migrations.memory_reclaim``,
``migrations.migration_threads``, the prediction's columns), not in
tables of their own: the columns are release 2's (one baseline
revision, unchanged), a status change that carries one is still one
UPDATE of one row, and no read of a migration joins anything. What
moved is the object boundary: the
migration's core record (numamig.db.migrations) no longer reads or
writes these columns, and each satellite is read here, as its own
object, only where someone asks for it. Public API::

    get(db, uuid, names) -> {name: object}
    get_many(db, uuids, names) -> {uuid: {name: object}}
    satellites_of_row(row, names) -> {name: object}
    set_reclaim(db, uuid, entries) -> MigrationReclaim
    set_prediction(db, uuid, prediction) -> MigrationPrediction

(Where the threads ran is written by numamig.db.migration_threads.)
"""

import sqlalchemy as sa

from numamig import exception
from numamig.db import _rows
from numamig.db import models
from numamig.objects import migration_satellites as satellites

_T = models.Migration.__table__
# Satellite name -> (its columns, how the object is built from a row
# that has them).
_COLUMNS = {
    'reclaim': (('memory_reclaim',), lambda uuid, row: satellites.
                MigrationReclaim(migration_uuid=uuid,
                                 entries=row.memory_reclaim or [])),
    'threads': (('migration_threads',), lambda uuid, row: satellites.
                MigrationThreads(migration_uuid=uuid,
                                 sides=row.migration_threads or {})),
    'prediction': (satellites.PREDICTION_FIELDS, lambda uuid, row:
                   satellites.MigrationPrediction(
                       migration_uuid=uuid,
                       **{name: getattr(row, name) for name in
                          satellites.PREDICTION_FIELDS})),
}


def get(db, uuid, names):
    """The satellites ``names`` (keys of SATELLITES) of migration ``uuid``.

    :returns: {name: object}; an object with nothing recorded is empty.
    :raises Invalid: a name is not a satellite (nothing read).
    :raises MigrationNotFound:
    :raises StoredRecordInvalid: a stored value the object refuses.
    """
    found = get_many(db, [uuid], names)
    if uuid not in found:
        raise exception.MigrationNotFound(migration_uuid=uuid)
    return found[uuid]


def get_many(db, uuids, names):
    """The satellites ``names`` of each of migrations ``uuids``, in one
    query (``migration top`` reads every migration in flight at once).

    :returns: {uuid: {name: object}}; a uuid not recorded is left out.
    :raises Invalid: a name is not a satellite (nothing read).
    :raises StoredRecordInvalid: a stored value the object refuses.
    """
    names = tuple(names)
    unknown = sorted(set(names) - set(_COLUMNS))
    if unknown:
        raise exception.Invalid(
            reason=f"no satellite record {', '.join(unknown)} of a "
                   f"migration (known: {', '.join(sorted(_COLUMNS))})")
    uuids = list(uuids)
    if not uuids:
        return {}
    columns = []
    for name in names:
        columns.extend(c for c in _COLUMNS[name][0] if c not in columns)
    with db.reader() as session:
        rows = session.connection().execute(
            sa.select(_T.c.uuid, *(_T.c[c] for c in columns)).where(
                _T.c.uuid.in_(uuids))).all()
    return {row.uuid: satellites_of_row(row, names) for row in rows}


def satellites_of_row(row, names):
    """{name: object} of the satellites ``names`` from ``row`` (anything
    with the migrations columns as attributes, and ``uuid``).

    :raises StoredRecordInvalid: a stored value the object refuses.
    """
    found = {}
    for name in names:
        columns, build = _COLUMNS[name]
        try:
            found[name] = build(row.uuid, row).validate()
        except (exception.ObjectValidationError, ValueError,
                TypeError) as exc:
            raise exception.StoredRecordInvalid(
                table='migrations', key=row.uuid, column=','.join(columns),
                reason=str(exc)) from exc
    return found


def set_prediction(db, uuid, prediction):
    """Record the pre-flight prediction of migration ``uuid``.

    :param prediction: a dict with some of PREDICTION_FIELDS (what
        numamig.convergence.predict answers; others are ignored).
    :returns: the MigrationPrediction recorded.
    :raises Invalid: a value the object refuses; nothing changed.
    :raises MigrationNotFound:
    """
    values = {name: prediction.get(name)
              for name in satellites.PREDICTION_FIELDS}
    try:
        recorded = satellites.MigrationPrediction(
            migration_uuid=uuid, **values).validate()
    except (exception.ObjectValidationError, ValueError,
            TypeError) as exc:
        raise exception.Invalid(
            reason=f"prediction of migration {uuid}: unusable "
                   f"{values}: {exc}") from exc
    with db.writer() as session:
        result = _rows.run(session, sa.update(_T).where(
            _T.c.uuid == uuid).values(updated_at=_rows.utcnow(), **values))
        if result.rowcount != 1:
            raise exception.MigrationNotFound(migration_uuid=uuid)
    return recorded


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
