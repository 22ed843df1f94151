"""Start-up reconciliation of an agent's records with its hypervisor.

A compute agent may have been stopped or killed at any point of a
migration it was running as source. On start it finds those migrations
and ends them according to where the guest is now: still here, it rolls
back (the destination drops its claim and copy, the migration ends
``failed``); already gone, it completes the post-migration steps. It
also logs guests that exist on only one side of records and hypervisor.
Everything it changes is logged.
"""

import logging

from numamig import exception
from numamig.objects import fields

LOG = logging.getLogger(__name__)
STATUS = fields.MigrationStatus

# Source-side statuses in which only the (dead) source thread could make
# progress; earlier ones are still driven by the conductor's cast.
_INTERRUPTED = (STATUS.PREPARING, STATUS.RUNNING, STATUS.POST_MIGRATING)


def reconcile_host(agent, ctxt):
    """Fix what a previous run of this agent left half done.

    :returns: a list of one-line descriptions of what was fixed.
    """
    guests = agent.driver.list_guests()
    fixed = []
    for migration in agent.conductor.migration_get_in_progress_by_host(
            ctxt, agent.host):
        if migration.source_host != agent.host or \
                migration.status not in _INTERRUPTED or \
                migration.uuid in agent.outgoing_migrations():
            continue
        try:
            fixed.append(_end_interrupted(agent, ctxt, migration, guests))
        except exception.NumamigException as exc:
            LOG.error("%s: could not reconcile migration %s: %s",
                      agent.host, migration.uuid, exc)
    fixed += _compare_guests(agent, ctxt, guests)
    for line in fixed:
        LOG.warning("%s: reconciled: %s", agent.host, line)
    if not fixed:
        LOG.info("%s: records and hypervisor agree", agent.host)
    return fixed


def _end_interrupted(agent, ctxt, migration, guests):
    instance = agent.conductor.instance_get(ctxt, migration.instance_uuid)
    api = agent.compute_api
    if instance.uuid in guests and migration.status != STATUS.POST_MIGRATING:
        api.rollback_live_migration_at_destination(ctxt, instance, migration)
        api.drop_move_claim_at_destination(ctxt, instance, migration)
        agent.conductor.migration_set_status(
            ctxt, migration.uuid, STATUS.FAILED,
            error=f"interrupted by a restart of source {agent.host}; "
                  f"rolled back, the guest stays on the source")
        return (f"migration {migration.uuid} of {instance.uuid} rolled "
                f"back (interrupted while {migration.status})")
    if migration.status != STATUS.POST_MIGRATING:
        agent.conductor.migration_set_status(
            ctxt, migration.uuid, STATUS.POST_MIGRATING,
            detail=f"resumed by {agent.host} after a restart")
    api.post_live_migration_at_destination(ctxt, instance, migration)
    agent.tracker.drop_instance(instance.uuid)
    agent.conductor.migration_set_status(
        ctxt, migration.uuid, STATUS.COMPLETED,
        detail=f"completed by {agent.host} after a restart")
    return (f"migration {migration.uuid} of {instance.uuid} completed "
            f"(the guest had left before the restart)")


def _compare_guests(agent, ctxt, guests):
    fixed = []
    recorded = {i.uuid: i for i in agent.tracker.instances()}
    for uuid in sorted(set(recorded) - set(guests)):
        if recorded[uuid].power_state == STATUS_SHUTDOWN:
            continue
        agent.conductor.instance_update(
            ctxt, uuid, {'power_state': STATUS_SHUTDOWN})
        fixed.append(f"instance {uuid} is recorded here but the hypervisor "
                     f"has no such guest: power state set to shutdown")
    for uuid in sorted(set(guests) - set(recorded)):
        LOG.warning("%s: guest %s (%s) is not a numamig instance; adopt it "
                    "with 'numamig-manage instance adopt %s'", agent.host,
                    guests[uuid], uuid, agent.host)
    return fixed


STATUS_SHUTDOWN = fields.PowerState.SHUTDOWN
