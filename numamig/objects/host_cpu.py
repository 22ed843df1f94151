"""HostCPU: the CPU a compute host offers its guests, as libvirt sees it."""

from oslo_versionedobjects import fields

from numamig import cpumodel
from numamig.objects import base


@base.register
class HostCPU(base.NumamigObject):
    """A host's CPU, for the scheduler's and the destination's CPU checks.

    From libvirt's host capabilities (``<host><cpu>``): ``arch``,
    ``vendor``, ``model`` and the ``features`` listed beyond that model.
    From its domain capabilities (``getDomainCapabilities``): the
    host-model expansion a guest of mode host-model gets here
    (``host_model`` and its ``host_model_features`` required and
    ``host_model_disabled``), the custom models usable here
    (``custom_models``) and, per model not usable, the features that
    block it where libvirt names them (``model_blockers``). Domain
    capabilities are empty where the hypervisor has none (libvirt's test
    driver): the checks then judge by the host capabilities alone
    (numamig.cpumodel says where that is exact).

    Feature lists are sorted, so that two reports that say the same are
    the same text (numamig.db.compute_nodes.content_digest).
    """

    # Version 1.0 - Release 2: Initial version
    VERSION = '1.0'

    fields = {
        'arch': fields.StringField(nullable=True, default=None),
        'vendor': fields.StringField(nullable=True, default=None),
        'model': fields.StringField(nullable=True, default=None),
        'features': fields.ListOfStringsField(default=[]),
        'host_model': fields.StringField(nullable=True, default=None),
        'host_model_features': fields.ListOfStringsField(default=[]),
        'host_model_disabled': fields.ListOfStringsField(default=[]),
        'custom_models': fields.ListOfStringsField(default=[]),
        'model_blockers': fields.DictOfListOfStringsField(default={}),
    }

    def _validate(self):
        for name in ('features', 'host_model_features',
                     'host_model_disabled', 'custom_models'):
            values = self.get(name, [])
            if list(values) != sorted(set(values)):
                raise self.invalid(
                    f"{name} must be sorted and without repeats")


@base.register
class InstanceCPU(base.NumamigObject):
    """One running guest's CPU as it would migrate, in its host's report.

    What a source reads for a migration check (the migratable domain
    XML: host-model expanded to what the guest runs; numamig.cpumodel.
    GuestCPU), reported so that the conductor's standing live-migratable
    answer can judge the guest's CPU against every host before any
    migration is asked for. ``mode`` None: the hypervisor's default CPU.
    Feature lists are sorted (as HostCPU's).
    """

    # Version 1.0 - Release 2: Initial version
    VERSION = '1.0'

    fields = {
        'instance_uuid': fields.StringField(),
        'mode': fields.StringField(nullable=True, default=None),
        'model': fields.StringField(nullable=True, default=None),
        'features': fields.ListOfStringsField(default=[]),
        'disabled': fields.ListOfStringsField(default=[]),
    }

    @classmethod
    def of(cls, instance_uuid, guest):
        """The report's entry for ``guest`` (a cpumodel.GuestCPU)."""
        return cls(instance_uuid=instance_uuid, mode=guest.mode,
                   model=guest.model, features=sorted(guest.features),
                   disabled=sorted(guest.disabled))

    def guest_cpu(self):
        """The cpumodel.GuestCPU the CPU checks read."""
        return cpumodel.GuestCPU(
            mode=self.get('mode'), model=self.get('model'),
            features=frozenset(self.get('features', [])),
            disabled=frozenset(self.get('disabled', [])))

    def _validate(self):
        for name in ('features', 'disabled'):
            values = self.get(name, [])
            if list(values) != sorted(set(values)):
                raise self.invalid(
                    f"{name} must be sorted and without repeats")
