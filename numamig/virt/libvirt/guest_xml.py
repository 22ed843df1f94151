"""Domain XML of a guest numamig creates, from its placed NUMA topology.

Guests numamig creates (for tests, CI and the embedded tier) are
diskless. A caller may hand in a base domain XML (devices, os, features
of its choice); numamig then fills in identity, size, the guest NUMA
cells and every NUMA-related part, the last through the same pipeline a
migration uses (migration_xml), so creation and migration cannot drift.
"""

import platform

from lxml import etree

from numamig import cpuspec
from numamig.virt.libvirt import hostdev_xml
from numamig.virt.libvirt import migration_xml
from numamig.virt.libvirt import virtio_mem

METADATA_NS = 'http://numamig.org/xmlns/instance/1.0'
METADATA_TAG = f'{{{METADATA_NS}}}numa'

_SKELETON = """<domain type='{type}'>
  <name/>
  <uuid/>
  <memory unit='KiB'/>
  <currentMemory unit='KiB'/>
  <vcpu placement='static'/>
  <os>
    <type{arch}>hvm</type>
  </os>
  <devices>{devices}
  </devices>
</domain>
"""
_QEMU_DEVICES = """
    <memballoon model='none'/>"""


def build_domain_xml(instance, topology, info, domain_type, base_xml=None):
    """Return the domain XML that runs ``instance`` as placed.

    :param instance: the Instance (name, uuid, vcpus, memory_mb).
    :param topology: its placed InstanceNUMATopology, or None for a guest
        without NUMA characteristics.
    :param info: the NUMAMigrateInfo of that placement on this host
        (numa_info.build_migrate_info), or None with ``topology``.
    :param domain_type: 'kvm', 'qemu' or 'test' (the libvirt test driver).
    :param base_xml: optional domain XML whose other parts are kept.
    :raises DomainXMLError: ``base_xml`` is unusable or does not fit.
    """
    doc = migration_xml.parse_domain(
        base_xml or _skeleton(domain_type))
    doc.set('type', domain_type)
    _set_text(doc, 'name', instance.name)
    _set_text(doc, 'uuid', instance.uuid)
    device_mb, plugged_mb = virtio_mem.device_memory_mb(topology)
    for tag, mib in (('memory', instance.memory_mb + device_mb),
                     ('currentMemory', instance.memory_mb + plugged_mb)):
        el = _set_text(doc, tag, str(mib * 1024))
        el.set('unit', 'KiB')
    _set_text(doc, 'vcpu', str(instance.vcpus))
    _set_numa_cells(doc, topology)
    virtio_mem.write_devices(doc, topology)
    _set_hostdevs(doc, topology)
    _set_metadata(doc, topology)
    if info is not None:
        migration_xml.apply_numa_info(doc, info)
    etree.indent(doc)
    return etree.tostring(doc, encoding='unicode')


def _skeleton(domain_type):
    # The test driver knows no x86_64 machine types; real hosts need arch.
    arch = '' if domain_type == 'test' else \
        f" arch='{platform.machine()}'"
    devices = '' if domain_type == 'test' else _QEMU_DEVICES
    return _SKELETON.format(type=domain_type, arch=arch, devices=devices)


def _set_text(doc, tag, text):
    el = doc.find(tag)
    if el is None:
        el = etree.SubElement(doc, tag)
    el.text = text
    return el


def _set_hostdevs(doc, topology):
    """A managed ``<hostdev>`` per PCI function the placement claimed, so
    that the guest is created holding what its host's claim records (a
    function ``base_xml`` names already is kept as written)."""
    claimed = [d.address for d in (topology.get('pci_devices') or ())] \
        if topology is not None else []
    if not claimed:
        return
    present = {d.address for d in hostdev_xml.assigned_devices(doc)}
    devices = doc.find('devices')
    if devices is None:
        devices = etree.SubElement(doc, 'devices')
    for address in claimed:
        if address not in present:
            devices.append(etree.fromstring(
                hostdev_xml.new_device_xml(address)))


def _set_numa_cells(doc, topology):
    cpu = doc.find('cpu')
    if cpu is not None and cpu.find('numa') is not None:
        cpu.remove(cpu.find('numa'))
    if topology is None or not topology.cells:
        return
    if cpu is None:
        cpu = etree.SubElement(doc, 'cpu')
    numa = etree.SubElement(cpu, 'numa')
    for cell in sorted(topology.cells, key=lambda c: c.id):
        etree.SubElement(numa, 'cell', id=str(cell.id),
                         cpus=cpuspec.format_cpu_spec(cell.vcpus),
                         memory=str(cell.memory_mb * 1024), unit='KiB')


def _set_metadata(doc, topology):
    """Record what the XML alone cannot say: which vCPUs are dedicated.

    A floating vCPU pinned to a one-pCPU shared set looks exactly like a
    dedicated one in <cputune>; the policies are not in the XML at all.
    """
    metadata = doc.find('metadata')
    if metadata is not None:
        for old in metadata.findall(METADATA_TAG):
            metadata.remove(old)
    if topology is None or not topology.cells:
        return
    if metadata is None:
        metadata = etree.Element('metadata')
        doc.find('uuid').addnext(metadata)
    attrs = {'pinned_vcpus': cpuspec.format_cpu_spec(
        set().union(*(c.pcpuset for c in topology.cells)))}
    policies = (('cpu_policy', topology.cells[0].get('cpu_policy')),
                ('cpu_thread_policy',
                 topology.cells[0].get('cpu_thread_policy')),
                ('emulator_threads_policy',
                 topology.get('emulator_threads_policy')))
    attrs.update({k: v for k, v in policies if v})
    etree.SubElement(metadata, METADATA_TAG, attrs,
                     nsmap={'numamig': METADATA_NS})
