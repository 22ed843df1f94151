"""Migration: one live migration's record, status history and progress."""

from oslo_utils import versionutils
from oslo_versionedobjects import fields

from numamig.objects import base
from numamig.objects import fields as nm_fields

STATUS = nm_fields.MigrationStatus

# How the migration's run went, as the source reported it. None where
# nothing was reported: the run has not ended, never started, or its
# source is of a release that did not report it.
RESULT_FIELDS = ('elapsed_ms', 'downtime_ms', 'emulated', 'post_copy',
                 'paused')

# Admission order: a waiting migration of a higher priority is admitted
# before any of a lower one. The names are what operators type;
# any integer in [0, MAX_PRIORITY] is accepted.
PRIORITIES = {'routine': 0, 'maintenance': 50, 'drain': 100}
MAX_PRIORITY = 100
# Fields of the admission queue; queue_position is worked out when a
# migration is read, never stored.
QUEUE_FIELDS = ('priority', 'admitted_at', 'queue_position')
# Release 2's version of the object: it brought RELEASE_2_FIELDS and
# status postcopy-paused (the guest split between the hosts after its
# post-copy recovery gave up, both claims kept). A peer reading release
# 1's version (1.0) gets none of these fields, and ``running`` instead of
# that status (see MigrationStatus.OLDER); the status history entries
# are MigrationStatusChange 1.1 for the same reason.
RELEASE_2_VERSION = '1.1'
RELEASE_2_FIELDS = RESULT_FIELDS + QUEUE_FIELDS
_PRIORITY_NAMES = ', '.join(f'{k}={v}' for k, v in PRIORITIES.items())

# Status changes a migration may make. Anything else is a bug or a race
# between conductor workers, and is refused instead of recorded.
# The table lives with the statuses, which derive their groups from it.
ALLOWED_TRANSITIONS = STATUS.TRANSITIONS


def can_transition(old, new):
    """Whether a migration in status ``old`` may move to ``new``."""
    return new in ALLOWED_TRANSITIONS.get(old, set())


@base.register
class MigrationStatusChange(base.NumamigObject):
    """One entry of a migration's status history."""

    # Version 1.0 - Release 1: Initial version
    # Version 1.1 - Release 2: status postcopy-paused
    VERSION = '1.1'

    obj_enum_values = {'status': {'1.1': (STATUS.POSTCOPY_PAUSED,)}}

    fields = {
        'status': nm_fields.MigrationStatusField(),
        'changed_at': fields.DateTimeField(),
        'detail': fields.StringField(nullable=True, default=None),
    }


@base.register
class Migration(base.NumamigObject):
    """A live migration as the conductor records it."""

    # Version 1.0 - Release 1: Initial version
    # Version 1.1 - Release 2: Added elapsed_ms, downtime_ms, emulated,
    #              post_copy and paused (the result of the run); priority,
    #              admitted_at and queue_position (the admission queue);
    #              status postcopy-paused, and history as
    #              MigrationStatusChange 1.1 (RELEASE_2_FIELDS,
    #              RELEASE_2_VERSION). What was reclaimed to place it,
    #              where its threads ran, the pre-flight convergence
    #              prediction, how the run converged and its post-copy
    #              recovery are objects of their own
    #              (numamig.objects.migration_satellites), not fields.
    VERSION = RELEASE_2_VERSION

    obj_relationships = {'history': [('1.0', '1.0'),
                                     (RELEASE_2_VERSION, '1.1')]}
    obj_enum_values = {'status': {RELEASE_2_VERSION:
                                  (STATUS.POSTCOPY_PAUSED,)}}

    fields = {
        'uuid': fields.UUIDField(),
        'instance_uuid': fields.UUIDField(),
        'source_host': fields.StringField(),
        'dest_host': fields.StringField(nullable=True, default=None),
        'requested_host': fields.StringField(nullable=True, default=None),
        'status': nm_fields.MigrationStatusField(default=STATUS.ACCEPTED),
        'memory_total': fields.IntegerField(default=0),
        'memory_processed': fields.IntegerField(default=0),
        'memory_remaining': fields.IntegerField(default=0),
        'disk_total': fields.IntegerField(default=0),
        'disk_processed': fields.IntegerField(default=0),
        'disk_remaining': fields.IntegerField(default=0),
        'created_at': fields.DateTimeField(nullable=True, default=None),
        'updated_at': fields.DateTimeField(nullable=True, default=None),
        'error': fields.StringField(nullable=True, default=None),
        # Hosts tried as destination and why each refused, in order.
        'refused_hosts': fields.DictOfStringsField(default={}),
        'history': fields.ListOfObjectsField('MigrationStatusChange',
                                             default=[]),
        # How long the run took, where it ran (the hypervisor's job for a
        # native migration, the destination's define and start for an
        # emulated one), in milliseconds.
        'elapsed_ms': fields.IntegerField(nullable=True, default=None),
        # How long the guest stood still, as the hypervisor measured it;
        # None also where it did not say (emulated runs, old hypervisors).
        'downtime_ms': fields.IntegerField(nullable=True, default=None),
        # True: numamig carried the guest over itself because the
        # hypervisor cannot migrate (the libvirt test driver).
        'emulated': fields.BooleanField(nullable=True, default=None),
        # How a forced completion made the run converge.
        'post_copy': fields.BooleanField(nullable=True, default=None),
        'paused': fields.BooleanField(nullable=True, default=None),
        # Higher first; see PRIORITIES.
        'priority': fields.IntegerField(default=0),
        # When a conductor worker took it from the queue; None while it
        # waits there.
        'admitted_at': fields.DateTimeField(nullable=True, default=None),
        # 1 for the next to be admitted, while it waits; else None.
        'queue_position': fields.IntegerField(nullable=True, default=None),
    }

    def obj_make_compatible(self, primitive, target_version):
        super().obj_make_compatible(primitive, target_version)
        target = versionutils.convert_version_to_tuple(target_version)
        if target < versionutils.convert_version_to_tuple(RELEASE_2_VERSION):
            for name in RELEASE_2_FIELDS:
                primitive.pop(name, None)

    @property
    def in_progress(self):
        return self.status in STATUS.IN_PROGRESS

    @property
    def waiting(self):
        """Whether it waits in the admission queue (not yet admitted)."""
        return self.status == STATUS.ACCEPTED and \
            self.get('admitted_at') is None

    @property
    def has_result(self):
        """Whether the source reported how the run went."""
        return any(self.get(name) is not None for name in RESULT_FIELDS)

    def _validate(self):
        base.require_nonnegative(
            self, 'memory_total', 'memory_processed', 'memory_remaining',
            'disk_total', 'disk_processed', 'disk_remaining',
            'elapsed_ms', 'downtime_ms')
        if not 0 <= self.get('priority', 0) <= MAX_PRIORITY:
            raise self.invalid(
                f"priority {self.priority} is outside 0-{MAX_PRIORITY} "
                f"(names: {_PRIORITY_NAMES})")
        position = self.get('queue_position')
        if position is not None and position < 1:
            raise self.invalid(f"queue position {position} is below 1")
        if self.get('dest_host') and self.dest_host == self.source_host:
            raise self.invalid(
                f"source and destination are both {self.source_host}")
