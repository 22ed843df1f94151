"""The drain guest's kernel and the shaped link's arguments (no QEMU).

The kernel's behaviour is proven on the real tier
(tests/functional/libvirt/test_real_shaped_link.py); here: the bytes
it is built from, and the refusals.
"""

import struct

from numamig_ci import libvirt_hosts
from numamig_ci import shaped_link
from tests import base

LOAD = 0x100000


def words(kernel):
    """The patched immediates (top, pages, divisor, working set end)."""
    code = kernel[32:]
    return tuple(struct.unpack_from('<I', code, offset)[0] for offset in (
        libvirt_hosts._TOP, libvirt_hosts._PAGES, libvirt_hosts._DIVISOR,
        libvirt_hosts._WS_END))


class DrainKernelTest(base.TestCase):

    def test_multiboot_header_and_entry(self):
        kernel, _rate = libvirt_hosts.drain_kernel(126)
        magic, flags, checksum, header, load, end, bss, entry = \
            struct.unpack_from('<8I', kernel)
        self.assertEqual((0x1BADB002, 0x00010000, 0),
                         (magic, flags, (magic + flags + checksum) % 2**32))
        self.assertEqual((LOAD, LOAD, 0, 0, LOAD + 32),
                         (header, load, end, bss, entry))
        # The entry's first instructions: cli; mov $0x200000, %edi.
        self.assertEqual(b'\xfa\xbf\x00\x00\x20\x00', kernel[32:38])

    def test_idle_kernel_writes_then_dirties_nothing(self):
        kernel, rate = libvirt_hosts.drain_kernel(126)
        self.assertEqual(0, rate)
        self.assertEqual((126 << 20, 0), words(kernel)[:2])

    def test_the_rate_is_whole_pages_per_tick(self):
        kernel, rate = libvirt_hosts.drain_kernel(126, 6, 32)
        # 6 MiB/s at 100 Hz: 15.36 pages a tick, 15 written: 5.86 MiB/s.
        self.assertEqual((126 << 20, 15, 11932, 34 << 20), words(kernel))
        self.assertAlmostEqual(15 * 100 / 256, rate)
        # 2 MiB/s at 50 Hz: 10.24 pages, 10 written; the PIT divisor.
        kernel, rate = libvirt_hosts.drain_kernel(64, 2, 8, hz=50)
        self.assertEqual((10, 23864), words(kernel)[1:3])
        self.assertAlmostEqual(10 * 50 / 256, rate)

    def test_refusals(self):
        for args, words_ in (
                ((2,), 'written range'), ((5000,), 'written range'),
                ((126, 0.001, 32), 'under one page'),
                ((126, 4, 0), 'working set'),
                ((126, 4, 125), 'working set'),
                ((126, -1, 1), '>= 0'), ((126, 4, 32, 10), 'hz')):
            self.assertRaisesMessage(ValueError, words_,
                                     libvirt_hosts.drain_kernel, *args)


class ShapedLinkArgumentsTest(base.TestCase):

    def test_names_carry_the_tag(self):
        link = shaped_link.ShapedLink('12345678', 32)
        self.assertEqual(('nmig-link-12345678', 'nm12345678a',
                          'nm12345678b'),
                         (link.netns, link.outer_dev, link.inner_dev))
        # Interface names fit the kernel's 15 characters.
        self.assertLessEqual(len(link.outer_dev), 15)

    def test_refusals(self):
        for tag, rate in (('', 1), ('123456789', 1), ('A', 1), ('a-b', 1),
                          ('a', 0), ('a', 10001)):
            self.assertRaises(ValueError, shaped_link.ShapedLink, tag, rate)

    def test_down_before_up_does_nothing(self):
        shaped_link.ShapedLink('zz', 5).down()
