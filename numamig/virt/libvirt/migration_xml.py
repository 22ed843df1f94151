"""Write a NUMAMigrateInfo into domain XML: the migration rewrite pipeline.

The source of a live migration turns its own domain XML into the one the
destination must run: every NUMA-related part (vCPU, emulator and I/O
thread pins, realtime scheduling, guest cell -> host node memory binding,
huge page backing, the floating vCPU set, the host node and page size
backing each guest cell's virtio-mem device, the distances between the
guest's cells) is replaced from the destination's NUMAMigrateInfo;
everything else is left as it was. Each XML section has one
``_update_<section>(doc, info)`` step. A guest numamig creates goes
through the same steps, so there is one writer.
"""

from lxml import etree

from numamig import cpuspec
from numamig import exception
from numamig.virt.libvirt import hostdev_xml
from numamig.virt.libvirt import virtio_mem

DEFAULT_SCHEDULER = 'fifo'
REALTIME_SCHEDULERS = ('fifo', 'rr')


def get_updated_xml(xml_text, info, live=False):
    """Return the domain XML ``xml_text`` rewritten for ``info``.

    The input text is parsed into a new document, so nothing the caller
    holds is changed. ``live``: the XML a running guest continues with
    (see apply_numa_info).

    :raises DomainXMLError: the XML cannot be parsed, or ``info`` does not
        fit its shape (a guest cell or vCPU the guest lacks).
    """
    doc = parse_domain(xml_text)
    apply_numa_info(doc, info, live=live)
    return etree.tostring(doc, encoding='unicode')


def get_migration_xml(xml_text, info):
    """Return the XML a live migration carries to its destination.

    The NUMA rewrite of ``info`` (None: the path of releases before
    NUMA-aware migration, NUMA parts as they are), then the steps only a
    migration takes (``_MIGRATION_STEPS``): no passed-through PCI device
    travels, the destination plugs its own after the arrival
    (numamig.virt.libvirt.hostdev). Unchanged text is returned as it
    came.

    :raises DomainXMLError: as get_updated_xml.
    """
    doc = parse_domain(xml_text)
    changed = info is not None
    if changed:
        apply_numa_info(doc, info)
    for step in _MIGRATION_STEPS:
        changed = step(doc) or changed
    if not changed:
        return xml_text
    return etree.tostring(doc, encoding='unicode')


def parse_domain(xml_text):
    """Return the root element of a domain XML document.

    :raises DomainXMLError: the text is not a ``<domain>`` document.
    """
    try:
        doc = etree.fromstring(
            xml_text.encode() if isinstance(xml_text, str) else xml_text)
    except etree.XMLSyntaxError as exc:
        raise exception.DomainXMLError(domain='(unparsed)',
                                       reason=f"not XML: {exc}")
    if doc.tag != 'domain':
        raise exception.DomainXMLError(
            domain='(unparsed)', reason=f"root element is <{doc.tag}>, "
                                        f"not <domain>")
    return doc


def apply_numa_info(doc, info, live=False):
    """Rewrite the NUMA parts of the domain element ``doc`` in place.

    Shape is checked first, so on error ``doc`` is unchanged.

    :param live: ``doc`` is the XML a running guest continues with (a
        migration's DEST_XML, an incoming one the guard filters): its
        cells' ``<distances>`` are left as they are. They are part of
        the guest's ABI: QEMU built the guest's firmware table (ACPI
        SLIT) from them at start, and libvirt refuses a destination
        whose distances differ ("Target NUMA distance from 0 to 1
        doesn't match source"). The destination's distances go to the
        persistent definition (``live=False``), which the guest's next
        start uses.

    :raises DomainXMLError: ``info`` names guest cells or vCPUs that the
        domain lacks, or omits guest cells that it has.
    """
    _check_shape(doc, info)
    for step in _STEPS:
        if live and step in _PERSISTENT_ONLY:
            continue
        step(doc, info)


def domain_name(doc):
    return doc.findtext('name') or '(unnamed)'


def vcpu_count(doc):
    """Return the domain's maximum vCPU count."""
    text = doc.findtext('vcpu')
    try:
        return int(text)
    except (TypeError, ValueError):
        raise exception.DomainXMLError(
            domain=domain_name(doc),
            reason=f"<vcpu> is {text!r}, not a vCPU count")


def guest_cell_ids(doc):
    """Return the ids of the guest NUMA cells of ``<cpu><numa>``."""
    return {int(cell.get('id')) for cell in doc.iterfind('cpu/numa/cell')}


def page_sizes(doc, cells=None):
    """Return {guest cell: page size KiB} from ``<memoryBacking>``.

    A ``<page>`` without a nodeset backs every guest cell (``cells``,
    default the domain's own); cells without one use small pages and
    are absent.
    """
    if cells is None:
        cells = guest_cell_ids(doc)
    result = {}
    for el in doc.iterfind('memoryBacking/hugepages/page'):
        size = int(kib(el.get('size'), el.get('unit', 'KiB')))
        nodeset = el.get('nodeset')
        for cell in (cpuspec.parse_cpu_spec(nodeset) if nodeset else cells):
            result[cell] = size
    return result


_UNIT_KIB = {'b': 1 / 1024, 'bytes': 1 / 1024, 'k': 1, 'kib': 1,
             'kb': 1000 / 1024, 'm': 1024, 'mib': 1024, 'mb': 1000 ** 2 /
             1024, 'g': 1024 ** 2, 'gib': 1024 ** 2}


def kib(value, unit):
    """``value`` in libvirt's ``unit`` (KiB, M, GiB, bytes...) as KiB.

    :raises ValueError: an unknown unit or a value that is no number.
    """
    try:
        factor = _UNIT_KIB[unit.lower()]
    except KeyError:
        raise ValueError(f"unknown memory unit {unit!r}")
    return int(value) * factor


def _check_shape(doc, info):
    name, cells = domain_name(doc), guest_cell_ids(doc)
    vcpus = set(range(vcpu_count(doc)))
    pinned_cells = set(info.cell_pins)
    if pinned_cells != cells:
        raise exception.DomainXMLError(
            domain=name,
            reason=f"NUMA info places guest cells {sorted(pinned_cells)} "
                   f"but the guest has cells {sorted(cells)}")
    for what, ids in (('pins', set(info.cpu_pins)),
                      ('realtime scheduling', info.sched_vcpus)):
        stray = ids - vcpus
        if stray:
            raise exception.DomainXMLError(
                domain=name,
                reason=f"NUMA info has {what} for vCPUs {sorted(stray)}, "
                       f"the guest has vCPUs 0-{len(vcpus) - 1}")
    told = set(getattr(info, 'cell_distances', None) or {})
    if told and told != cells:
        raise exception.DomainXMLError(
            domain=name,
            reason=f"NUMA info has distances for guest cells "
                   f"{sorted(told)} but the guest has cells {sorted(cells)}")
    virtio_mem.check_shape(doc, info, cells)
    stray_pages = set(info.pagesizes) - cells
    if stray_pages:
        raise exception.DomainXMLError(
            domain=name,
            reason=f"NUMA info has page sizes for guest cells "
                   f"{sorted(stray_pages)} the guest lacks "
                   f"({sorted(cells)})")


def _update_vcpu(doc, info):
    # Placement 'auto' (numad, as virt-install writes it) makes libvirt
    # drop the cpuset: the floating vCPUs would run anywhere on the
    # destination. Found by the XML corpus (issue 17).
    vcpu = doc.find('vcpu')
    if info.floating_cpus:
        vcpu.set('placement', 'static')
        vcpu.set('cpuset', cpuspec.format_cpu_spec(info.floating_cpus))
    else:
        vcpu.attrib.pop('cpuset', None)


def _update_vcpupins(doc, info):
    cputune = _child(doc, 'cputune', after='vcpu')
    _remove_all(cputune, 'vcpupin')
    for vcpu, pcpus in sorted(info.cpu_pins.items()):
        _insert(cputune, 'vcpupin', vcpu=str(vcpu),
                cpuset=cpuspec.format_cpu_spec(pcpus))


def _update_emulatorpin(doc, info):
    cputune = _child(doc, 'cputune', after='vcpu')
    _remove_all(cputune, 'emulatorpin')
    if info.emulator_pins:
        _insert(cputune, 'emulatorpin',
                cpuset=cpuspec.format_cpu_spec(info.emulator_pins))


def _update_iothreadpins(doc, info):
    # I/O threads share the emulator threads' pCPUs: both serve the guest
    # without being its vCPUs. Every I/O thread gets its pin, whether the
    # source had one or not: guests created before their pins were
    # written (Nova bug 2139351's) would otherwise run their I/O threads
    # on any destination pCPU, other guests' dedicated ones included.
    # Pins only name threads the guest has: libvirt refuses the others.
    cputune = _child(doc, 'cputune', after='vcpu')
    _remove_all(cputune, 'iothreadpin')
    if info.emulator_pins:
        cpuset = cpuspec.format_cpu_spec(info.emulator_pins)
        for thread in iothread_ids(doc):
            _insert(cputune, 'iothreadpin', iothread=str(thread),
                    cpuset=cpuset)


def iothread_ids(doc):
    """Return the ids of the guest's I/O threads, as libvirt numbers them.

    ``<iothreadids>`` names some or all; libvirt gives the rest of the
    ``<iothreads>`` count the lowest ids not taken, from 1.

    :raises DomainXMLError: ``<iothreads>`` or an id is not a number.
    """
    try:
        count = int(doc.findtext('iothreads') or 0)
        named = [int(el.get('id'))
                 for el in doc.iterfind('iothreadids/iothread')]
    except (TypeError, ValueError) as exc:
        raise exception.DomainXMLError(
            domain=domain_name(doc), reason=f"malformed I/O threads: {exc}")
    free = (i for i in range(1, count + len(named) + 1) if i not in named)
    return sorted(named + [next(free)
                           for _ in range(max(count - len(named), 0))])


def _update_vcpusched(doc, info):
    cputune = _child(doc, 'cputune', after='vcpu')
    old = cputune.findall('vcpusched')
    schedulers = {el.get('scheduler') for el in old} & set(
        REALTIME_SCHEDULERS)
    scheduler = schedulers.pop() if len(schedulers) == 1 else \
        DEFAULT_SCHEDULER
    _remove_all(cputune, 'vcpusched')
    if info.sched_vcpus:
        _insert(cputune, 'vcpusched',
                vcpus=cpuspec.format_cpu_spec(info.sched_vcpus),
                scheduler=scheduler, priority=str(info.sched_priority))


def _update_numatune(doc, info):
    old = doc.find('numatune')
    if not info.cell_pins:
        if old is not None:
            doc.remove(old)
        return
    numatune = _child(doc, 'numatune', after='cputune')
    memory = numatune.find('memory')
    if memory is None:
        memory = etree.Element('memory', mode='strict')
        numatune.insert(0, memory)
    memory.attrib.pop('placement', None)
    memory.set('nodeset', cpuspec.format_cpu_spec(info.host_nodes))
    modes = {el.get('cellid'): el.get('mode', 'strict')
             for el in numatune.iterfind('memnode')}
    _remove_all(numatune, 'memnode')
    for cell, nodes in sorted(info.cell_pins.items()):
        _insert(numatune, 'memnode', cellid=str(cell),
                mode=modes.get(str(cell), 'strict'),
                nodeset=cpuspec.format_cpu_spec(nodes))


def _update_memory_backing(doc, info):
    # <page nodeset> names GUEST cells, so the nodesets only change when
    # the page sizes do; writing them from info keeps them valid either way.
    backing = doc.find('memoryBacking')
    if not info.pagesizes:
        if backing is not None and backing.find('hugepages') is not None:
            backing.remove(backing.find('hugepages'))
            if len(backing) == 0:
                doc.remove(backing)
        return
    backing = _child(doc, 'memoryBacking', after='currentMemory')
    hugepages = backing.find('hugepages')
    if hugepages is None:
        hugepages = etree.SubElement(backing, 'hugepages')
    _remove_all(hugepages, 'page')
    by_size = {}
    for cell, size in info.pagesizes.items():
        by_size.setdefault(size, set()).add(cell)
    for size, cells in sorted(by_size.items()):
        etree.SubElement(hugepages, 'page', size=str(size), unit='KiB',
                         nodeset=cpuspec.format_cpu_spec(cells))


def _update_virtio_mem(doc, info):
    # Each guest cell's virtio-mem device follows the cell's host node
    # and page size; its requested/current sizes travel unchanged.
    virtio_mem.update_sources(doc, info)


def _update_distances(doc, info):
    # Each guest cell's <distances> are those between the host nodes the
    # cells are placed on (the destination's, in a migration), so a
    # guest rebooted there reads its real locality from its firmware
    # (ACPI SLIT). A running guest's kernel read its table at boot and
    # keeps it: nothing here changes what it sees before a reboot. Not
    # told (a host without a full table, a destination that does not
    # tell, a guest of one cell): no <distances>, rather than the
    # source's, which no longer describe where the cells are; the guest
    # kernel then assumes local 10, remote 20, as numamig does.
    table = getattr(info, 'cell_distances', None) or {}
    for cell in doc.iterfind('cpu/numa/cell'):
        _remove_all(cell, 'distances')
        row = table.get(int(cell.get('id')))
        if not row:
            continue
        distances = etree.Element('distances')
        for other, value in sorted(row.items()):
            etree.SubElement(distances, 'sibling', id=str(other),
                             value=str(value))
        # libvirt's schema puts <distances> before a cell's <cache>.
        cell.insert(0, distances)


def _drop_empty_cputune(doc, info):
    cputune = doc.find('cputune')
    if cputune is not None and len(cputune) == 0:
        doc.remove(cputune)


_STEPS = (_update_vcpu, _update_vcpupins, _update_emulatorpin,
          _update_iothreadpins, _update_vcpusched, _update_numatune,
          _update_memory_backing, _update_virtio_mem, _update_distances,
          _drop_empty_cputune)
# What a running guest cannot change (apply_numa_info's ``live``).
_PERSISTENT_ONLY = (_update_distances,)


def with_running_distances(xml_text, running_text):
    """``xml_text`` with each cell's ``<distances>`` as the running
    guest's XML ``running_text`` has them (none where it has none).

    A migration's DEST_XML must keep the distances the guest runs with
    (apply_numa_info's ``live``), its PERSIST_XML carries the
    destination's: this makes the first from the second. Returns
    ``xml_text`` itself when nothing differs.

    :raises DomainXMLError: either text is not a domain XML.
    """
    doc, running = parse_domain(xml_text), parse_domain(running_text)
    rows = {cell.get('id'): cell.find('distances')
            for cell in running.iterfind('cpu/numa/cell')}
    changed = False
    for cell in doc.iterfind('cpu/numa/cell'):
        want = rows.get(cell.get('id'))
        have = cell.find('distances')
        if _text(want) == _text(have):
            continue
        changed = True
        _remove_all(cell, 'distances')
        if want is not None:
            cell.insert(0, etree.fromstring(
                etree.tostring(want, with_tail=False)))
    return etree.tostring(doc, encoding='unicode') if changed else xml_text


def _text(element):
    if element is None:
        return None
    return [(s.get('id'), s.get('value'))
            for s in element.iterfind('sibling')]


def _drop_assigned_devices(doc):
    # libvirt refuses to migrate a guest holding a VFIO device; the
    # source unplugged them before the copy, and a device the guest
    # still held then would make the destination claim the source's
    # host address. Returns whether anything was dropped.
    return bool(hostdev_xml.drop_assigned_devices(doc))


# Steps of a migration's XML only: a guest numamig creates, and a
# destination's persistent definition rewritten to its claim, keep their
# devices.
_MIGRATION_STEPS = (_drop_assigned_devices,)


def _child(parent, tag, after):
    """Return ``parent``'s ``tag`` child, creating it after ``after``."""
    child = parent.find(tag)
    if child is None:
        child = etree.Element(tag)
        anchor = parent.find(after)
        if anchor is None:
            parent.append(child)
        else:
            anchor.addnext(child)
    return child


def _remove_all(parent, tag):
    for el in parent.findall(tag):
        parent.remove(el)


def _insert(parent, tag, **attrs):
    # Keep elements of one kind together, where libvirt itself puts them.
    same = parent.findall(tag)
    el = etree.Element(tag, **attrs)
    if same:
        same[-1].addnext(el)
    else:
        parent.append(el)
    return el
