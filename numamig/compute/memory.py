"""Resizing a guest's virtio-mem devices on this host, for the conductor.

The conductor plans a memory change (numa.reclaim), records what it
asks for, and calls this agent to carry it out. The agent only checks
the request is for a guest it runs and for sizes within its devices,
asks the hypervisor, and answers what the guest really has plugged
(``current``) when it reached the sizes or when the deadline passed.
Usage changes only once the conductor records that answer.
"""

from numamig import exception

# The most guest cells one request may name (a guest has at most as many
# cells as vCPUs; no real guest has more than a few).
MAX_CELLS = 64
# The longest a caller may ask an agent to wait for a guest (seconds).
MAX_DEADLINE_S = 3600


def resize(agent, instance_uuid, requested, deadline_s):
    """Set the requested size of each named device and wait for it.

    :param requested: {guest cell (int or its text): MiB}.
    :returns: {'current': {cell: MiB or None}, 'reached': bool}.
    :raises InstanceNotFound: the guest is not running here.
    :raises InvalidMemoryChange: a cell without a device, or a size out
        of the device's range or not whole blocks; nothing is asked.
    :raises HypervisorError: the hypervisor refused.
    """
    instance = _tracked(agent, instance_uuid)
    sizes = _checked(instance, requested)
    current, reached = agent.driver.resize_virtio_mem(instance_uuid, sizes,
                                                      deadline_s)
    return {'current': {str(cell): mib for cell, mib in current.items()},
            'reached': reached}


def _tracked(agent, instance_uuid):
    for instance in agent.tracker.instances():
        if instance.uuid == instance_uuid:
            return instance
    raise exception.InstanceNotFound(instance_uuid=instance_uuid)


def _checked(instance, requested):
    cells = {c.id: c for c in (instance.numa_topology.cells
                               if instance.get('numa_topology') else ())}
    sizes = {}
    for key, mib in requested.items():
        try:
            cell = cells[int(key)]
        except (KeyError, ValueError):
            raise exception.InvalidMemoryChange(
                reason=f"guest cell {key!r} of {instance.uuid} has no "
                       f"virtio-mem device")
        if not cell.has_virtio_mem:
            raise exception.InvalidMemoryChange(
                reason=f"guest cell {cell.id} of {instance.uuid} has no "
                       f"virtio-mem device")
        block_mb = cell.virtio_mem_block_kb // 1024 or 1
        if isinstance(mib, bool) or not isinstance(mib, int) or \
                not 0 <= mib <= cell.virtio_mem_size_mb or mib % block_mb:
            raise exception.InvalidMemoryChange(
                reason=f"guest cell {cell.id}: {mib!r} MiB is not whole "
                       f"{block_mb} MiB blocks from 0 to "
                       f"{cell.virtio_mem_size_mb}")
        sizes[cell.id] = mib
    return sizes
