"""virtio-mem devices in domain XML: written, rewritten and read back.

One ``<memory model='virtio-mem'>`` device per guest cell that has one
(libvirt >= 7.9). Its ``<target>`` (size, guest node, block, requested)
is the guest's and never changes on a host; its ``<source>`` (the host
nodes backing it and their page size) is the host's, so it is written by
the same pipeline step on creation and on a migration's rewrite, from the
NUMAMigrateInfo: guest cell N's device is backed by the host node of
guest cell N and by that cell's page size. ``<current>`` (what the guest
has plugged) is libvirt's report and is kept as it is.
"""

from lxml import etree

from numamig import cpuspec
from numamig import exception

MODEL = 'virtio-mem'
_XPATH = f"devices/memory[@model='{MODEL}']"


def device_elements(doc):
    """Return {guest cell: <memory> element} of the domain's devices.

    Devices without a ``<target><node>`` (a guest without NUMA cells)
    are not numamig's and are left out.

    :raises DomainXMLError: two devices name one guest cell, or a node
        is not a number.
    """
    found = {}
    for el in doc.iterfind(_XPATH):
        text = el.findtext('target/node')
        if text is None:
            continue
        try:
            cell = int(text)
        except ValueError:
            raise _error(doc, f"virtio-mem <node> {text!r} is not a number")
        if cell in found:
            raise _error(doc, f"two virtio-mem devices for guest cell {cell}")
        found[cell] = el
    return found


def device_memory_mb(topology):
    """Return (sum of device sizes, sum of requested sizes) in MiB.

    libvirt counts memory devices in ``<memory>`` (boot memory plus every
    device's size) and refuses a domain whose devices exceed it.
    """
    cells = [c for c in (topology.cells if topology else ())
             if c.has_virtio_mem]
    return (sum(c.virtio_mem_size_mb for c in cells),
            sum(c.virtio_mem_requested_mb for c in cells))


def write_devices(doc, topology):
    """Replace the domain's virtio-mem devices by the topology's.

    Also sets ``<maxMemory>``: libvirt requires one slot per device and
    room for boot memory plus every device's size. ``<source>`` is left
    for the pipeline step (update_sources) to fill in.
    """
    for el in device_elements(doc).values():
        el.getparent().remove(el)
    cells = [c for c in (topology.cells if topology else ())
             if c.has_virtio_mem]
    old_max = doc.find('maxMemory')
    if old_max is not None:
        doc.remove(old_max)
    if not cells:
        return
    devices = doc.find('devices')
    if devices is None:
        devices = etree.SubElement(doc, 'devices')
    for cell in sorted(cells, key=lambda c: c.id):
        devices.append(_device(cell))
    boot_kib = sum(c.memory_mb for c in topology.cells) * 1024
    max_kib = boot_kib + sum(c.virtio_mem_size_mb for c in cells) * 1024
    maximum = etree.Element('maxMemory', slots=str(len(cells)), unit='KiB')
    maximum.text = str(max_kib)
    doc.find('name').addnext(maximum)


def _device(cell):
    el = etree.Element('memory', model=MODEL)
    etree.SubElement(el, 'source')
    target = etree.SubElement(el, 'target')
    for tag, kib in (('size', cell.virtio_mem_size_mb * 1024),
                     ('node', None),
                     ('block', cell.virtio_mem_block_kb),
                     ('requested', cell.virtio_mem_requested_mb * 1024)):
        child = etree.SubElement(target, tag)
        if kib is None:
            child.text = str(cell.id)
        else:
            child.set('unit', 'KiB')
            child.text = str(kib)
    return el


def check_shape(doc, info, cells):
    """Refuse devices of guest cells the NUMA info does not place."""
    stray = set(device_elements(doc)) - set(info.cell_pins)
    if stray:
        raise _error(doc, f"virtio-mem devices of guest cells "
                          f"{sorted(stray)}, but the guest has cells "
                          f"{sorted(cells)}")


def update_sources(doc, info):
    """The pipeline step: back each device by its guest cell's host node
    (``<nodemask>``) and page size (``<pagesize>``; none for the host's
    small pages). ``<target>`` (requested, current) is not touched."""
    for cell, el in sorted(device_elements(doc).items()):
        source = el.find('source')
        if source is None:
            source = etree.Element('source')
            el.insert(0, source)
        nodemask = source.find('nodemask')
        if nodemask is None:
            nodemask = etree.SubElement(source, 'nodemask')
        nodemask.text = cpuspec.format_cpu_spec(info.cell_pins[cell])
        for old in source.findall('pagesize'):
            source.remove(old)
        size = info.pagesizes.get(cell)
        if size:
            page = etree.SubElement(source, 'pagesize', unit='KiB')
            page.text = str(size)


def read_devices(doc, kib):
    """Return {guest cell: InstanceNUMACell virtio-mem fields}.

    ``kib(value, unit)`` converts libvirt sizes (migration_xml.kib).
    ``virtio_mem_current_mb`` is None where libvirt reports no
    ``<current>`` (an inactive domain).

    :raises DomainXMLError: a device without size, block or requested.
    """
    result = {}
    for cell, el in device_elements(doc).items():
        sizes = {}
        for tag in ('size', 'block', 'requested', 'current'):
            child = el.find(f'target/{tag}')
            if child is None or child.text is None:
                if tag == 'current':
                    sizes[tag] = None
                    continue
                raise _error(doc, f"virtio-mem device of guest cell {cell} "
                                  f"has no <{tag}>")
            sizes[tag] = int(kib(child.text, child.get('unit', 'KiB')))
        result[cell] = {
            'virtio_mem_size_mb': sizes['size'] // 1024,
            'virtio_mem_block_kb': sizes['block'],
            'virtio_mem_requested_mb': sizes['requested'] // 1024,
            'virtio_mem_current_mb': None if sizes['current'] is None
            else sizes['current'] // 1024}
    return result


def _error(doc, reason):
    return exception.DomainXMLError(domain=doc.findtext('name') or
                                    '(unnamed)', reason=reason)
