"""Tests of the capacity index's conditions: exact at every boundary.

For each capacity, a host whose best cell has exactly what a guest cell
needs is not short (the fit accepts it), and one unit less is short (the
fit refuses it): the index is never stricter than the fit, and it does
rule hosts out.
"""

from numamig import objects
from numamig.numa import fit
from numamig.numa import views
from numamig.scheduler import capacity
from tests import base
from tests.unit.numa import hosts


def _needs(request, limits=None, pagesize_kb=None):
    return capacity.Needs.of(views.RequestView(request),
                             views.limits_view(limits), pagesize_kb)


class CapacityTest(base.TestCase):

    def _assert_boundary(self, host, request, short_by, limits=None,
                         pagesize_kb=None):
        """``request`` fits ``host``; the index passes it. ``short_by`` is
        the capacity the index must name once the host has less."""
        needs = _needs(request, limits, pagesize_kb)
        self.assertTrue(fit.fit(host, request, limits,
                                pagesize_kb=pagesize_kb).fits)
        self.assertIsNone(needs.short(capacity.HostCapacity(host)))
        return needs

    def test_free_pcpus(self):
        # One cell of two cores of two threads: pCPUs 0-3.
        host = hosts.make_host(cells=1, cores=2, threads=2, pinned={0, 1})
        request = hosts.request([(2, 0, 1024, None, None)])
        needs = self._assert_boundary(host, request, capacity.PCPUS)
        fuller = hosts.make_host(cells=1, cores=2, threads=2,
                                 pinned={0, 1, 2})
        self.assertFalse(fit.fit(fuller, request).fits)
        self.assertEqual(capacity.PCPUS,
                         needs.short(capacity.HostCapacity(fuller)))
        self.assertEqual(1, capacity.HostCapacity(fuller).pcpus)

    def test_cells(self):
        request = hosts.request([(1, 0, 1024, None, None)] * 2)
        needs = self._assert_boundary(hosts.make_host(cells=2), request,
                                      capacity.CELLS)
        self.assertEqual(capacity.CELLS, needs.short(
            capacity.HostCapacity(hosts.make_host(cells=1))))

    def test_shared_pcpus(self):
        request = hosts.request([(0, 4, 1024, None, None)])
        needs = self._assert_boundary(
            hosts.make_host(cells=1, cores=4, shared=2), request,
            capacity.SHARED)
        self.assertEqual(capacity.SHARED, needs.short(
            capacity.HostCapacity(hosts.make_host(cells=1, cores=4,
                                                  shared=1))))

    def test_memory_without_limits(self):
        request = hosts.request([(1, 0, 8192, None, None)])
        needs = self._assert_boundary(hosts.make_host(memory_mb=8192),
                                      request, capacity.MEMORY)
        self.assertEqual(capacity.MEMORY, needs.short(
            capacity.HostCapacity(hosts.make_host(memory_mb=8191))))

    def test_memory_with_limits_counts_usage_and_ratio(self):
        limits = objects.NUMALimits(cpu_allocation_ratio=1.0,
                                    ram_allocation_ratio=1.5)
        # 8192 * 1.5 - 6000 = 6288 MiB fit; the small pages are 8192 *
        # 1.5 - 0 on their side. A floating guest: pinned ones never
        # overcommit memory.
        host = hosts.make_host(cells=1, memory_mb=8192, shared=1,
                               memory_usage_mb=6000)
        request = hosts.request([(0, 1, 6288, None, None)])
        needs = self._assert_boundary(host, request, capacity.MEMORY,
                                      limits=limits)
        # The bound is a necessary condition with a little slack.
        self.assertGreaterEqual(needs._memory_limit(
            capacity.HostCapacity(host)), 6288)
        fuller = hosts.make_host(cells=1, memory_mb=8192, shared=1,
                                 memory_usage_mb=8000)
        self.assertFalse(fit.fit(fuller, request, limits).fits)
        self.assertEqual(capacity.MEMORY,
                         needs.short(capacity.HostCapacity(fuller)))

    def test_huge_pages(self):
        pools = hosts.hugepage_pools(8192, pages_2m=1024, used_2m=512)
        host = hosts.make_host(cells=1, memory_mb=8192, pages=pools)
        request = hosts.request([(1, 0, 1024, 2048, None)])
        needs = self._assert_boundary(host, request, capacity.PAGES)
        fuller = hosts.make_host(cells=1, memory_mb=8192,
                                 pages=hosts.hugepage_pools(
                                     8192, pages_2m=1024, used_2m=513))
        self.assertFalse(fit.fit(fuller, request).fits)
        self.assertEqual(capacity.PAGES,
                         needs.short(capacity.HostCapacity(fuller)))

    def test_forced_page_size_not_a_whole_number_of_pages(self):
        request = hosts.request([(1, 0, 1025, None, None)])
        needs = _needs(request, pagesize_kb=2048)
        host = hosts.make_host(cells=1, pages=hosts.hugepage_pools(
            8192, pages_2m=1024))
        self.assertFalse(fit.fit(host, request, pagesize_kb=2048).fits)
        self.assertEqual(capacity.PAGES,
                         needs.short(capacity.HostCapacity(host)))

    def test_no_request_needs_nothing(self):
        self.assertIsNone(capacity.Needs.of(None, None, None))
