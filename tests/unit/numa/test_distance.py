"""Nearest first: the fit against an independent brute force.

Thousands of generated small hosts (2-4 cells, random symmetric distance
tables with 10 on the diagonal, random free pCPUs, memory and 2 MiB
pages) and guests (1-3 cells, pinned vCPUs, small or 2 MiB pages). The
brute force here enumerates every assignment of guest cells to distinct
host cells with its own fit check (free pCPUs, free small memory or free
2 MiB pages: all these generated cells can run out of) and its own cost
(the sum of the table's distances over pairs of guest cells). The fit
must fit iff the brute force finds a fit, never be farther than the
brute force's nearest, and, among the nearest, give the assignment the
strategy's order gives first (today's tie-break). On hosts whose remote
distances are all equal, and for every decision and refusal, distances
change nothing: the answers equal those of the same host without a
table.
"""

import itertools
import pickle
import random

from numamig import objects
from numamig.numa import distance
from numamig.numa import fit
from numamig.numa import views
from tests import base
from tests.unit.numa import hosts
from tests.unit.numa import test_properties

CASES = 3000
STRATEGIES = ('spread', 'pack')


def _random_host(rng, uniform_remote=None):
    """A host of 2-4 cells of 1-4 single-thread cores and 4 GiB with a
    2 MiB pool, some pCPUs pinned, some memory and pages used, and a
    symmetric table: random remote distances, or all ``uniform_remote``.
    """
    count = rng.randint(2, 4)
    table = {}
    for a, b in itertools.combinations(range(count), 2):
        table[a, b] = table[b, a] = (uniform_remote or
                                     rng.choice((11, 12, 16, 20, 21, 32)))
    cells = []
    for cell_id in range(count):
        cores = rng.randint(1, 4)
        pages_2m = rng.randint(0, 1024)
        used_2m = rng.randint(0, pages_2m)
        # Half the cells nearly empty, so that guests of several cells
        # often fit more than one set of host cells.
        busy = rng.random() < 0.5
        small_used = rng.randint(0, (4096 - pages_2m * 2) if busy else 256)
        cell = hosts.make_cell(
            cell_id, cores=cores, threads=1, memory_mb=4096,
            pages=hosts.hugepage_pools(4096, pages_2m=pages_2m,
                                       used_2m=used_2m)[:2],
            memory_usage_mb=small_used + used_2m * 2)
        # make_cell numbers pCPUs from cell_id * cores: make them unique.
        cell.pcpuset = {cell_id * 8 + cpu for cpu in range(cores)}
        cell.pinned_cpus = set(rng.sample(sorted(cell.pcpuset),
                                          rng.randint(0, cores) if busy
                                          else 0))
        cell.distances = {other: (10 if other == cell_id
                                  else table[cell_id, other])
                          for other in range(count)}
        cells.append(cell)
    return objects.HostNUMATopology(cells=cells).validate()


def _random_request(rng):
    count = rng.randint(1, 3)
    pagesize = rng.choice((None, 2048))
    return hosts.request([(rng.randint(1, 3), 0,
                           rng.choice((512, 1024, 2048)), pagesize, None)
                          for _ in range(count)])


def _brute_fits(cell, guest):
    """Whether a guest cell fits a host cell, counted here from the
    objects: free pCPUs, then free 2 MiB pages or free small memory."""
    if len(guest.pcpuset) > len(cell.pcpuset - cell.pinned_cpus):
        return False
    if guest.pagesize == 2048:
        pool = cell.pages_of(2048)
        return guest.memory_mb // 2 <= pool.total - pool.used
    small_mb = cell.pages_of(4).total * 4 // 1024
    huge_used_mb = cell.pages_of(2048).used * 2
    return guest.memory_mb <= small_mb - (cell.memory_usage_mb -
                                          huge_used_mb)


def _brute_force(host, request):
    """{cost: [assignments as host cell ids per guest cell]} of every
    assignment that fits."""
    by_id = {cell.id: cell for cell in host.cells}
    found = {}
    for ids in itertools.permutations(sorted(by_id), len(request.cells)):
        if all(_brute_fits(by_id[i], g)
               for i, g in zip(ids, request.cells, strict=True)):
            cost = sum(by_id[a].distances[b]
                       for a, b in itertools.combinations(ids, 2))
            found.setdefault(cost, []).append(ids)
    return found


def _without_table(host):
    plain = host.obj_clone()
    for cell in plain.cells:
        cell.distances = {}
    return plain


def _chosen(result):
    return tuple(cell.host_cell for cell in result.topology.cells)


class NearestFirstTest(base.TestCase):

    def test_never_farther_than_the_brute_force(self):
        rng = random.Random(39)
        farther = nearer = 0
        for case in range(CASES):
            host, request = _random_host(rng), _random_request(rng)
            strategy = STRATEGIES[case % 2]
            answer = fit.fit(host, request, strategy=strategy)
            found = _brute_force(host, request)
            self.assertEqual(bool(found), answer.fits, (case, answer))
            if not found:
                continue
            best = min(found)
            chosen = _chosen(answer)
            self.assertEqual(best, answer.distance.cost, (case, chosen))
            self.assertIn(f"distance cost {best}", answer.distance.reason)
            # Ties: the strategy's order gives the first of the nearest.
            order = [cell.id for cell in
                     views.HostView(host).order(strategy)]
            first = min(found[best], key=lambda ids: [order.index(i)
                                                      for i in ids])
            self.assertEqual(first, chosen, case)
            plain = fit.fit(_without_table(host), request,
                            strategy=strategy)
            plain_cost = sum(host.cells[a].distances[b] for a, b in
                             itertools.combinations(_chosen(plain), 2))
            farther += plain_cost > best
            nearer += plain_cost == best
        # The cases exercise both: nearest first changes some answers
        # (75 of these 3000; most guests of several cells fit one set
        # only, or land on the nearest set in the order anyway).
        self.assertGreater(farther, 50)
        self.assertGreater(nearer, 100)

    def test_equal_distances_change_nothing(self):
        rng = random.Random(3939)
        for case in range(CASES):
            host = _random_host(rng, uniform_remote=rng.choice((11, 20,
                                                                32)))
            request = _random_request(rng)
            for strategy in STRATEGIES:
                with_table = fit.fit(host, request, strategy=strategy)
                plain = fit.fit(_without_table(host), request,
                                strategy=strategy)
                self.assertEqual(plain, with_table, case)
                if plain.fits:
                    self.assertEqual(
                        [cell[1:] for cell in plain.placement.cells],
                        [cell[1:] for cell in with_table.placement.cells])
                    self.assertEqual(plain.distance.excess, 0)
                    self.assertEqual(with_table.distance.excess, 0)

    def test_decisions_and_refusals_never_depend_on_distances(self):
        rng = random.Random(393939)
        for case in range(CASES):
            host, request = _random_host(rng), _random_request(rng)
            strategy = STRATEGIES[case % 2]
            with_table = fit.fit(host, request, strategy=strategy)
            plain = fit.fit(_without_table(host), request,
                            strategy=strategy)
            self.assertEqual(plain.fits, with_table.fits, case)
            self.assertEqual(plain.reason, with_table.reason, case)
            self.assertEqual(fit.refusal_reasons(plain),
                             fit.refusal_reasons(with_table))

    def test_property_hosts_with_a_uniform_table_answer_as_before(self):
        # The property tests' generators (SMT, shared CPUs, 1 GiB pages,
        # thread policies, isolated emulator threads, limits): a table of
        # equal remote distances changes no answer.
        rng = random.Random(7)

        @test_properties.given(test_properties.host_topologies(),
                               test_properties.requests(),
                               test_properties.limits,
                               test_properties.st.sampled_from(STRATEGIES))
        @test_properties.settings(max_examples=500, deadline=None,
                                  database=None)
        def check(host, request, lim, strategy):
            plain = fit.fit(host, request, limits=lim, strategy=strategy)
            remote = rng.choice((12, 20, 21))
            ids = [cell.id for cell in host.cells]
            for cell in host.cells:
                cell.distances = {other: 10 if other == cell.id else remote
                                  for other in ids}
            self.assertEqual(plain, fit.fit(host, request, limits=lim,
                                            strategy=strategy))
        check()


class DistanceTest(base.TestCase):

    def _cells(self, table):
        return [objects.HostNUMACell(id=i, distances=dict(enumerate(row)))
                for i, row in enumerate(table)]

    def test_cost_is_the_sum_over_pairs(self):
        cells = self._cells([[10, 12, 21, 21], [12, 10, 21, 21],
                             [21, 21, 10, 12], [21, 21, 12, 10]])
        self.assertEqual(12, distance.cost(cells[:2]))
        self.assertEqual(12 + 21 + 21, distance.cost(cells[:3]))
        self.assertEqual(0, distance.cost(cells[:1]))
        self.assertEqual(9, distance.excess(cells[1:3], cells))
        self.assertFalse(distance.uniform(cells))

    def test_a_missing_table_is_local_10_remote_20(self):
        cells = [objects.HostNUMACell(id=0, distances={}),
                 objects.HostNUMACell(id=1, distances={0: 21})]
        self.assertEqual(10, distance.between(cells[0], cells[0]))
        self.assertEqual(21, distance.between(cells[0], cells[1]))
        self.assertEqual([(0, 0), (0, 1), (1, 1)], distance.missing(cells))
        self.assertEqual({0: {0: 10, 1: 20}, 1: {0: 21, 1: 10}},
                         distance.assumed_table(cells))

    def test_a_two_cell_guest_lands_on_a_close_pair(self):
        host = hosts.make_host(cells=4, cores=2, threads=1)
        table = [[10, 21, 12, 21], [21, 10, 21, 12],
                 [12, 21, 10, 21], [21, 12, 21, 10]]
        for cell, row in zip(host.cells, table, strict=True):
            cell.distances = dict(enumerate(row))
        request = hosts.request([(1, 0, 1024, None, None)] * 2)
        answer = fit.fit(host, request)
        self.assertEqual((0, 2), _chosen(answer))
        self.assertEqual(12, answer.distance.cost)
        self.assertEqual(0, answer.distance.excess)
        self.assertEqual("host cells 0, 2: distance cost 12 (the nearest "
                         "set of host cells it fits; 2 nearer than the "
                         "strategy's first checked)",
                         answer.distance.reason)
        plain = fit.fit(_without_table(host), request)
        self.assertEqual((0, 1), _chosen(plain))
        self.assertIn("equally far", plain.distance.reason)

    def test_many_cells_are_bounded_and_never_worse(self):
        # 16 cells, 8 guest cells: C(16, 8) sets is over MAX_SETS, so the
        # search compares one set per cell; two sockets of 8 near nodes.
        host = hosts.make_host(cells=16, cores=1, threads=1)
        for cell in host.cells:
            cell.distances = {other.id: (10 if other.id == cell.id else
                                         12 if other.id % 2 == cell.id % 2
                                         else 21) for other in host.cells}
        request = hosts.request([(1, 0, 512, None, None)] * 8)
        answer = fit.fit(host, request)
        self.assertEqual(12 * 28, answer.distance.cost)
        self.assertEqual(0, answer.distance.excess)

    def test_a_pickled_result_keeps_its_distance(self):
        host = hosts.make_host(cells=4, cores=2, threads=1)
        for cell in host.cells:
            cell.distances = {other: 10 if other == cell.id else
                              12 if other % 2 == cell.id % 2 else 21
                              for other in range(4)}
        answer = fit.fit(host, hosts.request([(1, 0, 512, None, None)] * 2))
        again = pickle.loads(pickle.dumps(answer))
        self.assertEqual(answer, again)
        self.assertEqual(answer.distance, again.distance)
        self.assertEqual(12, again.distance.cost)


class GuestTableTest(base.TestCase):
    """distance.guest_table: what a guest is told of its cells."""

    @staticmethod
    def _cells(rows):
        return [objects.HostNUMACell(id=cell, distances=row)
                for cell, row in rows.items()]

    def test_each_direction_as_the_host_reports_it(self):
        cells = self._cells({0: {0: 10, 1: 12, 2: 31},
                             1: {0: 12, 1: 10, 2: 21},
                             2: {0: 32, 1: 21, 2: 10}})
        self.assertEqual({0: {0: 10, 1: 31}, 1: {0: 32, 1: 10}},
                         distance.guest_table({0: 0, 1: 2}, cells))
        self.assertEqual({5: {5: 10, 7: 21}, 7: {5: 21, 7: 10}},
                         distance.guest_table({5: 1, 7: 2}, cells))

    def test_none_where_it_could_only_be_assumed_or_not_be_carried(self):
        rows = {0: {0: 10, 1: 12}, 1: {1: 10}}
        self.assertIsNone(distance.guest_table({0: 0, 1: 1},
                                               self._cells(rows)))
        for bad in (10, 256):
            rows = {0: {0: 10, 1: bad}, 1: {0: 12, 1: 10}}
            self.assertIsNone(distance.guest_table({0: 0, 1: 1},
                                                   self._cells(rows)))
        # A host cell the host does not have.
        self.assertIsNone(distance.guest_table(
            {0: 0, 1: 9}, self._cells({0: {0: 10, 9: 20}})))

    def test_one_cell_is_told_nothing(self):
        self.assertIsNone(distance.guest_table(
            {0: 1}, self._cells({1: {1: 10}})))
