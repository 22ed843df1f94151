"""What a recorded instance asks of a host: its NUMA request and page size.

The conductor (choosing and checking destinations) and the compute agent
(claiming) both rebuild these from the instance record; they live with
the NUMA engine so that neither service borrows the other's code.
"""

from numamig.numa import constraints
from numamig.numa import pci
from numamig.numa import vmem


def numa_request(instance, pci_aliases=None):
    """Rebuild an instance's unplaced NUMA request from its specs.

    A guest placed with virtio-mem devices keeps their sizes now (what a
    reclaim or a growth left them at, and what the guest reports
    plugged), not the flavor's starting ones: a destination must claim
    what the guest holds.

    A placed guest keeps the PCI requests recorded when it was created
    (its topology's pci_requests): an agent needs no ``[pci] alias`` to
    move it, and an alias changed since then does not change what the
    guest has. ``pci_aliases`` resolve them for a guest not placed yet.

    :returns: an InstanceNUMATopology, or None for a guest without NUMA
        characteristics.
    :raises InvalidNUMARequest: if the recorded specs make no request.
    """
    placed = instance.get('numa_topology')
    recorded = list(placed.get('pci_requests') or ()) if placed else []
    extra_specs = instance.extra_specs
    if recorded:
        extra_specs = {k: v for k, v in (extra_specs or {}).items()
                       if k != pci.ALIAS_SPEC_KEY}
    request = constraints.get_numa_request(
        instance.vcpus, instance.memory_mb, extra_specs,
        instance.image_properties, pci_aliases)
    if recorded:
        if request is None:
            request = constraints.get_numa_request(
                instance.vcpus, instance.memory_mb,
                dict(extra_specs, **{'hw:numa_nodes': '1'}),
                instance.image_properties)
        request.pci_requests = [r.obj_clone() for r in recorded]
        request.pci_numa_affinity_policy = placed.get(
            'pci_numa_affinity_policy')
    if request is None or placed is None or not placed.has_virtio_mem:
        return request
    return vmem.with_device_state(request, placed)


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
