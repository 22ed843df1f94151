"""Resizing a running guest's virtio-mem devices, and waiting for it.

libvirt changes a device's ``<requested>`` with ``updateDeviceFlags`` on
the LIVE device XML (alias and PCI address kept: measured on libvirt 9.0,
the persistent XML is refused); the guest's driver then plugs or unplugs
blocks and ``<current>`` follows, in steps of about a second (QEMU rate
limits its size-change event). The wait is driven by libvirt's
``memory-device-size-change`` event: each event makes the live XML be
read again, and the wait ends when every device reached its requested
size or at the deadline. A guest without the driver, or hung, never
moves ``current``: the deadline says so, and what it reports then is what
the host really got back.
"""

import threading
import time

import libvirt
from lxml import etree
from oslo_log import log as logging

from numamig import exception
from numamig.virt.libvirt import errors
from numamig.virt.libvirt import events
from numamig.virt.libvirt import migration_xml
from numamig.virt.libvirt import virtio_mem

LOG = logging.getLogger(__name__)

SIZE_CHANGE_EVENT = getattr(
    libvirt, 'VIR_DOMAIN_EVENT_ID_MEMORY_DEVICE_SIZE_CHANGE', 26)
AFFECT_LIVE = getattr(libvirt, 'VIR_DOMAIN_AFFECT_LIVE', 1)


def resize(dom, requested_mb, deadline_s, host, clock=time.monotonic):
    """Ask each device for its new requested size; wait for ``current``.

    :param requested_mb: {guest cell: MiB}.
    :param deadline_s: the longest wait for the guest, in seconds.
    :returns: ({guest cell: current MiB}, reached) with ``reached`` True
        when every device's current equals its requested size in time.
    :raises HypervisorError: libvirt refused a resize (the test driver
        has none) or the domain has no device for a cell; devices
        resized before the refusal keep their new requested size.
    """
    watcher = _SizeChanges(dom)
    watcher.start()
    try:
        live = _live_doc(dom, host)
        devices = virtio_mem.device_elements(live)
        missing = sorted(set(requested_mb) - set(devices))
        if missing:
            raise exception.HypervisorError(
                host=host, action='resize virtio-mem devices',
                reason=f"the domain has no device for guest cells {missing}")
        for cell, mib in sorted(requested_mb.items()):
            _update(dom, devices[cell], cell, mib, host)
        return _wait(dom, watcher, requested_mb, deadline_s, host, clock)
    finally:
        watcher.stop()


def current_sizes(dom, host):
    """Return {guest cell: current MiB} (None where not reported)."""
    return {cell: fields['virtio_mem_current_mb'] for cell, fields in
            virtio_mem.read_devices(_live_doc(dom, host),
                                    migration_xml.kib).items()}


def _live_doc(dom, host):
    try:
        return migration_xml.parse_domain(dom.XMLDesc(0))
    except libvirt.libvirtError as exc:
        raise errors.hypervisor_error(exc, host, 'read the live domain XML')


def _update(dom, element, cell, mib, host):
    device = etree.fromstring(etree.tostring(element))
    device.find('target/requested').text = str(mib * 1024)
    device.find('target/requested').set('unit', 'KiB')
    try:
        dom.updateDeviceFlags(etree.tostring(device, encoding='unicode'),
                              AFFECT_LIVE)
    except libvirt.libvirtError as exc:
        raise errors.hypervisor_error(
            exc, host, f"resize the virtio-mem device of guest cell {cell} "
                       f"to {mib} MiB")


def _wait(dom, watcher, requested_mb, deadline_s, host, clock):
    end = clock() + deadline_s
    while True:
        current = current_sizes(dom, host)
        if all(current.get(c) == mib for c, mib in requested_mb.items()):
            return current, True
        left = end - clock()
        if left <= 0 or not watcher.wait(left):
            final = current_sizes(dom, host)
            reached = all(final.get(c) == mib
                          for c, mib in requested_mb.items())
            if not reached:
                LOG.warning("%s: virtio-mem devices of %s at %s MiB after "
                            "%.1f s, %s MiB requested", host,
                            dom.UUIDString(), final, deadline_s,
                            requested_mb)
            return final, reached


class _SizeChanges(events.DomainEventSubscription):
    """Wakes the waiter on each memory-device-size-change event of one
    domain. Without events (no event loop, an older libvirt), ``wait``
    returns False at once only when the deadline is reached: the state
    is then read once, at the deadline."""

    EVENT = SIZE_CHANGE_EVENT
    NAME = 'size events'

    def __init__(self, dom):
        super().__init__(dom)
        self._changed = threading.Event()

    def _unavailable(self, exc):
        LOG.info("No memory-device-size-change events for %s; its "
                 "devices are read at the deadline: %s",
                 self._dom.UUIDString(), exc)

    def _on_event(self, *_args):
        self._changed.set()

    def wait(self, timeout):
        """Wait for the next change; False when none came in time."""
        if self._callback_id is None:
            threading.Event().wait(timeout)
            return False
        arrived = self._changed.wait(timeout)
        self._changed.clear()
        return arrived
