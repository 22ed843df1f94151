"""Passed-through PCI devices of a guest: find, unplug, plug, verify.

A guest holding a host PCI device (``<hostdev mode='subsystem'
type='pci'>``, or an SR-IOV ``<interface type='hostdev'>``) cannot be
live-migrated: QEMU cannot copy the device's state, and libvirt refuses
("cannot migrate domain: VFIO device doesn't support migration",
measured on libvirt 9.0 / QEMU 7.2). numamig moves such a guest the way
Nova moves SR-IOV ports: the source hot-unplugs each device before the
copy and waits for the guest to let go (libvirt's ``device-removed``
event, bounded by a deadline), the migration XML carries none
(``migration_xml.drop_assigned_devices``), and the destination
hot-plugs the devices its claim holds once the guest runs there. A
failed or aborted migration plugs the source's devices back. The guest
sees a PCI hot-unplug and, later, a hot-plug (doc/source/devices.rst).

Hot-unplug is cooperative: PCIe native hot-plug (QEMU's q35 root ports)
and ACPI hot-plug both wait for the guest OS to release the slot. A
guest without a hot-plug driver (or a hung one) never does: libvirt's
``detachDeviceFlags`` returns after 5 s with the request pending, the
device stays in the live XML, and only the deadline here ends the wait.

The deadline does not withdraw the request: neither libvirt nor QEMU
offers a way to cancel a ``device_del``. A guest that wakes later (a
paused or hung one) still releases the device, and libvirt then drops
it from the live XML with a ``device-removed`` event, long after the
migration failed. ``detach``
therefore leaves a ``LateRelease`` watch on the devices still pending at
its deadline: a late release is logged and the device plugged back into
the guest (live), so the guest keeps the device its host's claim still
records. The watch ends with the re-plug, with the domain's stop, or
with the next ``detach`` of the domain (the next migration's unplug).

The device's NUMA node comes from libvirt's node device
(``<capability type='pci'><numa node='N'/>``, the kernel's sysfs
``numa_node``); the guest cell's host node from the live XML's
``<numatune><memnode>``. ``verify_affinity`` compares both.
"""

import threading
import time

import libvirt
from lxml import etree
from oslo_log import log as logging

from numamig import exception
from numamig.virt.libvirt import events
from numamig.virt.libvirt import hostdev_xml

LOG = logging.getLogger(__name__)

DEVICE_REMOVED = getattr(libvirt, 'VIR_DOMAIN_EVENT_ID_DEVICE_REMOVED', 15)
DEVICE_REMOVAL_FAILED = getattr(
    libvirt, 'VIR_DOMAIN_EVENT_ID_DEVICE_REMOVAL_FAILED', 22)
# How often the live XML is read again while no event comes (a libvirt
# connection without an event loop gets none).
POLL_S = 1.0
LIFECYCLE = getattr(libvirt, 'VIR_DOMAIN_EVENT_ID_LIFECYCLE', 0)
STOPPED = getattr(libvirt, 'VIR_DOMAIN_EVENT_STOPPED', 5)
# What became of a device released late (LateRelease's on_late).
REPLUGGED = 'replugged'
LOST = 'lost'
# The late-release watches, (host, domain UUID) -> LateRelease.
_late = {}
_late_lock = threading.Lock()

def device_node(conn, address):
    """The host NUMA node of the PCI device at ``address``, as libvirt's
    node device reports it; None when it reports none (-1: a host
    without NUMA, or firmware that did not say).

    :raises libvirt.libvirtError: no such node device.
    """
    name = hostdev_xml.nodedev_name(address)
    text = conn.nodeDeviceLookupByName(name).XMLDesc(0)
    node = etree.fromstring(text).find("capability[@type='pci']/numa")
    if node is None:
        return None
    value = int(node.get('node'))
    return None if value < 0 else value


def verify_affinity(conn, doc, placements):
    """Check each device is on the host node of its guest cell.

    :param doc: the guest's live domain element.
    :param placements: [(alias, address, guest cell)] (a claim's).
    :returns: [dict(alias, address, guest_cell, cell_nodes, device_node,
        present, local)], one per placement: ``present`` whether the live
        XML holds the device, ``local`` whether its node is one of the
        cell's (None when either node is unknown).
    """
    live = {d.address for d in hostdev_xml.assigned_devices(doc)}
    cells = hostdev_xml.cell_host_nodes(doc)
    result = []
    for alias, address, cell in placements:
        address = hostdev_xml.canonical(address)
        try:
            node = device_node(conn, address)
        except libvirt.libvirtError as exc:
            LOG.warning("No node device for %s: %s", address, exc)
            node = None
        nodes = sorted(cells.get(cell, ()))
        local = None if node is None or not nodes else node in nodes
        result.append({'alias': alias, 'address': address,
                       'guest_cell': cell, 'cell_nodes': nodes,
                       'device_node': node, 'present': address in live,
                       'local': local})
    return result


class RemovalWatch(events.DomainEventSubscription):
    """The aliases libvirt reports removed (or refused) for one domain."""

    EVENT = DEVICE_REMOVED
    NAME = 'device-removed event'

    def __init__(self, dom):
        super().__init__(dom)
        self.removed = set()
        self.changed = threading.Event()
        self._failed = None
        # The LateRelease that took this subscription over at the
        # deadline (libvirt refuses a second device-removed callback of
        # one domain on one connection: "event callback already
        # tracked", measured on libvirt 9.0).
        self.late = None

    def start(self):
        super().start()
        # The guest may refuse an unplug: that ends the wait at once.
        try:
            self._failed = self._conn.domainEventRegisterAny(
                self._dom, DEVICE_REMOVAL_FAILED, self._on_failed, None)
        except (libvirt.libvirtError, AttributeError):
            self._failed = None

    def stop(self):
        super().stop()
        if self._failed is not None:
            try:
                self._conn.domainEventDeregisterAny(self._failed)
            except libvirt.libvirtError:
                pass
            self._failed = None

    def _on_event(self, _conn, _dom, alias, _opaque):
        self.removed.add(alias)
        self.changed.set()
        if self.late is not None:
            self.late.released(alias)

    def _on_failed(self, _conn, _dom, alias, _opaque):
        self.changed.set()

    def _unavailable(self, exc):
        LOG.info("No device-removed events for %s (%s): its live XML is "
                 "read every %.0f s instead", self._dom.UUIDString(), exc,
                 POLL_S)


class LateRelease:
    """The devices a guest had not released at ``detach``'s deadline:
    plugs each back when the guest releases it after all. It takes over
    the unplug's RemovalWatch (its device-removed subscription)."""

    def __init__(self, watch, dom, host, devices, on_late=None):
        self._watch = watch
        self._dom = dom
        self._on_late = on_late
        self.host = host
        self.uuid = dom.UUIDString()
        self.pending = {d.alias: d for d in devices if d.alias}
        self.replugged = []
        self.done = threading.Event()
        self._lifecycle = None

    def start(self):
        # A stopped guest's pending request died with its QEMU; a later
        # device-removed of the same alias (a new start, an operator's
        # own detach) is not this one.
        try:
            self._lifecycle = self._watch._conn.domainEventRegisterAny(
                self._dom, LIFECYCLE, self._on_lifecycle, None)
        except (libvirt.libvirtError, AttributeError):
            self._lifecycle = None
        with _late_lock:
            previous = _late.pop((self.host, self.uuid), None)
            _late[(self.host, self.uuid)] = self
        if previous is not None:
            previous.stop()
        self._watch.late = self

    def stop(self):
        self._watch.late = None
        self._watch.stop()
        if self._lifecycle is not None:
            try:
                self._watch._conn.domainEventDeregisterAny(self._lifecycle)
            except libvirt.libvirtError:
                pass
            self._lifecycle = None
        with _late_lock:
            if _late.get((self.host, self.uuid)) is self:
                del _late[(self.host, self.uuid)]
        self.done.set()

    def released(self, alias):
        device = self.pending.pop(alias, None)
        if device is None:
            return
        # Not on libvirt's event loop thread: a hot-plug takes seconds
        # and other domains' events would wait behind it.
        threading.Thread(target=self._replug, args=(device,),
                         name=f'late-release-{self.uuid}',
                         daemon=True).start()

    def _on_lifecycle(self, _conn, _dom, event, _detail, _opaque):
        if event == STOPPED:
            LOG.info("%s: %s stopped; its pending unplug of %s is gone "
                     "with it", self.host, self.uuid,
                     ', '.join(d.address for d in self.pending.values()))
            self.pending.clear()
            self.stop()

    def _replug(self, device):
        LOG.warning("%s: %s released %s after its migration's unplug had "
                    "timed out; plugging it back (the migration failed, "
                    "the guest stays here)", self.host, self.uuid,
                    device.address)
        try:
            self.replugged += attach(self._dom, [
                hostdev_xml.device_xml(device)], self.host)
        except (exception.NumamigException, libvirt.libvirtError) as exc:
            LOG.error("%s: %s lost %s: the guest released it late and it "
                      "could not be plugged back: %s (plug it with virsh "
                      "attach-device, or release the claim)", self.host,
                      self.uuid, device.address, exc)
            self._tell(device, LOST, f"released after the unplug's "
                                     f"deadline; not plugged back: {exc}")
        else:
            self._tell(device, REPLUGGED, "released after the unplug's "
                                          "deadline; plugged back")
        if not self.pending:
            self.stop()

    def _tell(self, device, outcome, reason):
        """Call ``on_late``. It is the caller's code, run on this watch's
        own thread: whatever it raises is logged in one line and goes no
        further, so that the plug stands and the watch still ends (its
        libvirt subscriptions deregistered)."""
        if self._on_late is None:
            return
        try:
            self._on_late(device.address, device.alias, outcome, reason)
        except Exception as exc:  # noqa: BLE001 - any caller's callback
            LOG.error("%s: the late release of %s from %s was not told: %s",
                      self.host, device.address, self.uuid,
                      exception.brief(exc))


def late_release(host, uuid):
    """The running LateRelease watch of a domain, or None."""
    with _late_lock:
        return _late.get((host, uuid))


def _watch_late(watch, dom, host, devices, pending, on_late=None):
    """Hand ``watch`` over to a LateRelease of the devices still
    ``pending`` (telling ``on_late``); None where there are none or no
    events come."""
    still = [d for d in devices if d.address in pending]
    if not still or watch._callback_id is None:
        if still:
            LOG.warning("%s: no device-removed events for %s: should the "
                        "guest release %s late, it is not plugged back",
                        host, dom.UUIDString(),
                        ', '.join(d.address for d in still))
        return None
    late = LateRelease(watch, dom, host, still, on_late)
    late.start()
    return late


def _live_addresses(dom):
    doc = etree.fromstring(dom.XMLDesc(0))
    return {d.address for d in hostdev_xml.assigned_devices(doc)}


def detach(dom, host, deadline_s, clock=time.monotonic, on_late=None):
    """Hot-unplug every passed-through PCI device of the running ``dom``
    and wait, up to ``deadline_s``, until the guest released them all.

    :param on_late: told ``(address, alias, outcome, reason)`` of each
        device released after the deadline, once plugged back
        (REPLUGGED) or not (LOST).

    :returns: [AssignedDevice] unplugged, to plug back on a rollback.
    :raises DeviceDetachFailed: libvirt refused, or a device was still
        plugged at the deadline; the devices unplugged before it are
        plugged back first, and the error names what was left.
    """
    devices = hostdev_xml.assigned_devices(etree.fromstring(dom.XMLDesc(0)))
    if not devices:
        return []
    uuid = dom.UUIDString()
    # The previous migration's late watch: this unplug is the one now.
    previous = late_release(host, uuid)
    if previous is not None:
        previous.stop()
    watch = RemovalWatch(dom)
    watch.start()
    started = clock()
    try:
        for index, device in enumerate(devices):
            try:
                dom.detachDeviceFlags(device.xml,
                                      libvirt.VIR_DOMAIN_AFFECT_LIVE)
            except libvirt.libvirtError as exc:
                # The requests already sent stay pending as at the
                # deadline below.
                asked = devices[:index]
                _watch_late(watch, dom, host, asked,
                            {d.address for d in asked} &
                            _live_addresses(dom), on_late)
                _replug_gone(dom, devices, host)
                raise exception.DeviceDetachFailed(
                    instance=uuid, host=host, address=device.address,
                    reason=exc.get_error_message())
        pending = {d.address for d in devices}
        while True:
            pending &= _live_addresses(dom)
            if not pending:
                break
            left = started + deadline_s - clock()
            if left <= 0:
                # Watch first, then plug back what is gone: a release
                # in between is then plugged back by one or the other
                # (attach skips a device already there).
                late = _watch_late(watch, dom, host, devices, pending,
                                   on_late)
                _replug_gone(dom, devices, host)
                later = ('plugged back' if late else
                         'NOT plugged back (no device-removed events)')
                raise exception.DeviceDetachFailed(
                    instance=uuid, host=host,
                    address=', '.join(sorted(pending)),
                    reason=f"the guest did not release it within "
                           f"{deadline_s:g} s ([compute] "
                           f"device_detach_timeout; a guest OS without "
                           f"PCI hot-plug support, or a paused or hung "
                           f"one, does not); it stays in the guest, and "
                           f"is {later} should the guest release it "
                           f"later")
            watch.changed.wait(min(left, POLL_S))
            watch.changed.clear()
    finally:
        if watch.late is None:
            watch.stop()
    LOG.info("%s: unplugged %s from %s in %.1f s", host,
             ', '.join(d.address for d in devices), uuid, clock() - started)
    return devices


def _replug_gone(dom, devices, host):
    """Plug back those of ``devices`` the guest already released."""
    try:
        present = _live_addresses(dom)
    except libvirt.libvirtError:
        return
    gone = [d for d in devices if d.address not in present]
    if gone:
        attach(dom, [hostdev_xml.device_xml(d) for d in gone], host)


def attach(dom, xmls, host, persist=False):
    """Hot-plug each device XML into the running ``dom``; with
    ``persist``, into its persistent definition too (a destination's
    device must survive a restart; a source's plugged back after a
    failed migration is still in it: the unplug was live only).

    A device already in the live XML is skipped: asked twice (a
    redelivered request), the second plugs nothing.

    :returns: the addresses plugged now.
    :raises DeviceAttachFailed: libvirt refused one; those plugged before
        it stay plugged.
    """
    uuid = dom.UUIDString()
    present = _live_addresses(dom)
    flags = libvirt.VIR_DOMAIN_AFFECT_LIVE
    if persist and dom.isPersistent():
        flags |= libvirt.VIR_DOMAIN_AFFECT_CONFIG
    plugged = []
    for text in xmls:
        address = hostdev_xml.source_address(etree.fromstring(text))
        if address in present:
            continue
        try:
            dom.attachDeviceFlags(text, flags)
        except libvirt.libvirtError as exc:
            raise exception.DeviceAttachFailed(
                instance=uuid, host=host, address=address,
                reason=exc.get_error_message())
        plugged.append(address)
    if plugged:
        LOG.info("%s: plugged %s into %s", host, ', '.join(plugged), uuid)
    return plugged
