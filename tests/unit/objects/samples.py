"""Valid, fully populated examples of every numamig object, for the tests.

Each builder returns a new object every call (tests may change it) with
every field set to a non-default value where one exists, so that a round
trip that loses a field cannot pass by comparing two defaults.

The host drawn by ``host_topology()``::

    cell 0: shared 0-1, dedicated 2-7 (2-3 pinned), SMT pairs, 16 GiB,
            4K pool + 2M pool (512 pages, 10 used, 8 reserved)
    cell 1: shared 8-9, dedicated 10-15, SMT pairs, 16 GiB,
            4K pool + 1G pool (4 pages)
"""

import datetime

from oslo_utils.fixture import uuidsentinel as uuids

from numamig import objects

NOW = datetime.datetime(2026, 11, 3, 12, 0, 0, tzinfo=datetime.UTC)


def pages(size_kb=2048, total=512, used=10, reserved=8):
    return objects.NUMAPagesTopology(size_kb=size_kb, total=total, used=used,
                                     reserved=reserved)


def host_cell(cell_id=0):
    base = cell_id * 8
    return objects.HostNUMACell(
        id=cell_id,
        cpuset={base, base + 1},
        pcpuset=set(range(base + 2, base + 8)),
        pinned_cpus={base + 2, base + 3} if cell_id == 0 else set(),
        siblings=[{base + i, base + i + 1} for i in range(0, 8, 2)],
        memory_mb=16384,
        memory_usage_mb=2048,
        cpu_usage=3,
        mempages=[pages(4, 4194304, 0, 0),
                  pages(2048) if cell_id == 0 else pages(1048576, 4, 0, 0)],
        distances={0: 10 if cell_id == 0 else 21,
                   1: 21 if cell_id == 0 else 10},
        socket=cell_id)


def host_pci_device(address='0000:81:00.1', numa_node=1):
    """A virtual function of the PF 0000:81:00.0 (an Intel X710)."""
    return objects.HostPCIDevice(
        address=address, vendor_id='8086', product_id='154c',
        dev_type='type-VF', parent_addr='0000:81:00.0', numa_node=numa_node,
        instance_uuid=uuids.instance if address.endswith('.1') else None)


def host_topology():
    return objects.HostNUMATopology(
        cells=[host_cell(0), host_cell(1)],
        pci_devices=[host_pci_device('0000:81:00.1'),
                     host_pci_device('0000:81:00.2')])


def pci_request():
    return objects.PCIRequest(alias='vf', count=2, vendor_id='8086',
                              product_id='154c', device_type='type-VF',
                              numa_policy='preferred')


def instance_pci_device():
    return objects.InstancePCIDevice(alias='vf', address='0000:81:00.1',
                                     host_node=1, guest_cell=1)


def limits():
    return objects.NUMALimits(cpu_allocation_ratio=4.0,
                              ram_allocation_ratio=1.5)


def instance_cell(cell_id=0, host_cell_id=1):
    """A placed mixed guest cell: vCPUs 2c..2c+1 pinned, 2c+2 floating."""
    first = cell_id * 3
    return objects.InstanceNUMACell(
        id=cell_id,
        host_cell=host_cell_id,
        cpuset={first + 2},
        pcpuset={first, first + 1},
        memory_mb=1024,
        pagesize=2048,
        cpu_pinning={first: 10 + 2 * cell_id, first + 1: 11 + 2 * cell_id},
        cpuset_reserved={14 + cell_id} if cell_id == 0 else None,
        cpu_policy='mixed',
        cpu_thread_policy='prefer',
        realtime_vcpus={first + 1},
        virtio_mem_size_mb=512, virtio_mem_block_kb=2048,
        virtio_mem_requested_mb=256, virtio_mem_current_mb=128)


def instance_topology():
    return objects.InstanceNUMATopology(
        instance_uuid=uuids.instance,
        cells=[instance_cell(0, 0), instance_cell(1, 1)],
        emulator_threads_policy='isolate',
        pci_requests=[pci_request()],
        pci_numa_affinity_policy='required',
        pci_devices=[instance_pci_device()])


def migrate_info():
    return objects.NUMAMigrateInfo(
        cpu_pins={0: {10}, 1: {11}, 2: {8, 9}},
        cell_pins={0: {1}},
        emulator_pins={14},
        sched_vcpus={1},
        sched_priority=50,
        pagesizes={0: 2048},
        floating_cpus={8, 9})


def live_migrate_data():
    return objects.LiveMigrateData(
        instance_uuid=uuids.instance,
        source_host='src',
        dest_host='dst',
        migration_uuid=uuids.migration,
        dest_connect_uri='qemu+tcp://dst/system',
        migration_uri='tcp://dst',
        emulated=True,
        bandwidth_mib=100,
        dst_numa_info=migrate_info(),
        src_supports_numa_live_migration=True,
        dst_supports_numa_live_migration=True)


def migration_context():
    return objects.MigrationContext(
        instance_uuid=uuids.instance,
        migration_uuid=uuids.migration,
        source_host='src',
        dest_host='dst',
        old_numa_topology=instance_topology(),
        new_numa_topology=instance_topology())


def status_change(status='running'):
    return objects.MigrationStatusChange(status=status, changed_at=NOW,
                                         detail='job started')


def migration():
    return objects.Migration(
        uuid=uuids.migration,
        instance_uuid=uuids.instance,
        source_host='src',
        dest_host='dst',
        requested_host='dst',
        status='running',
        memory_total=1 << 30,
        memory_processed=1 << 29,
        memory_remaining=1 << 29,
        disk_total=10,
        disk_processed=5,
        disk_remaining=5,
        created_at=NOW,
        updated_at=NOW,
        error='none yet',
        refused_hosts={'other': 'no free 2M pages on any cell'},
        history=[status_change('accepted'), status_change('running')],
        elapsed_ms=412,
        downtime_ms=18,
        emulated=False,
        post_copy=False,
        paused=True)


# What was reclaimed to place it (release 2, a satellite record).
RECLAIM_ENTRIES = [{'host': 'dst', 'host_node': '1',
                    'instance_uuid': uuids.other, 'cell': '0',
                    'before_mb': '1024', 'after_mb': '512',
                    'current_mb': '512', 'released_mb': '512',
                    'outcome': 'kept'}]


def migration_reclaim():
    return objects.MigrationReclaim(migration_uuid=uuids.migration,
                                    entries=RECLAIM_ENTRIES)


def migration_prediction():
    return objects.MigrationPrediction(migration_uuid=uuids.migration,
                                       prediction='converges',
                                       predicted_elapsed_ms=9000,
                                       predicted_downtime_ms=40,
                                       sampled_dirty_rate=1 << 20)


# How it converged (release 2, a satellite record).
CONVERGENCE_ACTIONS = ['allow 50 ms of downtime (the job starts)']


def migration_convergence():
    return objects.MigrationConvergence(migration_uuid=uuids.migration,
                                        policy='nfv',
                                        actions=CONVERGENCE_ACTIONS)


# Its post-copy recovery (release 2, a satellite record).
RECOVERY_EVENTS = [
    {'event': 'link-lost', 'at': '2026-11-03T12:00:01.000+00:00',
     'attempt': None, 'detail': 'stream broke'},
    {'event': 'resumed', 'at': '2026-11-03T12:00:04.000+00:00',
     'attempt': '2', 'detail': None}]


def migration_recovery():
    return objects.MigrationRecovery(migration_uuid=uuids.migration,
                                     events=RECOVERY_EVENTS)


def migration_threads():
    return objects.MigrationThreads(migration_uuid=uuids.migration,
                                    sides=THREADS)



def migration_devices():
    return objects.MigrationDevices(
        migration_uuid=uuids.migration, host='dst',
        devices=[{'alias': 'nic', 'address': '0000:82:00.0',
                  'guest_cell': '1', 'cell_nodes': '1',
                  'device_node': '1', 'plugged': 'yes', 'local': 'yes'}])

# Where a migration's threads ran (MigrationThreads, release 2), both hosts.
THREADS = {
    'source': {'host': 'src', 'basis': 'shared-guest-nodes',
               'cpus': [6, 7], 'connections': 2,
               'threads': {'live_migration': [6, 7],
                           'multifdsend_0': [6, 7],
                           'multifdsend_1': [6, 7]}},
    'dest': {'host': 'dst', 'basis': 'none', 'cpus': [],
             'connections': None,
             'threads': {'multifdrecv_0': [3], 'multifdrecv_1': [3]}}}


def instance():
    return objects.Instance(
        uuid=uuids.instance,
        name='guest-1',
        project_id='tenant-a',
        host='src',
        vcpus=6,
        memory_mb=2048,
        extra_specs={'hw:cpu_policy': 'mixed', 'hw:numa_nodes': '2'},
        image_properties={'hw_mem_page_size': '2MB'},
        numa_topology=instance_topology(),
        migration_context=migration_context(),
        power_state='running',
        task_state='migrating')


def host_cpu():
    return objects.HostCPU(
        arch='x86_64', vendor='Intel', model='Skylake-Client-IBRS',
        features=['avx512f', 'vmx'], host_model='Skylake-Client-IBRS',
        host_model_features=['avx512f', 'ss'], host_model_disabled=['mpx'],
        custom_models=['Broadwell', 'Skylake-Client-IBRS', 'qemu64'],
        model_blockers={'Icelake-Server': ['avx512vbmi', 'pku']})


def instance_cpu():
    return objects.InstanceCPU(
        instance_uuid='7d6b8d2c-2f0a-4a4e-9c38-1c1f0a9e3b21',
        mode='host-model', model='Skylake-Client-IBRS',
        features=['avx512f', 'ss'], disabled=['mpx'])


def cpu_power_cell():
    return objects.CPUPowerCell(id=0, managed={2, 3, 4, 5},
                                powered_down={4, 5})


def cpu_power_state():
    return objects.CPUPowerState(strategy='cpu_state',
                                 cells=[cpu_power_cell()], failed={5})
def guest_locality():
    return objects.GuestLocality(
        instance_uuid='7d6b8d2c-2f0a-4a4e-9c38-1c1f0a9e3b21',
        memory_mb={0: 256, 1: 768}, vcpu_nodes={0: 2}, home_node=0,
        remote_share=0.75, state='move',
        reason='remote share 75% above 50% for 3 intervals: memory to '
               'node 0', moves=1)


def host_locality():
    return objects.HostLocality(
        policy='act', measured_at=NOW, remote_share=0.75,
        guests=[guest_locality()], moves_total=1,
        pages_moved_total=196608)


def compute_node_report():
    return objects.ComputeNodeReport(
        cpu=host_cpu(),
        cpu_power=cpu_power_state(),
        locality=host_locality(),
        guest_cpus=[instance_cpu()],
        host='src',
        hypervisor_uri='qemu:///system',
        hypervisor_type='kvm',
        topology=host_topology(),
        service_version=2,
        fingerprint='pfp0v001deadbeefdeadbeef',
        reported_at=NOW)


# Object name -> builder, one per registered numamig object class.
BUILDERS = {
    'NUMAPagesTopology': pages,
    'HostNUMACell': host_cell,
    'HostNUMATopology': host_topology,
    'NUMALimits': limits,
    'InstanceNUMACell': instance_cell,
    'InstanceNUMATopology': instance_topology,
    'NUMAMigrateInfo': migrate_info,
    'LiveMigrateData': live_migrate_data,
    'MigrationContext': migration_context,
    'MigrationStatusChange': status_change,
    'Migration': migration,
    'MigrationPrediction': migration_prediction,
    'MigrationConvergence': migration_convergence,
    'MigrationRecovery': migration_recovery,
    'MigrationDevices': migration_devices,
    'MigrationReclaim': migration_reclaim,
    'MigrationThreads': migration_threads,
    'Instance': instance,
    'ComputeNodeReport': compute_node_report,
    'HostCPU': host_cpu,
    'InstanceCPU': instance_cpu,
    'CPUPowerCell': cpu_power_cell,
    'CPUPowerState': cpu_power_state,
    'HostLocality': host_locality,
    'GuestLocality': guest_locality,
    'HostPCIDevice': host_pci_device,
    'PCIRequest': pci_request,
    'InstancePCIDevice': instance_pci_device,
}
