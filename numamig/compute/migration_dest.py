"""The destination's side of a live migration: check, claim, adopt, undo.

Every function takes the agent (numamig.compute.agent.Agent: host,
driver, tracker, conductor and compute RPC clients) first. Whether
NUMA-aware live migration is used is decided by flags in LiveMigrateData,
each side setting only what it can know (see the spec's upgrade table):

* the destination offers it (``dst_supports_numa_live_migration``) only
  when the conductor sent the migration, i.e. could send API 1.1;
* the source keeps its own flag only when the destination offered it and
  the source can itself send 1.1 to the destination;
* the destination claims only when both flags came back set, and the
  source rewrites the XML only when ``dst_numa_info`` is present;
* the destination answers in the version it was asked in: a conductor
  that sent API 1.0 gets LiveMigrateData 1.0 back;
* a source that cannot take part copies its XML verbatim. When this
  host's migration guard is on (numamig.virt.libvirt.guard), the
  destination claims all the same (a "guarded" claim, recorded by this
  host) and the guard rewrites the incoming XML to it; the source never
  sees the NUMA objects, which its release cannot read.

These are the current release's flows. An agent running as the release
before (a testing aid, numamig.releases) takes previous_release's
instead: the manager picks them through ``agent.flows``.
"""

from oslo_log import log as logging

from numamig import exception
from numamig import objects
from numamig import releases
from numamig.compute import build
from numamig.compute import claims
from numamig.compute import devices
from numamig.compute import migration_threads
from numamig.compute import report
from numamig.compute import rpcapi as compute_rpcapi

LOG = logging.getLogger(__name__)


def check_destination(agent, ctxt, instance, source_host, migration_uuid,
                      migration=None, limits=None, source_data=None):
    """Check this host can take the guest; claim it on the NUMA path.

    :param source_data: the source's answer to its check, which the
        conductor asked first (compute API 1.3). This host then calls no
        other agent, so agents' RPC pools never wait on each other, and
        returns its claim (``migration_context``) for the conductor to
        record with the ``queued`` status. None (an older conductor, or a
        cap): this host asks the source and records the claim itself.

    Idempotent: asked twice for the same migration (a redelivered
    request), it returns the claim it already holds. Asked again after
    this host rolled the migration back (a request sent again that waited
    in the broker meanwhile), it refuses and claims nothing: no source
    will ever send that guest or drop a claim taken now.

    :returns: LiveMigrateData, with dst_numa_info when claimed.
    :raises MigrationPreCheckError: this host cannot take the guest, or
        rolled this migration back already; nothing stays claimed.
    """
    if agent.incoming.rolled_back(migration_uuid):
        raise exception.MigrationPreCheckError(
            reason=f"host {agent.host} rolled migration {migration_uuid} "
                   f"of instance {instance.uuid} back already (a repeated "
                   f"request); nothing claimed")
    check_not_here(agent, instance)
    if source_data is not None:
        check_cpu(agent, instance, source_data)
    # A conductor that sent the migration can send API 1.1: only then
    # may this host offer NUMA-aware live migration.
    dest_check_data = make_dest_check_data(
        agent, instance, source_host, migration_uuid,
        offer=migration is not None)
    if source_data is not None:
        return _check_with_source_answer(agent, ctxt, instance, migration,
                                         limits, dest_check_data,
                                         source_data)
    migrate_data = agent.compute_api.check_can_live_migrate_source(
        ctxt, instance, dest_check_data)
    check_cpu(agent, instance, migrate_data)
    if migration is None:
        # The conductor spoke API 1.0: it reads LiveMigrateData 1.0 only.
        _log_no_offer(agent, migration_uuid,
                      "the conductor sent compute API 1.0 (no claim "
                      "parameters)")
        return releases.backported(
            migrate_data, releases.lmd_version_for_api('1.0'))
    if not (migrate_data.get('src_supports_numa_live_migration') and
            dest_check_data.dst_supports_numa_live_migration):
        return _source_cannot_take_part(
            agent, ctxt, instance, migration, limits, source_host,
            migrate_data, dest_check_data.dst_supports_numa_live_migration)
    claim = claims.move_claim(agent.tracker, agent.conductor_api, ctxt,
                              instance, migration, limits)
    if claim is not None:
        try:
            migrate_data.dst_numa_info = agent.driver.build_migrate_info(
                claim.topology, agent.tracker.usage_topology())
        except Exception:
            drop_claim(agent, ctxt, instance, migration.uuid)
            raise
    return migrate_data


def _check_with_source_answer(agent, ctxt, instance, migration, limits,
                              dest_check_data, source_data):
    """API 1.3: combine the source's answer with this host's; claim
    without recording, and return the claim to the conductor."""
    migrate_data = dest_check_data.obj_clone()
    migrate_data.src_supports_numa_live_migration = bool(
        source_data.get('src_supports_numa_live_migration'))
    if not (migrate_data.src_supports_numa_live_migration and
            dest_check_data.dst_supports_numa_live_migration):
        # In the version the source spoke: the conductor casts it on.
        return _source_cannot_take_part(
            agent, ctxt, instance, migration, limits,
            source_data.source_host,
            releases.backported(migrate_data, source_data.VERSION),
            dest_check_data.dst_supports_numa_live_migration)
    claim = claims.move_claim(agent.tracker, agent.conductor_api, ctxt,
                              instance, migration, limits, persist=False)
    if claim is None:
        return migrate_data
    try:
        migrate_data.dst_numa_info = agent.driver.build_migrate_info(
            claim.topology, agent.tracker.usage_topology())
    except Exception:
        agent.tracker.drop_move_claim(migration.uuid)
        raise
    migrate_data.migration_context = claims.context_of(agent.tracker,
                                                       instance, claim)
    return migrate_data


def _source_cannot_take_part(agent, ctxt, instance, migration, limits,
                             source_host, migrate_data, offered):
    """The old path, or a guarded claim when this host offered NUMA-aware
    live migration and its guard is on.

    A guarded claim is recorded by this host (as with API 1.1) and
    ``migrate_data`` goes back as it is: the source's release reads no
    NUMA objects and copies the XML, which the guard rewrites here.
    """
    why = (f"source {source_host} cannot take part (older release, or "
           f"capped below {compute_rpcapi.RELEASE_2})")
    if not (offered and agent.driver.migration_guard_state() == 'on'):
        _log_no_offer(agent, migration.uuid, why)
        return migrate_data
    claim = claims.move_claim(agent.tracker, agent.conductor_api, ctxt,
                              instance, migration, limits, guarded=True)
    if claim is not None:
        releases.log_old_path(
            agent.host, migration.uuid, releases.OLD_PATH_NUMA_OBJECTS,
            f"{why}; claimed for this host's migration guard, which "
            f"rewrites the incoming XML to the claim")
    return migrate_data


def _log_no_offer(agent, migration_uuid, reason):
    releases.log_old_path(agent.host, migration_uuid,
                          releases.OLD_PATH_NUMA_INFO, reason)


def check_not_here(agent, instance):
    """:raises MigrationPreCheckError: the guest is (also) here already."""
    if instance.host == agent.host:
        raise exception.MigrationPreCheckError(
            reason=f"instance {instance.uuid} already runs on {agent.host}")
    guests = agent.driver.list_guests()
    if instance.uuid in guests:
        raise exception.MigrationPreCheckError(
            reason=f"host {agent.host} already has a guest with uuid "
                   f"{instance.uuid}")
    # libvirt would refuse the incoming domain only once the copy starts.
    build.check_name_free(agent, instance, guests)


def check_cpu(agent, instance, source_answer):
    """Refuse a guest whose CPU this host's cannot run.

    :param source_answer: the source's LiveMigrateData, which carries the
        guest's CPU (none from an older source: not checked, as before).
    :raises MigrationPreCheckError: naming the features this host lacks.
    """
    guest = source_answer.guest_cpu()
    if guest is None:
        return
    answer = agent.driver.compare_guest_cpu(guest)
    if answer.refused:
        raise exception.MigrationPreCheckError(
            reason=f"host {agent.host} cannot run the CPU of instance "
                   f"{instance.uuid} ({guest.describe()}): {answer.reason}")


def make_dest_check_data(agent, instance, source_host, migration_uuid,
                         offer):
    """What this host tells the source about itself.

    :param offer: whether this host offers NUMA-aware live migration.
    """
    connect_uri, migration_uri = agent.driver.migration_target()
    return objects.LiveMigrateData(
        instance_uuid=instance.uuid, source_host=source_host,
        dest_host=agent.host, migration_uuid=migration_uuid,
        dest_connect_uri=connect_uri, migration_uri=migration_uri,
        emulated=not agent.driver.supports_native_migration,
        dst_supports_numa_live_migration=offer)


def pre_live_migration(agent, ctxt, instance, migrate_data):
    """Get ready to receive the guest; check the claim is still held.

    :raises MigrationError: the claim dst_numa_info describes is gone
        (dropped by an abort or a conductor error): migrating now would
        place the guest on resources nobody holds.
    """
    if migrate_data.get('dst_numa_info') is not None and \
            agent.tracker.get_claim(migrate_data.migration_uuid) is None:
        raise exception.MigrationError(
            reason=f"host {agent.host} no longer holds the claim of "
                   f"migration {migrate_data.migration_uuid} for instance "
                   f"{instance.uuid}")
    migration_threads.watch_incoming(agent, ctxt, instance, migrate_data)
    return migrate_data


def accept_emulated(agent, ctxt, instance, migration, dest_xml):
    """Emulated migration: define and start the guest's destination XML.

    Idempotent: a repeat for a guest that runs here already (the first
    request's answer was lost) changes nothing and answers None (the
    source then reports what it measured); one that comes after this
    host rolled the migration back is refused, so that no late copy
    starts beside the guest that stayed on the source.

    :returns: the driver's MigrationResult as a dict, for the source to
        report (a dict, not an object: a source of any release reads it,
        and one that ignores answers loses nothing).
    :raises MigrationError: this host rolled the migration back.
    """
    with agent.incoming.lock:
        if agent.incoming.rolled_back(migration.uuid):
            raise exception.MigrationError(
                reason=f"host {agent.host} rolled migration "
                       f"{migration.uuid} back; instance {instance.uuid} "
                       f"is not defined here")
        if instance.uuid in agent.driver.list_guests():
            LOG.info("%s: instance %s already runs here (a repeated "
                     "request of migration %s); nothing done", agent.host,
                     instance.uuid, migration.uuid)
            return None
        LOG.info("%s: EMULATED migration %s: defining instance %s from "
                 "the source's XML (the hypervisor cannot migrate)",
                 agent.host, migration.uuid, instance.uuid)
        result = agent.driver.accept_emulated_migration(instance.uuid,
                                                        dest_xml)
    return result.as_dict() if result is not None else None


def post_at_destination(agent, ctxt, instance, migration,
                        records_by_source=False):
    """The guest runs here now: make it this host's instance.

    With a claim, the migration context is applied (the claimed topology
    becomes the instance's): in this host's tracker only when
    ``records_by_source`` (API 1.3: the source records it applied with
    ``completed``, in one conductor call), else in the records too.
    Without one (the old path) the placement is read back from the
    guest's XML, as the release before did.

    Idempotent: when the tracker already counts the guest here (a
    redelivered request), or the records already place it here (a
    reconciliation completed it first), it is only counted here.

    :returns: the updated Instance.
    :raises GuestNotArrived: the hypervisor here does not run the guest
        (the source lost it mid-way): nothing is applied or counted.
    """
    migration_threads.stop_watching(agent, migration.uuid)
    if instance.uuid not in agent.driver.list_guests():
        raise exception.GuestNotArrived(instance_uuid=instance.uuid,
                                        host=agent.host,
                                        migration_uuid=migration.uuid)
    claim = agent.tracker.get_claim(migration.uuid)
    if records_by_source:
        if claim is not None:
            # As on the path below, before the claim becomes the
            # instance's; the source records the arrival, but only this
            # host can plug its own devices (measured on real QEMU: a
            # guest arrived without them when this was left out).
            devices.plug_claimed(agent, ctxt, instance, migration,
                                 devices.claimed_placements(claim))
        counted = _counted_here(agent, instance, migration, claim)
        if counted is not None:
            return counted
    if claim is not None and claim.guarded and \
            not _guard_placed(agent, ctxt, instance, migration, claim):
        return place_from_guest(agent, ctxt, instance, migration)
    if claim is not None:
        # Before the claim becomes the instance's: a redelivered request
        # finds the devices plugged and plugs nothing.
        devices.plug_claimed(agent, ctxt, instance, migration,
                             devices.claimed_placements(claim))
        updated = agent.conductor_api.migration_context_apply(
            ctxt, instance.uuid, migration.uuid)
        agent.tracker.apply_move_claim(migration.uuid, updated)
        LOG.info("%s: instance %s arrived (migration %s)", agent.host,
                 instance.uuid, migration.uuid)
    elif _already_here(agent, ctxt, instance):
        updated = agent.conductor_api.instance_get(ctxt, instance.uuid)
        agent.tracker.track_instance(updated)
        return updated
    else:
        updated = place_from_guest(agent, ctxt, instance, migration)
    report.request(agent, f"the arrival of {instance.uuid}")
    return updated


def _guard_placed(agent, ctxt, instance, migration, claim):
    """Whether the migration guard placed an arrived guest as claimed.

    It did not when libvirtd never loaded the hook (it was installed
    after libvirtd started): the guest then runs with the source's
    copied XML, and recording the claim would make the records lie.
    Then the claim is dropped and the arrival takes the old path.
    """
    mismatch = agent.driver.check_arrival(instance.uuid, migration.uuid,
                                          claim.topology)
    if mismatch is None:
        return True
    LOG.error("%s: instance %s arrived (migration %s) WITHOUT the placement "
              "of its guarded claim, so the migration guard did not run "
              "(restart libvirtd after installing it): %s; its placement is "
              "read back from its XML instead", agent.host, instance.uuid,
              migration.uuid, mismatch)
    drop_claim(agent, ctxt, instance, migration.uuid)
    return False


def place_from_guest(agent, ctxt, instance, migration):
    """The old path of an arrival: read the placement back from the
    guest's XML and record it, with no claim to apply.

    :returns: the updated Instance.
    """
    topology = agent.driver.get_guest_topology(instance.uuid)
    updated = agent.conductor_api.instance_set_placement(
        ctxt, instance.uuid, agent.host, topology)
    agent.tracker.track_instance(updated)
    LOG.info("%s: instance %s arrived (migration %s)", agent.host,
             instance.uuid, migration.uuid)
    return updated


def _counted_here(agent, instance, migration, claim):
    """Count an arrived guest from its claim, without the records.

    :returns: the Instance as now counted here, or None when neither a
        claim nor an earlier arrival tells its placement here.
    """
    if claim is None:
        return next((i for i in agent.tracker.instances()
                     if i.uuid == instance.uuid), None)
    arrived = instance.obj_clone()
    arrived.host = agent.host
    arrived.numa_topology = claim.topology
    arrived.migration_context = None
    agent.tracker.apply_move_claim(migration.uuid, arrived)
    LOG.info("%s: instance %s arrived (migration %s); the source records "
             "it", agent.host, instance.uuid, migration.uuid)
    report.request(agent, f"the arrival of {instance.uuid}")
    return arrived


def _already_here(agent, ctxt, instance):
    current = agent.conductor_api.instance_get(ctxt, instance.uuid)
    return current.host == agent.host and \
        current.get('migration_context') is None


def rollback_at_destination(agent, ctxt, instance, migration):
    """Undo what this host prepared: the guest copy and any claim.

    A guest this host counts as its own (it arrived: the claim was
    applied here) is never destroyed, whatever host the request's stale
    instance names: a repeated request after the migration completed
    must not destroy the migrated guest. Idempotent otherwise too.

    Dropping the claim here too is the old path: a source from the
    release before never calls drop_move_claim_at_destination. When this
    host holds a claim the source is new and asks for the drop as well
    (idempotent); when it holds none, only this old path remains.

    The migration is remembered as rolled back here: a request to
    define its guest that comes later is refused (accept_emulated).
    """
    migration_threads.stop_watching(agent, migration.uuid)
    with agent.incoming.lock:
        agent.incoming.mark_rolled_back(migration.uuid)
        remove_partial_copy(agent, instance, migration)
    claim = agent.tracker.get_claim(migration.uuid)
    if claim is None:
        releases.log_old_path(
            agent.host, migration.uuid, releases.OLD_PATH_DEST_DROP,
            "no claim held; the rollback drops any record of one, as "
            "no drop request comes when none was taken")
    elif claim.guarded:
        releases.log_old_path(
            agent.host, migration.uuid, releases.OLD_PATH_DEST_DROP,
            "the claim was taken for the migration guard, and the "
            "source's release sends no drop request: the rollback drops "
            "it")
    drop_claim(agent, ctxt, instance, migration.uuid)


def remove_partial_copy(agent, instance, migration):
    """Destroy the copy a failed migration left here, never a guest this
    host counts as its own."""
    if instance.host != agent.host and \
            instance.uuid not in agent.tracker.instance_uuids() and \
            instance.uuid in agent.driver.list_guests():
        LOG.info("%s: removing the partial copy of instance %s "
                 "(migration %s rolled back)", agent.host, instance.uuid,
                 migration.uuid)
        agent.driver.destroy(instance.uuid)


def drop_claim(agent, ctxt, instance, migration_uuid):
    """Drop this host's claim for a migration, here and in the records.

    Idempotent: dropping a claim twice, or one never taken, is fine. Only
    a claim held on this host is dropped from the records: the conductor
    may have moved the migration on to another destination meanwhile.
    """
    dropped = agent.tracker.drop_move_claim(migration_uuid)
    agent.conductor_api.migration_context_drop(ctxt, instance.uuid,
                                               migration_uuid,
                                               dest_host=agent.host)
    if dropped is not None:
        report.request(agent, f"dropping the claim of {migration_uuid}")
