"""Move claims that outlived their migration: find them, release them.

A claim (an instance's migration context) belongs to one migration and
is released when that migration ends. A crash between the end and the
release, or a destination answering after the conductor moved on, can
leave one behind: it keeps the destination's pCPUs and pages reserved
for a guest that will never arrive. Releasing is conditional on the
migration that holds it, so a claim re-taken by a new migration in the
meantime is never dropped by mistake.
"""

from numamig.audit import pins


def leaked(db):
    """Return the Findings of every leaked claim in the records."""
    from numamig.db import instances
    from numamig.db import migrations
    found = []
    for record in instances.get_leaked_claims(db):
        context = record.instance.migration_context
        status = _status(db, migrations, context.migration_uuid)
        found.append(pins.Finding(
            pins.LEAKED_CLAIM, context.dest_host,
            f"instance {record.instance.name} ({record.instance.uuid}) "
            f"holds a claim on {context.dest_host} for migration "
            f"{context.migration_uuid}, which is {status}",
            (record.instance.uuid, context.migration_uuid)))
    return found


def heal(db, findings):
    """Release the leaked claims ``leaked`` found.

    :returns: (released, skipped) Findings; a claim is skipped when it
        is no longer held by the migration the finding names (something
        else released or replaced it since).
    """
    from numamig.db import instances
    released, skipped = [], []
    for finding in findings:
        if finding.kind != pins.LEAKED_CLAIM:
            continue
        instance_uuid, migration_uuid = finding.instance_uuids
        if instances.drop_migration_context(db, instance_uuid,
                                            migration_uuid):
            released.append(finding)
        else:
            skipped.append(finding)
    return released, skipped


def _status(db, migrations, migration_uuid):
    from numamig import exception
    try:
        return migrations.get(db, migration_uuid,
                              with_history=False).status
    except exception.MigrationNotFound:
        return "not recorded at all"
