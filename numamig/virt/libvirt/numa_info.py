"""Placed InstanceNUMATopology + host topology -> NUMAMigrateInfo.

A placement says which host cell each guest cell uses and which pCPU each
pinned vCPU gets; the domain XML also needs what only the host knows:
where floating vCPUs and emulator threads may run (its shared set) and
the realtime priority it uses, and how far apart the host nodes of the
guest's cells are (told to the guest). The destination of a migration
computes this from its claim and sends it to the source; a host creating
a guest computes it for itself. Either way the XML is written from this
one value.
"""

from numamig import cpuspec
from numamig import exception
from numamig import objects
from numamig.numa import distance
from numamig.objects import fields as nm_fields

SMALL_PAGE_KB = 4


def build_migrate_info(topology, host_topology, realtime_priority=1,
                       host='?'):
    """Return the NUMAMigrateInfo of a placed topology on this host.

    Pinned vCPUs map to their pCPU; floating vCPUs of a NUMA guest to the
    shared pCPUs of their host cell. Emulator threads go to the reserved
    pCPUs of an isolate policy, else to the host's shared set, else to the
    guest's own pins. Neither argument is modified.

    :raises MigrationPreCheckError: the topology is not placed, or names
        host cells or pCPUs this host cannot give it.
    """
    if not topology.is_placed:
        raise _refuse(host, topology, "its NUMA topology is not placed "
                                      "(guest cells without a host cell)")
    shared = set().union(*(c.cpuset for c in host_topology.cells))
    cpu_pins, cell_pins, pagesizes = {}, {}, {}
    for cell in topology.cells:
        host_cell = _host_cell(host_topology, cell, host, topology)
        cell_pins[cell.id] = {cell.host_cell}
        cpu_pins.update(_cell_cpu_pins(cell, host_cell, host, topology))
        if cell.pagesize and cell.pagesize != SMALL_PAGE_KB:
            pagesizes[cell.id] = cell.pagesize
    sched_vcpus = set().union(*(c.realtime_vcpus for c in topology.cells))
    info = objects.NUMAMigrateInfo(
        cpu_pins=cpu_pins, cell_pins=cell_pins,
        emulator_pins=_emulator_pins(topology, shared, host),
        sched_vcpus=sched_vcpus,
        sched_priority=realtime_priority if sched_vcpus else None,
        pagesizes=pagesizes,
        floating_cpus=shared or None,
        # Told to the guest through <distances> (its kernel reads them
        # at boot); none where the host's table lacks an entry.
        cell_distances=distance.guest_table(
            {cell.id: cell.host_cell for cell in topology.cells},
            host_topology.cells) or {})
    return info.validate()


def _host_cell(host_topology, cell, host, topology):
    try:
        return host_topology.cell(cell.host_cell)
    except KeyError:
        raise _refuse(host, topology,
                      f"guest cell {cell.id} is placed on host cell "
                      f"{cell.host_cell}, which this host lacks (cells "
                      f"{sorted(c.id for c in host_topology.cells)})")


def _cell_cpu_pins(cell, host_cell, host, topology):
    pinning = cell.get('cpu_pinning') or {}
    unpinned = cell.pcpuset - set(pinning)
    if unpinned:
        raise _refuse(host, topology,
                      f"pinned vCPUs {sorted(unpinned)} of guest cell "
                      f"{cell.id} have no pCPU")
    outside = set(pinning.values()) - host_cell.pcpuset
    if outside:
        raise _refuse(host, topology,
                      f"guest cell {cell.id} pins vCPUs to pCPUs "
                      f"{cpuspec.format_cpu_spec(outside)}, outside the "
                      f"dedicated set of host cell {host_cell.id}")
    pins = {vcpu: {pcpu} for vcpu, pcpu in pinning.items()}
    if cell.cpuset and not host_cell.cpuset:
        raise _refuse(host, topology,
                      f"floating vCPUs {sorted(cell.cpuset)} of guest cell "
                      f"{cell.id} need shared pCPUs, and host cell "
                      f"{host_cell.id} has none")
    pins.update({vcpu: set(host_cell.cpuset) for vcpu in cell.cpuset})
    return pins


def _emulator_pins(topology, shared, host):
    reserved = topology.cpuset_reserved
    isolate = (topology.get('emulator_threads_policy') ==
               nm_fields.CPUEmulatorThreadsPolicy.ISOLATE)
    if isolate and not reserved:
        raise _refuse(host, topology,
                      "emulator threads policy is isolate but no pCPU is "
                      "reserved for them (cpuset_reserved is empty)")
    if reserved:
        return set(reserved)
    if shared:
        return set(shared)
    return set(topology.cpu_pinning.values())


def _refuse(host, topology, reason):
    return exception.MigrationPreCheckError(
        reason=f"host {host} cannot run instance "
               f"{topology.get('instance_uuid') or '(unnamed)'}: {reason}")
