"""libvirt PCI node devices -> the host's assignable HostPCIDevices.

libvirt lists each PCI function of the host as a node device
(``virsh nodedev-list --cap pci``); its XML (``virsh nodedev-dumpxml
pci_0000_81_10_1``) gives the address, the vendor and product ids, the
NUMA node (the kernel's sysfs ``numa_node``; libvirt leaves ``<numa>``
out, or writes -1, where the platform does not say), and the SR-IOV
relation: a PF carries ``<capability type='virt_functions'>``, a VF
``<capability type='phys_function'>`` naming its PF. Only the functions
the ``[pci] device_spec`` allow-list admits are reported.
"""

from lxml import etree

from numamig import exception
from numamig import objects
from numamig.numa import pci
from numamig.objects import pci as pci_obj


def _address(el):
    """'dddd:bb:ss.f' of an element with domain/bus/slot/function
    attributes (0x hex) or children (decimal, as the pci capability)."""
    if el.get('bus') is not None:
        values = [int(el.get(k), 0) for k in ('domain', 'bus', 'slot',
                                              'function')]
    else:
        values = [int(el.findtext(k), 0) for k in ('domain', 'bus', 'slot',
                                                  'function')]
    domain, bus, slot, function = values
    return f'{domain:04x}:{bus:02x}:{slot:02x}.{function:x}'


def parse_pci_device(xml_text, host='?'):
    """Return the HostPCIDevice of one node device's XML, or None when
    it is not a PCI function.

    :raises CapabilitiesError: XML libvirt would not write (a PCI
        capability without address or ids).
    """
    try:
        root = etree.fromstring(xml_text.encode()
                                if isinstance(xml_text, str) else xml_text)
    except etree.XMLSyntaxError as exc:
        raise exception.CapabilitiesError(
            host=host, source='node device XML', reason=f"not XML: {exc}")
    cap = root.find("capability[@type='pci']")
    if cap is None:
        return None
    name = root.findtext('name')
    try:
        address = _address(cap)
        vendor = '%04x' % int(cap.find('vendor').get('id'), 16)
        product = '%04x' % int(cap.find('product').get('id'), 16)
        numa = cap.find('numa')
        node = None if numa is None else int(numa.get('node'))
        parent = None
        dev_type = pci_obj.TYPE_PCI
        pf = cap.find("capability[@type='phys_function']/address")
        if pf is not None:
            dev_type, parent = pci_obj.TYPE_VF, _address(pf)
        elif cap.find("capability[@type='virt_functions']") is not None:
            dev_type = pci_obj.TYPE_PF
    except (AttributeError, TypeError, ValueError) as exc:
        raise exception.CapabilitiesError(
            host=host, source=f'node device {name}',
            reason=f"malformed PCI capability: {exc}")
    return objects.HostPCIDevice(
        address=address, vendor_id=vendor, product_id=product,
        dev_type=dev_type, parent_addr=parent,
        numa_node=None if node is None or node < 0 else node)


def assignable_devices(xml_texts, specs, cell_ids, host='?'):
    """Return the admitted HostPCIDevices of node device XMLs, in address
    order.

    A function on a node the host topology does not have (a CPU-less
    node, or a capabilities file that describes another host) is
    reported without a node: no policy treats it as local.
    """
    found = []
    if not specs:
        return found
    for text in xml_texts:
        device = parse_pci_device(text, host)
        if device is None or not pci.admitted(device, specs):
            continue
        if device.numa_node is not None and device.numa_node not in \
                cell_ids:
            device.numa_node = None
        found.append(device)
        if len(found) > pci.MAX_HOST_DEVICES:
            raise exception.CapabilitiesError(
                host=host, source='node devices',
                reason=f"more than {pci.MAX_HOST_DEVICES} admitted PCI "
                       f"functions; narrow [pci] device_spec")
    return sorted(found, key=lambda d: d.address)
