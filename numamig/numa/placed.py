"""Building the placed InstanceNUMATopology a fit returns, cheaply.

The normal constructor coerces every field through OVO's setters (tens
of microseconds per guest cell, more than the whole search takes). The
fit already holds values of exactly the coerced types (ints, sets of
ints, an int-to-int dict, enum strings taken from the validated request),
so these builders hand them to ``obj_from_coerced``, which stores them
as the constructor would and refuses a build that leaves a field out.
The unit tests compare the results with normally constructed objects
(fields, primitives, changed fields, stored attributes and their types).
"""

import typing

from numamig import objects

_build_cell = objects.InstanceNUMACell.obj_from_coerced
_build_topology = objects.InstanceNUMATopology.obj_from_coerced


def instance_cell(guest, host_cell, pagesize, pins, reserved):
    """Return a placed InstanceNUMACell.

    :param guest: the request's guest cell (or its views.GuestView);
        its sets are copied, so the result shares nothing with it.
    :param pins: a new {vCPU: pCPU} dict; ``reserved`` a new set or None.
    """
    return _build_cell(
        id=guest.id, host_cell=host_cell, cpuset=guest.cpuset,
        pcpuset=guest.pcpuset, memory_mb=guest.memory_mb, pagesize=pagesize,
        cpu_pinning=pins, cpuset_reserved=reserved,
        cpu_policy=guest.cpu_policy,
        cpu_thread_policy=guest.cpu_thread_policy,
        realtime_vcpus=guest.realtime_vcpus or (),
        virtio_mem_size_mb=guest.virtio_mem_size_mb,
        virtio_mem_block_kb=guest.virtio_mem_block_kb,
        virtio_mem_requested_mb=guest.virtio_mem_requested_mb,
        virtio_mem_current_mb=guest.virtio_mem_current_mb)


def instance_topology(instance_uuid, cells, emulator_threads_policy,
                      pci=None):
    """Return a placed InstanceNUMATopology of the given cells.

    :param pci: the request's (pci_requests, pci_numa_affinity_policy)
        and the claimed InstancePCIDevices, as a PlacedPCI, or None for
        a guest without devices.
    """
    if pci is None:
        requests, policy, devices = [], None, []
    else:
        requests = [request.obj_clone() for request in pci.requests]
        policy = pci.policy
        devices = [pci_device(*held) for held in pci.devices]
    return _build_topology(
        instance_uuid=instance_uuid, cells=cells,
        emulator_threads_policy=emulator_threads_policy,
        pci_requests=requests, pci_numa_affinity_policy=policy,
        pci_devices=devices)


def pci_device(alias, address, host_node, guest_cell):
    """Return the InstancePCIDevice of one claimed host function."""
    return objects.InstancePCIDevice(alias=alias, address=address,
                                     host_node=host_node,
                                     guest_cell=guest_cell)


class PlacedPCI(typing.NamedTuple):
    """The PCI side of a placement: the request's PCIRequests and
    policy, and per claimed function (alias, address, host node, guest
    cell) in request order."""

    requests: tuple
    policy: str | None
    devices: tuple


class PlacedCell(typing.NamedTuple):
    """Where a fit put one guest cell, in plain values.

    ``guest``: the request's guest cell (or its views.GuestView);
    ``pins``: {vCPU: pCPU}; ``reserved``: the isolated emulator threads'
    pCPUs or None.
    """

    guest: object
    host_cell: int
    pagesize: int | None
    pins: dict
    reserved: set | None


class Placement(typing.NamedTuple):
    """A whole fit's answer in plain values, turned into the placed
    InstanceNUMATopology by ``topology()`` when someone needs it (a
    scheduler fitting a guest on many hosts needs it for one)."""

    instance_uuid: str | None
    cells: tuple
    emulator_threads_policy: str | None
    pci: PlacedPCI | None = None

    def topology(self):
        """Return a new placed InstanceNUMATopology.

        Each call builds a new one that shares nothing with the others.
        """
        return instance_topology(
            self.instance_uuid,
            [instance_cell(cell.guest, cell.host_cell, cell.pagesize,
                           dict(cell.pins),
                           None if cell.reserved is None
                           else set(cell.reserved))
             for cell in self.cells],
            self.emulator_threads_policy, self.pci)
