"""The compute flows of the release before NUMA-aware live migration.

A testing aid for rolling upgrades (numamig.releases): an agent told to
run as release 1 takes these flows where that release differed, so the
current flows (migration_dest, migration_source) read as today's release
only. Each is what that release did, written out from today's parts:
no NUMA offer from either side, hence no claim, no claim drop on
rollback, the arrived guest's placement read back from its XML, and no
old-path decision logged (that code did not exist then).
"""

from numamig import releases
from numamig.compute import migration_dest
from numamig.compute import migration_source


def check_destination(agent, ctxt, instance, source_host, migration_uuid,
                      migration=None, limits=None, source_data=None):
    """Ask the source, offer nothing, claim nothing.

    The claim parameters (``migration``, ``limits``, ``source_data``)
    are not part of this release's API; its dispatcher never passes them.
    """
    migration_dest.check_not_here(agent, instance)
    dest_check_data = migration_dest.make_dest_check_data(
        agent, instance, source_host, migration_uuid, offer=False)
    migrate_data = agent.compute_api.check_can_live_migrate_source(
        ctxt, instance, dest_check_data)
    return releases.backported(migrate_data, _own_migrate_data_version(agent))


def check_source(agent, ctxt, instance, dest_check_data):
    """Confirm the guest runs here; set no NUMA flag."""
    migration_source.check_guest_here(agent, instance)
    return releases.backported(dest_check_data.obj_clone(),
                               dest_check_data.VERSION)


def post_at_destination(agent, ctxt, instance, migration,
                        records_by_source=False):
    """Record the placement the guest's XML shows; there is no claim."""
    return migration_dest.place_from_guest(agent, ctxt, instance, migration)


def rollback_at_destination(agent, ctxt, instance, migration):
    """Remove a partial copy; this release took no claim to drop."""
    migration_dest.remove_partial_copy(agent, instance, migration)


def log_old_path(host, migration_uuid, item, reason, level=None):
    """Nothing: this release had no new path to leave."""


def _own_migrate_data_version(agent):
    return releases.lmd_version_for_api(agent.release.compute_api_version)
