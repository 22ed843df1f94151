"""Property tests of fit and usage over random hosts and requests.

For thousands of generated cases: fit never modifies its inputs and gives
the same answer twice; a placement is a valid object whose apply never
fails and whose release restores the host exactly; the decision and the
assignment equal those of the permutation search the matching replaces.
"""

import copy
import itertools

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from numamig import objects
from numamig.numa import cellfit
from numamig.numa import fit
from numamig.numa import pages
from numamig.numa import usage
from numamig.numa import views
from tests import base
from tests.unit.numa import hosts

POLICIES = (None, 'prefer', 'isolate', 'require')
PAGESIZES = (None, -1, -2, -3, 4, 2048, 1048576)


@st.composite
def host_topologies(draw):
    cells = draw(st.integers(1, 4))
    cores = draw(st.integers(1, 4))
    threads = draw(st.sampled_from((1, 2)))
    shared = draw(st.integers(0, min(1, cores - 1)))
    memory_mb = 4096
    host = hosts.make_host(
        cells=cells, cores=cores, threads=threads, shared=shared,
        memory_mb=memory_mb,
        pages=hosts.hugepage_pools(memory_mb, pages_2m=512, pages_1g=1))
    for cell in host.cells:
        cell.pinned_cpus = draw(st.sets(st.sampled_from(
            sorted(cell.pcpuset)))) if cell.pcpuset else set()
        cell.memory_usage_mb = draw(st.integers(0, memory_mb))
        cell.cpu_usage = draw(st.integers(0, 4))
        pool = cell.pages_of(2048)
        pool.used = draw(st.integers(0, pool.total))
        pool.reserved = draw(st.integers(0, pool.total - pool.used))
    return host.validate()


@st.composite
def requests(draw):
    count = draw(st.integers(1, 3))
    policy = draw(st.sampled_from(POLICIES))
    pagesize = draw(st.sampled_from(PAGESIZES))
    cells = []
    for _ in range(count):
        pinned = draw(st.integers(0, 4))
        floating = draw(st.integers(0 if pinned else 1, 2))
        memory = draw(st.sampled_from((1024, 2048)))
        cells.append((pinned, floating, memory, pagesize, policy))
    emulator = None
    if cells[0][0] and draw(st.booleans()):
        emulator = 'isolate'
    return hosts.request(cells, emulator)


limits = st.one_of(st.none(), st.builds(
    objects.NUMALimits,
    cpu_allocation_ratio=st.sampled_from((1.0, 4.0, 16.0)),
    ram_allocation_ratio=st.sampled_from((1.0, 1.5))))


def _by_permutations(host, request, lim, strategy):
    """The assignment trying host-cell permutations in strategy order."""
    order = views.HostView(host).order(strategy)
    lim = views.limits_view(lim)
    isolate = request.emulator_threads_policy == 'isolate'
    demands = [cellfit.demand_of(g, int(isolate and g.id == 0), None)
               for g in request.cells]
    for perm in itertools.permutations(range(len(order)),
                                       len(request.cells)):
        if all(cellfit.check(order[h], d, lim)[0] is None
               for d, h in zip(demands, perm, strict=True)):
            return [order[h].id for h in perm]
    return None


def _reasons_by_checks(host, request, lim, strategy):
    """What a refusal ran out of, from cellfit.check alone: the reasons
    of every host cell for the first guest cell that fits none, else
    ``cells`` (each fits somewhere, but not on distinct cells)."""
    order = views.HostView(host).order(strategy)
    lim = views.limits_view(lim)
    isolate = request.emulator_threads_policy == 'isolate'
    for guest in request.cells:
        demand = cellfit.demand_of(guest, int(isolate and guest.id == 0),
                                   None)
        whys = [cellfit.check(cell, demand, lim)[0] for cell in order]
        if all(why is not None for why in whys):
            return frozenset(cellfit.reason_of(why) for why in whys) \
                or frozenset((cellfit.CELLS,))
    return frozenset((cellfit.CELLS,))


class FitPropertiesTest(base.TestCase):

    @settings(max_examples=1500, deadline=None)
    @given(host_topologies(), requests(), limits,
           st.sampled_from(fit.STRATEGIES))
    def test_a_refusal_names_what_it_ran_out_of(self, host, request, lim,
                                                 strategy):
        result = fit.fit(host, request, lim, strategy)
        reasons = fit.refusal_reasons(result)
        if result.fits:
            self.assertEqual(frozenset(), reasons)
            return
        self.assertTrue(reasons)
        self.assertLessEqual(reasons, set(cellfit.REASONS))
        self.assertEqual(_reasons_by_checks(host, request, lim, strategy),
                         reasons, result.reason)

    @settings(max_examples=1000, deadline=None)
    @given(host_topologies(), requests(), limits,
           st.sampled_from(fit.STRATEGIES))
    def test_fit_apply_release(self, host, request, lim, strategy):
        before = copy.deepcopy((host, request, lim))
        result = fit.fit(host, request, lim, strategy)
        self.assertEqual(before, (host, request, lim))
        self.assertEqual(result, fit.fit(host, request, lim, strategy))
        expected = _by_permutations(host, request, lim, strategy)
        if not result.fits:
            self.assertIsNone(expected)
            self.assertTrue(result.reason)
            return
        placed = result.topology.validate()
        self.assertEqual(expected, [c.host_cell for c in placed.cells])
        applied = usage.apply(host, placed).validate()
        self.assertEqual(before[0], host)
        self.assertEqual(host, usage.release(applied, placed))

    @settings(max_examples=300, deadline=None)
    @given(host_topologies(), st.lists(requests(), min_size=1, max_size=6),
           limits, st.sampled_from(fit.STRATEGIES))
    def test_one_view_serves_many_fits(self, host, guests, lim, strategy):
        # What a view works out on first need (core layouts, preferred
        # cores, orders) must not leak from one fit into the next.
        host_view = views.HostView(host)
        limits_view = views.limits_view(lim)
        for request in guests:
            expected = fit.fit(host, request, lim, strategy)
            request_view = views.RequestView(request)
            for _ in range(2):
                self.assertEqual(expected, fit.fit(
                    host_view, request_view, limits_view, strategy))

    @settings(max_examples=300, deadline=None)
    @given(host_topologies(), st.lists(requests(), min_size=1, max_size=6),
           st.sampled_from(fit.STRATEGIES))
    def test_successive_claims_never_clash(self, host, guests, strategy):
        placed = []
        current = host
        for request in guests:
            result = fit.fit(current, request, objects.NUMALimits(),
                             strategy)
            if result.fits:
                current = usage.apply(current, result.topology).validate()
                placed.append(result.topology)
        self.assertEqual(current, usage.host_with_usage(host, placed))
        for before, after in zip(host.cells, current.cells, strict=True):
            # Guests with and without a page size share the small pages:
            # together they never claim more than there are.
            capacity, used = pages.small_page_memory(before)
            self.assertLessEqual(pages.small_page_memory(after)[1],
                                 max(used, capacity))
        for topology in reversed(placed):
            current = usage.release(current, topology)
        self.assertEqual(host, current)

    @settings(max_examples=300, deadline=None)
    @given(host_topologies(), requests(),
           st.sampled_from((4, 2048, 1048576)))
    def test_forced_page_size_is_kept(self, host, request, size):
        result = fit.fit(host, request, pagesize_kb=size)
        if result.fits:
            self.assertEqual({size},
                             {c.pagesize for c in result.topology.cells})
            usage.apply(host, result.topology)
