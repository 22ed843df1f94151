"""Instance records: create, read, update with revisions, claims.

Every call is one committed transaction. Writers use optimistic
concurrency: a row's ``revision`` grows by one on every write and an
update only applies to the revision it expects, so when two conductor
workers race, exactly one wins and the other gets ConcurrentUpdate.

A migration context (a move claim) is set, dropped and applied
conditionally on which migration holds it, so two claims on one instance
can never both be recorded. Public API::

    create(db, instance) -> InstanceRecord
    get(db, uuid) -> InstanceRecord
    get_all(db, host=None) -> [InstanceRecord]
    update(db, uuid, values, expected_revision=None) -> InstanceRecord
    destroy(db, uuid, expected_revision=None)
    set_migration_context(db, uuid, context, expected_migration_uuid=None)
        -> InstanceRecord
    drop_migration_context(db, uuid, migration_uuid, claim_host=None)
        -> bool
    apply_migration_context(db, uuid, migration_uuid) -> InstanceRecord
    guest_pairs(db, hosts) -> {host: [(project id, uuid)]}
    get_in / guest_pairs_in / set_migration_context_in /
    apply_migration_context_in(session, ...):
        the same inside a caller's transaction
    get_claims_on_host(db, host) -> [InstanceRecord]
    get_leaked_claims(db) -> [InstanceRecord]
"""

import typing

from oslo_db import exception as db_exc
import sqlalchemy as sa

from numamig import exception
from numamig import objects
from numamig.db import _rows
from numamig.db import models
from numamig.db import primitives
from numamig.objects import fields as nm_fields

IN_PROGRESS = nm_fields.MigrationStatus.IN_PROGRESS
_T = models.Instance.__table__

# Fields update() may change. uuid is the identity; the migration context
# changes only through the claim functions below.
UPDATABLE_FIELDS = frozenset((
    'name', 'project_id', 'host', 'vcpus', 'memory_mb', 'extra_specs',
    'image_properties', 'numa_topology', 'power_state', 'task_state'))


class InstanceRecord(typing.NamedTuple):
    """An instance as stored, with the revision to name when updating."""

    instance: objects.Instance
    revision: int


def create(db, instance):
    """Record a new instance at revision 1.

    :raises ObjectValidationError: if the instance is invalid.
    :raises RecordExists: if an instance with its uuid exists.
    """
    values = _columns_of(instance)
    values['migration_context'] = primitives.dump(
        instance.get('migration_context'))
    values.update(_claim_columns(instance.get('migration_context')))
    now = _rows.utcnow()
    try:
        with db.writer() as session:
            session.execute(sa.insert(models.Instance).values(
                revision=1, created_at=now, updated_at=now, **values))
    except db_exc.DBDuplicateEntry as exc:
        raise exception.RecordExists(what='Instance',
                                     key=instance.uuid) from exc
    return get(db, instance.uuid)


def revisions(db):
    """{uuid: revision} of every instance: what changed since a look
    is read whole, the rest not at all (the live-migratable answer)."""
    with db.reader() as session:
        return dict(session.execute(sa.select(
            models.Instance.uuid, models.Instance.revision)).all())


def get(db, uuid):
    """:raises InstanceNotFound: if there is no such instance."""
    with db.reader() as session:
        return _to_record(_row(session, uuid))


def get_in(session, uuid):
    """``get`` inside the caller's transaction."""
    return _to_record(_row(session, uuid))


def uuids_named(db, name, limit=10):
    """The uuids of the instances named ``name`` (at most ``limit``),
    oldest first: how an operator's command finds a guest by its name."""
    query = sa.select(models.Instance.uuid).where(
        models.Instance.name == name).order_by(models.Instance.id).limit(
        limit)
    with db.reader() as session:
        return list(session.scalars(query))


def get_all(db, host=None):
    """All instances, or those whose ``host`` is the given one."""
    query = sa.select(models.Instance).order_by(models.Instance.id)
    if host is not None:
        query = query.where(models.Instance.host == host)
    with db.reader() as session:
        return [_to_record(row) for row in session.scalars(query)]


def guest_pairs(db, hosts):
    """{host: [(project id, uuid), ...]} of the instances on ``hosts``.

    What the scheduler's guest-set fingerprint counts, read from two
    columns in one query instead of whole records.
    """
    if not hosts:
        return {}
    with db.reader() as session:
        return guest_pairs_in(session, hosts)


def guest_pairs_in(session, hosts):
    """``guest_pairs`` inside the caller's transaction."""
    pairs = {host: [] for host in hosts}
    if not pairs:
        return pairs
    query = sa.select(models.Instance.host, models.Instance.project_id,
                      models.Instance.uuid).where(
        models.Instance.host.in_(sorted(pairs))).order_by(models.Instance.id)
    for host, project_id, uuid in session.execute(query):
        pairs[host].append((project_id, uuid))
    return pairs


def update(db, uuid, values, expected_revision=None):
    """Change some fields of an instance; return the new record.

    :param values: {field: value} of fields in UPDATABLE_FIELDS.
    :param expected_revision: the revision the caller read; None applies
        the change to whatever revision is current (still atomically).
    :raises Invalid: for fields that cannot be updated here.
    :raises ObjectValidationError: if the result would be invalid.
    :raises ConcurrentUpdate: if the record is not at the expected
        revision; nothing is changed then.

    A change to what is recorded already (a repeated request) writes
    nothing: the revision stays, so a writer that read it is not
    refused because of a request that changed nothing.
    """
    unknown = set(values) - UPDATABLE_FIELDS
    if unknown:
        raise exception.Invalid(
            reason=f"instance fields {sorted(unknown)} cannot be updated; "
                   f"updatable: {sorted(UPDATABLE_FIELDS)}")
    with db.writer() as session:
        row = _row(session, uuid)
        _check_revision(row, expected_revision)
        recorded = _to_record(row)
        instance = recorded.instance.obj_clone()
        for name, value in values.items():
            _set_field(instance, name, value)
        instance.validate()
        if instance == recorded.instance:
            return recorded
        _conditional_update(session, row, _columns_of(instance))
        return _to_record(_row(session, uuid))


def destroy(db, uuid, expected_revision=None):
    """Delete an instance and (by cascade) its migration records.

    :raises InstanceNotFound, ConcurrentUpdate:
    """
    with db.writer() as session:
        row = _row(session, uuid)
        _check_revision(row, expected_revision)
        result = session.execute(sa.delete(models.Instance).where(
            models.Instance.uuid == uuid,
            models.Instance.revision == row.revision))
        if result.rowcount != 1:
            raise _lost_race(session, row)


def set_migration_context(db, uuid, context, expected_migration_uuid=None):
    """Record a move claim, if the instance holds the expected one.

    :param expected_migration_uuid: the migration whose context the caller
        expects to replace; None means the instance must hold none.
    :raises MigrationContextConflict: if another claim is held; nothing
        is changed then.
    :raises Invalid: if the context is for another instance or invalid.
    """
    with db.writer() as session:
        return set_migration_context_in(session, uuid, context,
                                        expected_migration_uuid)


def set_migration_context_in(session, uuid, context,
                             expected_migration_uuid=None):
    """``set_migration_context`` inside the caller's write transaction."""
    write_migration_context_in(session, uuid, context,
                               expected_migration_uuid)
    return _to_record(_row(session, uuid))


def write_migration_context_in(session, uuid, context,
                               expected_migration_uuid=None):
    """``set_migration_context_in`` that reads nothing back, for a caller
    that does not need the record (recording a claim with its status)."""
    if context.instance_uuid != uuid:
        raise exception.Invalid(
            reason=f"migration context of instance {context.instance_uuid} "
                   f"cannot be set on instance {uuid}")
    values = dict(migration_context=primitives.dump(context),
                  **_claim_columns(context))
    result = _rows.run(session, _bump(
        uuid, _held_by(expected_migration_uuid)).values(**values))
    if result.rowcount != 1:
        holder = _row(session, uuid).migration_uuid
        raise exception.MigrationContextConflict(
            instance_uuid=uuid, holder=_rows.none_or(holder),
            expected=_rows.none_or(expected_migration_uuid),
            migration_uuid=context.migration_uuid)


def drop_migration_context(db, uuid, migration_uuid, claim_host=None):
    """Drop the claim of ``migration_uuid``; idempotent.

    :param claim_host: drop it only if it is held on this host: a
        destination the conductor gave up on must not drop the claim the
        same migration took on the next one.
    :returns: True if it was dropped now, False if the instance did not
        hold it (already dropped, or held by another migration or on
        another host, which is left alone).
    :raises InstanceNotFound:
    """
    conditions = [_held_by(migration_uuid)]
    if claim_host is not None:
        conditions.append(_T.c.claim_host == claim_host)
    with db.writer() as session:
        result = _rows.run(
            session, _bump(uuid, *conditions).values(
                migration_context=None, **_claim_columns(None)))
        if result.rowcount != 1:
            _row(session, uuid)
            return False
        return True


def apply_migration_context(db, uuid, migration_uuid):
    """Make a migration's outcome the instance's: the destination host and
    the claimed NUMA topology, and drop the claim, in one write.

    :raises MigrationContextConflict: if ``migration_uuid`` does not hold
        the instance's context (never claimed, dropped, or replaced).
    :raises ConcurrentUpdate: if the record changed meanwhile.
    """
    with db.writer() as session:
        return apply_migration_context_in(session, uuid, migration_uuid)


def apply_migration_context_in(session, uuid, migration_uuid):
    """``apply_migration_context`` inside the caller's write transaction."""
    row = _row(session, uuid)
    if row.migration_uuid != migration_uuid:
        raise exception.MigrationContextConflict(
            instance_uuid=uuid, holder=_rows.none_or(row.migration_uuid),
            expected=migration_uuid, migration_uuid=migration_uuid)
    instance = _to_record(row).instance
    context = instance.migration_context
    instance.host = context.dest_host
    instance.numa_topology = context.new_numa_topology
    instance.migration_context = None
    values = _columns_of(instance)  # validates it
    values.update(migration_context=None, **_claim_columns(None))
    _conditional_update(session, row, values)
    # What was just written, not read back: the instance is validated
    # and its columns came from it (test_instances compares the two).
    instance.obj_reset_changes(recursive=True)
    return InstanceRecord(instance, row.revision + 1)


def get_claims_on_host(db, host):
    """Instances with a claim on ``host`` held by an in-progress migration.

    These are the incoming claims a destination's usage must include.
    """
    query = _with_claim_migration().where(
        models.Instance.claim_host == host,
        models.Migration.status.in_(IN_PROGRESS))
    with db.reader() as session:
        return [_to_record(row) for row in session.scalars(query)]


def get_leaked_claims(db):
    """Instances holding a claim of a migration no longer in progress.

    Such a claim (its migration completed, failed or vanished) reserves
    resources nothing will release: audits report and drop these.
    """
    query = _with_claim_migration(outer=True).where(
        models.Instance.migration_uuid.is_not(None),
        sa.or_(models.Migration.id.is_(None),
               models.Migration.status.not_in(IN_PROGRESS)))
    with db.reader() as session:
        return [_to_record(row) for row in session.scalars(query)]


def _with_claim_migration(outer=False):
    return sa.select(models.Instance).join(
        models.Migration,
        models.Migration.uuid == models.Instance.migration_uuid,
        isouter=outer).order_by(models.Instance.id)


def _row(session, uuid):
    row = _rows.fresh_by_uuid(session, models.Instance, uuid)
    if row is None:
        raise exception.InstanceNotFound(instance_uuid=uuid)
    return row


def _check_revision(row, expected_revision):
    if expected_revision is not None and row.revision != expected_revision:
        raise exception.ConcurrentUpdate(
            what='Instance', key=row.uuid, expected=expected_revision,
            actual=row.revision)


def _bump(uuid, *conditions):
    """An UPDATE of one instance that also advances its revision, on the
    Core table: the ORM's bulk-update layer costs more CPU than the
    statement, and no ORM entity of an instance is loaded to synchronise
    (reads are plain rows, _rows.fresh_by_uuid)."""
    return sa.update(_T).where(_T.c.uuid == uuid, *conditions).values(
        revision=_T.c.revision + 1, updated_at=_rows.utcnow())


def _held_by(migration_uuid):
    if migration_uuid is None:
        return _T.c.migration_uuid.is_(None)
    return _T.c.migration_uuid == migration_uuid


def _conditional_update(session, row, values):
    result = _rows.run(session, _bump(
        row.uuid, _T.c.revision == row.revision).values(**values))
    if result.rowcount != 1:
        raise _lost_race(session, row)
    # ``row`` is stale now; a caller that needs the result re-reads it.


def _lost_race(session, row):
    expected = row.revision
    current = session.scalars(sa.select(models.Instance.revision).where(
        models.Instance.uuid == row.uuid)).one_or_none()
    if current is None:
        return exception.InstanceNotFound(instance_uuid=row.uuid)
    return exception.ConcurrentUpdate(what='Instance', key=row.uuid,
                                      expected=expected, actual=current)


def _columns_of(instance):
    instance.validate()
    return {
        'uuid': instance.uuid, 'name': instance.name,
        'project_id': instance.project_id, 'host': instance.get('host'),
        'vcpus': instance.vcpus, 'memory_mb': instance.memory_mb,
        'extra_specs': dict(instance.extra_specs),
        'image_properties': dict(instance.image_properties),
        'numa_topology': primitives.dump(instance.get('numa_topology')),
        'power_state': instance.power_state,
        'task_state': instance.get('task_state')}


def _set_field(instance, name, value):
    try:
        setattr(instance, name, value)
    except (ValueError, TypeError) as exc:
        raise exception.Invalid(
            reason=f"instance {instance.uuid}: {name}={value!r}: {exc}"
        ) from exc


def _claim_columns(context):
    if context is None:
        return {'migration_uuid': None, 'claim_host': None}
    return {'migration_uuid': context.migration_uuid,
            'claim_host': context.dest_host}


def _to_record(row):
    def nested(column, cls):
        return primitives.load(getattr(row, column), cls, 'instances',
                               row.uuid, column)
    topology = nested('numa_topology', objects.InstanceNUMATopology)
    context = nested('migration_context', objects.MigrationContext)
    try:
        instance = objects.Instance(
            uuid=row.uuid, name=row.name, project_id=row.project_id,
            host=row.host, vcpus=row.vcpus, memory_mb=row.memory_mb,
            extra_specs=row.extra_specs,
            image_properties=row.image_properties, numa_topology=topology,
            migration_context=context, power_state=row.power_state,
            task_state=row.task_state)
        instance.validate()
    except (exception.ObjectValidationError, ValueError, TypeError) as exc:
        raise exception.StoredRecordInvalid(
            table='instances', key=row.uuid, column='*',
            reason=str(exc)) from exc
    instance.obj_reset_changes(recursive=True)
    return InstanceRecord(instance, row.revision)

