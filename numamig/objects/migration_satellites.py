"""Satellite records of a migration: objects of their own, not fields.

A migration's core record (numamig.objects.migration.Migration) is the
most shared object numamig has: every agent of both releases reads it
through the records API, the operators' API answers with it, and its
version is in every manifest. What a feature learns about one migration
(what was reclaimed to place it, where its threads ran, ...) is read by
operators and tools only, so it lives here, one object per concern,
keyed by the migration's uuid: a feature that adds to one of them bumps
that object alone, and agents reading Migration never see the change.

Agents read two of them, and only when they resume a post-copy that
stopped (numamig.compute.postcopy_paused): the convergence policy the
run chose and the recovery history so far (AGENT_SATELLITES, through the
records API's ``migration_get_with_satellites``, with the migration in
one round trip). A change to those two is a change to the records API
too; a change to any other is not.

They are stored in the migration's row (numamig.db.migration_satellites
reads them from there) and read through the operators' API
(``migration_get_satellites``), by name, so that a client only ever asks
for the ones it knows. SATELLITES maps each name to its class; a new
satellite is a class here, a name there and its read in the database
module.
"""

from oslo_versionedobjects import fields

from numamig.objects import base
from numamig.objects import fields as nm_fields

# What was reclaimed from other guests' virtio-mem devices to place the
# guest on its destination, one entry per device: the host and host
# node, the guest and its guest cell, the device's requested size before
# and as asked (MiB), what the guest reported plugged after, what the
# host stopped holding, and the outcome (RECLAIM_OUTCOMES). Values are
# text (a dict of strings on the wire); numbers are MiB.
MEMORY_RECLAIM_KEYS = ('host', 'host_node', 'instance_uuid', 'cell',
                       'before_mb', 'after_mb', 'current_mb', 'released_mb',
                       'outcome')
# kept: the claim succeeded, the guest keeps its smaller size; given
# back: the reclaim fell short or the host still refused, its size was
# set back; not given back: setting it back failed or timed out (the
# entry says what it has); refused: the hypervisor refused to resize
# the device, nothing was taken.
RECLAIM_OUTCOMES = ('kept', 'given back', 'not given back', 'refused')
MAX_RECLAIM_ENTRIES = 256


@base.register
class MigrationReclaim(base.NumamigObject):
    """The virtio-mem memory reclaimed from other guests to place one
    migration's guest ([virtio_mem] placement_reclaim)."""

    # Version 1.0 - Release 2: Initial version (Migration.memory_reclaim
    #              of release 2's development)
    VERSION = '1.0'

    fields = {
        'migration_uuid': fields.UUIDField(),
        # See MEMORY_RECLAIM_KEYS; empty: nothing was reclaimed for it.
        'entries': fields.ListOfDictOfNullableStringsField(default=[]),
    }

    def _validate(self):
        entries = self.get('entries') or []
        if len(entries) > MAX_RECLAIM_ENTRIES:
            raise self.invalid(f"memory reclaim: {len(entries)} entries, "
                               f"at most {MAX_RECLAIM_ENTRIES}")
        for entry in entries:
            unknown = sorted(set(entry) - set(MEMORY_RECLAIM_KEYS))
            if unknown or entry.get('outcome') not in RECLAIM_OUTCOMES:
                raise self.invalid(
                    f"memory reclaim entry {entry}: keys must be some of "
                    f"{', '.join(MEMORY_RECLAIM_KEYS)} and the outcome one "
                    f"of {', '.join(RECLAIM_OUTCOMES)}")


@base.register
class MigrationThreads(base.NumamigObject):
    """Where one migration's own QEMU threads ran on each host."""

    # Version 1.0 - Release 2: Initial version (Migration.migration_threads
    #              of release 2's development)
    VERSION = '1.0'

    fields = {
        'migration_uuid': fields.UUIDField(),
        # {'source': {...}, 'dest': {...}}, a side per host that recorded
        # it (shape and bounds: numamig.objects.migration_threads); empty:
        # neither did.
        'sides': nm_fields.MigrationThreadsField(default={}),
    }


# The pre-flight convergence prediction's fields, as
# numamig.convergence.predict answers them: its outcome, the predicted
# time and downtime (ms) and the guest's dirty rate it used (bytes/s).
PREDICTION_FIELDS = ('prediction', 'predicted_elapsed_ms',
                     'predicted_downtime_ms', 'sampled_dirty_rate')


@base.register
class MigrationPrediction(base.NumamigObject):
    """The pre-flight convergence prediction of one migration ([conductor]
    convergence_prediction); every field None where none was made."""

    # Version 1.0 - Release 2: Initial version (Migration.prediction,
    #              predicted_elapsed_ms, predicted_downtime_ms and
    #              sampled_dirty_rate of release 2's development)
    VERSION = '1.0'

    fields = {
        'migration_uuid': fields.UUIDField(),
        # numamig.convergence.predict's outcome (at most 32 characters).
        'prediction': fields.StringField(nullable=True, default=None),
        'predicted_elapsed_ms': fields.IntegerField(nullable=True,
                                                    default=None),
        'predicted_downtime_ms': fields.IntegerField(nullable=True,
                                                     default=None),
        # The guest's dirty rate the prediction used, bytes per second.
        'sampled_dirty_rate': fields.IntegerField(nullable=True,
                                                  default=None),
    }

    def _validate(self):
        name = self.get('prediction')
        if name is not None and not 0 < len(name) <= 32:
            raise self.invalid(f"prediction {name!r}: 1 to 32 characters")
        for field in PREDICTION_FIELDS[1:]:
            value = self.get(field)
            if value is not None and value < 0:
                raise self.invalid(f"{field} {value}: negative")


# How the run converged: the policy chosen for it (the request's, the
# flavor's, the image's or the default; then the one the source ran
# under) and what that policy did, or (observe-only) would have done,
# in order. The names are the migrations columns and the keys of a
# run's result (numamig.virt.driver.MigrationResult) that carry them.
CONVERGENCE_FIELDS = ('convergence_policy', 'convergence_actions')
MAX_POLICY_NAME = 64
MAX_ACTIONS = 40
MAX_ACTION_LENGTH = 300


@base.register
class MigrationConvergence(base.NumamigObject):
    """How one migration converged: its convergence policy and what the
    policy did ([libvirt] live_migration_policies, numamig.convergence)."""

    # Version 1.0 - Release 2: Initial version (Migration.
    #              convergence_policy and convergence_actions of release
    #              2's development)
    VERSION = '1.0'

    fields = {
        'migration_uuid': fields.UUIDField(),
        # None: none chosen yet (a migration recorded by release 1).
        'policy': fields.StringField(nullable=True, default=None),
        # None: the source has not reported (or is of release 1).
        'actions': fields.ListOfStringsField(nullable=True, default=None),
    }

    def _validate(self):
        name = self.get('policy')
        if name is not None and not 1 <= len(name) <= MAX_POLICY_NAME:
            raise self.invalid(f"convergence policy name of {len(name)} "
                               f"characters (1-{MAX_POLICY_NAME})")
        actions = self.get('actions') or []
        if len(actions) > MAX_ACTIONS or any(
                len(a) > MAX_ACTION_LENGTH for a in actions):
            raise self.invalid(
                f"convergence actions: at most {MAX_ACTIONS} of at most "
                f"{MAX_ACTION_LENGTH} characters each")


# The post-copy recovery history: when the migration stream broke during
# post-copy, each resume attempt and its outcome
# (numamig.convergence.recovery), as the source reported it. The name is
# the migrations column and the key of a run's result.
RECOVERY_FIELDS = ('postcopy_recovery',)
MAX_RECOVERY_EVENTS = 40
# An event: its kind, when, the attempt and a detail (text; the attempt
# may come as an integer).
MAX_EVENT_KEYS = 4
MAX_EVENT_TEXT = 300


@base.register
class MigrationRecovery(base.NumamigObject):
    """The recovery of one migration whose stream broke in post-copy
    ([libvirt] live_migration_postcopy_recovery_*)."""

    # Version 1.0 - Release 2: Initial version (Migration.
    #              postcopy_recovery of release 2's development)
    VERSION = '1.0'

    fields = {
        'migration_uuid': fields.UUIDField(),
        # [{event, at, attempt, detail}], oldest first; None: the stream
        # never broke in post-copy.
        'events': fields.ListOfDictOfNullableStringsField(nullable=True,
                                                          default=None),
    }

    def _validate(self):
        events = self.get('events') or []
        if len(events) > MAX_RECOVERY_EVENTS:
            raise self.invalid(f"post-copy recovery history of "
                               f"{len(events)} events (at most "
                               f"{MAX_RECOVERY_EVENTS})")


# The destination's verification of a guest's passed-through devices
# once it arrived (numamig.compute.devices.plug_claimed): per device,
# its alias, host PCI address, guest cell, the host nodes of that guest
# cell ("1" or "0,1"), the node the hypervisor reports for the device
# (empty: none reported), whether it is plugged and whether it is on one
# of those nodes ("yes"/"no"). Values are text (a dict of strings on the
# wire).
DEVICE_KEYS = ('alias', 'address', 'guest_cell', 'cell_nodes',
               'device_node', 'plugged', 'local')
# A guest holds a few devices; the bound keeps a host from making the
# record grow without bound.
MAX_DEVICES = 64
MAX_DEVICE_TEXT = 64
DEVICE_COLUMN = 'migration_devices'


def device_entry(item):
    """One DEVICE_KEYS entry (text) of a driver's verification item
    (numamig.virt.driver.verify_device_affinity's dict)."""
    nodes = item.get('cell_nodes') or []
    node = item.get('device_node')
    return {
        'alias': str(item['alias']), 'address': str(item['address']),
        'guest_cell': str(int(item['guest_cell'])),
        'cell_nodes': ','.join(str(int(n)) for n in nodes),
        'device_node': None if node is None else str(int(node)),
        'plugged': 'yes' if item.get('present') else 'no',
        'local': 'yes' if item.get('present') and item.get('local')
        else 'no'}


def devices_problem(host, devices):
    """Why (host, devices) is not a MigrationDevices record, or None."""
    if not isinstance(host, str) or not 0 < len(host) <= 255:
        return "host must be a name of 1 to 255 characters"
    if not isinstance(devices, list) or not devices or \
            len(devices) > MAX_DEVICES:
        return f"devices must be a list of 1 to {MAX_DEVICES} entries"
    for entry in devices:
        if not isinstance(entry, dict) or set(entry) != set(DEVICE_KEYS):
            return f"each device must have exactly {', '.join(DEVICE_KEYS)}"
        for key, value in entry.items():
            if value is None and key == 'device_node':
                continue
            if not isinstance(value, str) or len(value) > MAX_DEVICE_TEXT:
                return (f"device {key} must be text of at most "
                        f"{MAX_DEVICE_TEXT} characters")
        if entry['plugged'] not in ('yes', 'no') or \
                entry['local'] not in ('yes', 'no'):
            return "plugged and local must be 'yes' or 'no'"
    return None


@base.register
class MigrationDevices(base.NumamigObject):
    """The destination's verification, after the arrival, that each of
    a guest's passed-through devices is plugged and on the host node of
    its guest cell (doc/source/device-migration.rst)."""

    # Version 1.0 - Release 2: Initial version (issue 41)
    VERSION = '1.0'

    fields = {
        'migration_uuid': fields.UUIDField(),
        # The destination that verified; None: nothing verified (the
        # guest held no device, or the destination has not reported).
        'host': fields.StringField(nullable=True, default=None),
        # DEVICE_KEYS per device, in the claim's order.
        'devices': fields.ListOfDictOfNullableStringsField(default=[]),
    }

    def _validate(self):
        devices = self.get('devices') or []
        if devices and devices_problem(self.get('host'), devices):
            raise self.invalid(
                f"device verification: "
                f"{devices_problem(self.get('host'), devices)}")

    @property
    def all_local(self):
        """Every device plugged and local (None: nothing verified)."""
        if not self.get('devices'):
            return None
        return all(d['local'] == 'yes' for d in self.devices)


# Name (what a client asks for) -> class.
SATELLITES = {
    'reclaim': MigrationReclaim,
    'threads': MigrationThreads,
    'prediction': MigrationPrediction,
    'convergence': MigrationConvergence,
    'recovery': MigrationRecovery,
    'devices': MigrationDevices,
}
# The ones agents read (the records API's migration_get_with_satellites).
AGENT_SATELLITES = ('convergence', 'recovery')
