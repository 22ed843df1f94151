"""Record changes agents ask the conductor for, with the claim rules.

The database enforces each write atomically; this module adds the rules
that span records and the scheduler's cache:

* a move claim (migration context) is recorded only while its migration
  is in progress and still tries that destination, so a destination
  that answers after the conductor moved on cannot leave a claim behind;
* a claim left by a migration that has ended is healed away before a
  new one is recorded;
* a migration that ends without completing drops its claim from the
  records and its reservation from the scheduler's cache, so nothing
  stays claimed anywhere.

Every function takes the ConductorManager (database, cache) first.
"""

import logging

from numamig import exception
from numamig.db import compute_nodes
from numamig.db import instances
from numamig.db import migrations
from numamig.objects import fields

LOG = logging.getLogger(__name__)
STATUS = fields.MigrationStatus


def save_report(conductor, report):
    """Store a host's report and feed it to the scheduler's cache."""
    compute_nodes.save_report(conductor.db, report)
    guests = [(r.instance.project_id, r.instance.uuid)
              for r in instances.get_all(conductor.db, host=report.host)]
    conductor.cache.update(report, guests=guests)


def set_migration_context(conductor, context):
    """Record a destination's move claim; answer only once committed.

    :raises MigrationPreCheckError: the migration has ended or now tries
        another destination, or another in-progress migration holds a
        claim on the instance; nothing is recorded.
    """
    db = conductor.db
    migration = migrations.get(db, context.migration_uuid)
    if not migration.in_progress or migration.dest_host != context.dest_host:
        raise exception.MigrationPreCheckError(
            reason=f"migration {migration.uuid} is {migration.status} with "
                   f"destination {migration.dest_host}; the claim of "
                   f"{context.dest_host} was not recorded")
    current = instances.get(db, context.instance_uuid).instance
    held = current.get('migration_context')
    expected = None
    if held is not None:
        expected = _replaceable(db, held, context)
    try:
        instances.set_migration_context(db, context.instance_uuid, context,
                                        expected_migration_uuid=expected)
    except exception.MigrationContextConflict as exc:
        raise exception.MigrationPreCheckError(reason=str(exc)) from exc


def _replaceable(db, held, context):
    """Which held claim the new one may replace, or raise."""
    if held.migration_uuid == context.migration_uuid:
        # An earlier candidate of this same migration that answered late.
        return held.migration_uuid
    try:
        holder = migrations.get(db, held.migration_uuid)
        ended = not holder.in_progress
    except exception.MigrationNotFound:
        ended = True
    if not ended:
        raise exception.MigrationPreCheckError(
            reason=f"instance {context.instance_uuid} is already being "
                   f"migrated by {held.migration_uuid}")
    LOG.warning("Healing the leaked claim of migration %s on instance %s "
                "(host %s)", held.migration_uuid, context.instance_uuid,
                held.dest_host)
    return held.migration_uuid


def set_status(conductor, migration_uuid, status, detail=None, error=None,
               expected=None):
    """Move a migration to ``status``; converge claims if it ended badly.

    :raises InvalidStatusTransition: nothing changed then.
    """
    migration = migrations.set_status(conductor.db, migration_uuid, status,
                                      detail=detail, expected=expected,
                                      error=error)
    if status in (STATUS.ERROR, STATUS.FAILED, STATUS.CANCELLED):
        release_claims(conductor, migration)
    return migration


def release_claims(conductor, migration):
    """Drop what a migration that did not complete still holds.

    The destination agent drops its in-memory claim itself (or its next
    recompute does, since the records no longer show it).
    """
    dropped = instances.drop_migration_context(
        conductor.db, migration.instance_uuid, migration.uuid)
    if migration.dest_host:
        conductor.cache.release(migration.dest_host, migration.instance_uuid)
    if dropped:
        LOG.info("Dropped the claim of migration %s (%s) on %s",
                 migration.uuid, migration.status, migration.dest_host)


def end_orphaned_migrations(conductor, now):
    """End ``accepted`` migrations whose conductor worker died.

    Only a conductor worker runs the destination choice of an accepted
    migration; one not updated for longer than that choice can take
    (every candidate timing out) lost its worker.

    :returns: the migrations ended.
    """
    patience = (conductor.check_timeout *
                (max(conductor.migrate_max_retries, 0) + 2))
    ended = []
    for migration in migrations.get_all(conductor.db,
                                        status=STATUS.ACCEPTED):
        updated = migration.updated_at or migration.created_at
        if updated is None or (now - updated).total_seconds() < patience:
            continue
        try:
            ended.append(set_status(
                conductor, migration.uuid, STATUS.ERROR,
                expected=[STATUS.ACCEPTED],
                error="its conductor worker stopped while choosing the "
                      "destination"))
        except exception.InvalidStatusTransition:
            continue
        LOG.warning("Ended orphaned migration %s of %s (accepted since %s)",
                    migration.uuid, migration.instance_uuid, updated)
    return ended


def set_placement(conductor, instance_uuid, host, numa_topology):
    """Record where an instance runs and its placement there."""
    record = instances.update(conductor.db, instance_uuid,
                              {'host': host, 'numa_topology': numa_topology})
    return record.instance


def update_instance(conductor, instance_uuid, values):
    """Change fields an agent may change (power and task state)."""
    allowed = {'power_state', 'task_state'}
    if set(values) - allowed:
        raise exception.Invalid(
            reason=f"agents may only update {sorted(allowed)} of instance "
                   f"{instance_uuid}, not {sorted(set(values) - allowed)}")
    return instances.update(conductor.db, instance_uuid, values).instance
