"""Builders for compute agent tests: hosts, instances, a mocked agent.

The driver, the conductor client and the compute client are mocks; the
resource tracker, the claims and the NUMA engine are real. Flows get
``agent()`` (what a ComputeManager hands them), endpoints ``manager()``.
"""

import dataclasses
from unittest import mock
import uuid

from numamig import cpumodel
from numamig import objects
from numamig import releases
from numamig import service
from numamig.compute import flows
from numamig.compute import manager as manager_mod
from numamig.conf import CONF
from numamig.convergence import policy as convergence
from tests.unit.numa import hosts

HOST = 'dst'
SOURCE = 'src'


def new_uuid():
    return str(uuid.uuid4())


def host_topology(**kwargs):
    """Two cells of four dedicated cores x 2 threads (pCPUs 0-15)."""
    kwargs.setdefault('cells', 2)
    kwargs.setdefault('cores', 4)
    kwargs.setdefault('threads', 2)
    return hosts.make_host(**kwargs)


def pinned_cell(cell_id, host_cell, pins, memory_mb=1024, pagesize=None):
    return objects.InstanceNUMACell(
        id=cell_id, host_cell=host_cell, pcpuset=set(pins),
        cpu_pinning=dict(pins), memory_mb=memory_mb, pagesize=pagesize,
        cpu_policy='dedicated')


def instance(host=SOURCE, vcpus=2, memory_mb=1024, pins=None, host_cell=0,
             extra_specs=None, pagesize=None, **overrides):
    """A dedicated-CPU instance, placed with ``pins`` when given."""
    uuid_ = overrides.pop('uuid', None) or new_uuid()
    topology = None
    if pins is not None:
        topology = objects.InstanceNUMATopology(
            instance_uuid=uuid_, cells=[pinned_cell(
                0, host_cell, pins, memory_mb, pagesize)])
    specs = {'hw:cpu_policy': 'dedicated'} if extra_specs is None \
        else extra_specs
    return objects.Instance(
        uuid=uuid_, name=f'guest-{uuid_[:8]}', project_id='demo', host=host,
        vcpus=vcpus, memory_mb=memory_mb, extra_specs=specs,
        numa_topology=topology, power_state='running', **overrides)


def migration(inst, dest_host=HOST, **overrides):
    return objects.Migration(
        uuid=overrides.pop('uuid', None) or new_uuid(),
        instance_uuid=inst.uuid, source_host=inst.host, dest_host=dest_host,
        status=overrides.pop('status', 'accepted'), **overrides)


def agent(**kwargs):
    """The Agent the flows of a ``manager(**kwargs)`` get."""
    return manager(**kwargs).agent


def as_release(agent_, new):
    """``agent_`` behaving as the current release (``new``) or the one
    before NUMA-aware live migration."""
    release = releases.RELEASES[max(releases.RELEASES) if new else 1]
    return dataclasses.replace(agent_, release=release,
                               flows=flows.for_release(release))


def settings(**changes):
    """The ComputeSettings a daemon builds from the test's CONF (set it
    with ``flags``), with ``changes``."""
    return dataclasses.replace(
        service.compute_settings_from_conf(CONF), **changes)


def manager(host=HOST, topology=None, instances=(), claimed=(),
            guests=None):
    """A ComputeManager whose driver, conductor and peers are mocks.

    :param instances: Instances the conductor's records put on the host.
    :param claimed: Instances holding a migration context on the host.
    :param guests: {uuid: name} the driver lists; default: ``instances``.
    """
    driver = mock.Mock(name='driver')
    driver.supports_native_migration = False
    driver.hypervisor_uri = f'test:///{host}'
    driver.hypervisor_type = 'test'
    driver.postcopy_paused.return_value = False
    driver.get_host_topology.return_value = topology or host_topology()
    driver.list_guests.return_value = guests if guests is not None else {
        i.uuid: i.name for i in instances}
    driver.migration_target.return_value = (f'test:///{host}', None)
    driver.migration_guard_state.return_value = 'off'
    driver.refresh_distances.return_value = None   # the table as it was
    driver.read_guard_log.return_value = ([], None)
    driver.migration_housekeeping_cpus.return_value = None
    # A driver that knows no CPU (the CPU tests set their own).
    driver.host_cpu.return_value = None
    driver.guest_cpu.return_value = None
    driver.compare_guest_cpu.return_value = cpumodel.RUNS
    driver.select_migration_policy.return_value = (
        convergence.SHIPPED[convergence.TIMER], 'the default')
    # No modelled copy (the behaviour of a host without one).
    driver.emulate_copy.return_value = None
    # Guests without passed-through devices (test_devices sets some).
    driver.assigned_devices.return_value = []
    driver.detach_devices.return_value = []
    driver.reattach_devices.return_value = []
    driver.attach_devices.return_value = []
    driver.verify_device_affinity.return_value = []
    conductor = mock.Mock(name='conductor')
    conductor.instance_get_all_by_host.return_value = list(instances)
    conductor.instance_get_claims_on_host.return_value = list(claimed)
    conductor.migration_get_in_progress_by_host.return_value = []
    # A conductor of before API 1.3 unless a test says otherwise: the
    # source walks every status.
    conductor.supports_short_path.return_value = False
    compute_api = mock.Mock(name='compute_api')
    compute_api.supports_numa_live_migration.return_value = True
    result = manager_mod.ComputeManager(host, driver, conductor,
                                        compute_api, settings())
    result.tracker.start(mock.sentinel.ctxt)
    return result


def pinned(topology):
    """Every pCPU the host cells of ``topology`` have pinned."""
    return set().union(*(cell.pinned_cpus for cell in topology.cells))
