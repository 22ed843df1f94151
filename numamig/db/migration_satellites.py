"""A migration's satellite records (numamig.objects.migration_satellites).

They are kept in the migration's own row (``migrations.memory_reclaim``,
``migrations.migration_threads``, the prediction's, convergence's and
post-copy recovery's columns), not in tables of their own: the columns
are release 2's (one baseline revision, unchanged), a status change
that carries one is still one UPDATE of one row, and no read of a
migration joins anything. What moved is the object boundary: the
migration's core record (numamig.db.migrations) no longer reads these
columns (it writes only what a run's result carries, in its status
change, checked by ``fits`` here), and each satellite is read here, as
its own object, only where someone asks for it. Public API::

    get(db, uuid, names) -> {name: object}
    get_in(session, uuid, names) -> {name: object}
    get_many(db, uuids, names) -> {uuid: {name: object}}
    satellites_of_row(row, names) -> {name: object}
    set_reclaim(db, uuid, entries) -> MigrationReclaim
    set_prediction(db, uuid, prediction) -> MigrationPrediction
    set_policy(db, uuid, name) -> MigrationConvergence
    record_recovery(db, uuid, history) -> bool
    record_devices(db, uuid, host, devices) -> bool
    fits(column, value) -> bool

(Where the threads ran is written by numamig.db.migration_threads; a
run's result, which may carry the convergence and recovery columns, is
written with the status change that reports it, one UPDATE of the row,
by numamig.db.migrations, which checks those columns with ``fits``.)
"""

import sqlalchemy as sa

from numamig import exception
from numamig.db import _rows
from numamig.db import models
from numamig.objects import fields as nm_fields
from numamig.objects import migration_satellites as satellites

STATUS = nm_fields.MigrationStatus

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
    'convergence': (satellites.CONVERGENCE_FIELDS, lambda uuid, row:
                    satellites.MigrationConvergence(
                        migration_uuid=uuid, policy=row.convergence_policy,
                        actions=row.convergence_actions)),
    'recovery': (satellites.RECOVERY_FIELDS, lambda uuid, row: satellites.
                 MigrationRecovery(migration_uuid=uuid,
                                   events=_as_text(row.postcopy_recovery))),
    'devices': ((satellites.DEVICE_COLUMN,), lambda uuid, row:
                satellites.MigrationDevices(
                    migration_uuid=uuid,
                    **(getattr(row, satellites.DEVICE_COLUMN) or {}))),
}


def _as_text(history):
    """A stored recovery history with its values as text (the attempt
    number may have been recorded as an integer)."""
    if history is None:
        return None
    return [{k: None if v is None else str(v) for k, v in event.items()}
            for event in history]


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
    names = _known(names)
    uuids = list(uuids)
    if not uuids:
        return {}
    with db.reader() as session:
        return _read(session, uuids, names)


def get_in(session, uuid, names):
    """``get`` inside the caller's transaction (a read that answers a
    migration with its satellites reads both in one).

    :raises Invalid: a name is not a satellite (nothing read).
    :raises MigrationNotFound:
    :raises StoredRecordInvalid: a stored value the object refuses.
    """
    names = _known(names)
    found = _read(session, [uuid], names)
    if uuid not in found:
        raise exception.MigrationNotFound(migration_uuid=uuid)
    return found[uuid]


def _known(names):
    names = tuple(names)
    unknown = sorted(set(names) - set(_COLUMNS))
    if unknown:
        raise exception.Invalid(
            reason=f"no satellite record {', '.join(unknown)} of a "
                   f"migration (known: {', '.join(sorted(_COLUMNS))})")
    return names


def _read(session, uuids, names):
    columns = []
    for name in names:
        columns.extend(c for c in _COLUMNS[name][0] if c not in columns)
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


def set_policy(db, uuid, name):
    """Record ``name`` as migration ``uuid``'s convergence policy (the
    conductor chose another before the run); what its policy did stays.

    :returns: the MigrationConvergence recorded.
    :raises Invalid: an unusable name; nothing changed.
    :raises MigrationNotFound:
    """
    if not fits('convergence_policy', name) or name is None:
        raise exception.Invalid(reason=f"policy name {name!r} unusable")
    with db.writer() as session:
        result = _rows.run(session, sa.update(_T).where(
            _T.c.uuid == uuid).values(updated_at=_rows.utcnow(),
                                      convergence_policy=name))
        if result.rowcount != 1:
            raise exception.MigrationNotFound(migration_uuid=uuid)
        return get_in(session, uuid, ('convergence',))['convergence']


def fits(column, value):
    """Whether ``value`` fits convergence or recovery column ``column``
    (what a source reports, checked before it is recorded): the policy a
    name of 1 to MAX_POLICY_NAME characters, the actions a bounded list
    of short strings, the recovery history a bounded list of events of
    short strings (the attempt number may be an integer); None for each.
    """
    if value is None:
        return True
    if column == 'convergence_policy':
        return isinstance(value, str) and \
            0 < len(value) <= satellites.MAX_POLICY_NAME
    if column == 'convergence_actions':
        return isinstance(value, list) and \
            len(value) <= satellites.MAX_ACTIONS and \
            all(isinstance(a, str) and
                len(a) <= satellites.MAX_ACTION_LENGTH for a in value)
    if column == 'postcopy_recovery':
        return _history_fits(value)
    return False


def _history_fits(history):
    if not isinstance(history, list) or \
            len(history) > satellites.MAX_RECOVERY_EVENTS:
        return False
    for event in history:
        if not isinstance(event, dict) or \
                len(event) > satellites.MAX_EVENT_KEYS or any(
                    not isinstance(k, str) or not (
                        v is None or isinstance(v, int) and
                        not isinstance(v, bool) or
                        isinstance(v, str) and
                        len(v) <= satellites.MAX_EVENT_TEXT)
                    for k, v in event.items()):
            return False
    return True


def record_recovery(db, uuid, history):
    """Record migration ``uuid``'s post-copy recovery history while its
    source recovers (the records API's ``migration_record_recovery``;
    a run's result may carry the final one too).

    Idempotent and order-proof: the history only grows (up to its bound,
    then its newest events change), so a report equal to the recorded
    one (a repeat) or shorter (overtaken by a later report) changes
    nothing; nor does one for a migration that has ended.

    :returns: True if recorded.
    :raises InvalidMigrationResult: the history is unusable.
    :raises MigrationNotFound:
    """
    if not _history_fits(history):
        raise exception.InvalidMigrationResult(
            migration_uuid=uuid,
            reason=f"postcopy_recovery must be a list of at most "
                   f"{satellites.MAX_RECOVERY_EVENTS} events (dicts of "
                   f"event, at, attempt, detail); got {history!r:.200}")
    with db.writer() as session:
        row = _rows.fresh_by_uuid(session, models.Migration, uuid)
        if row is None:
            raise exception.MigrationNotFound(migration_uuid=uuid)
        recorded = row.postcopy_recovery or []
        if row.status not in STATUS.IN_PROGRESS or \
                len(recorded) > len(history) or recorded == history:
            return False
        result = _rows.run(session, sa.update(_T).where(
            _T.c.uuid == uuid).where(
            _T.c.status.in_(STATUS.IN_PROGRESS)).values(
                updated_at=_rows.utcnow(), postcopy_recovery=history))
        return result.rowcount == 1


def record_devices(db, uuid, host, devices):
    """Record the destination ``host``'s verification of migration
    ``uuid``'s passed-through devices after the arrival (the records
    API's ``migration_record_devices``): DEVICE_KEYS entries, one per
    device its claim held.

    Idempotent: a repeat (the same verification, a redelivered request
    or a redelivered arrival that plugged nothing new) changes nothing
    and tells nothing. Any status is accepted: the source may have
    recorded the migration completed first. A change is told of
    (``instance.devices.verified``) once it commits.

    :returns: True if the row changed.
    :raises InvalidMigrationResult: the verification is unusable
        (nothing recorded).
    :raises MigrationNotFound:
    """
    problem = satellites.devices_problem(host, devices)
    if problem:
        raise exception.InvalidMigrationResult(
            migration_uuid=uuid,
            reason=f"migration_devices: {problem}; got {devices!r:.200}")
    record = {'host': host, 'devices': [
        {key: entry[key] for key in satellites.DEVICE_KEYS}
        for entry in devices]}
    with db.writer() as session:
        row = _rows.fresh_by_uuid(session, models.Migration, uuid,
                                  lock=True)
        if row is None:
            raise exception.MigrationNotFound(migration_uuid=uuid)
        if row.migration_devices == record:
            return False
        _rows.run(session, sa.update(_T).where(_T.c.uuid == uuid).values(
            migration_devices=record, updated_at=_rows.utcnow()))
        _rows.note_change(session, _rows.DEVICES_VERIFIED, dict(
            record, migration_uuid=uuid, instance_uuid=row.instance_uuid))
        return True
