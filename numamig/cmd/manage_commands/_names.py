"""The names of migration records a reading command words, without the
object registry.

``migration show`` and ``migration list`` word statuses, result fields,
reclaim entries and thread records by names that live with the versioned
objects (numamig.objects.fields, numamig.objects.migration,
numamig.objects.migration_satellites,
numamig.objects.migration_threads). Importing any of those loads the
object registry and, through oslo.versionedobjects, oslo.messaging: more
than the rest of a read together (issue 43). The few names a read needs
are copied here; tests/unit/cmd/test_names.py keeps each copy equal to
its source, so a status or field added there fails a test until it is
added here.
"""


class MigrationStatus:
    """numamig.objects.fields.MigrationStatus, the names a read uses."""

    ACCEPTED = 'accepted'
    QUEUED = 'queued'
    COMPLETED = 'completed'
    FAILED = 'failed'
    CANCELLED = 'cancelled'
    ALL = ('accepted', 'queued', 'preparing', 'running', 'postcopy-paused',
           'post-migrating', 'completed', 'failed', 'error', 'cancelled')
    HALTED = ('postcopy-paused',)
    SETTLED = ('postcopy-paused', 'completed', 'failed', 'error',
               'cancelled')
    UNSUCCESSFUL = ('failed', 'error', 'cancelled')


# numamig.objects.migration.RESULT_FIELDS: how the run went.
RESULT_FIELDS = ('elapsed_ms', 'downtime_ms', 'emulated', 'post_copy',
                 'paused')
# numamig.objects.migration_satellites.SATELLITES: what ``show`` reads.
SATELLITES = ('reclaim', 'threads', 'prediction', 'convergence',
              'recovery', 'devices')
# numamig.objects.migration_satellites.PREDICTION_FIELDS.
PREDICTION_FIELDS = ('prediction', 'predicted_elapsed_ms',
                     'predicted_downtime_ms', 'sampled_dirty_rate')
# numamig.objects.migration_satellites.MEMORY_RECLAIM_KEYS.
MEMORY_RECLAIM_KEYS = ('host', 'host_node', 'instance_uuid', 'cell',
                       'before_mb', 'after_mb', 'current_mb', 'released_mb',
                       'outcome')
# numamig.objects.migration_threads.SIDES.
THREAD_SIDES = ('source', 'dest')
