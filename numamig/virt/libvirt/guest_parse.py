"""Domain XML -> the NUMA placement it expresses.

Two readings of one domain: ``parse_guest_topology`` rebuilds the
InstanceNUMATopology (so existing guests can be adopted and audited), and
``extract_numa_info`` returns the NUMAMigrateInfo the XML carries (what a
rewrite wrote, so a test or an audit can compare it with what was meant).
"""

from numamig import cpuspec
from numamig import exception
from numamig import objects
from numamig.numa import distance
from numamig.objects import fields as nm_fields
from numamig.virt.libvirt import guest_xml
from numamig.virt.libvirt import migration_xml
from numamig.virt.libvirt import virtio_mem


def parse_guest_topology(xml_text):
    """Return the InstanceNUMATopology a domain XML expresses.

    Host cells come from ``<numatune><memnode>``, pins from
    ``<vcpupin>``, page sizes from ``<memoryBacking>``, realtime vCPUs
    from ``<vcpusched>``. Which vCPUs are dedicated (rather than floating
    on a one-pCPU shared set) and the policies come from numamig's
    metadata; for a guest numamig did not create, a vCPU pinned alone to
    one pCPU no other vCPU uses counts as dedicated.

    :returns: the topology, or None for a guest without ``<cpu><numa>``.
    :raises DomainXMLError: the XML is malformed.
    """
    doc = migration_xml.parse_domain(xml_text)
    try:
        return _topology(doc)
    except (TypeError, ValueError, cpuspec.CPUSpecError) as exc:
        raise exception.DomainXMLError(domain=migration_xml.domain_name(doc),
                                       reason=f"malformed NUMA part: {exc}")


def extract_numa_info(xml_text):
    """Return the NUMAMigrateInfo written in a domain XML.

    :raises DomainXMLError: the XML is malformed.
    """
    doc = migration_xml.parse_domain(xml_text)
    try:
        return _info(doc)
    except (TypeError, ValueError, cpuspec.CPUSpecError) as exc:
        raise exception.DomainXMLError(domain=migration_xml.domain_name(doc),
                                       reason=f"malformed NUMA part: {exc}")


def _info(doc):
    sched = _sched_vcpus(doc)
    priorities = {p for p in sched.values() if p is not None}
    vcpu = doc.find('vcpu')
    floating = vcpu.get('cpuset') if vcpu is not None else None
    emulator = doc.find('cputune/emulatorpin')
    return objects.NUMAMigrateInfo(
        cpu_pins=_vcpu_pins(doc),
        cell_pins={cell: {node} for cell, node in _memnodes(doc).items()},
        emulator_pins=_cpus(emulator.get('cpuset')) if emulator is not None
        else set(),
        sched_vcpus=set(sched),
        sched_priority=min(priorities) if priorities else None,
        pagesizes=migration_xml.page_sizes(doc),
        floating_cpus=_cpus(floating) if floating else None,
        cell_distances=_cell_distances(doc))


def _cell_distances(doc):
    """The guest cells' ``<distances>`` as NUMAMigrateInfo carries them:
    only a full table over the guest's cells that a guest's firmware
    table can carry (10 to itself, 11-255 between two); anything else
    (none, a partial or an invalid table someone wrote) is {}, not
    numamig's to carry."""
    cells = [int(c.get('id')) for c in doc.iterfind('cpu/numa/cell')]
    table = {}
    for cell in doc.iterfind('cpu/numa/cell'):
        row = {int(s.get('id')): int(s.get('value'))
               for s in cell.iterfind('distances/sibling')}
        table[int(cell.get('id'))] = row
    if len(cells) < 2:
        return {}
    for cell, row in table.items():
        if set(row) != set(cells) or row[cell] != distance.LOCAL or any(
                not distance.LOCAL < value <= distance.GUEST_MAX
                for other, value in row.items() if other != cell):
            return {}
    return table


def _topology(doc):
    cells = doc.findall('cpu/numa/cell')
    if not cells:
        return None
    meta = _metadata(doc)
    pins = _vcpu_pins(doc)
    pinned = _pinned_vcpus(meta, pins)
    memnodes = _memnodes(doc)
    pagesizes = migration_xml.page_sizes(
        doc, {int(c.get('id')) for c in cells})
    realtime = set(_sched_vcpus(doc))
    emulator = doc.find('cputune/emulatorpin')
    isolate = meta.get('emulator_threads_policy') == \
        nm_fields.CPUEmulatorThreadsPolicy.ISOLATE
    devices = virtio_mem.read_devices(doc, migration_xml.kib)
    guest_cells = []
    for el in sorted(cells, key=lambda c: int(c.get('id'))):
        cell_id, vcpus = int(el.get('id')), _cpus(el.get('cpus'))
        guest_cells.append(objects.InstanceNUMACell(
            id=cell_id, host_cell=memnodes.get(cell_id),
            cpuset=vcpus - pinned, pcpuset=vcpus & pinned,
            memory_mb=int(migration_xml.kib(el.get('memory'),
                                             el.get('unit', 'KiB'))
                          // 1024),
            pagesize=pagesizes.get(cell_id),
            cpu_pinning={v: min(pins[v]) for v in vcpus & pinned
                         if v in pins},
            cpuset_reserved=_cpus(emulator.get('cpuset'))
            if isolate and cell_id == 0 and emulator is not None else None,
            cpu_policy=meta.get('cpu_policy') if meta else
            _policy(vcpus, pinned),
            cpu_thread_policy=meta.get('cpu_thread_policy'),
            realtime_vcpus=vcpus & realtime,
            **devices.get(cell_id, {})))
    return objects.InstanceNUMATopology(
        instance_uuid=doc.findtext('uuid'), cells=guest_cells,
        emulator_threads_policy=meta.get('emulator_threads_policy'))


def _metadata(doc):
    el = doc.find(f'metadata/{guest_xml.METADATA_TAG}')
    return dict(el.attrib) if el is not None else {}


def _pinned_vcpus(meta, pins):
    if 'pinned_vcpus' in meta:
        return _cpus(meta['pinned_vcpus'])
    single = [next(iter(p)) for p in pins.values() if len(p) == 1]
    return {vcpu for vcpu, pcpus in pins.items()
            if len(pcpus) == 1 and single.count(next(iter(pcpus))) == 1}


def _policy(vcpus, pinned):
    if vcpus <= pinned:
        return nm_fields.CPUAllocationPolicy.DEDICATED
    if vcpus & pinned:
        return nm_fields.CPUAllocationPolicy.MIXED
    return None


def _vcpu_pins(doc):
    return {int(el.get('vcpu')): _cpus(el.get('cpuset'))
            for el in doc.iterfind('cputune/vcpupin')}


def _memnodes(doc):
    """Return {guest cell: host node} from <numatune><memnode>."""
    result = {}
    for el in doc.iterfind('numatune/memnode'):
        nodes = _cpus(el.get('nodeset'))
        if len(nodes) != 1:
            raise ValueError(f"memnode of guest cell {el.get('cellid')} "
                             f"binds to nodes {sorted(nodes)}, not one")
        result[int(el.get('cellid'))] = nodes.pop()
    return result


def _sched_vcpus(doc):
    """Return {vCPU: priority} of realtime-scheduled vCPUs."""
    result = {}
    for el in doc.iterfind('cputune/vcpusched'):
        if el.get('scheduler') in migration_xml.REALTIME_SCHEDULERS:
            priority = el.get('priority')
            for vcpu in _cpus(el.get('vcpus')):
                result[vcpu] = int(priority) if priority else None
    return result


def _cpus(spec):
    return cpuspec.parse_cpu_spec(spec)
