"""Usage on views: the same accounting as numa.usage.apply, on views."""

import copy
import random

from numamig import exception
from numamig.numa import fit
from numamig.numa import usage
from numamig.numa import view_usage
from numamig.numa import views
from tests import base
from tests.unit.numa import hosts

_FIELDS = ('id', 'pinned_cpus', 'memory_usage_mb', 'cpu_usage', 'pools',
           'free_pcpus', 'free_pages', 'small_memory', 'page_sizes')

# (pinned, floating, memory MiB, page size, thread policy) per guest cell
_SHAPES = [
    [(2, 0, 1024, None, None)],
    [(2, 1, 512, 2048, 'isolate')],
    [(2, 0, 1024, 2048, 'require')] * 2,
    [(1, 0, 1024, 1048576, 'prefer')],
    [(0, 2, 1024, None, None)],
    [(3, 0, 512, -1, None), (1, 1, 512, -1, None)],      # small pages
]


def _fields(view):
    return [tuple(getattr(cell, name) for name in _FIELDS)
            for cell in view.cells]


class ApplyOnViewTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.host = hosts.make_host(
            cells=2, cores=4, threads=2, shared=1, memory_mb=4096,
            pages=hosts.hugepage_pools(4096, pages_2m=512, pages_1g=1))

    def test_same_as_a_view_of_usage_apply(self):
        # Guests placed one after another, in a random order of shapes,
        # some failing: each step must give the view usage.apply's
        # topology gives, and leave the view it started from unchanged.
        placed = 0
        for seed in range(20):
            rng = random.Random(seed)
            topology, view = self.host, views.HostView(self.host)
            for step in range(12):
                shape = rng.choice(_SHAPES)
                emulator = rng.choice([None, 'isolate'])
                result = fit.fit(view, hosts.request(shape, emulator))
                if not result.fits:
                    continue
                before = _fields(view)
                view = view_usage.apply(view, result.placement)
                topology = usage.apply(topology, result.topology)
                self.assertEqual(_fields(views.HostView(topology)),
                                 _fields(view), (seed, step, shape))
                self.assertNotEqual(before, _fields(view))
                placed += 1
        self.assertGreater(placed, 100)

    def test_inputs_unchanged_and_untouched_cells_shared(self):
        view = views.HostView(self.host)
        kept = copy.deepcopy(_fields(view))
        result = fit.fit(view, hosts.request([(2, 0, 1024, None, None)]))
        after = view_usage.apply(view, result.placement)
        self.assertEqual(kept, _fields(view))
        used = result.placement.cells[0].host_cell
        other = 1 - used
        self.assertIs(view.cells[other], after.cells[other])
        self.assertIsNot(view.cells[used], after.cells[used])

    def test_a_clashing_placement_raises_like_usage_apply(self):
        view = views.HostView(self.host)
        placement = fit.fit(view, hosts.request(
            [(2, 0, 1024, None, None)])).placement
        once = view_usage.apply(view, placement)
        self.assertRaises(exception.CPUAlreadyPinned, view_usage.apply,
                          once, placement)

    def test_pages_beyond_the_pool_raise(self):
        view = views.HostView(self.host)
        placement = fit.fit(view, hosts.request(
            [(1, 0, 1024, 1048576, None)])).placement
        once = view_usage.apply(view, placement)
        # The same pages again, on pins that are free: only pages clash.
        (cell,) = placement.cells
        free = min(once.cells[cell.host_cell].free_pcpus)
        moved = placement._replace(cells=(cell._replace(pins={0: free}),))
        self.assertRaises(exception.PagesExhausted, view_usage.apply, once,
                          moved)

    def test_idle_cells(self):
        view = views.HostView(self.host)
        self.assertEqual([True, True], [c.is_idle() for c in view.cells])
        result = fit.fit(view, hosts.request([(0, 1, 512, None, None)]))
        after = view_usage.apply(view, result.placement)
        used = result.placement.cells[0].host_cell
        self.assertEqual([c.id != used for c in after.cells],
                         [c.is_idle() for c in after.cells])
