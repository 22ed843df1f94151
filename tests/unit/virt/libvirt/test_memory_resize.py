"""Resizing virtio-mem devices: the live device XML, the event-driven
wait, the deadline."""

import threading

import libvirt
from lxml import etree

from numamig import exception
from numamig.virt.libvirt import memory_resize
from numamig.virt.libvirt import migration_xml
from numamig.virt.libvirt import virtio_mem
from tests import base

_DOMAIN = """<domain type='qemu'><name>g</name>
<devices>{}</devices></domain>"""
_DEVICE = """<memory model='virtio-mem'><source><nodemask>0</nodemask>
<pagesize unit='KiB'>4</pagesize></source><target>
<size unit='KiB'>524288</size><node>{cell}</node>
<block unit='KiB'>2048</block><requested unit='KiB'>262144</requested>
<current unit='KiB'>262144</current></target>
<alias name='virtiomem{cell}'/></memory>"""


class FakeDomain:
    """A running guest whose driver follows ``requested`` when told to
    (``follow``), sending a size-change event each time, or never."""

    def __init__(self, events=True, refuse=None):
        self.doc = migration_xml.parse_domain(_DOMAIN.format(
            ''.join(_DEVICE.format(cell=c) for c in (0, 1))))
        self.updates = []
        self.callback = None
        self.events = events
        self.refuse = refuse

    def UUIDString(self):  # noqa: N802 - libvirt API
        return 'u'

    def XMLDesc(self, flags):  # noqa: N802 - libvirt API
        return etree.tostring(self.doc, encoding='unicode')

    def connect(self):
        return self

    def domainEventRegisterAny(self, dom, event, callback,  # noqa: N802
                               opaque):
        if not self.events:
            raise libvirt.libvirtError('no event loop')
        assert event == memory_resize.SIZE_CHANGE_EVENT
        self.callback = callback
        return 7

    def domainEventDeregisterAny(self, callback_id):  # noqa: N802
        self.callback = None

    def updateDeviceFlags(self, xml, flags):  # noqa: N802 - libvirt
        if self.refuse:
            raise self.refuse
        device = etree.fromstring(xml)
        self.updates.append((flags, device.findtext('alias') is None,
                             device.find('alias').get('name'),
                             device.findtext('target/requested')))
        cell = int(device.findtext('target/node'))
        ours = virtio_mem.device_elements(self.doc)[cell]
        ours.find('target/requested').text = \
            device.findtext('target/requested')

    def follow(self):
        for el in virtio_mem.device_elements(self.doc).values():
            el.find('target/current').text = el.findtext('target/requested')
        if self.callback:
            self.callback(self, self, 'virtiomem1', 0, None)


class ResizeTest(base.TestCase):

    def test_live_device_xml_then_wait_for_the_event(self):
        dom = FakeDomain()
        timer = threading.Timer(0.05, dom.follow)
        timer.start()
        self.addCleanup(timer.cancel)
        current, reached = memory_resize.resize(dom, {1: 64}, 30, 'h')
        self.assertEqual(({0: 256, 1: 64}, True), (current, reached))
        # The live XML (alias kept), only node 1's device, LIVE flag.
        self.assertEqual([(memory_resize.AFFECT_LIVE, False, 'virtiomem1',
                           '65536')], dom.updates)
        self.assertIsNone(dom.callback, "the event callback is removed")

    def test_a_guest_that_does_not_answer_meets_the_deadline(self):
        dom = FakeDomain()
        current, reached = memory_resize.resize(dom, {0: 0, 1: 128}, 0.2,
                                                'h')
        # Nothing unplugged: the host got nothing back.
        self.assertEqual(({0: 256, 1: 256}, False), (current, reached))

    def test_without_events_read_at_the_deadline(self):
        dom = FakeDomain(events=False)
        timer = threading.Timer(0.05, dom.follow)
        timer.start()
        self.addCleanup(timer.cancel)
        current, reached = memory_resize.resize(dom, {1: 128}, 0.3, 'h')
        self.assertEqual(({0: 256, 1: 128}, True), (current, reached))

    def test_refused_by_libvirt(self):
        error = libvirt.libvirtError('this function is not supported')
        dom = FakeDomain(refuse=error)
        exc = self.assertRaises(exception.HypervisorError,
                                memory_resize.resize, dom, {0: 128}, 1, 'h')
        self.assertIn('resize the virtio-mem device of guest cell 0 to 128',
                      str(exc))

    def test_cell_without_a_device(self):
        exc = self.assertRaises(exception.HypervisorError,
                                memory_resize.resize, FakeDomain(),
                                {2: 128}, 1, 'h')
        self.assertIn('no device for guest cells [2]', str(exc))
