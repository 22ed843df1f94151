"""The conductor RPC API's versions: what each brought, and the object
versions a receiver of each reads.

Kept apart from the client (numamig.conductor.rpcapi) so that the
version table, which grows with every API change, is read in one place.

API version history, one version per release (the development steps
of release 2, once 1.2 to 1.18, ship as the one version 1.2):

* 1.0 - Initial version: ping; compute node reports; instance records
        (get, list, create, adopt, placement, update); migration
        records (get, list, status, progress) and migration contexts
        (set, drop, apply); live_migrate_instance, its dry run,
        migration_abort and migration_force_complete.
* 1.1 - Release 1: migration_context_drop takes dest_host (drop only
        the claim held there); instance_delete, heal_claims and
        host_domains.
* 1.2 - Release 2: migration_set_status takes the run's result and may
        record postcopy-paused or move queued -> running;
        migration_complete; live_migrate_instance takes a priority, the
        migration's uuid (a repeat returns the migration recorded) and a
        convergence policy, and queues the request (answered at once,
        accepted); live_migration_dry_run takes a policy; agents call
        on AGENT_TOPIC; compute_node_delete; migration_wait;
        host_refresh_usage; host_set_disabled and host_drain_plan;
        host_drain_start/show/wait/abort and host_defragment_start;
        instance_memory_set and host_reclaim;
        migration_record_recovery and migration_record_threads;
        migration_resume. Reports carry the migration guard's state
        (ComputeNodeReport 1.1), answers carry Migration 1.1 and
        MigrationStatusChange 1.1, guest cells their virtio-mem devices
        (InstanceNUMACell 1.1 and the objects holding it). Messages at
        1.0-1.1 get release 1's objects.

Objects too have one version per release: release 1's, and release 2's
one minor above it where release 2 changed the object (Migration 1.1
holds everything its development steps 1.1 to 1.7 added).
"""

# The newest conductor API version each release serves.
RELEASE_1 = '1.1'
RELEASE_2 = '1.2'
# [upgrade_levels] conductor may name a release instead of a version.
VERSION_ALIASES = {'release-1': RELEASE_1, 'release-2': RELEASE_2}

_RELEASE_1_OBJECTS = {
    'ComputeNodeReport': '1.0', 'HostNUMACell': '1.0',
    'HostNUMATopology': '1.0', 'Instance': '1.0',
    'InstanceNUMACell': '1.0', 'InstanceNUMATopology': '1.0',
    'LiveMigrateData': '1.0', 'Migration': '1.0',
    'MigrationContext': '1.0', 'MigrationStatusChange': '1.0',
    'NUMALimits': '1.0', 'NUMAMigrateInfo': '1.0',
    'NUMAPagesTopology': '1.0',
}
# API version -> the object versions a receiver of that version reads.
OBJECT_VERSIONS = {
    '1.0': dict(_RELEASE_1_OBJECTS),
    RELEASE_1: dict(_RELEASE_1_OBJECTS),
    RELEASE_2: dict(_RELEASE_1_OBJECTS, ComputeNodeReport='1.1',
                    Instance='1.1', InstanceNUMACell='1.1',
                    InstanceNUMATopology='1.1', LiveMigrateData='1.1',
                    Migration='1.1', MigrationContext='1.1',
                    MigrationStatusChange='1.1'),
}

# Objects an uncapped client sends older than their newest version (the
# only exceptions tests/unit/test_object_manifests.py allows): none, each
# release's manifest names each object in that release's version. (No
# conductor method takes or answers LiveMigrateData, which travels
# between agents and in the conductor's compute calls; its entries only
# keep the manifests complete.)
HELD_BACK = {}
