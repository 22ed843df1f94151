"""MigrationContext: the claim a migration holds, old and new topology."""

from oslo_versionedobjects import fields

from numamig.objects import base


@base.register
class MigrationContext(base.NumamigObject):
    """The NUMA topologies an instance has before and after a migration.

    Persisting this is what makes a move claim survive a crash: the
    destination's usage includes ``new_numa_topology`` for as long as the
    migration named by ``migration_uuid`` is in progress.
    """

    # Version 1.0 - Release 1: Initial version
    # Version 1.1 - Release 2: InstanceNUMATopology 1.1 (virtio-mem devices)
    VERSION = '1.1'

    def obj_version_needed(self):
        """1.1 only when a topology it holds has virtio-mem or PCI
        devices."""
        return (self.VERSION if self.has_virtio_mem or self.has_pci
                else '1.0')

    @property
    def has_pci(self):
        return any(topology is not None and topology.has_pci
                   for topology in (self.get('old_numa_topology'),
                                    self.get('new_numa_topology')))

    @property
    def has_virtio_mem(self):
        return any(topology is not None and topology.has_virtio_mem
                   for topology in (self.get('old_numa_topology'),
                                    self.get('new_numa_topology')))

    obj_relationships = {
        'old_numa_topology': [('1.0', '1.0'), ('1.1', '1.1')],
        'new_numa_topology': [('1.0', '1.0'), ('1.1', '1.1')],
    }

    fields = {
        'instance_uuid': fields.UUIDField(),
        'migration_uuid': fields.UUIDField(),
        'source_host': fields.StringField(),
        'dest_host': fields.StringField(),
        'old_numa_topology': fields.ObjectField('InstanceNUMATopology',
                                                nullable=True, default=None),
        'new_numa_topology': fields.ObjectField('InstanceNUMATopology',
                                                nullable=True, default=None),
    }

    def _validate(self):
        if self.source_host == self.dest_host:
            raise self.invalid(
                f"source and destination are both {self.source_host}")
