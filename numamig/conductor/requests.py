"""Migration requests: record one, or find the one a repeat names.

The conductor's ``live_migrate_instance`` checks what needs no host,
records the migration ``accepted`` in the admission queue and returns;
a request delivered (or sent) again names the migration it recorded, and
is answered with it. Functions take the conductor's Worker
(numamig.conductor.worker) or its database.
"""

from oslo_log import log as logging
from oslo_utils import uuidutils

from numamig import exception
from numamig import objects
from numamig.conductor import maintenance
from numamig.conductor import records
from numamig.conductor.tasks import live_migrate
from numamig.convergence import policy as convergence
from numamig.db import migrations
from numamig.db import queue
from numamig.objects import fields

LOG = logging.getLogger(__name__)
STATUS = fields.MigrationStatus


def record(worker, ctxt, instance_uuid, dest_host, priority, migration_uuid,
           policy=None):
    """Check what needs no host and record the migration ``accepted``.

    :param policy: the convergence policy requested, or None.
    :returns: the Migration, with its queue position.
    :raises InstanceBusy: being deleted, or migrated already.
    :raises UnknownMigrationPolicy: the request, flavor or image names a
        policy this conductor does not know; nothing is recorded.
    """
    instance, disabled = records.read_instance(
        worker, instance_uuid, with_maintenance=dest_host is not None)
    if instance.get('task_state') == maintenance.DELETING:
        raise exception.InstanceBusy(
            instance_uuid=instance_uuid, action='migrated',
            reason="it is being deleted")
    migration = objects.Migration(
        uuid=migration_uuid or uuidutils.generate_uuid(),
        instance_uuid=instance_uuid,
        source_host=instance.host, requested_host=dest_host,
        status=STATUS.ACCEPTED, priority=priority or 0)
    chosen = choose_policy(worker, instance, policy).name
    live_migrate.LiveMigrationTask(
        ctxt, worker, instance, migration,
        hosts=live_migrate.HostsRead(None, disabled),
        policy=chosen).precheck()
    migration = migrations.create(worker.db, migration,
                                  max_queued=worker.settings.admission.queued,
                                  policy=chosen)
    LOG.info("Migration %s of %s from %s accepted (priority %d)",
             migration.uuid, instance_uuid, instance.host,
             migration.priority)
    return migration


def choose_policy(worker, instance, requested=None):
    """The convergence Policy of a migration of ``instance``: the one
    requested, else its flavor's, else its image's, else the default.

    :raises UnknownMigrationPolicy:
    """
    policy, where = convergence.select(
        worker.settings.migration_policies, requested,
        (instance.get('extra_specs') or {}).get(convergence.FLAVOR_KEY),
        (instance.get('image_properties') or {}).get(convergence.IMAGE_KEY),
        worker.settings.default_migration_policy)
    LOG.debug("Migration of %s: convergence policy %s (%s)", instance.uuid,
              policy.name, where)
    return policy


def recorded_already(db, instance_uuid, migration_uuid):
    """The migration a request with ``migration_uuid`` recorded, or
    None.

    :raises Invalid: it is a migration of another instance.
    """
    try:
        migration = migrations.get(db, migration_uuid)
    except exception.MigrationNotFound:
        return None
    if migration.instance_uuid != instance_uuid:
        raise exception.Invalid(
            reason=f"migration {migration_uuid} is a migration of "
                   f"instance {migration.instance_uuid}, not of "
                   f"{instance_uuid}; nothing was recorded")
    LOG.info("Migration %s of %s was requested already (a repeated "
             "request); it is %s", migration_uuid, instance_uuid,
             migration.status)
    return with_position(db, migration)


def get(db, migration_uuid):
    """A migration with its place in the queue while it waits.

    :raises MigrationNotFound:
    """
    return with_position(db, migrations.get(db, migration_uuid))


def with_position(db, migration):
    """``migration`` with its place in the queue while it waits."""
    if migration.waiting:
        migration.queue_position = queue.position(db, migration.uuid)
    return migration
