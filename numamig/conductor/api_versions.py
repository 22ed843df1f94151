"""The conductor's RPC APIs, one per audience, and their version histories.

The conductor serves three APIs on its topics, each a target namespace
with a version history of its own (as nova's ConductorAPI and
ComputeTaskAPI share the conductor topic):

* RECORDS (namespace ``records``): what compute agents call, to record
  reports, claims and their migrations' statuses and to read what they
  need. A rolling upgrade depends on it: it changes only when agents
  need it to. Client numamig.conductor.records_rpcapi, endpoint
  numamig.conductor.records_manager.
* OPERATIONS (namespace ``operations``): what operators and tools call,
  to migrate, drain, defragment, change memory, resume, and to read
  migrations, instances and hosts. Client numamig.conductor.rpcapi,
  endpoint numamig.conductor.manager.
* RELEASE_1_API (no namespace): the one API release 1 had for every
  audience, frozen at 1.1. A conductor keeps serving it for services of
  release 1, and its clients send it to a conductor of release 1
  (numamig.conductor.endpoints).

Reads have no API of their own: each audience reads through its API,
so that an operator's new read never changes the agents'; the few reads
both audiences make (a migration, an instance, the hosts) are declared
by both endpoints and read once, by the records endpoint.

Versions: the namespaced APIs start at 2.0 so that one number names one
API step whatever the namespace: ``[upgrade_levels] conductor`` may say
'1.0' or '1.1' (release 1's API, no namespace) or '2.0' (release 2's
APIs), or name a release.

RELEASE_1_API history:

* 1.0 - Initial version: ping; compute node reports; instance records
        (get, list, claims on a host, create, adopt, placement, update);
        migration records (get, list, in progress on a host, status,
        progress) and migration contexts (set, drop, apply);
        compute_node_get_all; get_domain_xml; live_migrate_instance, its
        dry run, migration_abort and migration_force_complete.
* 1.1 - Release 1: migration_context_drop takes dest_host (drop only
        the claim held there); instance_delete, heal_claims and
        host_domains.

RECORDS history:

* 2.0 - Release 2: the agents' calls of 1.1, and: migration_set_status
        takes the run's result and may record postcopy-paused or move
        queued -> running; migration_complete;
        migration_record_recovery, migration_record_threads and
        migration_record_devices (the destination's verification of a
        guest's passed-through devices after the arrival);
        migration_get_with_satellites (a migration with the satellite
        records agents read, its MigrationConvergence and
        MigrationRecovery, in one round trip). Served on the agents'
        topic (AGENT_TOPIC) with RPC threads of its own.

OPERATIONS history:

* 2.0 - Release 2: the operators' calls of 1.1, and:
        live_migrate_instance takes a priority, the migration's uuid (a
        repeat returns the migration recorded) and a convergence policy,
        and queues the request (answered at once, accepted);
        live_migration_dry_run takes a policy; compute_node_delete;
        migration_wait; host_refresh_usage; host_set_disabled and
        host_drain_plan; host_drain_start/show/wait/abort,
        host_defragment_plan and host_defragment_start;
        instance_memory_set and host_reclaim; migration_resume;
        migration_get_satellites (what was reclaimed to place a
        migration, where its threads ran, its pre-flight prediction, how
        it converged, its post-copy recovery: objects of their own,
        numamig.objects.migration_satellites).

Objects have one version per release too: release 1's, and release 2's
one minor above it where release 2 changed the object. Every API
version reads the objects OBJECT_VERSIONS names for its number.
"""

import dataclasses

from oslo_utils import versionutils


@dataclasses.dataclass(frozen=True)
class API:
    """One conductor RPC API as its clients and endpoint see it.

    :param namespace: its target namespace (None: release 1's API).
    :param version: the newest version this release serves and sends.
    :param first: its first version (a cap below it means release 1's
        API instead).
    :param service_key: its entry in
        numamig.objects.service.SERVICE_VERSION_HISTORY.
    """

    namespace: str
    version: str
    first: str
    service_key: str


# Release 1's API: its newest version, frozen.
RELEASE_1 = '1.1'
# The namespaced APIs' version of release 2.
RELEASE_2 = '2.0'

RELEASE_1_API = API(None, RELEASE_1, '1.0', 'conductor_rpc')
RECORDS = API('records', RELEASE_2, RELEASE_2, 'conductor_records_rpc')
OPERATIONS = API('operations', RELEASE_2, RELEASE_2,
                 'conductor_operations_rpc')

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
# API version -> the object versions a receiver of that version reads
# (the same for every API of that number).
OBJECT_VERSIONS = {
    '1.0': dict(_RELEASE_1_OBJECTS),
    RELEASE_1: dict(_RELEASE_1_OBJECTS),
    RELEASE_2: dict(_RELEASE_1_OBJECTS, ComputeNodeReport='1.1',
                    Instance='1.1', InstanceNUMACell='1.1',
                    InstanceNUMATopology='1.1', LiveMigrateData='1.1',
                    Migration='1.1', MigrationContext='1.1',
                    MigrationStatusChange='1.1',
                    # New in release 2: a migration's satellite records,
                    # a host's CPU, its CPU power state and its
                    # locality watch (in
                    # ComputeNodeReport 1.1).
                    MigrationReclaim='1.0', MigrationThreads='1.0',
                    MigrationPrediction='1.0', MigrationConvergence='1.0',
                    MigrationRecovery='1.0', MigrationDevices='1.0',
                    HostCPU='1.0',
                    CPUPowerState='1.0', CPUPowerCell='1.0',
                    HostLocality='1.0', GuestLocality='1.0',
                    InstanceCPU='1.0',
                    # PCI passthrough (issue 41): host functions in the
                    # reports, requests and claims in the topologies.
                    HostNUMATopology='1.1', HostNUMACell='1.1',
                    HostPCIDevice='1.0', PCIRequest='1.0',
                    InstancePCIDevice='1.0'),
}

# Objects an uncapped client sends older than their newest version (the
# only exceptions tests/unit/test_object_manifests.py allows): none, each
# release's manifest names each object in that release's version. (No
# conductor method takes or answers LiveMigrateData, which travels
# between agents and in the conductor's compute calls; its entries only
# keep the manifests complete.)
HELD_BACK = {}


def is_version(text):
    """Whether ``text`` names a version of a conductor API (for
    ``[upgrade_levels] conductor``)."""
    try:
        parsed = versionutils.convert_version_to_tuple(text)
    except (ValueError, TypeError, AttributeError):
        return False
    return any(parsed == versionutils.convert_version_to_tuple(v)
               for v in OBJECT_VERSIONS)


def lower(cap, other):
    """The older of two caps (None: no cap)."""
    if cap is None or other is None:
        return cap or other
    return min(cap, other, key=versionutils.convert_version_to_tuple)


def allows(cap, version):
    """Whether a client capped at ``cap`` (None: uncapped) may send
    ``version``."""
    return cap is None or versionutils.convert_version_to_tuple(cap) >= \
        versionutils.convert_version_to_tuple(version)
