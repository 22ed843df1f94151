"""Operators' maintenance requests: delete an instance, heal leaked
claims, list a host's domains, forget a host.

They go through the conductor, not straight to the database, so that
the agents and the scheduler's cache change together with the records:
a deleted guest's usage is released on its host, a healed claim leaves
the destination agent's memory and the cache's reservations too.
Every function takes the conductor's Worker first
(numamig.conductor.worker).
"""

from oslo_log import log as logging
import oslo_messaging as messaging

from numamig import exception
from numamig import objects
from numamig.audit import claims as audit_claims
from numamig.db import compute_nodes
from numamig.db import instances
from numamig.db import migrations

LOG = logging.getLogger(__name__)
DELETING = 'deleting'


def delete_instance(worker, ctxt, instance_uuid):
    """Destroy an instance's guest, release its usage, drop its record.

    Idempotent: an instance no longer recorded is not an error. The
    record is marked ``deleting`` first (a migration request for it is
    then refused); if its host cannot delete the guest the mark is
    undone and nothing else changed.

    :returns: True if it was deleted now, False if it was not recorded.
    :raises InstanceBusy: a migration of it is in progress.
    :raises Invalid: its agent is too old to delete guests.
    """
    db = worker.db
    try:
        record = instances.get(db, instance_uuid)
    except exception.InstanceNotFound:
        LOG.info("Instance %s is not recorded: nothing to delete",
                 instance_uuid)
        return False
    _check_not_migrating(db, record.instance)
    previous = record.instance.get('task_state')
    marked = instances.update(db, instance_uuid, {'task_state': DELETING},
                              expected_revision=record.revision)
    instance = marked.instance
    try:
        _check_not_migrating(db, instance)
        if instance.host:
            _delete_on_host(worker, ctxt, instance)
    except BaseException:
        instances.update(db, instance_uuid, {'task_state': previous})
        raise
    instances.destroy(db, instance_uuid)
    if instance.host:
        _forget_in_cache(worker, instance.host, instance_uuid)
    LOG.info("Deleted instance %s (%s) from %s", instance_uuid,
             instance.name, instance.host or 'no host')
    return True


def _forget_in_cache(worker, host, instance_uuid):
    """The scheduler's view of ``host`` without the deleted guest."""
    worker.cache.release(host, instance_uuid)
    guests = [(r.instance.project_id, r.instance.uuid)
              for r in instances.get_all(worker.db, host=host)]
    try:
        worker.cache.set_guests(host, guests)
    except exception.HostNotFound:
        pass  # never reported: the cache knows nothing of it


def _check_not_migrating(db, instance):
    busy = [m for m in migrations.get_all(db, instance_uuid=instance.uuid)
            if m.in_progress]
    if busy:
        raise exception.InstanceBusy(
            instance_uuid=instance.uuid, action='deleted',
            reason=f"migration {busy[0].uuid} is {busy[0].status}; wait "
                   f"for it to end or abort it")


def _delete_on_host(worker, ctxt, instance):
    try:
        worker.compute_api.delete_instance(
            ctxt, instance, timeout=worker.settings.check_timeout)
    except messaging.UnsupportedVersion as exc:
        raise _agent_too_old(instance.host, f"delete instance "
                             f"{instance.uuid}", '1.2',
                             "upgrade it first") from exc


def _agent_too_old(host, what, version, then):
    """Invalid: ``host``'s agent cannot ``what`` below compute API
    ``version``; ``then`` says what follows."""
    return exception.Invalid(
        reason=f"compute host {host} cannot {what}: its agent (or "
               f"[upgrade_levels] compute) is older than compute API "
               f"{version}; {then}")


def heal_claims(worker, ctxt, dry_run=False):
    """Find leaked claims and, unless ``dry_run``, release them everywhere.

    Each release is conditional on the migration holding the claim (see
    numamig.audit.claims); a released claim also leaves the scheduler's
    reservations and, best effort, the destination agent's memory.

    :returns: {'found', 'released', 'skipped'}: lists of Finding dicts.
    """
    found = audit_claims.leaked(worker.db)
    released, skipped = ([], []) if dry_run else \
        audit_claims.heal(worker.db, found)
    for finding in released:
        _forget_on_agent(worker, ctxt, finding)
    return {'found': [f.as_dict() for f in found],
            'released': [f.as_dict() for f in released],
            'skipped': [f.as_dict() for f in skipped]}


def _forget_on_agent(worker, ctxt, finding):
    instance_uuid, migration_uuid = finding.instance_uuids
    worker.cache.release(finding.host, instance_uuid)
    try:
        instance = instances.get(worker.db, instance_uuid).instance
        target = objects.Migration(
            uuid=migration_uuid, instance_uuid=instance_uuid,
            source_host=instance.host or finding.host,
            dest_host=finding.host)
        worker.compute_api.drop_move_claim_at_destination(
            ctxt, instance, target, timeout=worker.settings.check_timeout)
    except Exception as exc:  # noqa: BLE001 - best effort, logged
        LOG.warning("Healed claim of migration %s: %s did not confirm "
                    "dropping it (%s); it does at its next usage "
                    "recompute", migration_uuid, finding.host, exc)


def host_domains(worker, ctxt, host):
    """Every domain of ``host`` with its live and persistent XML.

    An agent older than compute API 1.2 cannot list its domains: the
    recorded guests' live XML is fetched one by one instead, and
    persistent XML is then unavailable.

    :raises HostNotFound: ``host`` never reported.
    """
    worker.cache.get(host)
    try:
        return worker.compute_api.list_domains(
            ctxt, host, timeout=worker.settings.check_timeout)
    except messaging.UnsupportedVersion:
        LOG.info("Compute host %s cannot list its domains (older than "
                 "compute API 1.2): reading its recorded guests only",
                 host)
    domains = []
    for record in instances.get_all(worker.db, host=host):
        entry = {'uuid': record.instance.uuid, 'name': record.instance.name,
                 'live_xml': None, 'persistent_xml': None, 'error': None}
        try:
            entry['live_xml'] = worker.compute_api.get_domain_xml(
                ctxt, host, record.instance.uuid)
        except Exception as exc:  # noqa: BLE001 - reported per guest
            entry['error'] = f"domain XML not read: {exc}"
        domains.append(entry)
    return domains


def refresh_usage(worker, ctxt, host):
    """Have ``host``'s agent recompute its usage from the records now.

    The agent does so every ``[compute] update_resources_interval``
    anyway; ``heal claims`` asks for it when the host's report and the
    records differ, then compares the fresh report.

    :returns: the ComputeNodeReport the agent sent (and stored).
    :raises HostNotFound: ``host`` never reported.
    :raises Invalid: its agent (or [upgrade_levels] compute) is older
        than compute API 1.4.
    """
    worker.cache.get(host)
    try:
        return worker.compute_api.refresh_usage(
            ctxt, host, timeout=worker.settings.check_timeout)
    except messaging.UnsupportedVersion as exc:
        raise _agent_too_old(host, "recompute its usage on request", '1.4',
                             "it does so every [compute] "
                             "update_resources_interval") from exc


def delete_host(worker, host):
    """Forget a host that no longer runs numamig: its record and its
    place in the scheduler's cache (and so in upgrade checks).

    Idempotent: a host no longer recorded is not an error.

    :returns: True if it was deleted now, False if it was not recorded.
    :raises HostInUse: its agent still reports, or guests, claims or
        migrations still involve it; nothing changed.
    """
    reason = _host_in_use(worker, host)
    if reason:
        raise exception.HostInUse(host=host, reason=reason)
    deleted = compute_nodes.delete(worker.db, host)
    worker.cache.remove(host)
    if deleted:
        LOG.info("Compute host %s deleted by request", host)
    return deleted


def _host_in_use(worker, host):
    db = worker.db
    try:
        if worker.cache.get(host).is_up:
            return ("its agent still reports; stop numamig-compute there "
                    "first")
    except exception.HostNotFound:
        pass
    guests = instances.get_all(db, host=host)
    if guests:
        return (f"{len(guests)} guest(s) are recorded on it, e.g. "
                f"{guests[0].instance.uuid}; migrate or delete them first")
    if instances.get_claims_on_host(db, host):
        return "a migration claim is held on it; see 'heal claims'"
    busy = migrations.get_in_progress_by_host(db, host)
    if busy:
        return f"migration {busy[0].uuid} involves it ({busy[0].status})"
    return None
