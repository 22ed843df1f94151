"""The conductor RPC API's versions: what each brought, and the object
versions a receiver of each reads.

Kept apart from the client (numamig.conductor.rpcapi) so that the
version table, which grows with every API change, is read in one place.

API version history:

* 1.0 - Initial version: ping; compute node reports; instance records
        (get, list, create, adopt, placement, update); migration
        records (get, list, status, progress) and migration contexts
        (set, drop, apply); live_migrate_instance, its dry run,
        migration_abort and migration_force_complete.
* 1.1 - migration_context_drop takes dest_host (drop only the claim
        held there); instance_delete, heal_claims and host_domains.
* 1.2 - migration_set_status takes the run's result; answers carry
        Migration 1.1 (messages at 1.0-1.1 get Migration 1.0).
* 1.3 - live_migrate_instance takes a priority, records the request
        in the admission queue and returns it at once (accepted,
        with its queue position); answers carry Migration 1.2
        (messages at 1.2 get Migration 1.1); agents call on
        AGENT_TOPIC. migration_complete (completed, the run's result
        and the applied claim in one call); migration_set_status
        sent at 1.3 may move queued -> running (no preparing step).
* 1.4 - compute_node_delete (forget a host that no longer runs
        numamig).
* 1.5 - migration_wait (answered once a migration changes, instead
        of polled).
* 1.6 - host_refresh_usage (a host recomputes its usage from the
        records now and reports it).
* 1.7 - compute node reports carry the migration guard's state
        (ComputeNodeReport 1.1); answers to older messages carry
        ComputeNodeReport 1.0.
* 1.8 - host_set_disabled (disable a host for maintenance, or enable
        it) and host_drain_plan (where every guest of a host would
        go, at once; nothing moves).
* 1.9 - live_migrate_instance takes the migration's uuid, chosen by
        the client: a request delivered again (or sent again after
        a timeout) returns the migration it recorded instead of
        recording another.
* 1.10 - host_drain_start (disable a host and move every guest by
         a plan), host_drain_show, host_drain_wait and
         host_drain_abort (numamig.conductor.rpcapi_drain).
* 1.11 - virtio-mem devices: InstanceNUMACell 1.1 (and
         InstanceNUMATopology, Instance, MigrationContext 1.1);
         instance_memory_set and host_reclaim.
* 1.12 - live_migrate_instance takes a convergence policy name
         (``policy``); answers carry Migration 1.3 (the migration's
         convergence policy and actions, and the pre-flight
         prediction next to the outcome).
* 1.13 - host_defragment_start (carry a defragmentation plan out as a
         drain of kind ``defragment``); drains answered carry
         ``kind`` and ``outcome``, their moves ``source_host``, and
         defragmentation plans chains through third hosts.
* 1.14 - answers carry Migration 1.4 (memory_reclaim: virtio-mem
         memory reclaimed from other guests to place the guest,
         [virtio_mem] placement_reclaim); messages at 1.12-1.13 get
         Migration 1.3.
* 1.15 - migration_record_recovery (a source reports a post-copy
         recovery's history while it recovers); a run's result may
         carry postcopy_recovery; answers carry Migration 1.5.
* 1.16 - migration_record_threads (each host of a migration reports
         where the migration's own QEMU threads ran); answers carry
         Migration 1.6 (migration_threads).
* 1.17 - status postcopy-paused: migration_set_status may record it
         (the source's post-copy recovery gave up: both claims kept);
         migration_resume (an operator asks the source to resume such
         a migration); answers carry Migration 1.7 and
         MigrationStatusChange 1.1 (messages at 1.15-1.16 get
         Migration 1.5, whose status says ``running`` instead).
* 1.18 - live_migration_dry_run takes a convergence policy name
         (``policy``): the dry run refuses an unknown one as the
         request does, and predicts under it.
"""

# API version -> the object versions a receiver of that version reads.
OBJECT_VERSIONS = {
    '1.0': {
        'ComputeNodeReport': '1.0', 'HostNUMACell': '1.0',
        'HostNUMATopology': '1.0', 'Instance': '1.0',
        'InstanceNUMACell': '1.0', 'InstanceNUMATopology': '1.0',
        'LiveMigrateData': '1.1', 'Migration': '1.0',
        'MigrationContext': '1.0', 'MigrationStatusChange': '1.0',
        'NUMALimits': '1.0', 'NUMAMigrateInfo': '1.0',
        'NUMAPagesTopology': '1.0',
    },
}
OBJECT_VERSIONS['1.1'] = dict(OBJECT_VERSIONS['1.0'])
OBJECT_VERSIONS['1.2'] = dict(OBJECT_VERSIONS['1.1'], Migration='1.1')
OBJECT_VERSIONS['1.3'] = dict(OBJECT_VERSIONS['1.2'], Migration='1.2')
OBJECT_VERSIONS['1.4'] = dict(OBJECT_VERSIONS['1.3'])
OBJECT_VERSIONS['1.5'] = dict(OBJECT_VERSIONS['1.4'])
OBJECT_VERSIONS['1.6'] = dict(OBJECT_VERSIONS['1.5'])
OBJECT_VERSIONS['1.7'] = dict(OBJECT_VERSIONS['1.6'],
                              ComputeNodeReport='1.1')
OBJECT_VERSIONS['1.8'] = dict(OBJECT_VERSIONS['1.7'])
OBJECT_VERSIONS['1.9'] = dict(OBJECT_VERSIONS['1.8'])
OBJECT_VERSIONS['1.10'] = dict(OBJECT_VERSIONS['1.9'])
OBJECT_VERSIONS['1.11'] = dict(OBJECT_VERSIONS['1.10'],
                               InstanceNUMACell='1.1',
                               InstanceNUMATopology='1.1', Instance='1.1',
                               MigrationContext='1.1')
OBJECT_VERSIONS['1.12'] = dict(OBJECT_VERSIONS['1.11'], Migration='1.3')
OBJECT_VERSIONS['1.13'] = dict(OBJECT_VERSIONS['1.12'])
OBJECT_VERSIONS['1.14'] = dict(OBJECT_VERSIONS['1.13'], Migration='1.4')
OBJECT_VERSIONS['1.15'] = dict(OBJECT_VERSIONS['1.14'], Migration='1.5')
OBJECT_VERSIONS['1.16'] = dict(OBJECT_VERSIONS['1.15'], Migration='1.6')
OBJECT_VERSIONS['1.17'] = dict(OBJECT_VERSIONS['1.16'], Migration='1.7',
                               MigrationStatusChange='1.1')
OBJECT_VERSIONS['1.18'] = dict(OBJECT_VERSIONS['1.17'])

# Objects an uncapped client sends older than their newest version (the
# only exceptions tests/unit/test_object_manifests.py allows): no
# conductor method takes or answers LiveMigrateData (it travels between
# agents and in the conductor's compute calls); the entry only keeps the
# manifests complete.
HELD_BACK = {'LiveMigrateData': '1.1'}
# (LiveMigrateData 1.2 and 1.3 are held back for the same reason.)

# The API version that brought claim drops limited to one host, instance
# deletion, claim healing and host domain listing.
OPERATIONS_VERSION = '1.1'
# The API version that brought the result of a migration's run: the
# ``result`` of migration_set_status, and Migration 1.1 in answers.
RESULTS_VERSION = '1.2'
# The API version that brought the admission queue: live_migrate_instance
# records and queues (with a priority) and returns at once; answers carry
# Migration 1.2; agents call on AGENT_TOPIC.
QUEUE_VERSION = '1.3'
# The API version that brought the migration uuid a client gives
# live_migrate_instance: a repeated request is then known as such.
REQUEST_UUID_VERSION = '1.9'
# The API version that brought convergence policies and predictions:
# live_migrate_instance takes a policy name, answers carry Migration 1.3
# (convergence_policy and actions, the prediction).
CONVERGENCE_VERSION = '1.12'
# The fields of a run's result a conductor reads from 1.12 (older ones
# refuse a result naming them).
CONVERGENCE_RESULT_FIELDS = ('convergence_policy', 'convergence_actions')
# The API version whose answers carry Migration 1.4 (what was reclaimed
# from other guests to place the migration's guest).
MEMORY_RECLAIM_VERSION = '1.14'
# The API version that brought post-copy recovery: migration_record_
# recovery, the postcopy_recovery of a run's result, Migration 1.5.
RECOVERY_VERSION = '1.15'
RECOVERY_RESULT_FIELDS = ('postcopy_recovery',)
# The API version that brought migration_record_threads and answers
# carrying Migration 1.6 (where the migration's threads ran).
THREADS_VERSION = '1.16'
# The API version that brought status postcopy-paused (recorded, and
# read in answers: Migration 1.7) and migration_resume.
PAUSED_VERSION = '1.17'
# The API version whose live_migration_dry_run takes a policy.
DRY_RUN_POLICY_VERSION = '1.18'
# Arguments a call may carry only from the API version given.
SINCE = {'result': RESULTS_VERSION, 'priority': QUEUE_VERSION,
          'migration_uuid': REQUEST_UUID_VERSION,
          'policy': CONVERGENCE_VERSION}
# The API version that brought the short status path of a migration:
# migration_set_status may move queued -> running, and migration_complete
# records completed, the result and the applied claim at once.
SHORT_PATH_VERSION = '1.3'

# The API version that brought compute_node_delete.
HOSTS_VERSION = '1.4'
# The API version that brought migration_wait.
WAIT_VERSION = '1.5'
# The API version that brought host_refresh_usage (heal claims).
USAGE_VERSION = '1.6'
# The API version whose reports carry the migration guard's state
# (ComputeNodeReport 1.1).
GUARD_VERSION = '1.7'
# The API version whose messages carry virtio-mem devices in guest cells
# (InstanceNUMACell 1.1 and the objects holding it).
VIRTIO_MEM_VERSION = '1.11'
# The API version that brought host maintenance: host_set_disabled and
# host_drain_plan.
MAINTENANCE_VERSION = '1.8'
# The API version that brought drains that move guests:
# host_drain_start, host_drain_show, host_drain_wait, host_drain_abort.
DRAIN_VERSION = '1.10'
# The API version that brought defragmentations carried out:
# host_defragment_start.
DEFRAGMENT_VERSION = '1.13'
