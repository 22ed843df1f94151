"""HostLocality: what a host's locality watch saw and did at its last look."""

from oslo_versionedobjects import fields

from numamig.objects import base
from numamig.objects import fields as nm_fields


@base.register
class GuestLocality(base.NumamigObject):
    """One running guest as the locality watch saw it.

    ``memory_mb``: {host node: MiB} of its memory (the kernel's
    numa_maps of its QEMU). ``vcpu_nodes``: {host node: vCPUs that last
    ran there}. ``home_node``: the node most of its vCPUs ran on (None
    when unknown); ``remote_share``: the share of its memory elsewhere.
    ``state``: numamig.numa.locality's states, or ``move-failed``;
    ``reason``: one line for the operator. ``moves``: how often the
    watch moved it within its flap window.
    """

    # Version 1.0 - Release 2: Initial version
    VERSION = '1.0'

    fields = {
        'instance_uuid': fields.StringField(),
        'memory_mb': nm_fields.IntToIntField(default={}),
        'vcpu_nodes': nm_fields.IntToIntField(default={}),
        'home_node': fields.IntegerField(nullable=True, default=None),
        'remote_share': fields.FloatField(default=0.0),
        'state': fields.StringField(),
        'reason': fields.StringField(default=''),
        'moves': fields.IntegerField(default=0),
    }

    def _validate(self):
        if not 0.0 <= self.remote_share <= 1.0:
            raise self.invalid(f"remote_share {self.remote_share} is not "
                               f"in [0, 1]")
        base.require_nonnegative(self, 'moves')


@base.register
class HostLocality(base.NumamigObject):
    """A host's locality watch at its last look.

    ``policy``: off, report or act ([locality] policy). ``measured_at``:
    when it last looked (None: never, or the policy is off).
    ``remote_share``: the share of the measured guests' memory that is
    remote from their vCPUs (None: nothing measured). ``moves_total``
    and ``pages_moved_total``: what it moved since the agent started.
    """

    # Version 1.0 - Release 2: Initial version
    VERSION = '1.0'

    obj_relationships = {'guests': [('1.0', '1.0')]}

    fields = {
        'policy': fields.StringField(),
        'measured_at': fields.DateTimeField(nullable=True, default=None),
        'remote_share': fields.FloatField(nullable=True, default=None),
        'guests': fields.ListOfObjectsField('GuestLocality', default=[]),
        'moves_total': fields.IntegerField(default=0),
        'pages_moved_total': fields.IntegerField(default=0),
    }

    POLICIES = ('off', 'report', 'act')

    def _validate(self):
        if self.policy not in self.POLICIES:
            raise self.invalid(f"policy must be one of "
                               f"{', '.join(self.POLICIES)}, got "
                               f"{self.policy!r}")
        base.require_nonnegative(self, 'moves_total', 'pages_moved_total')
