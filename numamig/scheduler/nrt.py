"""Export a host's NUMA topology and usage as a NodeResourceTopology.

NodeResourceTopology (NRT, topology.node.k8s.io/v1alpha2, seed 004) is
how the Kubernetes topology-aware scheduler ecosystem describes a node:
one zone per NUMA node, each with per-resource capacity, allocatable and
available amounts, plus NUMA distances as zone costs. Exporting numamig's
hosts in that shape lets the tools of that ecosystem (and operators used
to them) inspect a numamig host. The result is a plain dict ready for
``json.dumps``; nothing here reads files or configuration.

How numamig's accounting maps onto NRT resources, per zone (host cell):

- ``cpu``: capacity = every CPU of the cell; allocatable = its dedicated
  pCPUs (the ones a guest can own, as exclusive CPUs are in Kubernetes);
  available = dedicated pCPUs not pinned yet. Shared (floating) CPUs are
  overcommitted by ratio and have no exclusive availability, so they are
  given as zone attributes instead.
- ``memory`` (bytes): capacity = the cell's memory; allocatable = what is
  not set aside in huge page pools; available = allocatable minus the
  memory of guests backed by small pages.
- ``hugepages-<size>`` (bytes, e.g. ``hugepages-2Mi``): capacity = pool
  total; allocatable = total minus pages the host reserves; available =
  free pages. ``hugepages-2Mi`` and ``hugepages-1Gi`` are always present
  (zero when the cell has no such pool), so consumers can rely on them.

- ``pci-<vendor>-<product>`` (a count, e.g. ``pci-8086-154c``): the
  assignable PCI functions of that kind attached to the node
  (``[pci] device_spec``); capacity = allocatable = those functions,
  available = those no guest holds nor blocks (a VF of a given PF, a PF
  with a given VF). Functions whose node the host does not know are the
  node-level attributes ``pci.unaffined.<vendor>-<product>`` (free of
  total, e.g. ``2/4``).

Zone ``costs`` are the host's NUMA distances as placement uses them
(numamig.numa.distance). Where libvirt reports no entry for a pair of a
host of several cells, placement assumes local 10, remote 20; the export
gives those values too, so that a consumer sees the table numamig places
by, and names them in the zone attribute ``costs.assumed`` (the zones
whose cost from this zone is assumed, comma-separated), as ``host show``
marks them ``*``. A host of one cell without a table has no costs.

numamig places every guest NUMA cell on one host cell, as the Topology
Manager's ``single-numa-node`` policy places every container on one NUMA
node, so the node declares that policy with ``container`` scope (a guest
cell plays the part of a container).
"""

from numamig.numa import distance
from numamig.numa import pci

API_VERSION = 'topology.node.k8s.io/v1alpha2'
KIND = 'NodeResourceTopology'
FINGERPRINT_ANNOTATION = 'topology.node.k8s.io/fingerprint'
# The zone attribute naming the zones whose cost is assumed, not reported.
ASSUMED_COSTS = 'costs.assumed'
ZONE_TYPE = 'Node'
POLICY = 'single-numa-node'
SCOPE = 'container'
# The pre-attribute (deprecated) spelling of the same policy and scope.
LEGACY_POLICY = 'SingleNUMANodeContainerLevel'

_KIB = 1024
_MIB = 1024 * 1024
_SMALL_PAGE_KB = 4
_ALWAYS_REPORTED_KB = (2048, 1048576)
_UNITS = (('Gi', 1024 * 1024), ('Mi', 1024), ('Ki', 1))


def zone_name(cell_id):
    """Return the NRT zone name of a host cell (``node-<id>``)."""
    return f'node-{cell_id}'


def hugepages_resource(size_kb):
    """Return the Kubernetes resource name of a page size in KiB.

    >>> hugepages_resource(2048)
    'hugepages-2Mi'
    """
    for suffix, factor in _UNITS:
        if size_kb % factor == 0:
            return f'hugepages-{size_kb // factor}{suffix}'
    raise ValueError(f"page size {size_kb} KiB is not a whole KiB count")


def export(host, topology, fingerprint=None, virtio_mem=None):
    """Return the NodeResourceTopology of a host as a JSON-ready dict.

    :param host: the host name (the object's ``metadata.name``).
    :param topology: its HostNUMATopology with usage; not modified.
    :param fingerprint: the podfingerprint of its guest set, recorded in
        the annotation the NRT ecosystem reads; omitted when None.
    :param virtio_mem: numa.vmem.by_host_node of the host's guests: the
        zones of nodes with devices get the attributes
        ``virtio-mem.reclaimable`` and ``virtio-mem.growable`` (bytes)
        and ``virtio-mem.devices``; None or {}: none.
    """
    cells = sorted(topology.cells, key=lambda c: c.id)
    assumed = (distance.assumed_table(cells)
               if len(cells) > 1 and distance.missing(cells) else None)
    metadata = {'name': host}
    if fingerprint is not None:
        metadata['annotations'] = {FINGERPRINT_ANNOTATION: fingerprint}
    kinds = _pci_kinds(topology)
    return {
        'apiVersion': API_VERSION,
        'kind': KIND,
        'metadata': metadata,
        'topologyPolicies': [LEGACY_POLICY],
        'attributes': [_attribute('topologyManagerPolicy', POLICY),
                       _attribute('topologyManagerScope', SCOPE)] + [
            _attribute(f'pci.unaffined.{kind[4:]}', f'{free}/{total}')
            for kind, (total, free) in sorted(kinds.get(None, {}).items())],
        'zones': [_zone(cell, (virtio_mem or {}).get(cell.id),
                        kinds.get(cell.id, {}),
                        assumed and assumed[cell.id])
                  for cell in cells],
    }


def pci_resource(vendor_id, product_id):
    """The NRT resource name of a kind of PCI function."""
    return f'pci-{vendor_id}-{product_id}'


def _pci_kinds(topology):
    """{node or None: {resource: (total, free)}} of the host's functions."""
    host_devices = topology.get('pci_devices') or ()
    if not host_devices:
        return {}
    devices = pci.devices_of(host_devices)
    blocked = pci.unavailable(devices, pci.held_addresses(host_devices))
    kinds = {}
    for device in devices:
        per_node = kinds.setdefault(device.numa_node, {})
        name = pci_resource(device.vendor_id, device.product_id)
        total, free = per_node.get(name, (0, 0))
        per_node[name] = (total + 1,
                          free + (device.address not in blocked))
    return kinds


def export_host_state(state):
    """Export a scheduler HostState: its usage includes reservations."""
    return export(state.host, state.topology, state.report.fingerprint)


def _zone(cell, devices=None, pci_kinds=None, assumed=None):
    zone = {
        'name': zone_name(cell.id),
        'type': ZONE_TYPE,
        'resources': [_cpu(cell), _memory(cell)] + _hugepages(cell) + [
            _resource(name, total, total, free)
            for name, (total, free) in sorted((pci_kinds or {}).items())],
        'attributes': [
            _attribute('cpus.shared', str(len(cell.cpuset))),
            _attribute('cpus.shared.usage', str(cell.cpu_usage)),
        ],
    }
    if devices:
        zone['attributes'].extend([
            _attribute('virtio-mem.devices', str(devices['devices'])),
            _attribute('virtio-mem.reclaimable',
                       str(devices['reclaimable_mb'] * _MIB)),
            _attribute('virtio-mem.growable',
                       str(devices['growable_mb'] * _MIB))])
    if assumed is not None:
        # The row placement uses: reported entries, the rest assumed.
        zone['costs'] = [{'name': zone_name(other), 'value': value}
                         for other, value in sorted(assumed.items())]
        guessed = [zone_name(other) for other in sorted(assumed)
                   if other not in cell.distances]
        if guessed:
            zone['attributes'].append(
                _attribute(ASSUMED_COSTS, ','.join(guessed)))
    elif cell.distances:
        zone['costs'] = [{'name': zone_name(other), 'value': value}
                         for other, value in sorted(
                             cell.distances.items())]
    return zone


def _cpu(cell):
    return _resource('cpu', len(cell.all_cpus), len(cell.pcpuset),
                     len(cell.free_pcpus))


def _memory(cell):
    huge = [pool for pool in cell.mempages if pool.size_kb > _SMALL_PAGE_KB]
    set_aside_kb = sum(pool.total * pool.size_kb for pool in huge)
    huge_used_kb = sum(pool.used * pool.size_kb for pool in huge)
    capacity = cell.memory_mb * _MIB
    allocatable = max(0, capacity - set_aside_kb * _KIB)
    # memory_usage_mb counts every guest's memory, huge-page backed or
    # not; what huge pages back is already out of ``allocatable``.
    small_used = max(0, cell.memory_usage_mb * _MIB - huge_used_kb * _KIB)
    return _resource('memory', capacity, allocatable,
                     max(0, allocatable - small_used))


def _hugepages(cell):
    pools = {pool.size_kb: pool for pool in cell.mempages
             if pool.size_kb > _SMALL_PAGE_KB}
    resources = []
    for size_kb in sorted(set(pools) | set(_ALWAYS_REPORTED_KB)):
        pool = pools.get(size_kb)
        size = size_kb * _KIB
        if pool is None:
            total = allocatable = free = 0
        else:
            total = pool.total
            allocatable = pool.total - pool.reserved
            free = max(0, pool.free)
        resources.append(_resource(hugepages_resource(size_kb),
                                   total * size, allocatable * size,
                                   free * size))
    return resources


def _resource(name, capacity, allocatable, available):
    # NRT amounts are Kubernetes quantities; plain decimal integers are
    # their canonical form for counts and bytes.
    return {'name': name, 'capacity': str(capacity),
            'allocatable': str(allocatable), 'available': str(available)}


def _attribute(name, value):
    return {'name': name, 'value': value}
