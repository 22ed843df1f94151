"""ComputeNodeReport: what a compute agent periodically tells the conductor."""

from oslo_versionedobjects import fields

from numamig.objects import base


@base.register
class ComputeNodeReport(base.NumamigObject):
    """A host's topology with usage, its version and its guest fingerprint.

    ``fingerprint`` is a podfingerprint v001 string over the guests the
    host runs or holds claims for; the scheduler compares it with the set
    it expects to know when a report reflects its in-flight placements.
    """

    # Version 1.0: Initial version
    VERSION = '1.0'

    obj_relationships = {'topology': [('1.0', '1.0')]}

    fields = {
        'host': fields.StringField(),
        'hypervisor_uri': fields.StringField(),
        'hypervisor_type': fields.StringField(default='qemu'),
        'topology': fields.ObjectField('HostNUMATopology'),
        'service_version': fields.IntegerField(),
        'fingerprint': fields.StringField(),
        'reported_at': fields.DateTimeField(),
    }

    def _validate(self):
        if self.service_version < 1:
            raise self.invalid(
                f"service_version must be at least 1, got "
                f"{self.service_version}")
        if not self.fingerprint.startswith('pfp0v001'):
            raise self.invalid(
                f"fingerprint {self.fingerprint!r} is not a podfingerprint "
                f"v001 string")
