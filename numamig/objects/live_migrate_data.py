"""LiveMigrateData: what the compute hosts pass each other for a migration."""

from oslo_utils import versionutils
from oslo_versionedobjects import fields

from numamig.objects import base

# The fields NUMA-aware live migration added in 1.1. A receiver older than
# that never sees them; both flags must go too (an old peer that received
# one would believe its partner supports a protocol it cannot speak).
NUMA_FIELDS = ('dst_numa_info', 'src_supports_numa_live_migration',
               'dst_supports_numa_live_migration')


@base.register
class LiveMigrateData(base.NumamigObject):
    """Migration parameters agreed between source and destination."""

    # Version 1.0: Initial version (the release before NUMA-aware live
    #              migration)
    # Version 1.1: Added dst_numa_info, src_supports_numa_live_migration and
    #              dst_supports_numa_live_migration
    # Version 1.2: Added migration_context: the destination returns the
    #              claim it took for the conductor to record (compute API
    #              1.3), instead of recording it itself
    # Version 1.3: Added convergence_policy: the policy the conductor chose
    #              for the migration, which the source runs it under
    #              (compute API 1.6)
    #              and migration_context as MigrationContext 1.1 (virtio-mem)
    VERSION = '1.3'

    obj_relationships = {'dst_numa_info': [('1.1', '1.0'), ('1.2', '1.0'),
                                           ('1.3', '1.0')],
                         'migration_context': [('1.2', '1.0'),
                                               ('1.3', '1.1')]}

    fields = {
        'instance_uuid': fields.UUIDField(),
        'source_host': fields.StringField(),
        'dest_host': fields.StringField(),
        'migration_uuid': fields.UUIDField(),
        # Where the source's libvirt reaches the destination's (peer to
        # peer), and where the migration stream goes.
        'dest_connect_uri': fields.StringField(nullable=True, default=None),
        'migration_uri': fields.StringField(nullable=True, default=None),
        # Set when the hypervisor cannot migrate (libvirt test driver) and
        # numamig carries the guest over itself.
        'emulated': fields.BooleanField(default=False),
        'bandwidth_mib': fields.IntegerField(default=0),
        'dst_numa_info': fields.ObjectField('NUMAMigrateInfo', nullable=True,
                                            default=None),
        'src_supports_numa_live_migration': fields.BooleanField(
            default=False),
        'dst_supports_numa_live_migration': fields.BooleanField(
            default=False),
        # The claim the destination took and the conductor must record
        # before the migration may start (compute API 1.3); only in the
        # destination's answer to the conductor, never sent on.
        'migration_context': fields.ObjectField(
            'MigrationContext', nullable=True, default=None),
        # The convergence policy's name (numamig.convergence.policy); None:
        # the source chooses (flavor, image, its default), as before 1.3.
        'convergence_policy': fields.StringField(nullable=True,
                                                 default=None),
    }

    def obj_make_compatible(self, primitive, target_version):
        super().obj_make_compatible(primitive, target_version)
        target = versionutils.convert_version_to_tuple(target_version)
        if target < (1, 3):
            # An older source chooses its own (timer-based) behaviour.
            primitive.pop('convergence_policy', None)
        if target < (1, 2):
            # A receiver that old records claims itself: the destination
            # recorded it already (API 1.1), or took none (API 1.0).
            primitive.pop('migration_context', None)
        if target < (1, 1):
            for name in NUMA_FIELDS:
                primitive.pop(name, None)

    def _validate(self):
        if self.get('bandwidth_mib', 0) < 0:
            raise self.invalid(
                f"bandwidth_mib must not be negative, got "
                f"{self.bandwidth_mib}")
        if self.source_host == self.dest_host:
            raise self.invalid(
                f"source and destination are both {self.source_host}")
