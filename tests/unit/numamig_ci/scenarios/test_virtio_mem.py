"""The virtio-mem-per-node scenario's readings and checks, on canned
kernel, libvirt and command answers."""

from lxml import etree

from numamig_ci.backends import nested
from numamig_ci.scenarios import virtio_mem
from tests import base

MIB_KB = 1024
# /proc/PID/maps and numa_maps of a QEMU with two guest cells (128 MiB
# each, bound to their node) and two 512 MiB virtio-mem devices; the
# device on node 1 has 128 MiB plugged (populated), the other none.
MAPS = """\
7f0000000000-7f0020000000 rw-p 00000000 00:00 0
7f0020200000-7f0040200000 rw-p 00000000 00:00 0
7f0040400000-7f0048400000 rw-p 00000000 00:00 0
7f0048600000-7f0050600000 rw-p 00000000 00:00 0
7f0060000000-7f0060001000 r--p 00000000 08:01 12 /usr/bin/qemu
"""
NUMA_MAPS = """\
7f0000000000 bind:1 anon=32768 dirty=32768 N1=32768 kernelpagesize_kB=4
7f0020200000 bind:0
7f0040400000 bind:1 anon=23552 dirty=23552 N1=23552 kernelpagesize_kB=4
7f0048600000 bind:0 anon=20480 dirty=20480 N0=20480 kernelpagesize_kB=4
7f0060000000 default file=/usr/bin/qemu mapped=1 N0=1 kernelpagesize_kB=4
"""


class HostCountersTest(base.TestCase):

    def test_device_pages_per_node_leave_boot_memory_out(self):
        mappings = virtio_mem.bound_mappings(MAPS, NUMA_MAPS)
        self.assertEqual([(512 * MIB_KB, '1', {1: 32768}),
                          (512 * MIB_KB, '0', {}),
                          (128 * MIB_KB, '1', {1: 23552}),
                          (128 * MIB_KB, '0', {0: 20480})], mappings)
        self.assertEqual({1: 32768, 0: 0},
                         virtio_mem.device_pages(mappings, (1, 0)))

    def test_device_pages_must_be_exactly_what_is_plugged(self):
        self.assertEqual([], virtio_mem.check_device_pages(
            'g', 'h', {1: 32768, 0: 0}, {1: 128, 0: 0}))
        (failure,) = virtio_mem.check_device_pages(
            'g', 'h', {1: 32768, 0: 0}, {1: 256, 0: 0})
        self.assertIn('numa_maps', failure.element)
        # The pages on the other node: wrong too.
        self.assertTrue(virtio_mem.check_device_pages(
            'g', 'h', {1: 0, 0: 32768}, {1: 128, 0: 0}))

    def test_free_memory_moves_on_the_node_only(self):
        before = {0: 1600000, 1: 1700000}
        # 128 MiB given back on node 1, node 0 moved by 4 MiB.
        after = {0: 1600000 - 4 * MIB_KB, 1: 1700000 + 128 * MIB_KB}
        self.assertEqual([], virtio_mem.check_free_moved(
            'g', 'h', before, after, 1, 0, -128))

    def test_negative_control_the_other_node_fails(self):
        before = {0: 1600000, 1: 1700000}
        after = {0: 1600000 - 4 * MIB_KB, 1: 1700000 + 128 * MIB_KB}
        failures = virtio_mem.check_free_moved('g', 'h', before, after, 0,
                                               1, -128)
        self.assertEqual(['host kernel: node0 meminfo MemFree fall (MiB)',
                          'host kernel: node1 meminfo MemFree fall (MiB)'],
                         [f.element for f in failures])
        self.assertEqual(('-128 +- 48', '4.0'),
                         (failures[0].expected, failures[0].actual))

    def test_noise_beyond_the_margin_fails(self):
        before = {0: 1600000, 1: 1700000}
        after = {0: 1600000 - 50 * MIB_KB, 1: 1700000 + 128 * MIB_KB}
        (failure,) = virtio_mem.check_free_moved('g', 'h', before, after, 1,
                                                 0, -128)
        self.assertIn('node0', failure.element)


class GuestAndLibvirtTest(base.TestCase):

    def test_console_lines_per_guest_node(self):
        text = ("Linux ...\nVMEM 0=82292 1=62116\nnoise\n"
                "VMEM 0=82292 1=193188\r\nVMEM 0=8229")
        self.assertEqual([{0: 82292, 1: 62116}, {0: 82292, 1: 193188}],
                         virtio_mem.console_lines(text))

    def test_live_devices_requested_and_current(self):
        xml = ("<domain><devices>"
               "<memory model='virtio-mem'><target><size unit='KiB'>524288"
               "</size><node>0</node><requested unit='KiB'>131072"
               "</requested><current unit='KiB'>131072</current></target>"
               "</memory><memory model='virtio-mem'><target><node>1</node>"
               "<requested unit='KiB'>0</requested><current unit='KiB'>0"
               "</current></target></memory><memory model='dimm'/>"
               "</devices></domain>")
        self.assertEqual({0: (131072, 131072), 1: (0, 0)},
                         virtio_mem.devices(xml))
        self.assertEqual([], virtio_mem.check_devices('g', 'h', xml,
                                                      {0: 128, 1: 0}))
        failure = virtio_mem.check_devices('g', 'h', xml,
                                           {0: 0, 1: 128})[0]
        self.assertIn('node 0', failure.element)

    def test_answer_must_say_done_and_reached(self):
        answer = {'status': 'done', 'result': {'guests': [
            {'instance': 'u', 'reached': True, 'current': {'1': 128,
                                                           '0': 0}}]}}
        self.assertEqual([], virtio_mem.check_answer('g', 'h', answer, 1,
                                                     128, 'host reclaim'))
        self.assertTrue(virtio_mem.check_answer('g', 'h', answer, 0, 128,
                                                'host reclaim'))
        answer['result']['guests'][0]['reached'] = False
        self.assertTrue(virtio_mem.check_answer('g', 'h', answer, 1, 128,
                                                'host reclaim'))


class GuestKernelXMLTest(base.TestCase):

    DOMAIN = ("<domain type='qemu'><name>g</name><os><type>hvm</type>"
              "<boot dev='hd'/></os><cpu><numa><cell id='0'/></numa></cpu>"
              "<devices><serial type='pty'/><console type='pty'/>"
              "<memory model='virtio-mem'/></devices></domain>")

    def test_kernel_console_and_prealloc_numa_parts_kept(self):
        doc = etree.fromstring(nested.with_guest_kernel(
            self.DOMAIN, '/k', '/i', 'quiet', '/c', kvm=1).encode())
        self.assertEqual('kvm', doc.get('type'))
        self.assertEqual(['/k', '/i', 'quiet', None],
                         [doc.findtext(f'os/{t}') for t in
                          ('kernel', 'initrd', 'cmdline', 'boot')])
        (serial,) = doc.findall('devices/serial')
        self.assertEqual(('file', '/c'), (serial.get('type'),
                                          serial.find('source').get('path')))
        self.assertEqual([], doc.findall('devices/console'))
        self.assertIsNotNone(doc.find('features/acpi'))
        self.assertEqual(1, len(doc.findall('cpu/numa/cell')))
        self.assertEqual(1, len(doc.findall('devices/memory')))
        args = [a.get('value') for a in doc.iter(
            f'{{{nested.QEMU_NS}}}arg')]
        self.assertEqual(['-global', 'virtio-mem-pci.prealloc=on'], args)

    def test_tcg_machine_keeps_the_domain_type(self):
        doc = etree.fromstring(nested.with_guest_kernel(
            self.DOMAIN, '/k', '/i', 'quiet', '/c', kvm=0).encode())
        self.assertEqual('qemu', doc.get('type'))
