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
    def from_record(cls, migration, detail=None):
        """The payload of ``migration`` (a Migration as written)."""
        values = {name: migration.get(name) for name in cls.fields
                  if name != 'detail'}
        payload = cls(detail=detail, **values)
        # Whole, not a change set: no 'changes' list in the primitive.
        payload.obj_reset_changes()
        return payload
