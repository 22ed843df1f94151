"""A migration's status and its claim, changed in one transaction.

The conductor records a destination's move claim together with the
``queued`` status that lets the source start, and applies the claim
together with the ``completed`` status: either both are committed or
neither is, so no record ever shows a migration queued without its
claim, or completed with the claim still pending (or the reverse). The
rules about which claim may be replaced stay with the caller
(numamig.conductor.records). Public API::

    queue_with_claim(db, context, expected_migration_uuid, detail)
        -> Migration
    complete(db, migration_uuid, detail=None, result=None)
        -> (Migration, Instance or None)
"""

from numamig import exception
from numamig.db import instances
from numamig.db import migrations
from numamig.objects import fields

STATUS = fields.MigrationStatus


def queue_with_claim(db, context, expected_migration_uuid, detail,
                     start_request=None):
    """Record a move claim and move its migration accepted -> queued.

    :param expected_migration_uuid: the claim the new one may replace
        (None: the instance must hold none).
    :param start_request: the primitive of the live-migrate data the
        source will be cast, kept while ``queued`` (see
        migrations.set_status_in).
    :raises MigrationContextConflict: another claim is held.
    :raises MigrationPreCheckError: the migration tries another
        destination than the claim's.
    :raises InvalidStatusTransition: the migration is no longer
        ``accepted`` (cancelled meanwhile); nothing is recorded then.
    """
    with db.writer() as session:
        instances.write_migration_context_in(
            session, context.instance_uuid, context, expected_migration_uuid)
        migration = migrations.set_status_in(
            session, context.migration_uuid, STATUS.QUEUED, detail=detail,
            expected=[STATUS.ACCEPTED], start_request=start_request)
        if migration.dest_host != context.dest_host:
            # Rolled back with the claim: another destination is tried.
            raise exception.MigrationPreCheckError(
                reason=f"migration {migration.uuid} now tries "
                       f"{migration.dest_host}; the claim of "
                       f"{context.dest_host} was not recorded")
        return migration


def complete(db, migration_uuid, detail=None, result=None):
    """Record ``completed`` (with the run's result) and apply the claim.

    The claim is applied (the instance takes the destination host and the
    claimed topology) when this migration holds the instance's context;
    a migration that took none (the old path: the destination recorded
    the placement itself) or whose claim was applied already only changes
    status. A migration ``completed`` already is returned as it is, with
    no Instance: a repeated request changes nothing.

    :param result: checked values for the migration's result columns.
    :returns: the Migration and the Instance after the change (None when
        it was completed already).
    :raises MigrationNotFound:
    :raises InvalidStatusTransition: the migration may not complete;
        nothing is changed then.
    """
    with db.writer() as session:
        current = migrations.row_in(session, migration_uuid)
        if current.status == STATUS.COMPLETED:
            return migrations.get_in(session, migration_uuid,
                                     with_history=False), None
        instance_uuid = current.instance_uuid
        migration = migrations.set_status_in(
            session, migration_uuid, STATUS.COMPLETED, detail=detail,
            result=result)
        try:
            record = instances.apply_migration_context_in(
                session, instance_uuid, migration_uuid)
        except exception.MigrationContextConflict:
            # Nothing held by this migration: nothing written either.
            record = instances.get_in(session, instance_uuid)
        return migration, record.instance
