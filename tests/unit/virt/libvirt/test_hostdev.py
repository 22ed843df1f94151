"""Passed-through PCI devices: XML, unplug with a deadline, plug, verify."""

import itertools

import fixtures
import libvirt
from lxml import etree

from numamig import exception
from numamig.virt.libvirt import hostdev
from numamig.virt.libvirt import hostdev_xml
from numamig.virt.libvirt import migration_xml
from tests import base

_HOSTDEV = """<hostdev mode='subsystem' type='pci' managed='yes'>
<driver name='vfio'/><source><address domain='0x0000' bus='0x{bus}'
slot='0x00' function='0x0'/></source><alias name='hostdev{n}'/>
<address type='pci' domain='0x0000' bus='0x0{n}' slot='0x00'
function='0x0'/></hostdev>"""
_VF_IFACE = """<interface type='hostdev' managed='yes'><source>
<address type='pci' domain='0x0000' bus='0x03' slot='0x10'
function='0x2'/></source><alias name='ua-sriov'/></interface>"""
_DOMAIN = """<domain type='qemu'><name>g</name><uuid>u</uuid>
<vcpu>2</vcpu><cpu><numa><cell id='0' cpus='0' memory='1024'/>
<cell id='1' cpus='1' memory='1024'/></numa></cpu>
<numatune><memory mode='strict' nodeset='0-1'/>
<memnode cellid='0' mode='strict' nodeset='0'/>
<memnode cellid='1' mode='strict' nodeset='1'/></numatune>
<devices><disk type='file'/>{}<interface type='network'/></devices>
</domain>"""
_NODEDEV = """<device><name>{name}</name><capability type='pci'>
<domain>0</domain><bus>129</bus><slot>0</slot><function>0</function>
{numa}</capability></device>"""


def _doc(*devices):
    return migration_xml.parse_domain(_DOMAIN.format(''.join(devices)))


class AddressTest(base.TestCase):

    def test_spellings(self):
        self.assertEqual('0000:81:00.1', hostdev_xml.canonical('81:00.1'))
        self.assertEqual('000a:ff:1f.7', hostdev_xml.canonical('000A:FF:1F.7'))
        self.assertEqual('pci_0000_81_00_1',
                         hostdev_xml.nodedev_name('0000:81:00.1'))

    def test_not_an_address(self):
        for text in ('', '81:00', 'zz:00.0', '0000:100:00.0',
                     '0000:00:20.0', '0000:00:00.8'):
            self.assertRaises(ValueError, hostdev_xml.parse_address, text)


class XMLTest(base.TestCase):

    def test_finds_hostdevs_and_vf_interfaces_only(self):
        doc = _doc(_HOSTDEV.format(bus='81', n=2), _VF_IFACE,
                   "<hostdev mode='subsystem' type='usb'/>")
        found = hostdev_xml.assigned_devices(doc)
        self.assertEqual([('0000:81:00.0', 'hostdev2'),
                          ('0000:03:10.2', 'ua-sriov')],
                         [(d.address, d.alias) for d in found])

    def test_drop_leaves_everything_else(self):
        doc = _doc(_HOSTDEV.format(bus='81', n=2), _VF_IFACE)
        self.assertEqual(['0000:81:00.0', '0000:03:10.2'],
                         hostdev_xml.drop_assigned_devices(doc))
        self.assertEqual([], hostdev_xml.assigned_devices(doc))
        self.assertEqual(['disk', 'interface'],
                         [el.tag for el in doc.find('devices')])

    def test_device_xml_keeps_guest_slot_and_user_alias(self):
        device, vf = hostdev_xml.assigned_devices(
            _doc(_HOSTDEV.format(bus='81', n=2), _VF_IFACE))
        el = etree.fromstring(hostdev_xml.device_xml(device, '0000:82:00.0'))
        self.assertIsNone(el.find('alias'))
        self.assertEqual('0x82', el.find('source/address').get('bus'))
        self.assertEqual('0x02', el.find('address').get('bus'))
        again = etree.fromstring(hostdev_xml.device_xml(vf))
        self.assertEqual('ua-sriov', again.find('alias').get('name'))
        self.assertEqual('0x10', again.find('source/address').get('slot'))

    def test_new_device_xml(self):
        el = etree.fromstring(hostdev_xml.new_device_xml('0000:82:00.0'))
        self.assertEqual(('hostdev', 'pci', 'yes'),
                         (el.tag, el.get('type'), el.get('managed')))
        self.assertEqual('0000:82:00.0', hostdev_xml.source_address(el))

    def test_cell_host_nodes(self):
        self.assertEqual({0: {0}, 1: {1}}, hostdev_xml.cell_host_nodes(_doc()))
        doc = _doc()
        for el in doc.find('numatune').findall('memnode'):
            doc.find('numatune').remove(el)
        self.assertEqual({0: {0, 1}, 1: {0, 1}},
                         hostdev_xml.cell_host_nodes(doc))


class MigrationXMLTest(base.TestCase):

    def test_migration_xml_carries_no_device(self):
        text = _DOMAIN.format(_HOSTDEV.format(bus='81', n=2) + _VF_IFACE)
        out = migration_xml.parse_domain(
            migration_xml.get_migration_xml(text, None))
        self.assertEqual([], hostdev_xml.assigned_devices(out))
        self.assertEqual('0-1', out.find('numatune/memory').get('nodeset'))

    def test_unchanged_text_without_devices(self):
        text = _DOMAIN.format('')
        self.assertIs(text, migration_xml.get_migration_xml(text, None))

    def test_updated_xml_keeps_devices(self):
        # A destination's persistent definition rewritten to its claim
        # keeps the devices plugged there.
        doc = _doc(_HOSTDEV.format(bus='81', n=2))
        self.assertEqual(1, len(hostdev_xml.assigned_devices(doc)))
        self.assertNotIn(migration_xml._drop_assigned_devices,
                         migration_xml._STEPS)


class FakeConn:

    def __init__(self, nodes):
        self.nodes = nodes

    def nodeDeviceLookupByName(self, name):  # noqa: N802 - libvirt API
        if name not in self.nodes:
            raise libvirt.libvirtError(f'no node device {name}')
        node = self.nodes[name]
        numa = '' if node is None else f"<numa node='{node}'/>"
        conn = self

        class Dev:
            def XMLDesc(self, flags):  # noqa: N802 - libvirt API
                return _NODEDEV.format(name=name, numa=numa)
        del conn
        return Dev()


class VerifyTest(base.TestCase):

    def test_each_device_against_its_cells_nodes(self):
        conn = FakeConn({'pci_0000_81_00_0': 1, 'pci_0000_82_00_0': 0,
                         'pci_0000_83_00_0': -1})
        doc = _doc(_HOSTDEV.format(bus='81', n=2),
                   _HOSTDEV.format(bus='82', n=3))
        got = hostdev.verify_affinity(conn, doc, [
            ('nic', '0000:81:00.0', 1), ('nic', '82:00.0', 1),
            ('gpu', '0000:83:00.0', 0), ('nic', '0000:84:00.0', 0)])
        self.assertEqual(
            [(True, 1, True), (True, 0, False), (False, None, None),
             (False, None, None)],
            [(g['present'], g['device_node'], g['local']) for g in got])
        self.assertEqual([1], got[0]['cell_nodes'])


class FakeDomain:
    """A running guest: unplugs complete when the guest ``releases``
    (sending device-removed), or never; plugs always."""

    def __init__(self, devices, release=True, refuse=None, events=True,
                 persistent=True):
        self.doc = _doc(*devices)
        self.release = release
        self.refuse = refuse
        self.events = events
        self.persistent = persistent
        # callback id -> (event id, callback), ids unique as libvirt's.
        self.callbacks = {}
        self._ids = itertools.count(1)
        self.detached = []
        self.attached = []

    def UUIDString(self):  # noqa: N802 - libvirt API
        return 'u'

    def XMLDesc(self, flags):  # noqa: N802 - libvirt API
        return etree.tostring(self.doc, encoding='unicode')

    def connect(self):
        return self

    def isPersistent(self):  # noqa: N802 - libvirt API
        return self.persistent

    def domainEventRegisterAny(self, dom, event, callback,  # noqa: N802
                               opaque):
        if not self.events:
            raise libvirt.libvirtError('no event loop')
        if any(event == known for known, _ in self.callbacks.values()):
            # libvirt 9.0, for a second callback of one event and domain
            # on one connection (the Python binding's C callback is the
            # same for every one).
            raise libvirt.libvirtError('invalid argument: event callback '
                                       'already tracked')
        callback_id = next(self._ids)
        self.callbacks[callback_id] = (event, callback)
        return callback_id

    def emit(self, event, *args):
        for event_id, callback in list(self.callbacks.values()):
            if event_id == event:
                callback(self, self, *args, None)

    def domainEventDeregisterAny(self, callback_id):  # noqa: N802
        self.callbacks.pop(callback_id, None)

    def detachDeviceFlags(self, xml, flags):  # noqa: N802 - libvirt API
        if self.refuse:
            raise self.refuse
        self.detached.append((hostdev_xml.source_address(
            etree.fromstring(xml)), flags))
        if not self.release:
            return        # the request stays pending, as libvirt's does
        self.release_now(self.detached[-1][0])

    def release_now(self, address):
        """The guest lets go of the device: libvirt drops it from the
        live XML and sends device-removed."""
        for el in hostdev_xml.assigned_elements(self.doc):
            if hostdev_xml.source_address(el) == address:
                alias = el.find('alias').get('name')
                el.getparent().remove(el)
                self.emit(hostdev.DEVICE_REMOVED, alias)

    def attachDeviceFlags(self, xml, flags):  # noqa: N802 - libvirt API
        el = etree.fromstring(xml)
        self.attached.append((hostdev_xml.source_address(el), flags))
        self.doc.find('devices').append(el)


class DetachTest(base.TestCase):

    def test_unplugs_every_device_live_and_waits_for_the_event(self):
        dom = FakeDomain([_HOSTDEV.format(bus='81', n=2), _VF_IFACE])
        gone = hostdev.detach(dom, 'h', deadline_s=5)
        self.assertEqual(['0000:81:00.0', '0000:03:10.2'],
                         [d.address for d in gone])
        self.assertEqual({libvirt.VIR_DOMAIN_AFFECT_LIVE},
                         {flags for _, flags in dom.detached})
        self.assertEqual([], hostdev_xml.assigned_devices(dom.doc))
        self.assertEqual({}, dom.callbacks)      # subscription released

    def test_no_device_no_call(self):
        dom = FakeDomain([])
        self.assertEqual([], hostdev.detach(dom, 'h', deadline_s=5))
        self.assertEqual([], dom.detached)

    def test_without_events_the_xml_is_read(self):
        dom = FakeDomain([_HOSTDEV.format(bus='81', n=2)], events=False)
        self.assertEqual(1, len(hostdev.detach(dom, 'h', deadline_s=5)))

    def _stuck(self, devices=None, **kwargs):
        """A guest that does not release its devices: detach's deadline
        (1 s, on a clock that moves 0.3 s a read) raises."""
        now = [0.0]

        def clock():
            now[0] += 0.3
            return now[0]
        dom = FakeDomain(devices or [_HOSTDEV.format(bus='81', n=2)],
                         release=False, **kwargs)
        self.told = []
        exc = self.assertRaises(
            exception.DeviceDetachFailed, hostdev.detach, dom, 'h', 1.0,
            clock, on_late=lambda *told: self.told.append(told))
        return dom, exc

    def _late_done(self, dom):
        watch = hostdev.late_release('h', 'u')
        self.assertIsNotNone(watch)
        return watch

    def test_guest_never_releases_deadline_and_nothing_replugged(self):
        dom, exc = self._stuck()
        self.assertIn('0000:81:00.0', str(exc))
        self.assertIn('within 1 s ([compute] device_detach_timeout',
                      str(exc))
        self.assertIn('is plugged back should the guest release it later',
                      str(exc))
        # Still held by the guest: plugging it again would be refused.
        self.assertEqual([], dom.attached)
        self.assertEqual(['0000:81:00.0'],
                         [d.address for d in
                          hostdev_xml.assigned_devices(dom.doc)])
        # The unplug's subscription is the late-release watch's now.
        self.assertEqual({hostdev.DEVICE_REMOVED,
                          hostdev.DEVICE_REMOVAL_FAILED, hostdev.LIFECYCLE},
                         {event for event, _ in dom.callbacks.values()})
        self._late_done(dom).stop()
        self.assertEqual({}, dom.callbacks)

    def test_late_release_is_plugged_back(self):
        dom, _exc = self._stuck()
        watch = self._late_done(dom)
        dom.release_now('0000:81:00.0')       # the guest woke up
        self.assertTrue(watch.done.wait(10))
        self.assertEqual([('0000:81:00.0', libvirt.VIR_DOMAIN_AFFECT_LIVE)],
                         dom.attached)
        self.assertEqual(['0000:81:00.0'], watch.replugged)
        self.assertEqual(['0000:81:00.0'],
                         [d.address for d in
                          hostdev_xml.assigned_devices(dom.doc)])
        self.assertEqual({}, dom.callbacks)
        self.assertIsNone(hostdev.late_release('h', 'u'))
        (told,) = self.told
        self.assertEqual(('0000:81:00.0', hostdev.REPLUGGED), told[::2])
        self.assertIn('plugged back', told[3])

    def test_late_release_that_cannot_be_plugged_back_is_logged(self):
        log = self.useFixture(fixtures.FakeLogger())
        dom, _exc = self._stuck()
        watch = self._late_done(dom)

        def refuse(xml, flags):
            raise libvirt.libvirtError('in use by another domain')
        dom.attachDeviceFlags = refuse
        dom.release_now('0000:81:00.0')
        self.assertTrue(watch.done.wait(10))
        self.assertEqual([], watch.replugged)
        self.assertIn('lost 0000:81:00.0', log.output)
        self.assertEqual({}, dom.callbacks)
        (told,) = self.told
        self.assertEqual(('0000:81:00.0', hostdev.LOST), told[::2])
        self.assertIn('could not plug PCI device 0000:81:00.0', told[3])

    def test_a_listener_that_raises_never_undoes_the_plug(self):
        log = self.useFixture(fixtures.FakeLogger())
        dom = FakeDomain([_HOSTDEV.format(bus='81', n=2)], release=False)
        clock = iter(range(100)).__next__

        def broken(*told):
            raise RuntimeError('listener gone')
        self.assertRaises(exception.DeviceDetachFailed, hostdev.detach,
                          dom, 'h', 1.0, clock, on_late=broken)
        watch = self._late_done(dom)
        dom.release_now('0000:81:00.0')
        self.assertTrue(watch.done.wait(10))
        self.assertEqual(['0000:81:00.0'], watch.replugged)
        self.assertIn('was not told', log.output)

    def test_released_before_deadline_back_at_once_the_other_later(self):
        dom = FakeDomain([_HOSTDEV.format(bus='81', n=2),
                          _HOSTDEV.format(bus='82', n=3)], release=False)
        original = dom.detachDeviceFlags

        def first_released(xml, flags):
            original(xml, flags)
            if len(dom.detached) == 1:
                dom.release_now(dom.detached[0][0])
        dom.detachDeviceFlags = first_released
        now = [0.0]

        def clock():
            now[0] += 0.3
            return now[0]
        exc = self.assertRaises(exception.DeviceDetachFailed,
                                hostdev.detach, dom, 'h', 1.0, clock)
        self.assertIn('0000:82:00.0', str(exc))
        self.assertNotIn('0000:81:00.0', str(exc))
        self.assertEqual(['0000:81:00.0'], [a for a, _ in dom.attached])
        watch = self._late_done(dom)
        self.assertEqual({'hostdev3'}, set(watch.pending))
        dom.release_now('0000:82:00.0')
        self.assertTrue(watch.done.wait(10))
        self.assertEqual(['0000:81:00.0', '0000:82:00.0'],
                         [a for a, _ in dom.attached])

    def test_stopped_guest_ends_the_watch(self):
        dom, _exc = self._stuck()
        dom.emit(hostdev.LIFECYCLE, hostdev.STOPPED, 0)
        self.assertIsNone(hostdev.late_release('h', 'u'))
        self.assertEqual({}, dom.callbacks)
        self.assertEqual([], dom.attached)

    def test_next_unplug_takes_over_from_the_watch(self):
        dom, _exc = self._stuck()
        dom.release = True      # the next migration's unplug succeeds
        gone = hostdev.detach(dom, 'h', deadline_s=5)
        self.assertEqual(['0000:81:00.0'], [d.address for d in gone])
        # Not plugged back behind the new migration's back.
        self.assertEqual([], dom.attached)
        self.assertEqual({}, dom.callbacks)
        self.assertIsNone(hostdev.late_release('h', 'u'))

    def test_without_events_the_error_says_no_replug(self):
        _dom, exc = self._stuck(events=False)
        self.assertIn('NOT plugged back (no device-removed events)',
                      str(exc))
        self.assertIsNone(hostdev.late_release('h', 'u'))

    def test_refused_midway_replugs_those_released(self):
        dom = FakeDomain([_HOSTDEV.format(bus='81', n=2),
                          _HOSTDEV.format(bus='82', n=3)])
        calls = []
        original = dom.detachDeviceFlags

        def second_refused(xml, flags):
            calls.append(xml)
            if len(calls) == 2:
                raise libvirt.libvirtError('device busy')
            original(xml, flags)
        dom.detachDeviceFlags = second_refused
        exc = self.assertRaises(exception.DeviceDetachFailed,
                                hostdev.detach, dom, 'h', 5)
        self.assertIn('0000:82:00.0', str(exc))
        self.assertEqual([('0000:81:00.0', libvirt.VIR_DOMAIN_AFFECT_LIVE)],
                         dom.attached)
        self.assertIsNone(hostdev.late_release('h', 'u'))
        self.assertEqual({}, dom.callbacks)

    def test_refused_midway_watches_a_request_still_pending(self):
        dom = FakeDomain([_HOSTDEV.format(bus='81', n=2),
                          _HOSTDEV.format(bus='82', n=3)], release=False)
        original = dom.detachDeviceFlags

        def second_refused(xml, flags):
            if dom.detached:
                raise libvirt.libvirtError('device busy')
            original(xml, flags)
        dom.detachDeviceFlags = second_refused
        self.assertRaises(exception.DeviceDetachFailed, hostdev.detach,
                          dom, 'h', 5)
        self.assertEqual([], dom.attached)
        watch = hostdev.late_release('h', 'u')
        self.assertEqual({'hostdev2'}, set(watch.pending))
        dom.release_now('0000:81:00.0')
        self.assertTrue(watch.done.wait(10))
        self.assertEqual(['0000:81:00.0'], [a for a, _ in dom.attached])


class AttachTest(base.TestCase):

    def test_persistent_plug_and_idempotent(self):
        dom = FakeDomain([])
        xml = hostdev_xml.new_device_xml('0000:82:00.0')
        self.assertEqual(['0000:82:00.0'],
                         hostdev.attach(dom, [xml], 'h', persist=True))
        self.assertEqual(libvirt.VIR_DOMAIN_AFFECT_LIVE |
                         libvirt.VIR_DOMAIN_AFFECT_CONFIG,
                         dom.attached[0][1])
        self.assertEqual([], hostdev.attach(dom, [xml], 'h', persist=True))
        self.assertEqual(1, len(dom.attached))

    def test_source_replug_is_live_only(self):
        dom = FakeDomain([])
        hostdev.attach(dom, [hostdev_xml.new_device_xml('81:00.0')], 'h')
        self.assertEqual(libvirt.VIR_DOMAIN_AFFECT_LIVE, dom.attached[0][1])

    def test_refused(self):
        dom = FakeDomain([])

        def refuse(xml, flags):
            raise libvirt.libvirtError('in use by another domain')
        dom.attachDeviceFlags = refuse
        self.assertRaises(exception.DeviceAttachFailed, hostdev.attach,
                          dom, [hostdev_xml.new_device_xml('81:00.0')], 'h')
