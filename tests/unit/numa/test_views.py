"""The views a fit reads: what they work out once, and their contracts."""

import threading

from numamig import exception
from numamig import objects
from numamig.numa import fit
from numamig.numa import views
from tests import base
from tests.unit.numa import hosts


class CellViewTest(base.TestCase):

    def test_free_pcpus_and_counts(self):
        cell = hosts.make_cell(0, cores=4, shared=1, pinned={1, 5})
        view = views.CellView(cell)
        self.assertEqual(cell.free_pcpus, view.free_pcpus)
        self.assertEqual(len(cell.free_pcpus), view.free_count)
        self.assertEqual(len(cell.cpuset), view.shared_count)

    def test_pages_smallest_first_with_the_small_budget(self):
        # 4 GiB: 1 GiB in 512 2M pages (128 used), 512 MiB of small pages
        # reserved; 1.5 GiB of memory used, 256 MiB of it in 2M pages.
        pools = [(2048, 512, 128, 0), (4, 3 * 262144, 0, 131072)]
        cell = hosts.make_cell(0, memory_mb=4096, pages=pools,
                               memory_usage_mb=1536)
        view = views.CellView(cell)
        self.assertEqual((4, 2048), view.page_sizes)
        # Small pages: 3 GiB less 512 MiB reserved; 1280 MiB used there.
        self.assertEqual((2560, 1280), view.small_memory)
        self.assertEqual({4: 1280 * 256, 2048: 384}, view.free_pages)

    def test_cell_without_pools(self):
        view = views.CellView(hosts.make_cell(0, pages=[]))
        self.assertEqual((), view.page_sizes)
        self.assertIsNone(view.small_memory)
        self.assertEqual({}, view.free_pages)


class HostViewTest(base.TestCase):

    def _host(self):
        # Cell 1 has two pCPUs pinned: fuller than cells 0 and 2.
        return objects.HostNUMATopology(cells=[
            hosts.make_cell(0, cells=3), hosts.make_cell(1, cells=3,
                                                          pinned={4, 5}),
            hosts.make_cell(2, cells=3)])

    def test_orders(self):
        view = views.HostView(self._host())
        self.assertEqual([0, 2, 1], [c.id for c in view.order('spread')])
        self.assertEqual([1, 0, 2], [c.id for c in view.order('pack')])
        self.assertIs(view.order('spread'), view.order('spread'))

    def test_a_view_passes_through(self):
        view = views.HostView(self._host())
        self.assertIs(view, views.HostView.of(view))
        self.assertIsInstance(views.HostView.of(self._host()), views.HostView)

    def test_the_topology_is_not_modified(self):
        host = self._host()
        before = host.obj_clone()
        views.HostView(host).order('pack')
        self.assertEqual(before, host)


class RequestViewTest(base.TestCase):

    def test_guests_in_id_order_and_demands(self):
        request = hosts.request([(2, 0, 1024, 2048, 'prefer'),
                                 (1, 1, 512, None, None)],
                                emulator='isolate')
        request.cells.reverse()
        view = views.RequestView(request)
        self.assertEqual([0, 1], [g.id for g in view.guests])
        own, forced = view.demands(), view.demands(4)
        # Isolated emulator threads: one more pinned pCPU on cell 0; both
        # cells' policies pin (dedicated, mixed): no memory overcommit.
        self.assertEqual([(0, 3, 1024, 2048, 'prefer', True),
                          (1, 1, 512, None, None, True)], list(own))
        self.assertEqual([4, 4], [d.pagesize for d in forced])
        self.assertIs(own, view.demands())

    def test_request_without_cells_refused(self):
        for request in (None, objects.InstanceNUMATopology(cells=[])):
            self.assertRaises(exception.InvalidFitParameter,
                              views.RequestView, request)

    def test_a_view_passes_through(self):
        view = views.RequestView(hosts.request([(1, 0, 512, None, None)]))
        self.assertIs(view, views.RequestView.of(view))


class LimitsViewTest(base.TestCase):

    def test_unset_ratios_are_one(self):
        view = views.LimitsView(objects.NUMALimits())
        self.assertEqual((1.0, 1.0), (view.cpu_ratio, view.ram_ratio))
        view = views.LimitsView(objects.NUMALimits(
            cpu_allocation_ratio=4.0, ram_allocation_ratio=1.5))
        self.assertEqual((4.0, 1.5), (view.cpu_ratio, view.ram_ratio))

    def test_none_and_views_pass_through(self):
        self.assertIsNone(views.limits_view(None))
        view = views.LimitsView(objects.NUMALimits())
        self.assertIs(view, views.limits_view(view))


class SharedViewTest(base.TestCase):
    """A scheduler's threads fit different guests on one view at once."""

    def test_concurrent_fits_on_one_view_match_single_fits(self):
        host = hosts.make_host(cells=4, cores=8)
        requests = [hosts.request([(pinned, 0, 512, None, policy)] * nodes)
                    for pinned in (1, 2, 3)
                    for policy in ('prefer', 'isolate', 'require')
                    for nodes in (1, 2)]
        expected = [fit.fit(host, request) for request in requests]
        for _ in range(20):
            # A new view each round: no layout built yet.
            self.assertEqual(expected,
                             _fit_together(views.HostView(host), requests))


def _fit_together(view, requests):
    """Fit every request on ``view``, one thread each, started at once."""
    results = [None] * len(requests)
    barrier = threading.Barrier(len(requests))

    def run(index):
        barrier.wait()
        results[index] = fit.fit(view, requests[index])
    threads = [threading.Thread(target=run, args=(i,))
               for i in range(len(requests))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results
