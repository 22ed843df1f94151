"""PCI devices: what a host can pass through, what a guest asks, what it got.

A host reports each assignable PCI function it has (HostPCIDevice, in
HostNUMATopology.pci_devices): the functions libvirt lists as node
devices that the operator's ``[pci] device_spec`` allow-list admits. A
guest asks for devices by alias (PCIRequest, from the flavor's
``pci_passthrough:alias`` and the operator's ``[pci] alias``) with a
NUMA affinity policy, and a claim records which function each request
got (InstancePCIDevice, in InstanceNUMATopology.pci_devices). A host
function is used while some guest's placed topology names its address:
usage is derived from the placements, as it is for pCPUs and pages
(numa/pci.py), never stored twice.

Addresses are libvirt's and sysfs' 'dddd:bb:ss.f' in lower case.
"""

import re

from oslo_versionedobjects import fields

from numamig.objects import base

# Nova's device types (PciDeviceType): a plain PCI function, an SR-IOV
# physical function, one of its virtual functions.
TYPE_PCI = 'type-PCI'
TYPE_PF = 'type-PF'
TYPE_VF = 'type-VF'
DEVICE_TYPES = (TYPE_PCI, TYPE_PF, TYPE_VF)

# hw:pci_numa_affinity_policy and an alias' numa_policy (Nova's words).
POLICY_REQUIRED = 'required'
POLICY_LEGACY = 'legacy'
POLICY_PREFERRED = 'preferred'
POLICY_SOCKET = 'socket'
NUMA_POLICIES = (POLICY_REQUIRED, POLICY_LEGACY, POLICY_PREFERRED,
                 POLICY_SOCKET)

_ADDRESS = re.compile(r'^[0-9a-f]{4}:[0-9a-f]{2}:[01][0-9a-f]\.[0-7]$')
_HEX_ID = re.compile(r'^[0-9a-f]{4}$')


def is_address(text):
    """Whether ``text`` is a full lower-case PCI address 'dddd:bb:ss.f'
    (slot at most 0x1f)."""
    return (isinstance(text, str) and bool(_ADDRESS.match(text))
            and int(text[8:10], 16) <= 0x1f)


def is_hex_id(text):
    """Whether ``text`` is a four-digit lower-case vendor/product id."""
    return isinstance(text, str) and bool(_HEX_ID.match(text))


@base.register
class HostPCIDevice(base.NumamigObject):
    """One assignable PCI function of a host.

    ``dev_type`` is TYPE_PCI, TYPE_PF or TYPE_VF; a VF names its PF in
    ``parent_addr``. ``numa_node`` is the host NUMA cell the function is
    attached to, None where the platform does not say (sysfs -1). A PF
    and its VFs exclude each other: a PF given to a guest takes its VFs
    with it, and a PF with a VF in use cannot be given (numa/pci.py).
    ``instance_uuid``: the guest whose placed topology holds the
    function in a topology with usage (numa/usage.py sets and clears it
    as it does pinned pCPUs), None when free.
    """

    # Version 1.0 - Release 2: Initial version
    VERSION = '1.0'

    fields = {
        'address': fields.StringField(),
        'vendor_id': fields.StringField(),
        'product_id': fields.StringField(),
        'dev_type': fields.StringField(default=TYPE_PCI),
        'parent_addr': fields.StringField(nullable=True, default=None),
        'numa_node': fields.IntegerField(nullable=True, default=None),
        'instance_uuid': fields.StringField(nullable=True, default=None),
    }

    def _validate(self):
        base.require_nonnegative(self, 'numa_node')
        if not is_address(self.address):
            raise self.invalid(
                f"address {self.address!r} is not 'dddd:bb:ss.f' (lower "
                f"case)")
        for name in ('vendor_id', 'product_id'):
            if not is_hex_id(self.get(name)):
                raise self.invalid(
                    f"device {self.address}: {name} {self.get(name)!r} is "
                    f"not four lower-case hex digits")
        dev_type = self.get('dev_type', TYPE_PCI)
        if dev_type not in DEVICE_TYPES:
            raise self.invalid(
                f"device {self.address}: dev_type must be one of "
                f"{', '.join(DEVICE_TYPES)}, got {dev_type!r}")
        parent = self.get('parent_addr')
        if (parent is not None) != (dev_type == TYPE_VF):
            raise self.invalid(
                f"device {self.address}: parent_addr is given for, and "
                f"only for, a {TYPE_VF} (got {dev_type} with parent "
                f"{parent!r})")
        if parent is not None and not is_address(parent):
            raise self.invalid(
                f"device {self.address}: parent_addr {parent!r} is not "
                f"'dddd:bb:ss.f'")


@base.register
class PCIRequest(base.NumamigObject):
    """``count`` devices of the operator's alias ``alias``.

    ``vendor_id``/``product_id``/``device_type`` are the alias' (None:
    any); ``numa_policy`` the policy the fit applies: the guest's
    ``hw:pci_numa_affinity_policy`` where given, else the alias'
    numa_policy, else 'legacy' (Nova's order).
    """

    # Version 1.0 - Release 2: Initial version
    VERSION = '1.0'

    fields = {
        'alias': fields.StringField(),
        'count': fields.IntegerField(),
        'vendor_id': fields.StringField(nullable=True, default=None),
        'product_id': fields.StringField(nullable=True, default=None),
        'device_type': fields.StringField(nullable=True, default=None),
        'numa_policy': fields.StringField(default=POLICY_LEGACY),
    }

    def _validate(self):
        if self.count < 1:
            raise self.invalid(
                f"alias {self.alias}: count must be at least 1, got "
                f"{self.count}")
        for name in ('vendor_id', 'product_id'):
            value = self.get(name)
            if value is not None and not is_hex_id(value):
                raise self.invalid(
                    f"alias {self.alias}: {name} {value!r} is not four "
                    f"lower-case hex digits")
        dev_type = self.get('device_type')
        if dev_type is not None and dev_type not in DEVICE_TYPES:
            raise self.invalid(
                f"alias {self.alias}: device_type must be one of "
                f"{', '.join(DEVICE_TYPES)}, got {dev_type!r}")
        if self.get('numa_policy', POLICY_LEGACY) not in NUMA_POLICIES:
            raise self.invalid(
                f"alias {self.alias}: numa_policy must be one of "
                f"{', '.join(NUMA_POLICIES)}, got "
                f"{self.get('numa_policy')!r}")


@base.register
class InstancePCIDevice(base.NumamigObject):
    """A host PCI function a guest's claim holds.

    ``alias``: the request it serves; ``address``: the host function;
    ``host_node``: the function's host NUMA cell (None: the host does
    not say); ``guest_cell``: the guest cell placed on that host cell,
    None when no guest cell is (a 'preferred' or 'legacy' device off the
    guest's nodes, or a node-less device). What a destination verifies
    after a move: each device with a guest_cell is on that cell's node.
    """

    # Version 1.0 - Release 2: Initial version
    VERSION = '1.0'

    fields = {
        'alias': fields.StringField(),
        'address': fields.StringField(),
        'host_node': fields.IntegerField(nullable=True, default=None),
        'guest_cell': fields.IntegerField(nullable=True, default=None),
    }

    def _validate(self):
        base.require_nonnegative(self, 'host_node', 'guest_cell')
        if not is_address(self.address):
            raise self.invalid(
                f"alias {self.alias}: address {self.address!r} is not "
                f"'dddd:bb:ss.f' (lower case)")
