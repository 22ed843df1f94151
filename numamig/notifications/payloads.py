"""Notification payloads: versioned objects with a registry of their own.

A consumer reads ``payload['numamig_object.data']`` and checks
``numamig_object.name`` and ``.version``: a new field bumps the minor
version, a change a consumer must notice bumps the major. Samples of
every event live in doc/source/notification_samples/ and a test checks
each emitted notification against its sample.

Payloads are not RPC objects: they have a namespace of their own
(NAMESPACE), so that the RPC APIs' manifests and upgrade rules, which
walk the objects of namespace 'numamig', never carry them.
"""

from oslo_versionedobjects import base as ovo_base
from oslo_versionedobjects import fields

from numamig.objects import fields as nm_fields

NAMESPACE = 'numamig.notifications'


class PayloadRegistry(ovo_base.VersionedObjectRegistry):
    """Registers payloads (in oslo.versionedobjects' one process-wide
    registry, as every object)."""


register = PayloadRegistry.register


def payload_classes():
    """{name: [classes]} of the registered payloads."""
    return {name: classes for name, classes in
            PayloadRegistry.obj_classes().items()
            if classes[0].OBJ_PROJECT_NAMESPACE == NAMESPACE}


class NotificationPayload(ovo_base.VersionedObject):
    """Base of every payload; built from a record with ``from_record``."""

    OBJ_PROJECT_NAMESPACE = NAMESPACE
    OBJ_SERIAL_NAMESPACE = 'numamig_object'


@register
class MigrationPayload(NotificationPayload):
    """A migration as its status change left it.

    Version history:

    * 1.0 - Initial version (release 2).
    """

    VERSION = '1.0'

    fields = {
        'uuid': fields.UUIDField(),
        'instance_uuid': fields.UUIDField(),
        'source_host': fields.StringField(),
        'dest_host': fields.StringField(nullable=True),
        'requested_host': fields.StringField(nullable=True),
        'status': nm_fields.MigrationStatusField(),
        # What the conductor recorded with the change (the status
        # history's detail), and the error of a migration that failed.
        'detail': fields.StringField(nullable=True),
        'error': fields.StringField(nullable=True),
        'priority': fields.IntegerField(),
        'convergence_policy': fields.StringField(nullable=True),
        'convergence_actions': fields.ListOfStringsField(nullable=True),
        'prediction': fields.StringField(nullable=True),
        'memory_total': fields.IntegerField(),
        'memory_processed': fields.IntegerField(),
        'memory_remaining': fields.IntegerField(),
        'elapsed_ms': fields.IntegerField(nullable=True),
        'downtime_ms': fields.IntegerField(nullable=True),
        'post_copy': fields.BooleanField(nullable=True),
        'created_at': fields.DateTimeField(nullable=True),
        'updated_at': fields.DateTimeField(nullable=True),
    }

    @classmethod
    def from_record(cls, migration, detail=None, satellites=None):
        """The payload of ``migration`` (a Migration as written).

        :param satellites: {name: object} of its satellite records, read
            from the row written (numamig.db._rows.Change.satellites):
            ``prediction`` is MigrationPrediction.prediction,
            ``convergence_policy`` and ``convergence_actions``
            MigrationConvergence's policy and actions, no longer fields
            of Migration; None (each) where none was read.
        """
        satellites = satellites or {}
        prediction = satellites.get('prediction')
        convergence = satellites.get('convergence')
        values = {name: migration.get(name) for name in cls.fields
                  if name not in _FROM_SATELLITES}
        payload = cls(
            detail=detail,
            prediction=_value(prediction, 'prediction'),
            convergence_policy=_value(convergence, 'policy'),
            convergence_actions=_value(convergence, 'actions'), **values)
        # Whole, not a change set: no 'changes' list in the primitive.
        payload.obj_reset_changes()
        return payload


# MigrationPayload's fields that are not the Migration's.
_FROM_SATELLITES = ('detail', 'prediction', 'convergence_policy',
                    'convergence_actions')


def _value(record, name):
    return None if record is None else record.get(name)


@register
class DrainPayload(NotificationPayload):
    """A drain or a defragmentation as its change left it, with the
    count of its moves in each state.

    Version history:

    * 1.0 - Initial version (release 2).
    """

    VERSION = '1.0'

    fields = {
        'uuid': fields.UUIDField(),
        'host': fields.StringField(),
        # 'drain' or 'defragment'.
        'kind': fields.StringField(),
        'status': fields.StringField(),
        'parallel': fields.IntegerField(),
        'priority': fields.IntegerField(),
        'error': fields.StringField(nullable=True),
        # {move state: moves}: pending, migrating, completed, failed,
        # cancelled.
        'moves': fields.DictOfIntegersField(),
        'created_at': fields.DateTimeField(nullable=True),
        'ended_at': fields.DateTimeField(nullable=True),
    }

    @classmethod
    def from_record(cls, drain, detail=None):
        """The payload of ``drain`` (numamig.db.drains's dict)."""
        moves = {}
        for move in drain.get('moves') or ():
            moves[move['status']] = moves.get(move['status'], 0) + 1
        payload = cls(
            uuid=drain['uuid'], host=drain['host'], kind=drain['kind'],
            status=drain['status'], parallel=drain['parallel'],
            priority=drain['priority'], error=drain.get('error'),
            moves=moves, created_at=drain.get('created_at'),
            ended_at=drain.get('ended_at'))
        payload.obj_reset_changes()
        return payload


@register
class DrainMovePayload(NotificationPayload):
    """One guest's move of a drain or defragmentation.

    Version history:

    * 1.0 - Initial version (release 2).
    """

    VERSION = '1.0'

    fields = {
        'drain_uuid': fields.UUIDField(),
        'drain_host': fields.StringField(),
        'drain_kind': fields.StringField(),
        'instance_uuid': fields.UUIDField(),
        'name': fields.StringField(),
        # pending (again: 'replanned' in detail), migrating, completed,
        # failed, cancelled.
        'status': fields.StringField(),
        'detail': fields.StringField(nullable=True),
        'source_host': fields.StringField(nullable=True),
        'planned_host': fields.StringField(nullable=True),
        'dest_host': fields.StringField(nullable=True),
        'migration_uuid': fields.UUIDField(nullable=True),
        'attempts': fields.IntegerField(),
        'error': fields.StringField(nullable=True),
    }

    @classmethod
    def from_record(cls, move, detail=None):
        """The payload of ``move`` (numamig.db.drains's move dict with
        its drain's uuid, host and kind)."""
        payload = cls(
            detail=detail, **{name: move.get(name) for name in cls.fields
                              if name != 'detail'})
        payload.obj_reset_changes()
        return payload


@register
class HostMaintenancePayload(NotificationPayload):
    """A host disabled (by an operator or a drain) or enabled again.

    Version history:

    * 1.0 - Initial version (release 2).
    """

    VERSION = '1.0'

    fields = {
        'host': fields.StringField(),
        'disabled': fields.BooleanField(),
        'reason': fields.StringField(nullable=True),
        'disabled_at': fields.DateTimeField(nullable=True),
    }

    @classmethod
    def from_record(cls, maintenance, detail=None):
        """The payload of a numamig.db.compute_nodes.Maintenance."""
        payload = cls(host=maintenance.host,
                      disabled=maintenance.disabled_at is not None,
                      reason=maintenance.reason,
                      disabled_at=maintenance.disabled_at)
        payload.obj_reset_changes()
        return payload


@register
class MemoryChangePayload(NotificationPayload):
    """A virtio-mem memory change: a guest's memory set per node
    (``instance memory set``), memory reclaimed from a host node
    (``host reclaim``) or for a placement ([virtio_mem]
    placement_reclaim).

    Version history:

    * 1.0 - Initial version (release 2).
    """

    VERSION = '1.0'

    fields = {
        'uuid': fields.UUIDField(),
        'host': fields.StringField(),
        # instance-memory-set, host-reclaim or placement-reclaim.
        'operation': fields.StringField(),
        # running, done, partial (some guests refused) or failed.
        'status': fields.StringField(),
        # The request's values, as text (node, size_mb, instance ...).
        'request': fields.DictOfNullableStringsField(),
        # Guests asked, and those that reached their new size.
        'guests': fields.IntegerField(),
        'guests_reached': fields.IntegerField(),
        'error': fields.StringField(nullable=True),
    }

    @classmethod
    def from_record(cls, change, detail=None):
        """The payload of ``change`` (numamig.db.memory_changes's row
        dict)."""
        request = change.get('request') or {}
        result = change.get('result') or {}
        guests = result.get('guests') or []
        payload = cls(
            uuid=change['uuid'], host=change['host'],
            operation=operation_of(request), status=change['status'],
            request={k: None if v is None else str(v)
                     for k, v in request.items()},
            guests=len(guests),
            guests_reached=sum(1 for g in guests if g.get('reached')),
            error=result.get('error'))
        payload.obj_reset_changes()
        return payload


@register
class PolicyActionPayload(NotificationPayload):
    """A convergence policy's action on a migration being copied, sent
    by the source's agent as it happens (the migration's record lists
    the actions only with its result).

    Version history:

    * 1.0 - Initial version (release 2).
    """

    VERSION = '1.0'

    fields = {
        'migration_uuid': fields.UUIDField(),
        'instance_uuid': fields.UUIDField(),
        'source_host': fields.StringField(),
        'dest_host': fields.StringField(nullable=True),
        'policy': fields.StringField(),
        # downtime, auto_converge, post_copy, pause or abort.
        'action': fields.StringField(),
        # applied, failed (the hypervisor refused it; the policy goes on
        # to its next tier) or observed (an observe-only policy).
        'outcome': fields.StringField(),
        # The action as the migration's record lists it.
        'description': fields.StringField(),
    }

    @classmethod
    def from_record(cls, action, detail=None):
        """The payload of ``action`` (numamig.compute.events.PolicyAction)."""
        payload = cls(
            migration_uuid=action.migration_uuid,
            instance_uuid=action.instance_uuid,
            source_host=action.source_host, dest_host=action.dest_host,
            policy=action.policy, action=action.kind,
            outcome=action.outcome, description=action.line)
        payload.obj_reset_changes()
        return payload


@register
class GuardDecisionPayload(NotificationPayload):
    """The migration guard's decision on a migration into a host, read
    from its log by that host's agent: also for migrations numamig did
    not start.

    Version history:

    * 1.0 - Initial version (release 2).
    """

    VERSION = '1.0'

    fields = {
        'host': fields.StringField(),
        'guest': fields.StringField(),
        # As the incoming XML named it ('(unparsed)' for an XML the
        # guard could not read).
        'instance_uuid': fields.StringField(),
        # rewritten or refused.
        'decision': fields.StringField(),
        'reason': fields.StringField(),
        # When, as the guard's log wrote it: the host's local time.
        'decided_at': fields.StringField(),
    }

    @classmethod
    def from_record(cls, decision, detail=None):
        """The payload of ``decision``
        (numamig.compute.events.GuardDecision)."""
        payload = cls(
            host=decision.host, guest=decision.guest,
            instance_uuid=decision.instance_uuid, decision=decision.action,
            reason=decision.reason, decided_at=decision.at)
        payload.obj_reset_changes()
        return payload


@register
class LocalityMovePayload(NotificationPayload):
    """What a host's locality watch did to a floating guest's memory,
    sent by that host's agent as it happens.

    Version history:

    * 1.0 - Initial version (release 2).
    """

    VERSION = '1.0'

    fields = {
        'host': fields.StringField(),
        'instance_uuid': fields.StringField(),
        # moved, failed (libvirt refused) or flapping (moved its budget
        # of times within the flap window: left alone from now on).
        'outcome': fields.StringField(),
        # The host node its memory was (to be) moved to.
        'target_node': fields.IntegerField(nullable=True),
        # 4 KiB pages of its memory that were remote from its vCPUs.
        'pages': fields.IntegerField(),
        'remote_share': fields.FloatField(),
        'reason': fields.StringField(),
    }

    @classmethod
    def from_record(cls, move, detail=None):
        """The payload of ``move`` (numamig.compute.locality.Move)."""
        payload = cls(
            host=move.host, instance_uuid=move.instance_uuid,
            outcome=move.outcome, target_node=move.target_node,
            pages=move.pages, remote_share=move.remote_share,
            reason=move.reason)
        payload.obj_reset_changes()
        return payload


@register
class DeviceLateReleasePayload(NotificationPayload):
    """A passed-through device a guest released after its migration's
    unplug had timed out (the migration failed, the guest stayed on its
    source), and whether the source plugged it back; sent by that host's
    agent as it happens.

    Version history:

    * 1.0 - Initial version (release 2).
    """

    VERSION = '1.0'

    fields = {
        'host': fields.StringField(),
        'instance_uuid': fields.StringField(),
        # The migration whose unplug timed out.
        'migration_uuid': fields.StringField(),
        # The host PCI address and libvirt's alias of it in the guest.
        'address': fields.StringField(),
        'alias': fields.StringField(nullable=True),
        # replugged, or lost (the guest runs without it).
        'outcome': fields.StringField(),
        'reason': fields.StringField(),
    }

    @classmethod
    def from_record(cls, release, detail=None):
        """The payload of ``release``
        (numamig.compute.events.DeviceLateRelease)."""
        payload = cls(
            host=release.host, instance_uuid=release.instance_uuid,
            migration_uuid=release.migration_uuid, address=release.address,
            alias=release.alias, outcome=release.outcome,
            reason=release.reason)
        payload.obj_reset_changes()
        return payload


@register
class LiveMigratablePayload(NotificationPayload):
    """A guest's standing live-migratable answer changed
    (doc/source/live-migratable.rst), sent by the conductor worker that
    recorded the change.

    Version history:

    * 1.0 - Initial version (release 2).
    """

    VERSION = '1.0'

    fields = {
        'instance_uuid': fields.StringField(),
        # yes, degraded or no; the previous answer (None: the first).
        'status': fields.StringField(),
        'previous_status': fields.StringField(nullable=True),
        # Each reason's kind (no-host-fits, cpu-model, only-maintenance,
        # devices, policy, guard) and its line, in the same order.
        'reason_kinds': fields.ListOfStringsField(),
        'reasons': fields.ListOfStringsField(),
        # A host the answer rests on, or None.
        'witness': fields.StringField(nullable=True),
    }

    @classmethod
    def from_record(cls, change, detail=None):
        """The payload of ``change`` (numamig.db.live_migratable's
        change dict)."""
        payload = cls(
            instance_uuid=change['instance_uuid'], status=change['status'],
            previous_status=change['previous_status'],
            reason_kinds=[r['kind'] for r in change['reasons']],
            reasons=[r['detail'] for r in change['reasons']],
            witness=change['witness'])
        payload.obj_reset_changes()
        return payload


@register
class DevicesVerifiedPayload(NotificationPayload):
    """The destination of a migration verified, after the arrival, that
    each of the guest's passed-through devices is plugged and on the host
    node of its guest cell (doc/source/device-migration.rst), sent by the
    conductor worker that recorded the verification.

    Version history:

    * 1.0 - Initial version (release 2).
    """

    VERSION = '1.0'

    fields = {
        'instance_uuid': fields.StringField(),
        'migration_uuid': fields.StringField(),
        # The destination that verified.
        'host': fields.StringField(),
        # Every device plugged and on its guest cell's host node.
        'all_local': fields.BooleanField(),
        # Per device: alias, address, guest_cell, cell_nodes,
        # device_node, plugged, local (numamig.objects.
        # migration_satellites.DEVICE_KEYS).
        'devices': fields.ListOfDictOfNullableStringsField(),
        # One line per device not plugged or not local, in the same
        # order (empty when all_local).
        'problems': fields.ListOfStringsField(),
    }

    @classmethod
    def from_record(cls, record, detail=None):
        """The payload of ``record`` (numamig.db.migration_satellites.
        record_devices's change dict)."""
        devices = record['devices']
        payload = cls(
            instance_uuid=record['instance_uuid'],
            migration_uuid=record['migration_uuid'], host=record['host'],
            all_local=all(d['local'] == 'yes' for d in devices),
            devices=[dict(d) for d in devices],
            problems=[device_problem(d) for d in devices
                      if d['local'] != 'yes'])
        payload.obj_reset_changes()
        return payload


def device_problem(device):
    """One line saying why a verified device is not where it belongs."""
    where = (f"device {device['alias']} {device['address']} of guest "
             f"cell {device['guest_cell']} (host nodes "
             f"{device['cell_nodes'] or 'unknown'})")
    if device['plugged'] != 'yes':
        return f"{where}: not plugged"
    return f"{where}: on host node {device['device_node'] or 'unknown'}"


def operation_of(request):
    """Which memory change ``request`` asked for."""
    if 'placement' in request:
        return 'placement-reclaim'
    if 'instance' in request:
        return 'instance-memory-set'
    return 'host-reclaim'
