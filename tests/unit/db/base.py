"""Shared builders of the persistence tests: valid objects in a few lines."""

import datetime
import uuid

from numamig import objects
from tests import base
from tests.fixtures import database


def new_uuid():
    return str(uuid.uuid4())


def make_topology(instance_uuid, host_cell=0, pins=None, memory_mb=1024):
    """A one-cell placed topology of two vCPUs (pinned if ``pins``)."""
    pins = pins or {}
    cell = objects.InstanceNUMACell(
        id=0, host_cell=host_cell, memory_mb=memory_mb,
        cpuset=set() if pins else {0, 1}, pcpuset=set(pins),
        cpu_pinning=pins)
    return objects.InstanceNUMATopology(instance_uuid=instance_uuid,
                                        cells=[cell])


def make_instance(host='src', **overrides):
    instance_uuid = overrides.pop('uuid', None) or new_uuid()
    instance = objects.Instance(
        uuid=instance_uuid, name='guest', project_id='demo', host=host,
        vcpus=2, memory_mb=1024, extra_specs={'hw:cpu_policy': 'dedicated'},
        image_properties={'hw_mem_page_size': 'large'},
        numa_topology=make_topology(instance_uuid, pins={0: 2, 1: 3}),
        power_state='running')
    return _override(instance, overrides)


def make_context(instance, migration_uuid, dest_host='dst', pins=None):
    return objects.MigrationContext(
        instance_uuid=instance.uuid, migration_uuid=migration_uuid,
        source_host=instance.host, dest_host=dest_host,
        old_numa_topology=instance.numa_topology,
        new_numa_topology=make_topology(instance.uuid, host_cell=1,
                                        pins=pins or {0: 6, 1: 7}))


def make_migration(instance_uuid, source_host='src', **overrides):
    migration = objects.Migration(uuid=new_uuid(),
                                  instance_uuid=instance_uuid,
                                  source_host=source_host)
    return _override(migration, overrides)


def make_host_topology():
    cells = [objects.HostNUMACell(
        id=node, cpuset={node * 4, node * 4 + 1},
        pcpuset={node * 4 + 2, node * 4 + 3}, memory_mb=8192,
        siblings=[{node * 4, node * 4 + 1}, {node * 4 + 2, node * 4 + 3}],
        mempages=[objects.NUMAPagesTopology(size_kb=4, total=1048576),
                  objects.NUMAPagesTopology(size_kb=1048576, total=4,
                                            used=1)])
        for node in (0, 1)]
    return objects.HostNUMATopology(cells=cells)


def make_report(host='src', reported_at=None, **overrides):
    report = objects.ComputeNodeReport(
        host=host, hypervisor_uri='qemu:///system', hypervisor_type='qemu',
        topology=make_host_topology(), service_version=2,
        fingerprint='pfp0v001ef46db3751d8e999',
        reported_at=reported_at or datetime.datetime(
            2026, 1, 2, 3, 4, 5, 678901, tzinfo=datetime.UTC))
    return _override(report, overrides)


def _override(obj, overrides):
    # An object takes any attribute: a name that is not a field (one that
    # moved to a satellite record) would be kept and never recorded.
    unknown = sorted(set(overrides) - set(obj.fields))
    if unknown:
        raise AssertionError(f"{obj.obj_name()} has no field "
                             f"{', '.join(unknown)}")
    for name, value in overrides.items():
        setattr(obj, name, value)
    return obj


class DBTestCase(base.TestCase):
    """A test with a fresh, synced SQLite database in ``self.db``."""

    def setUp(self):
        super().setUp()
        self.db = self.useFixture(database.SQLiteDatabase()).db
