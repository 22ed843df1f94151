"""What a recorded instance asks of a host: its NUMA request and page size.

The conductor (choosing and checking destinations) and the compute agent
(claiming) both rebuild these from the instance record; they live with
the NUMA engine so that neither service borrows the other's code.
"""

from numamig.numa import constraints


def numa_request(instance):
    """Rebuild an instance's unplaced NUMA request from its specs.

    :returns: an InstanceNUMATopology, or None for a guest without NUMA
        characteristics.
    :raises InvalidNUMARequest: if the recorded specs make no request.
    """
    return constraints.get_numa_request(
        instance.vcpus, instance.memory_mb, instance.extra_specs,
        instance.image_properties)


def source_page_size(instance):
    """The page size (KiB) the guest uses now, or None for small pages.

    A migrating guest keeps its page size: a request of 'large' may have
    chosen 1 GiB pages on the source, and the guest's memory layout must
    not change under it.
    """
    topology = instance.get('numa_topology')
    if topology is None:
        return None
    sizes = {cell.pagesize for cell in topology.cells
             if cell.get('pagesize') is not None}
    return sizes.pop() if len(sizes) == 1 else None
