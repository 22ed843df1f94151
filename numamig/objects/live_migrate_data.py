"""LiveMigrateData: what the compute hosts pass each other for a migration."""

from oslo_utils import versionutils
from oslo_versionedobjects import fields

from numamig import cpumodel
from numamig.objects import base

# The fields NUMA-aware live migration added in release 2 (1.1). A
# receiver of release 1 never sees them; both flags must go too (an old
# peer that received one would believe its partner supports a protocol
# it cannot speak).
NUMA_FIELDS = ('dst_numa_info', 'src_supports_numa_live_migration',
               'dst_supports_numa_live_migration')
# Everything release 2's version (1.1) added to release 1's: the NUMA
# fields, the claim the destination returns and the convergence policy.
# The guest's CPU as it migrates (numamig.cpumodel.GuestCPU), which the
# source reads from the guest's domain XML: the conductor filters
# candidates by it and the destination's precheck compares it.
GUEST_CPU_FIELDS = ('guest_cpu_mode', 'guest_cpu_model',
                    'guest_cpu_features', 'guest_cpu_disabled')
RELEASE_2_FIELDS = NUMA_FIELDS + ('migration_context',
                                  'convergence_policy') + GUEST_CPU_FIELDS
RELEASE_2_VERSION = '1.1'


@base.register
class LiveMigrateData(base.NumamigObject):
    """Migration parameters agreed between source and destination."""

    # Version 1.0 - Release 1: Initial version (the release before
    #              NUMA-aware live migration)
    # Version 1.1 - Release 2: Added dst_numa_info,
    #              src_supports_numa_live_migration and
    #              dst_supports_numa_live_migration; migration_context
    #              (MigrationContext 1.1): the destination returns the
    #              claim it took for the conductor to record, instead of
    #              recording it itself; convergence_policy: the policy the
    #              conductor chose for the migration, which the source
    #              runs it under; guest_cpu_* (the guest's CPU, from the
    #              source) (RELEASE_2_FIELDS)
    VERSION = RELEASE_2_VERSION

    obj_relationships = {'dst_numa_info': [(RELEASE_2_VERSION, '1.0')],
                         'migration_context': [(RELEASE_2_VERSION, '1.1')]}

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
        # before the migration may start; only in the destination's
        # answer to the conductor, never sent on.
        'migration_context': fields.ObjectField(
            'MigrationContext', nullable=True, default=None),
        # The convergence policy's name (numamig.convergence.policy); None:
        # the source chooses (flavor, image, its default), as in release 1.
        'convergence_policy': fields.StringField(nullable=True,
                                                 default=None),
        # The guest's CPU mode (host-passthrough, host-model, custom,
        # maximum; None: the hypervisor's default, or not told), model and
        # required and refused features, set by the source.
        'guest_cpu_mode': fields.StringField(nullable=True, default=None),
        'guest_cpu_model': fields.StringField(nullable=True, default=None),
        'guest_cpu_features': fields.ListOfStringsField(default=[]),
        'guest_cpu_disabled': fields.ListOfStringsField(default=[]),
    }

    def guest_cpu(self):
        """The cpumodel.GuestCPU the source told, or None (not told: an
        older source, or a driver that cannot tell)."""
        mode = self.get('guest_cpu_mode')
        if mode is None and not self.get('guest_cpu_model'):
            return None
        return cpumodel.GuestCPU(
            mode=mode, model=self.get('guest_cpu_model'),
            features=frozenset(self.get('guest_cpu_features') or ()),
            disabled=frozenset(self.get('guest_cpu_disabled') or ()))

    def set_guest_cpu(self, guest):
        """Carry ``guest`` (a cpumodel.GuestCPU, or None)."""
        if guest is None or guest.mode is None:
            return
        self.guest_cpu_mode = guest.mode
        self.guest_cpu_model = guest.model
        self.guest_cpu_features = sorted(guest.features)
        self.guest_cpu_disabled = sorted(guest.disabled)

    def obj_make_compatible(self, primitive, target_version):
        super().obj_make_compatible(primitive, target_version)
        target = versionutils.convert_version_to_tuple(target_version)
        if target < versionutils.convert_version_to_tuple(RELEASE_2_VERSION):
            # Release 1 took no claim (nothing to record), chooses its own
            # (timer-based) convergence, and must see no NUMA flag.
            for name in RELEASE_2_FIELDS:
                primitive.pop(name, None)

    def _validate(self):
        if self.get('bandwidth_mib', 0) < 0:
            raise self.invalid(
                f"bandwidth_mib must not be negative, got "
                f"{self.bandwidth_mib}")
        if self.source_host == self.dest_host:
            raise self.invalid(
                f"source and destination are both {self.source_host}")
