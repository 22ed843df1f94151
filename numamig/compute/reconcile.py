"""Reconciliation of an agent's records with its hypervisor.

A compute agent may have been stopped or killed at any step of a
migration, as source or as destination. On start it finds those
migrations and ends them according to where the guest is now:

* as source, a migration it was running (preparing, running,
  post-migrating) whose guest waits paused here in a post-copy that lost
  its link is recorded ``postcopy-paused`` untouched, both claims kept (a
  rollback would destroy the destination's half of the guest; see
  numamig.compute.postcopy_paused); one with the guest still here
  otherwise rolls back (the destination
  drops its claim and copy, the migration ends ``failed``); with the
  guest gone it completes the post-migration steps the way the source's
  run does (completion.complete: with the records API of release 2, the
  destination counts the guest and ``completed`` is recorded with the
  claim applied in one call). A ``queued`` one is
  left alone: its start request may still wait in the broker for this
  agent, and the conductor ends it if it never comes;
  A guest that runs on neither host is lost: the migration ends
  ``error`` saying so and the destination drops its claim (the
  destination never adopts a guest its hypervisor does not run);
* as destination, a ``post-migrating`` one whose guest runs here is
  completed: the claim becomes the instance's placement;
* as source, a ``postcopy-paused`` one waits for an operator while its
  guest waits paused here; one whose guest has left (a resume completed
  in libvirt but not in the records) is completed, and one whose guest
  runs on neither host is lost, as above. This also runs periodically.

The source-side rule also runs periodically for migrations no thread of
this agent drives any more (the source gave up waiting for a peer). It
also logs guests that exist on only one side of records and hypervisor.
Everything it changes is logged.
"""

from oslo_log import log as logging
import oslo_messaging as messaging

from numamig import exception
from numamig.compute import completion
from numamig.compute import report
from numamig.objects import fields

LOG = logging.getLogger(__name__)
STATUS = fields.MigrationStatus
STATUS_SHUTDOWN = fields.PowerState.SHUTDOWN

# Source-side statuses in which only the (dead) source thread could make
# progress.
_INTERRUPTED = tuple(s for s in STATUS.STARTED if s not in STATUS.HALTED)


def reconcile_host(agent, ctxt):
    """At start: fix what a previous run of this agent left half done.

    :returns: a list of one-line descriptions of what was fixed.
    """
    guests = agent.driver.list_guests()
    fixed = []
    incoming = set()
    for migration in agent.conductor_api.migration_get_in_progress_by_host(
            ctxt, agent.host):
        if migration.dest_host == agent.host:
            incoming.add(migration.instance_uuid)
        fixed += _guarded(agent, migration, lambda m=migration: _at_start(
            agent, ctxt, m, guests))
    fixed += _compare_guests(agent, ctxt, guests, incoming)
    _log(agent, fixed)
    if not fixed:
        LOG.info("%s: records and hypervisor agree", agent.host)
    return fixed


def reconcile_outgoing(agent, ctxt):
    """Periodically: end outgoing migrations no thread here drives.

    A migration's thread registers before it moves past ``queued`` and
    sets its final status before it unregisters, so one seen neither
    driven before nor after re-reading its status is abandoned.

    :returns: a list of one-line descriptions of what was fixed.
    """
    fixed = []
    for migration in agent.conductor_api.migration_get_in_progress_by_host(
            ctxt, agent.host):
        if migration.source_host != agent.host or \
                migration.uuid in agent.outgoing.uuids():
            continue
        if migration.status in STATUS.HALTED:
            fixed += _guarded(agent, migration, lambda m=migration: _halted(
                agent, ctxt, m, agent.driver.list_guests()))
            continue
        if migration.status not in _INTERRUPTED:
            continue
        current = agent.conductor_api.migration_get(ctxt, migration.uuid)
        if current.status not in _INTERRUPTED or \
                current.uuid in agent.outgoing.uuids():
            continue
        fixed += _guarded(agent, current, lambda m=current: [
            _end_interrupted(agent, ctxt, m, agent.driver.list_guests())])
    _log(agent, fixed)
    return fixed


def _at_start(agent, ctxt, migration, guests):
    if migration.uuid in agent.outgoing.uuids():
        return []
    if migration.source_host == agent.host:
        if migration.status in _INTERRUPTED:
            return [_end_interrupted(agent, ctxt, migration, guests)]
        if migration.status in STATUS.HALTED:
            return _halted(agent, ctxt, migration, guests)
    elif migration.status == STATUS.POST_MIGRATING and \
            migration.instance_uuid in guests:
        return [_complete_incoming(agent, ctxt, migration)]
    return []


def _guarded(agent, migration, fix):
    try:
        return fix()
    except exception.NumamigException as exc:
        LOG.error("%s: could not reconcile migration %s: %s", agent.host,
                  migration.uuid, exc)
        return []


def _log(agent, fixed):
    for line in fixed:
        LOG.warning("%s: reconciled: %s", agent.host, line)


def _end_interrupted(agent, ctxt, migration, guests):
    instance = agent.conductor_api.instance_get(ctxt, migration.instance_uuid)
    api = agent.compute_api
    if instance.uuid in guests and agent.driver.postcopy_paused(instance.uuid):
        return _end_postcopy_paused(agent, ctxt, instance, migration)
    if instance.uuid in guests and migration.status != STATUS.POST_MIGRATING:
        api.rollback_live_migration_at_destination(ctxt, instance, migration)
        api.drop_move_claim_at_destination(ctxt, instance, migration)
        _set_final(agent, ctxt, migration, STATUS.FAILED,
                   error=f"interrupted on source {agent.host}; rolled "
                         f"back, the guest stays on the source")
        return (f"migration {migration.uuid} of {instance.uuid} rolled "
                f"back (interrupted while {migration.status})")
    try:
        completion.complete(
            agent, ctxt, instance, migration,
            detail=f"completed by {agent.host} after an interruption")
    except exception.GuestNotArrived:
        return _end_lost(agent, ctxt, instance, migration)
    report.request(agent, f"the departure of {instance.uuid}")
    return (f"migration {migration.uuid} of {instance.uuid} completed "
            f"(the guest had left before the interruption)")


def _end_postcopy_paused(agent, ctxt, instance, migration):
    """The guest waits paused here after its post-copy lost the link and
    the run that recovered it stopped: a rollback would destroy the
    destination's half (its CPU state and every page sent). Record it
    as the run does when it gives up (postcopy-paused, both claims
    kept), for the operator to resume."""
    paused = exception.PostCopyPaused(
        instance=instance.uuid, host=agent.host,
        dest=migration.dest_host,
        reason="its agent restarted while recovering it")
    try:
        _set_final(agent, ctxt, migration, STATUS.POSTCOPY_PAUSED,
                   error=str(paused))
    except messaging.UnsupportedVersion:
        # A conductor of release 1: ended as that release ended it.
        _set_final(agent, ctxt, migration, STATUS.ERROR, error=str(paused))
        return (f"migration {migration.uuid} of {instance.uuid} ended "
                f"error: the guest is paused in a broken post-copy (not "
                f"rolled back; the conductor is of release 1)")
    return (f"migration {migration.uuid} of {instance.uuid} is "
            f"postcopy-paused: the guest is paused in a broken post-copy "
            f"(not rolled back, both claims kept; resume it with "
            f"'numamig-manage migration resume {migration.uuid}')")


def _halted(agent, ctxt, migration, guests):
    """A postcopy-paused migration: left to the operator while its guest
    waits paused here; completed (or found lost) once it has left."""
    if migration.instance_uuid in guests:
        if not agent.driver.postcopy_paused(migration.instance_uuid):
            LOG.warning("%s: migration %s is postcopy-paused but guest %s "
                        "here is not paused in a broken post-copy; left "
                        "for the operator", agent.host, migration.uuid,
                        migration.instance_uuid)
        return []
    instance = agent.conductor_api.instance_get(ctxt, migration.instance_uuid)
    try:
        completion.complete(
            agent, ctxt, instance, migration,
            detail=f"completed by {agent.host}: the paused guest had left")
    except exception.GuestNotArrived:
        return [_end_lost(agent, ctxt, instance, migration)]
    report.request(agent, f"the departure of {instance.uuid}")
    return [f"migration {migration.uuid} of {instance.uuid} completed (the "
            f"postcopy-paused guest had left the source)"]


def _end_lost(agent, ctxt, instance, migration):
    """The guest runs neither here nor on the destination: end the
    migration ``error`` saying so, and free the destination's claim.
    The instance's record is left as it was (on this host) for the
    operator: ``numamig-manage audit pins`` reports it as missing."""
    agent.compute_api.drop_move_claim_at_destination(ctxt, instance,
                                                     migration)
    _set_final(agent, ctxt, migration, STATUS.ERROR, detail="guest lost",
               error=f"guest lost: instance {instance.uuid} runs neither "
                     f"on source {agent.host} nor on destination "
                     f"{migration.dest_host}; the destination's claim was "
                     f"dropped and the record still places it on "
                     f"{agent.host}")
    return (f"migration {migration.uuid} of {instance.uuid} ended error: "
            f"the guest runs on neither host (lost)")


def _complete_incoming(agent, ctxt, migration):
    """The guest arrived here and the source stopped before finishing."""
    instance = agent.conductor_api.instance_get(ctxt, migration.instance_uuid)
    agent.flows.post_at_destination(agent, ctxt, instance, migration)
    _set_final(agent, ctxt, migration, STATUS.COMPLETED,
               detail=f"completed by destination {agent.host} after an "
                      f"interruption")
    return (f"migration {migration.uuid} of {instance.uuid} completed by "
            f"the destination (the guest runs here)")


def _set_final(agent, ctxt, migration, status, error=None, detail=None):
    """Record a final status; one already recorded by a peer is fine."""
    try:
        agent.conductor_api.migration_set_status(ctxt, migration.uuid, status,
                                                 detail=detail, error=error)
    except exception.InvalidStatusTransition:
        current = agent.conductor_api.migration_get(ctxt, migration.uuid)
        if current.status != status:
            raise


def _compare_guests(agent, ctxt, guests, incoming):
    fixed = []
    recorded = {i.uuid: i for i in agent.tracker.instances()}
    for uuid in sorted(set(recorded) - set(guests)):
        if recorded[uuid].power_state == STATUS_SHUTDOWN:
            continue
        agent.conductor_api.instance_update(
            ctxt, uuid, {'power_state': STATUS_SHUTDOWN})
        fixed.append(f"instance {uuid} is recorded here but the hypervisor "
                     f"has no such guest: power state set to shutdown")
    for uuid in sorted(set(guests) - set(recorded) - incoming):
        LOG.warning("%s: guest %s (%s) is not a numamig instance; adopt it "
                    "with 'numamig-manage instance adopt %s'", agent.host,
                    guests[uuid], uuid, agent.host)
    return fixed
