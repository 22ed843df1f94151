"""Passed-through PCI devices in domain XML: pure parsing, no libvirt.

The XML half of numamig.virt.libvirt.hostdev, apart so that the
migration XML pipeline (and the command-line tools that read XML) never
load the libvirt library: the devices a guest holds (``<hostdev
mode='subsystem' type='pci'>`` and SR-IOV ``<interface
type='hostdev'>``), their host PCI addresses, the XML to plug one again
or a destination's claimed one in its place, and each guest cell's host
nodes from ``<numatune>``.
"""

import collections
import copy

from lxml import etree

from numamig import cpuspec

# A user alias survives an attach (libvirt drops the others and names
# the device anew).
USER_ALIAS_PREFIX = 'ua-'
_PCI_FIELDS = ('domain', 'bus', 'slot', 'function')

AssignedDevice = collections.namedtuple(
    'AssignedDevice', ['address', 'alias', 'xml'])
AssignedDevice.__doc__ = """One passed-through PCI device of a guest:
``address`` the host's 'DDDD:BB:SS.F', ``alias`` libvirt's name of it in
the guest (or None), ``xml`` its element as libvirt wrote it."""


def format_address(domain, bus, slot, function):
    return f'{domain:04x}:{bus:02x}:{slot:02x}.{function:x}'


def parse_address(text):
    """(domain, bus, slot, function) of 'DDDD:BB:SS.F' (or 'BB:SS.F').

    :raises ValueError: not a PCI address.
    """
    try:
        head, function = text.strip().lower().rsplit('.', 1)
        parts = head.split(':')
        if len(parts) == 2:
            parts.insert(0, '0')
        domain, bus, slot = (int(p, 16) for p in parts)
        value = (domain, bus, slot, int(function, 16))
    except (ValueError, AttributeError):
        raise ValueError(f"not a PCI address (DDDD:BB:SS.F): {text!r}")
    if not (value[0] <= 0xffff and value[1] <= 0xff and value[2] <= 0x1f
            and value[3] <= 7):
        raise ValueError(f"PCI address out of range: {text!r}")
    return value


def canonical(text):
    """'DDDD:BB:SS.F' in lower case of any spelling parse_address takes."""
    return format_address(*parse_address(text))


def nodedev_name(address):
    """libvirt's node device name of a PCI address: pci_0000_81_00_0."""
    domain, bus, slot, function = parse_address(address)
    return f'pci_{domain:04x}_{bus:02x}_{slot:02x}_{function:x}'


def source_address(el):
    """The host PCI address of a device element, or None."""
    source = el.find('source/address')
    if source is None or (el.tag == 'interface' and
                          source.get('type', 'pci') != 'pci'):
        return None
    try:
        return format_address(*(int(source.get(f, '0'), 0)
                                for f in _PCI_FIELDS))
    except ValueError:
        return None


def assigned_elements(doc):
    """The guest's passed-through PCI device elements, in XML order."""
    devices = doc.find('devices')
    if devices is None:
        return []
    found = []
    for el in devices:
        if el.tag == 'hostdev' and el.get('mode', 'subsystem') == \
                'subsystem' and el.get('type') == 'pci':
            found.append(el)
        elif el.tag == 'interface' and el.get('type') == 'hostdev':
            found.append(el)
    return found


def assigned_devices(doc):
    """[AssignedDevice] of the domain element ``doc``."""
    result = []
    for el in assigned_elements(doc):
        address = source_address(el)
        if address is None:
            continue
        alias = el.find('alias')
        result.append(AssignedDevice(
            address, alias.get('name') if alias is not None else None,
            etree.tostring(el, encoding='unicode')))
    return result


def drop_assigned_devices(doc):
    """Remove every passed-through PCI device from ``doc`` (in place):
    the XML a migration carries holds none. Returns their addresses."""
    dropped = []
    for el in assigned_elements(doc):
        dropped.append(source_address(el))
        el.getparent().remove(el)
    return dropped


def device_xml(assigned, address=None):
    """The XML to plug ``assigned`` (an AssignedDevice) again, or the
    device at ``address`` in its place (a destination's claimed one).

    The guest-side ``<address>`` is kept, so the guest finds the device
    in the slot it had; libvirt's own alias is dropped (it names the
    device anew), a user alias (ua-...) kept.
    """
    el = etree.fromstring(assigned.xml)
    el = copy.deepcopy(el)
    alias = el.find('alias')
    if alias is not None and not (alias.get('name') or '').startswith(
            USER_ALIAS_PREFIX):
        el.remove(alias)
    if address is not None:
        source = el.find('source/address')
        widths = {'domain': 4, 'bus': 2, 'slot': 2, 'function': 1}
        for field, value in zip(_PCI_FIELDS, parse_address(address),
                                strict=True):
            source.set(field, f'0x{value:0{widths[field]}x}')
    return etree.tostring(el, encoding='unicode')


def new_device_xml(address, guest_address=None):
    """A managed ``<hostdev>`` of the host device at ``address``."""
    domain, bus, slot, function = parse_address(address)
    el = etree.Element('hostdev', mode='subsystem', type='pci',
                       managed='yes')
    source = etree.SubElement(el, 'source')
    etree.SubElement(source, 'address', domain=f'0x{domain:04x}',
                     bus=f'0x{bus:02x}', slot=f'0x{slot:02x}',
                     function=f'0x{function:x}')
    if guest_address is not None:
        el.append(copy.deepcopy(guest_address))
    return etree.tostring(el, encoding='unicode')


def cell_host_nodes(doc):
    """{guest cell: set of host nodes} from ``<numatune>``: a cell's
    ``<memnode>``, else the domain's ``<memory nodeset>``; {} for a
    guest with no binding."""
    numatune = doc.find('numatune')
    if numatune is None:
        return {}
    cells = {int(el.get('id')) for el in doc.iterfind('cpu/numa/cell')} \
        or {0}
    memory = numatune.find('memory')
    default = set()
    if memory is not None and memory.get('nodeset'):
        default = cpuspec.parse_cpu_spec(memory.get('nodeset'))
    result = {cell: set(default) for cell in cells if default}
    for el in numatune.iterfind('memnode'):
        result[int(el.get('cellid'))] = cpuspec.parse_cpu_spec(
            el.get('nodeset'))
    return result
