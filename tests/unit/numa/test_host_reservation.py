"""Fitting on a host built the way the libvirt driver builds it.

The driver takes ``reserved_host_memory_mb`` off cell 0 twice over: its
``memory_mb`` and its small page pool's ``reserved``. A guest without a
page size is checked against the first, a guest asking for small pages
against the second; each must see the reservation once, and the two
kinds share the small pages, so neither may take what the other holds.
"""

import testscenarios

from numamig import objects
from numamig.numa import constraints
from numamig.numa import fit
from numamig.numa import usage
from numamig.virt.libvirt import host_topology
from tests import base
from tests import libvirt_settings
from tests.fixtures import libvirt_caps

load_tests = testscenarios.load_tests_apply_scenarios

RESERVED_MB = 512
NODE_MB = 4096
SMALL = {'hw:cpu_policy': 'dedicated', 'hw:mem_page_size': 'small'}
NO_SIZE = {'hw:cpu_policy': 'dedicated'}
FLOATING = {'hw:numa_nodes': '1'}


def _driver_host(pages_2m=0, shared=False):
    """One 4 GiB node, 2 cores x 2 threads, 512 MiB kept for the host."""
    cells = host_topology.parse_capabilities(libvirt_caps.caps_xml(
        cells=1, cores=2, threads=2, mem_gib=NODE_MB // 1024,
        pages_2m=pages_2m, pages_1g=0))
    settings = libvirt_settings.host(
        host='hostA', reserved_host_memory_mb=RESERVED_MB,
        cpu_shared_set=frozenset({0, 2}) if shared else None)
    return host_topology.build_host_topology(cells, settings)


def _fit(host, memory_mb, specs, limits):
    request = constraints.get_numa_request(1, memory_mb, specs, {})
    return fit.fit(host, request, limits)


class ReservationCountedOnceTest(testscenarios.WithScenarios,
                                 base.TestCase):
    # A guest needing exactly what is left fits, one MiB more does not,
    # and the reason names what is short by that one MiB.
    over = NODE_MB - RESERVED_MB + 1
    scenarios = [
        (f'{name}_{"limits" if limits else "no_limits"}',
         {'specs': specs, 'limits': limits, 'shared': name == 'floating',
          'why': why})
        for name, specs, why in (
            ('small_pages', SMALL,
             f"needs {over * 256} free 4 KiB pages, has {(over - 1) * 256}"),
            ('no_page_size', NO_SIZE, f"needs {over} MiB"),
            ('floating', FLOATING, f"needs {over} MiB"))
        for limits in (None, objects.NUMALimits())]

    def test_exactly_the_rest_fits(self):
        host = _driver_host(shared=self.shared)
        left = NODE_MB - RESERVED_MB
        self.assertEqual(left, host.cells[0].memory_mb)
        result = _fit(host, left, self.specs, self.limits)
        self.assertTrue(result.fits, result.reason)
        usage.apply(host, result.topology).validate()
        result = _fit(host, left + 1, self.specs, self.limits)
        self.assertFalse(result.fits)
        self.assertIn(self.why, result.reason)


class SmallPagesSharedTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.limits = objects.NUMALimits()
        self.left = NODE_MB - RESERVED_MB

    def _after(self, host, memory_mb, specs):
        result = _fit(host, memory_mb, specs, self.limits)
        self.assertTrue(result.fits, result.reason)
        return usage.apply(host, result.topology)

    def test_small_page_guest_cannot_take_memory_of_unsized_guest(self):
        host = self._after(_driver_host(), self.left - 1024, NO_SIZE)
        self.assertTrue(_fit(host, 1024, SMALL, self.limits).fits)
        result = _fit(host, 1025, SMALL, self.limits)
        self.assertFalse(result.fits)
        self.assertEqual(
            "guest cell 0 fits on no host cell: host cell 0 needs 262400 "
            "free 4 KiB pages, has 262144", result.reason)

    def test_unsized_guest_cannot_take_small_pages_of_another(self):
        host = self._after(_driver_host(), self.left - 1024, SMALL)
        self.assertTrue(_fit(host, 1024, NO_SIZE, self.limits).fits)
        self.assertFalse(_fit(host, 1025, NO_SIZE, self.limits).fits)

    def test_unsized_guest_cannot_take_huge_page_memory(self):
        # 1 GiB of the node is in 2 MiB pages: 2560 MiB of small pages.
        host = _driver_host(pages_2m=512)
        small = self.left - 1024
        for limits in (None, self.limits):
            self.assertTrue(_fit(host, small, NO_SIZE, limits).fits)
            result = _fit(host, small + 1, NO_SIZE, limits)
            self.assertFalse(result.fits)
            self.assertIn(f"needs {small + 1} MiB of small pages",
                          result.reason)

    def test_huge_page_guest_leaves_small_pages_alone(self):
        host = self._after(_driver_host(pages_2m=512), 1024,
                           {'hw:cpu_policy': 'dedicated',
                            'hw:mem_page_size': '2MB'})
        self.assertTrue(_fit(host, self.left - 1024, NO_SIZE,
                             self.limits).fits)
        self.assertTrue(_fit(host, self.left - 1024, SMALL,
                             self.limits).fits)
