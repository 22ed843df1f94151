"""Migration records: status changes that enforce the allowed transitions.

Every call is one committed transaction. A status change is a single
conditional ``UPDATE ... WHERE status IN (<statuses allowed to move to
the new one>)``: when two conductor workers race (one completes, the other
aborts), exactly one UPDATE matches and the other caller gets
InvalidStatusTransition naming the status it lost to. Each change is
recorded in the status history in the same transaction, and so is the
result of the run when the change reports one.

The status history is read only where someone looks at it (``get`` and
``get_all``, what operators see): the records a migration's own flow
reads and the answers to its status changes leave ``history`` unset,
which saves a query and a list of objects on every step. Public API::

    create(db, migration, max_queued=None, policy=None) -> Migration
    get(db, uuid, with_history=True) -> Migration
    get_in(session, uuid, with_history=True) -> Migration
    get_all(db, instance_uuid=None, status=None) -> [Migration]
    get_in_progress(db) -> [Migration]
    get_in_progress_by_host(db, host) -> [Migration]
    set_status(db, uuid, status, detail=None, expected=None, error=None,
               result=None) -> Migration
    set_status_in(session, uuid, status, ...) -> Migration
    set_dest_host(db, uuid, dest_host) -> Migration
    add_refused_host(db, uuid, host, reason) -> Migration
    update_progress(db, uuid, **progress) -> bool

A migration's satellite records (numamig.db.migration_satellites) are
columns of the same row: a run's result written with its status change
may carry the convergence and recovery columns, checked by that module,
and the status change's notification carries the satellites it needs
read from the row the change already read.
"""

import types

from oslo_db import exception as db_exc
import sqlalchemy as sa

from numamig import exception
from numamig import objects
from numamig.db import _rows
from numamig.db import migration_satellites
from numamig.db import models
from numamig.db import queue
from numamig.objects import fields as nm_fields
from numamig.objects import migration as migration_obj
from numamig.objects import migration_satellites as satellites_obj

STATUS = nm_fields.MigrationStatus
_T = models.Migration.__table__
PROGRESS_FIELDS = ('memory_total', 'memory_processed', 'memory_remaining',
                   'disk_total', 'disk_processed', 'disk_remaining')
RESULT_FIELDS = migration_obj.RESULT_FIELDS
_RESULT_FLAGS = ('emulated', 'post_copy', 'paused')
# Satellite columns a run's result may carry (MigrationConvergence's and
# MigrationRecovery's); the recovery history also comes alone while the
# source recovers (numamig.db.migration_satellites.record_recovery).
SATELLITE_RESULT_FIELDS = (satellites_obj.CONVERGENCE_FIELDS +
                           satellites_obj.RECOVERY_FIELDS)
# The satellites a status change's notification carries
# (numamig.notifications.payloads.MigrationPayload).
_NOTIFIED = ('prediction', 'convergence')


def sources_of(status):
    """The statuses ALLOWED_TRANSITIONS lets move to ``status``."""
    return sorted(old for old, new in
                  migration_obj.ALLOWED_TRANSITIONS.items() if status in new)


def create(db, migration, max_queued=None, policy=None):
    """Record a new migration and the first entry of its history.

    created_at/updated_at are set now; an empty history gets one entry
    for the initial status.

    :param policy: the name of the convergence policy chosen for it
        (MigrationConvergence.policy), recorded in the same INSERT.

    :param max_queued: record it as a request waiting in the admission
        queue (see numamig.db.queue): refused while another migration of
        the instance is in progress or when this many already wait. The
        migration returned then has its ``queue_position``.
    :raises ObjectValidationError: if the migration is invalid.
    :raises InstanceNotFound: if its instance is not recorded.
    :raises InstanceBusy: (queued only) the instance is being migrated.
    :raises MigrationQueueFull: (queued only) nothing was recorded.
    :raises RecordExists: if a migration with its uuid exists.
    """
    migration.validate()
    convergence = satellites_obj.MigrationConvergence(
        migration_uuid=migration.uuid, policy=policy).validate()
    now = _rows.utcnow()
    history = list(migration.history) or [objects.MigrationStatusChange(
        status=migration.status, changed_at=now, detail='created')]
    try:
        with db.writer() as session:
            _require_instance(session, migration.instance_uuid)
            if max_queued is not None:
                _check_can_queue(session, migration, max_queued)
            columns = dict(_columns_of(migration), created_at=now,
                           updated_at=now, convergence_policy=policy)
            row_id = _rows.run(session, _insert(), columns) \
                .inserted_primary_key[0]
            for change in history:
                _add_history(session, row_id, change.status,
                             change.changed_at, change.get('detail'))
            # What was just written, not read back: the columns round-trip
            # unchanged (tests/unit/db/test_migrations.py compares).
            created = _to_object(session, types.SimpleNamespace(**columns),
                                 with_history=False)
            created.history = history
            created.obj_reset_changes(['history'])
            # Nothing predicted yet: an empty prediction.
            _rows.note_status_change(session, created, history[-1].get(
                'detail'), {'prediction': satellites_obj.MigrationPrediction(
                    migration_uuid=migration.uuid),
                    'convergence': convergence})
            if max_queued is not None:
                created.queue_position = queue.position_of(
                    session, row_id, migration.get('priority', 0))
    except db_exc.DBDuplicateEntry as exc:
        raise exception.RecordExists(what='Migration',
                                     key=migration.uuid) from exc
    return created


def _check_can_queue(session, migration, max_queued):
    queue.lock(session)
    busy = _rows.run(session, _busy_with(), {
        'instance_uuid': migration.instance_uuid}).first()
    if busy is not None:
        raise exception.InstanceBusy(
            instance_uuid=migration.instance_uuid, action='migrated',
            reason=f"migration {busy.uuid} of it is {busy.status}; wait "
                   f"for it to end or abort it")
    waiting = queue.waiting_count(session)
    if waiting >= max_queued:
        raise exception.MigrationQueueFull(
            instance_uuid=migration.instance_uuid, count=waiting,
            limit=max_queued)


@_rows.prebuilt
def _status_change():
    # SET takes the columns of the parameters; WHERE binds its own names.
    return sa.update(_T).where(
        _T.c.uuid == sa.bindparam('b_uuid'),
        _T.c.status.in_(sa.bindparam('b_allowed', expanding=True)))


@_rows.prebuilt
def _insert():
    return sa.insert(_T)


@_rows.prebuilt
def _instance_id():
    table = models.Instance.__table__
    return sa.select(table.c.id).where(table.c.uuid == sa.bindparam('uuid'))


@_rows.prebuilt
def _busy_with():
    return sa.select(_T.c.uuid, _T.c.status).where(
        _T.c.instance_uuid == sa.bindparam('instance_uuid'),
        _T.c.status.in_(STATUS.IN_PROGRESS))


def get(db, uuid, with_history=True):
    """:param with_history: False: leave ``history`` unset (a flow that
        reads the status and hosts only).
    :raises MigrationNotFound: if there is no such migration."""
    with db.reader() as session:
        return get_in(session, uuid, with_history=with_history)


def get_in(session, uuid, with_history=True):
    """``get`` inside the caller's transaction."""
    return _to_object(session, _row(session, uuid),
                      with_history=with_history)


def row_in(session, uuid):
    """The migration's row (columns by name) inside the caller's
    transaction, for a flow that checks a column or two: building the
    Migration costs more than reading it.

    :raises MigrationNotFound:
    """
    return _row(session, uuid)


def get_all(db, instance_uuid=None, status=None):
    """Migrations, oldest first, optionally of one instance or status."""
    query = sa.select(models.Migration)
    if instance_uuid is not None:
        query = query.where(models.Migration.instance_uuid == instance_uuid)
    if status is not None:
        query = query.where(models.Migration.status == status)
    return _list(db, query)


def get_in_progress(db):
    """Every migration not ended yet, oldest first, without histories."""
    return _list(db, sa.select(models.Migration).where(
        models.Migration.status.in_(STATUS.IN_PROGRESS)).order_by(
        models.Migration.id), with_history=False)


def get_in_progress_by_host(db, host):
    """In-progress migrations with ``host`` as source or destination."""
    return _list(db, sa.select(models.Migration).where(
        models.Migration.status.in_(STATUS.IN_PROGRESS),
        sa.or_(models.Migration.source_host == host,
               models.Migration.dest_host == host)), with_history=False)


def set_status(db, uuid, status, detail=None, expected=None, error=None,
               result=None):
    """Move a migration to ``status`` if its current status allows it.

    :param detail: why, for the status history.
    :param expected: statuses the caller requires the migration to be in
        now (e.g. only cancel while still queued); None allows every
        status ALLOWED_TRANSITIONS permits.
    :param error: the error text to record with the change ('' clears
        the one recorded; None leaves it).
    :param result: values of RESULT_FIELDS and PROGRESS_FIELDS to record
        with the change (the run's result); booleans for the flags,
        non-negative integers or None for the rest.
    :returns: the migration after the change.
    :raises Invalid: for a status that does not exist.
    :raises InvalidMigrationResult: for a result with unknown fields or
        bad values; nothing is changed then.
    :raises InvalidStatusTransition: if the current status does not allow
        the change (another worker may have moved it first); nothing is
        changed then.
    :raises MigrationNotFound:
    """
    with db.writer() as session:
        return set_status_in(session, uuid, status, detail=detail,
                             expected=expected, error=error, result=result)


def set_status_in(session, uuid, status, detail=None, expected=None,
                  error=None, result=None, start_request=None):
    """``set_status`` inside the caller's write transaction, so that a
    status change and another record's change commit (or not) together.

    :param start_request: the primitive of the live-migrate data cast to
        the source, kept with ``queued`` so that a start request lost
        with a dead conductor worker or source can be sent again
        (numamig.conductor.restarts); every other change clears it.
    """
    if status not in STATUS.ALL:
        raise exception.Invalid(
            reason=f"unknown migration status {status!r}; known: "
                   f"{', '.join(STATUS.ALL)}")
    allowed = set(sources_of(status))
    if expected is not None:
        allowed &= set(expected)
    now = _rows.utcnow()
    values = dict(_checked_result(uuid, result or {}), status=status,
                  updated_at=now, start_request=start_request)
    if error is not None:
        values['error'] = error or None
    result = _rows.run(session, _status_change(), dict(
        values, b_uuid=uuid, b_allowed=sorted(allowed)))
    row = _row(session, uuid)
    if result.rowcount != 1:
        raise _refused(row, status, expected)
    _add_history(session, row.id, status, now, detail)
    changed = _to_object(session, row, with_history=False)
    # The notification's satellites, from the row just read (no query).
    _rows.note_status_change(session, changed, detail,
                             migration_satellites.satellites_of_row(
                                 row, _NOTIFIED))
    return changed


def queued_start_requests(db, updated_before, uuids=None):
    """(Migration, start request primitive) of every ``queued`` migration
    last changed before ``updated_before`` (None: whenever) that kept its
    start request (release 2; recorded with its claim).

    :param uuids: only these migrations (None: every one).
    """
    query = sa.select(models.Migration).where(
        models.Migration.status == STATUS.QUEUED,
        models.Migration.start_request.is_not(None)).order_by(
            models.Migration.id)
    if updated_before is not None:
        query = query.where(models.Migration.updated_at < updated_before)
    if uuids is not None:
        query = query.where(models.Migration.uuid.in_(list(uuids)))
    with db.reader() as session:
        return [(_to_object(session, row, with_history=False),
                 row.start_request) for row in session.scalars(query)]


def set_dest_host(db, uuid, dest_host, max_incoming=None):
    """Record the destination being tried, while the migration is
    in progress.

    :param max_incoming: refuse a destination that already has this many
        other migrations in flight into it (the admission limit).
    :raises MigrationNotInProgress: if it is no longer in progress.
    :raises Invalid: if ``dest_host`` is the source host.
    :raises DestinationBusy: nothing changed then.
    """
    with db.writer() as session:
        if max_incoming is not None:
            queue.lock(session)
        # Locked: the answer is built from this read and what is written.
        row = _row(session, uuid, lock=True)
        if dest_host == row.source_host:
            raise exception.Invalid(
                reason=f"migration {uuid}: destination {dest_host} is its "
                       f"source host")
        if max_incoming is not None:
            count = queue.in_flight_into(session, dest_host, excluding=uuid)
            if count >= max_incoming:
                raise exception.DestinationBusy(
                    host=dest_host, count=count, limit=max_incoming)
        return _update_in_progress(session, row, dest_host=dest_host)


def add_refused_host(db, uuid, host, reason):
    """Append a destination that refused, with its reason.

    The row is locked for the read-modify-write of the JSON list.

    :raises MigrationNotInProgress: if it is no longer in progress.
    """
    with db.writer() as session:
        row = _row(session, uuid, lock=True)
        refused = dict(row.refused_hosts)
        refused.pop(host, None)
        refused[host] = reason
        return _update_in_progress(session, row, refused_hosts=refused)


def update_progress(db, uuid, **progress):
    """Record memory/disk progress of a migration still in progress.

    :param progress: any of PROGRESS_FIELDS, non-negative integers.
    :returns: True if recorded, False if the migration is no longer in
        progress, or the sample is older than the recorded one (less
        memory processed: samples are casts, and a redelivered one can
        arrive after a later one); nothing written then.
    :raises Invalid: for unknown fields or negative values.
    """
    unknown = set(progress) - set(PROGRESS_FIELDS)
    negative = {k: v for k, v in progress.items()
                if not isinstance(v, int) or v < 0}
    if unknown or negative or not progress:
        raise exception.Invalid(
            reason=f"migration {uuid} progress: fields must be some of "
                   f"{', '.join(PROGRESS_FIELDS)} with non-negative "
                   f"integers, got {progress}")
    conditions = [_T.c.status.in_(STATUS.IN_PROGRESS)]
    if 'memory_processed' in progress:
        # Memory copied only grows during a run.
        conditions.append(_T.c.memory_processed <=
                          progress['memory_processed'])
    with db.writer() as session:
        result = _rows.run(session, _update(uuid).where(*conditions).values(
            updated_at=_rows.utcnow(), **progress))
        if result.rowcount != 1:
            _row(session, uuid)
            return False
        return True


def _checked_result(uuid, result):
    """``result`` if every value fits its column, else Invalid."""
    known = RESULT_FIELDS + PROGRESS_FIELDS + SATELLITE_RESULT_FIELDS
    bad = sorted(name for name, value in result.items()
                 if name not in known or not _fits(name, value))
    if bad:
        raise exception.InvalidMigrationResult(
            migration_uuid=uuid,
            reason=f"{', '.join(bad)} unusable; fields must be some of "
                   f"{', '.join(known)}, the flags "
                   f"{', '.join(_RESULT_FLAGS)} booleans or None, the "
                   f"others non-negative integers (the result's may be "
                   f"None); got {result}")
    return result


def _fits(name, value):
    if name in SATELLITE_RESULT_FIELDS:
        return migration_satellites.fits(name, value)
    if name in _RESULT_FLAGS:
        return value is None or isinstance(value, bool)
    if value is None:
        return name in RESULT_FIELDS
    return isinstance(value, int) and not isinstance(value, bool) and \
        value >= 0


def _update(uuid):
    # On the Core table: the ORM's bulk-update layer costs more CPU than
    # the statement, and no ORM entity of a migration is ever loaded for
    # it to synchronise.
    return sa.update(_T).where(_T.c.uuid == uuid)


def _update_in_progress(session, row, **values):
    """Update ``values`` of a migration still in progress.

    :returns: the Migration (no history) as the update left it, from the
        row read before and the values written: no read back.
    """
    values['updated_at'] = _rows.utcnow()
    before = dict(row._mapping)
    result = _rows.run(session, _update(row.uuid).where(
        _T.c.status.in_(STATUS.IN_PROGRESS)).values(**values))
    if result.rowcount != 1:
        raise exception.MigrationNotInProgress(
            migration_uuid=row.uuid, status=row.status,
            action=f"update {', '.join(sorted(values))}")
    return _to_object(session, types.SimpleNamespace(**{**before, **values}),
                      with_history=False)


def _refused(row, status, expected):
    allowed = ', '.join(sorted(migration_obj.ALLOWED_TRANSITIONS.get(
        row.status, ()))) or 'nothing, it is final'
    if expected is not None:
        allowed += (f"; and the caller required it to be in "
                    f"{', '.join(sorted(expected))}")
    return exception.InvalidStatusTransition(
        migration_uuid=row.uuid, current=row.status, requested=status,
        allowed=allowed)


def _require_instance(session, instance_uuid):
    found = _rows.run(session, _instance_id(), {
        'uuid': instance_uuid}).first()
    if found is None:
        raise exception.InstanceNotFound(instance_uuid=instance_uuid)


def _add_history(session, migration_id, status, changed_at, detail):
    _rows.run(session, _history_insert(), {
        'migration_id': migration_id, 'status': status,
        'changed_at': changed_at, 'detail': detail})


@_rows.prebuilt
def _history_insert():
    return sa.insert(models.MigrationStatusChange.__table__)


def _row(session, uuid, lock=False):
    row = _rows.fresh_by_uuid(session, models.Migration, uuid, lock=lock)
    if row is None:
        raise exception.MigrationNotFound(migration_uuid=uuid)
    return row


def _list(db, query, with_history=True):
    with db.reader() as session:
        return [_to_object(session, row, with_history=with_history)
                for row in session.scalars(
                    query.order_by(models.Migration.id))]


def _columns_of(migration):
    columns = {name: migration.get(name) for name in (
        'uuid', 'instance_uuid', 'source_host', 'dest_host',
        'requested_host', 'status', 'error') + PROGRESS_FIELDS +
        RESULT_FIELDS}
    columns['refused_hosts'] = dict(migration.refused_hosts)
    columns['priority'] = migration.get('priority', 0)
    columns['admitted_at'] = migration.get('admitted_at')
    return columns


def _to_object(session, row, with_history):
    try:
        migration = objects.Migration(
            created_at=row.created_at, updated_at=row.updated_at,
            refused_hosts=row.refused_hosts,
            **{name: getattr(row, name) for name in (
                'uuid', 'instance_uuid', 'source_host', 'dest_host',
                'requested_host', 'status', 'error', 'priority',
                'admitted_at') +
                PROGRESS_FIELDS + RESULT_FIELDS})
        if with_history:
            migration.history = _history(session, row.id)
        migration.validate()
    except (exception.ObjectValidationError, ValueError, TypeError) as exc:
        raise exception.StoredRecordInvalid(
            table='migrations', key=row.uuid, column='*',
            reason=str(exc)) from exc
    migration.obj_reset_changes(recursive=True)
    if not with_history:
        # Unset, not the empty default: nothing was read.
        del migration.history
    return migration


def _history(session, migration_id):
    changes = session.scalars(
        sa.select(models.MigrationStatusChange).where(
            models.MigrationStatusChange.migration_id == migration_id
        ).order_by(models.MigrationStatusChange.changed_at,
                   models.MigrationStatusChange.id))
    return [objects.MigrationStatusChange(
        status=h.status, changed_at=h.changed_at, detail=h.detail)
        for h in changes]
