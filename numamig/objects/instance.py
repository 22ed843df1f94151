"""Instance: a guest as numamig knows it (sizes, specs, NUMA placement)."""

from oslo_versionedobjects import fields

from numamig.objects import base
from numamig.objects import fields as nm_fields


def has_virtio_mem(*holders):
    """Whether any topology or migration context given has a virtio-mem
    device (None entries are skipped)."""
    return any(holder is not None and holder.has_virtio_mem
               for holder in holders)


def has_pci(*holders):
    """Whether any topology or migration context given asks for or holds
    PCI devices (None entries are skipped)."""
    return any(holder is not None and holder.has_pci for holder in holders)


@base.register
class Instance(base.NumamigObject):
    """A guest: its flavor-like request, where it runs and how it is placed.

    ``extra_specs`` and ``image_properties`` are kept so that a move claim
    rebuilds the NUMA request from them instead of copying the source's
    placement. ``project_id`` identifies the owner in guest-set
    fingerprints.
    """

    # Version 1.0 - Release 1: Initial version
    # Version 1.1 - Release 2: InstanceNUMATopology and MigrationContext 1.1
    #              (virtio-mem devices in guest cells)
    VERSION = '1.1'

    def obj_version_needed(self):
        """1.1 only for a guest with virtio-mem or PCI devices (1.1's
        only change is the version of the topologies it holds)."""
        holders = (self.get('numa_topology'), self.get('migration_context'))
        return (self.VERSION if has_virtio_mem(*holders) or has_pci(*holders)
                else '1.0')

    obj_relationships = {
        'numa_topology': [('1.0', '1.0'), ('1.1', '1.1')],
        'migration_context': [('1.0', '1.0'), ('1.1', '1.1')],
    }

    fields = {
        'uuid': fields.UUIDField(),
        'name': fields.StringField(),
        'project_id': fields.StringField(default='numamig'),
        'host': fields.StringField(nullable=True, default=None),
        'vcpus': fields.IntegerField(),
        'memory_mb': fields.IntegerField(),
        'extra_specs': fields.DictOfStringsField(default={}),
        'image_properties': fields.DictOfStringsField(default={}),
        'numa_topology': fields.ObjectField('InstanceNUMATopology',
                                            nullable=True, default=None),
        'migration_context': fields.ObjectField('MigrationContext',
                                                nullable=True, default=None),
        'power_state': nm_fields.PowerStateField(
            default=nm_fields.PowerState.UNKNOWN),
        'task_state': fields.StringField(nullable=True, default=None),
    }

    def _validate(self):
        if self.vcpus <= 0:
            raise self.invalid(f"vcpus must be positive, got {self.vcpus}")
        if self.memory_mb <= 0:
            raise self.invalid(
                f"memory_mb must be positive, got {self.memory_mb}")
        topology = self.get('numa_topology')
        if topology is not None and topology.cells:
            if len(topology.vcpus) != self.vcpus:
                raise self.invalid(
                    f"NUMA topology has {len(topology.vcpus)} vCPUs, the "
                    f"instance {self.vcpus}")
            memory = sum(cell.memory_mb for cell in topology.cells)
            if memory != self.memory_mb:
                raise self.invalid(
                    f"NUMA topology has {memory} MiB, the instance "
                    f"{self.memory_mb} MiB")
