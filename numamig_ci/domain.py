"""Domain XML -> the placement a guest really has, read independently.

The harness parses the XML itself instead of through numamig's own
parser (numamig/virt/libvirt/guest_parse.py): a bug shared by the writer
and the reader must not cancel out in the checks.
"""

import dataclasses

from lxml import etree

from numamig import cpuspec


@dataclasses.dataclass(frozen=True)
class DomainPlacement:
    """The NUMA-related parts of one domain XML document.

    Sets are frozensets of pCPUs (or host nodes); None where the element
    is absent. ``pins`` maps vCPU -> pCPUs of ``<vcpupin>``,
    ``iothread_pins`` iothread id -> pCPUs, ``memnodes`` guest cell ->
    host nodes, ``pagesizes`` guest cell -> page size in KiB.
    """

    name: str
    uuid: str
    vcpus: int
    vcpu_cpuset: frozenset | None
    pins: dict
    emulator_pins: frozenset | None
    iothread_pins: dict
    memory_nodeset: frozenset | None
    memnodes: dict
    pagesizes: dict
    guest_cells: dict

    @property
    def pinned_pcpus(self):
        """Every pCPU a vCPU of this domain may run on."""
        return frozenset().union(*self.pins.values())


def parse(xml_text):
    """Return the DomainPlacement of a domain XML string.

    :raises ValueError: the text is not a domain XML document.
    """
    try:
        doc = etree.fromstring(xml_text.encode())
    except etree.XMLSyntaxError as exc:
        raise ValueError(f"not XML: {exc}")
    if doc.tag != 'domain':
        raise ValueError(f"root element is <{doc.tag}>, not <domain>")
    vcpu = doc.find('vcpu')
    memory = doc.find('numatune/memory')
    emulator = doc.find('cputune/emulatorpin')
    return DomainPlacement(
        name=doc.findtext('name') or '',
        uuid=doc.findtext('uuid') or '',
        vcpus=int(vcpu.text) if vcpu is not None else 0,
        vcpu_cpuset=_cpus(vcpu.get('cpuset')) if vcpu is not None else None,
        pins={int(p.get('vcpu')): _cpus(p.get('cpuset'))
              for p in doc.iterfind('cputune/vcpupin')},
        emulator_pins=_cpus(emulator.get('cpuset'))
        if emulator is not None else None,
        iothread_pins={int(p.get('iothread')): _cpus(p.get('cpuset'))
                       for p in doc.iterfind('cputune/iothreadpin')},
        memory_nodeset=_cpus(memory.get('nodeset'))
        if memory is not None else None,
        memnodes={int(m.get('cellid')): _cpus(m.get('nodeset'))
                  for m in doc.iterfind('numatune/memnode')},
        pagesizes=_pagesizes(doc),
        guest_cells={int(c.get('id')): _cpus(c.get('cpus'))
                     for c in doc.iterfind('cpu/numa/cell')})


def _cpus(spec):
    if spec is None:
        return None
    return frozenset(cpuspec.parse_cpu_spec(spec))


def _pagesizes(doc):
    sizes = {}
    for page in doc.iterfind('memoryBacking/hugepages/page'):
        size_kb = _kib(int(page.get('size')), page.get('unit', 'KiB'))
        for cell in _cpus(page.get('nodeset')) or ():
            sizes[cell] = size_kb
    return sizes


def _kib(value, unit):
    factor = {'k': 1, 'kib': 1, 'm': 1024, 'mib': 1024, 'g': 1024 ** 2,
              'gib': 1024 ** 2}
    return value * factor.get(unit.lower(), 1)


def fmt(cpus):
    """A CPU set as operators write it ('1-3,9'), or 'none'."""
    if cpus is None:
        return 'none'
    return cpuspec.format_cpu_spec(cpus) if cpus else '(empty)'


def cell_distances(xml_text):
    """{guest cell: {guest cell: distance}} of each ``<cpu><numa><cell>``'s
    ``<distances>`` (cells without any: an empty row)."""
    doc = etree.fromstring(xml_text.encode())
    return {int(cell.get('id')): {int(s.get('id')): int(s.get('value'))
                                  for s in cell.iterfind('distances/sibling')}
            for cell in doc.iterfind('cpu/numa/cell')}
