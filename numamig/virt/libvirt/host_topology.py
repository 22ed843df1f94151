"""Host capabilities XML -> HostNUMATopology, with this host's settings.

libvirt reports what the hardware has; what guests may use of it is
narrowed by configuration: the dedicated and shared CPU sets, memory kept
for the host and huge pages kept for host services. Both steps live here
so that the topology an agent reports is exactly what its fit may use.
"""

import dataclasses

from lxml import etree

from numamig import cpuspec
from numamig import exception
from numamig import objects

SMALL_PAGE_KB = 4


@dataclasses.dataclass(frozen=True)
class CapsCell:
    """One NUMA cell as libvirt reports it, before any configuration."""

    id: int
    cpus: frozenset
    siblings: tuple
    memory_kb: int
    pages: dict
    distances: dict
    # The socket (package) of the cell's online CPUs, None when they are
    # on several or none say.
    socket: int | None = None


def parse_capabilities(xml_text, host='?', source='getCapabilities()'):
    """Return the CapsCells of a ``<capabilities>`` document, by cell id.

    Offline CPUs (listed without a socket) are left out: no guest can run
    on them.

    :raises CapabilitiesError: unparsable XML, or no NUMA cells (the
        libvirt test driver with a custom node file reports none: give
        the host a [libvirt] capabilities_file).
    """
    try:
        root = etree.fromstring(_as_bytes(xml_text))
    except etree.XMLSyntaxError as exc:
        raise exception.CapabilitiesError(
            host=host, source=source, reason=f"not XML: {exc}")
    cells = [_parse_cell(el, host, source)
             for el in root.iterfind('./host/topology/cells/cell')]
    if not cells:
        raise exception.CapabilitiesError(
            host=host, source=source,
            reason="no <host><topology><cells><cell> elements; a libvirt "
                   "test driver host needs [libvirt] capabilities_file")
    return sorted(cells, key=lambda c: c.id)


def _as_bytes(xml_text):
    return xml_text.encode() if isinstance(xml_text, str) else xml_text


def _parse_cell(el, host, source):
    try:
        cell_id = int(el.get('id'))
        memory_kb = _kib(el.find('memory'))
        pages = {int(p.get('size')): int(p.text)
                 for p in el.iterfind('pages')}
        distances = {int(s.get('id')): int(s.get('value'))
                     for s in el.iterfind('distances/sibling')}
        online = [c for c in el.iterfind('cpus/cpu')
                  if c.get('socket_id') is not None]
        cpus = frozenset(int(c.get('id')) for c in online)
        groups = {frozenset(cpuspec.parse_cpu_spec(c.get('siblings')
                                                   or c.get('id')))
                  for c in online}
    except (TypeError, ValueError, AttributeError) as exc:
        raise exception.CapabilitiesError(
            host=host, source=source,
            reason=f"malformed cell {el.get('id')!r}: {exc}")
    siblings = tuple(sorted((g & cpus for g in groups if g & cpus),
                            key=min))
    sockets = {c.get('socket_id') for c in online}
    socket = int(sockets.pop()) if len(sockets) == 1 else None
    return CapsCell(id=cell_id, cpus=cpus, siblings=siblings,
                    memory_kb=memory_kb, pages=pages, distances=distances,
                    socket=socket)


def _kib(el):
    factor = {'KiB': 1, 'MiB': 1024, 'GiB': 1024 * 1024}[
        el.get('unit', 'KiB')]
    return int(el.text) * factor


def build_host_topology(cells, settings, pci_devices=()):
    """Return the HostNUMATopology guests may use on this host.

    :param cells: CapsCells from ``parse_capabilities``.
    :param settings: the driver's LibvirtSettings.
    :param pci_devices: the assignable HostPCIDevices
        (nodedev.assignable_devices).
    :raises InvalidConfiguration: a CPU set names CPUs the host lacks,
        the memory reservation exceeds cell 0's small pages, or a huge page
        reservation names a node, size or count the host lacks.
    """
    dedicated, shared = _cpu_sets(cells, settings)
    reserved = _reserved_pages(cells, settings)
    host_cells = []
    for cell in cells:
        reserved_mb = (settings.reserved_host_memory_mb
                       if cell is cells[0] else 0)
        if reserved_mb > cell.memory_kb // 1024:
            raise exception.InvalidConfiguration(
                option='[compute] reserved_host_memory_mb',
                reason=f"{reserved_mb} MiB exceeds the "
                       f"{cell.memory_kb // 1024} MiB of NUMA node "
                       f"{cell.id}")
        host_cells.append(objects.HostNUMACell(
            id=cell.id,
            cpuset=set(cell.cpus & shared),
            pcpuset=set(cell.cpus & dedicated),
            pinned_cpus=set(),
            siblings=[set(g & (dedicated | shared)) for g in cell.siblings
                      if g & (dedicated | shared)],
            memory_mb=cell.memory_kb // 1024 - reserved_mb,
            mempages=_pools(cell, reserved, reserved_mb),
            distances=dict(cell.distances),
            socket=cell.socket))
    return objects.HostNUMATopology(
        cells=host_cells, pci_devices=list(pci_devices)).validate()


def _cpu_sets(cells, settings):
    """Return (dedicated, shared) pCPU sets, checked against the host."""
    host_cpus = frozenset().union(*(c.cpus for c in cells))
    for option, value in (('cpu_dedicated_set', settings.cpu_dedicated_set),
                          ('cpu_shared_set', settings.cpu_shared_set)):
        missing = (value or frozenset()) - host_cpus
        if missing:
            raise exception.InvalidConfiguration(
                option=f'[compute] {option}',
                reason=f"CPUs {cpuspec.format_cpu_spec(missing)} are not "
                       f"online CPUs of host {settings.host} (it has "
                       f"{cpuspec.format_cpu_spec(host_cpus)})")
    shared = settings.cpu_shared_set or frozenset()
    if settings.cpu_dedicated_set is None:
        return host_cpus - shared, shared
    return settings.cpu_dedicated_set, shared


def _reserved_pages(cells, settings):
    """Return {(node, size_kb): count} after checking it fits the host."""
    by_id = {c.id: c for c in cells}
    result = {}
    for entry in settings.reserved_huge_pages:
        cell = by_id.get(entry.node)
        if cell is None:
            reason = f"host has no NUMA node {entry.node} (nodes: " \
                     f"{sorted(by_id)})"
        elif entry.size_kb not in cell.pages:
            reason = f"node {entry.node} has no {entry.size_kb} KiB pages " \
                     f"(sizes: {sorted(cell.pages)})"
        elif entry.count > cell.pages[entry.size_kb]:
            reason = f"node {entry.node} has {cell.pages[entry.size_kb]} " \
                     f"pages of {entry.size_kb} KiB, fewer than the " \
                     f"{entry.count} to reserve"
        else:
            result[(entry.node, entry.size_kb)] = entry.count
            continue
        raise exception.InvalidConfiguration(
            option='[compute] reserved_huge_pages', reason=reason)
    return result


def _pools(cell, reserved, reserved_mb):
    pools = []
    for size_kb, total in sorted(cell.pages.items()):
        count = reserved.get((cell.id, size_kb), 0)
        if size_kb == SMALL_PAGE_KB:
            count = reserved_mb * 1024 // SMALL_PAGE_KB
            if count > total:
                raise exception.InvalidConfiguration(
                    option='[compute] reserved_host_memory_mb',
                    reason=f"{reserved_mb} MiB exceeds the "
                           f"{total * SMALL_PAGE_KB // 1024} MiB of small "
                           f"pages of NUMA node {cell.id}")
        pools.append(objects.NUMAPagesTopology(
            size_kb=size_kb, total=total, used=0, reserved=count))
    return pools
