"""ComputeNodeReport: what a compute agent periodically tells the conductor."""

from oslo_utils import versionutils
from oslo_versionedobjects import fields

from numamig.objects import base


@base.register
class ComputeNodeReport(base.NumamigObject):
    """A host's topology with usage, its version and its guest fingerprint.

    ``fingerprint`` is a podfingerprint v001 string over the guests the
    host runs or holds claims for; the scheduler compares it with the set
    it expects to know when a report reflects its in-flight placements.

    ``migration_guard`` says whether the host's destination-side
    migration guard checks incoming migrations: 'on', 'off' or 'failed'
    (numamig.virt.libvirt.guard_install); None in a report of an agent
    older than the guard.

    ``cpu`` is the host's CPU (HostCPU: libvirt's host CPU and domain
    capabilities) the CPU checks read (numamig.cpumodel); None in a report
    of a release-1 agent, which the checks treat as unknown, never as
    unable to run a guest.

    ``guest_cpus`` are the CPUs of the guests running here
    (InstanceCPU: each as it would migrate, read once per guest), which
    the conductor's standing live-migratable answer judges against every
    host's ``cpu``; empty from an agent older than them or a driver that
    cannot tell a guest's CPU.

    ``cpu_power`` is the host's CPU power management per cell
    (CPUPowerState: which dedicated pCPUs are powered down); None in a
    report of an agent that has none to report.

    ``locality`` is what the host's locality watch saw at its last look
    (HostLocality: each floating guest's memory per node, where its vCPUs
    ran, what the watch did); None from an agent older than the watch.
    It changes at every look and says nothing placement reads, so it is
    left out of the report's content digest
    (numamig.db.compute_nodes.content_digest).
    """

    # Version 1.0 - Release 1: Initial version
    # Version 1.1 - Release 2: migration_guard (the migration guard's
    #              state); cpu (HostCPU 1.0: the host's CPU); cpu_power
    #              (CPUPowerState 1.0: pCPUs powered down per cell);
    #              locality (HostLocality 1.0: the locality watch);
    #              HostNUMATopology 1.1 (PCI devices, cell sockets);
    #              guest_cpus (InstanceCPU 1.0: the guests' CPUs)
    VERSION = '1.1'

    obj_relationships = {'topology': [('1.0', '1.0'), ('1.1', '1.1')],
                         'cpu': [('1.1', '1.0')],
                         'cpu_power': [('1.1', '1.0')],
                         'locality': [('1.1', '1.0')],
                         'guest_cpus': [('1.1', '1.0')]}

    fields = {
        'host': fields.StringField(),
        'hypervisor_uri': fields.StringField(),
        'hypervisor_type': fields.StringField(default='qemu'),
        'topology': fields.ObjectField('HostNUMATopology'),
        'service_version': fields.IntegerField(),
        'fingerprint': fields.StringField(),
        'reported_at': fields.DateTimeField(),
        'migration_guard': fields.StringField(nullable=True, default=None),
        'cpu': fields.ObjectField('HostCPU', nullable=True, default=None),
        'cpu_power': fields.ObjectField('CPUPowerState', nullable=True,
                                        default=None),
        'locality': fields.ObjectField('HostLocality', nullable=True,
                                       default=None),
        'guest_cpus': fields.ListOfObjectsField('InstanceCPU', default=[]),
    }

    # The values of migration_guard (guard_install's states; objects/
    # imports nothing from virt/).
    GUARD_STATES = ('off', 'on', 'failed')

    def obj_make_compatible(self, primitive, target_version):
        super().obj_make_compatible(primitive, target_version)
        target = versionutils.convert_version_to_tuple(target_version)
        if target < (1, 1):
            primitive.pop('migration_guard', None)
            primitive.pop('cpu', None)
            primitive.pop('cpu_power', None)
            primitive.pop('locality', None)
            primitive.pop('guest_cpus', None)

    def _validate(self):
        if self.service_version < 1:
            raise self.invalid(
                f"service_version must be at least 1, got "
                f"{self.service_version}")
        guard = self.get('migration_guard')
        if guard is not None and guard not in self.GUARD_STATES:
            raise self.invalid(
                f"migration_guard must be one of "
                f"{', '.join(self.GUARD_STATES)}, got {guard!r}")
        if not self.fingerprint.startswith('pfp0v001'):
            raise self.invalid(
                f"fingerprint {self.fingerprint!r} is not a podfingerprint "
                f"v001 string")
