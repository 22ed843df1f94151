"""The conductor RPC API's versions: what each brought, and the object
versions a receiver of each reads.

Kept apart from the client (numamig.conductor.rpcapi) so that the
version table, which grows with every API change, is read in one place.
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
