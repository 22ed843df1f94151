"""Golden fit cases, written by hand from the rules of issue 3."""

import copy

import testscenarios

from numamig import exception
from numamig import objects
from numamig.numa import constraints
from numamig.numa import fit
from tests import base
from tests.unit.numa import hosts

GIB, MIB2 = 1048576, 2048

load_tests = testscenarios.load_tests_apply_scenarios


def _one_cell_host(pinned=(1,)):
    """2 cores x 2 threads, siblings {0,2} {1,3}, pCPU 1 pinned."""
    return objects.HostNUMATopology(cells=[objects.HostNUMACell(
        id=0, pcpuset={0, 1, 2, 3}, pinned_cpus=set(pinned),
        siblings=[{0, 2}, {1, 3}], memory_mb=4096,
        mempages=[objects.NUMAPagesTopology(size_kb=4, total=1048576)])])


def _placement(result):
    return [(c.id, c.host_cell, dict(c.cpu_pinning), c.pagesize,
             sorted(c.cpuset_reserved or ())) for c in result.topology.cells]


class GoldenThreadPolicyTest(base.TestCase):

    def test_prefer_two_vcpus_pin_the_full_free_core(self):
        result = fit.fit(_one_cell_host(),
                         hosts.request([(2, 0, 1024, None, 'prefer')]))
        self.assertTrue(result.fits)
        self.assertEqual({0: 0, 1: 2}, result.topology.cells[0].cpu_pinning)

    def test_require_three_vcpus_fail(self):
        result = fit.fit(_one_cell_host(),
                         hosts.request([(3, 0, 1024, None, 'require')]))
        self.assertFalse(result.fits)
        self.assertIsNone(result.topology)
        self.assertEqual(
            "guest cell 0 fits on no host cell: host cell 0 needs 3 free "
            "sibling threads on whole free cores for require, has 2",
            result.reason)

    def test_isolate_one_vcpu_takes_a_whole_core(self):
        result = fit.fit(_one_cell_host(),
                         hosts.request([(1, 0, 1024, None, 'isolate')]))
        self.assertEqual({0: 0}, result.topology.cells[0].cpu_pinning)

    def test_isolated_emulator_takes_one_more_pcpu_on_cell_0(self):
        host = hosts.make_host(cells=2, cores=4, threads=2)
        result = fit.fit(host, hosts.request(
            [(2, 0, 1024, None, None), (2, 0, 1024, None, None)],
            emulator='isolate'))
        self.assertEqual([(0, 0, {0: 0, 1: 8}, None, [1]),
                          (1, 1, {2: 4, 3: 12}, None, [])],
                         _placement(result))
        result.topology.validate()

    def test_isolated_emulator_can_tip_the_balance(self):
        request = hosts.request([(3, 0, 1024, None, None)],
                                emulator='isolate')
        self.assertTrue(fit.fit(_one_cell_host(pinned=()), request).fits)
        self.assertFalse(fit.fit(_one_cell_host(), request).fits)


class GoldenStrategyTest(base.TestCase):

    def _host(self):
        # Cell 0 has two pCPUs pinned: cell 1 is the emptier one.
        host = hosts.make_host(cells=2, cores=4, threads=2)
        host.cells[0].pinned_cpus = {0, 8}
        return host

    def test_spread_takes_the_emptiest_cell(self):
        result = fit.fit(self._host(),
                         hosts.request([(2, 0, 1024, None, None)]))
        self.assertEqual(1, result.topology.cells[0].host_cell)

    def test_pack_takes_the_fullest_cell(self):
        result = fit.fit(self._host(),
                         hosts.request([(2, 0, 1024, None, None)]),
                         strategy='pack')
        self.assertEqual(0, result.topology.cells[0].host_cell)
        self.assertEqual({0: 1, 1: 9}, result.topology.cells[0].cpu_pinning)

    def test_ties_go_in_cell_id_order(self):
        host = hosts.make_host(cells=4, cores=2, threads=1)
        result = fit.fit(host, hosts.request([(1, 0, 512, None, None)] * 2))
        self.assertEqual([0, 1],
                         [c.host_cell for c in result.topology.cells])

    def test_first_guest_cell_gives_way_to_a_constrained_one(self):
        # Guest cell 1 needs 3 pCPUs, which only cell 0 (spread's second
        # choice) has; guest cell 0 therefore goes to cell 1.
        host = hosts.make_host(cells=2, cores=2, threads=2)
        host.cells[1].pinned_cpus = {2}
        host.cells[1].memory_usage_mb = 0
        host.cells[0].memory_usage_mb = 1024
        result = fit.fit(host, hosts.request(
            [(1, 0, 512, None, None), (4, 0, 512, None, None)]))
        self.assertEqual([1, 0], [c.host_cell for c in
                                  result.topology.cells])

    def test_too_few_host_cells(self):
        host = hosts.make_host(cells=2, cores=4, threads=2)
        host.cells[1].pinned_cpus = set(host.cells[1].pcpuset)
        result = fit.fit(host, hosts.request([(1, 0, 512, None, None)] * 2))
        self.assertEqual("guest cells [0, 1] fit only on host cells [0], "
                         "and each guest cell needs a host cell of its own",
                         result.reason)


class GoldenPagesTest(base.TestCase):

    def _host(self, pages_2m=512, pages_1g=2, used_2m=0, reserved_2m=0):
        return hosts.make_host(
            cells=1, memory_mb=8192, pages=hosts.hugepage_pools(
                8192, pages_2m, pages_1g, used_2m, reserved_2m))

    def test_large_prefers_the_largest_size_that_fits(self):
        result = fit.fit(self._host(),
                         hosts.request([(2, 0, 1024, -2, None)]))
        self.assertEqual(GIB, result.topology.cells[0].pagesize)

    def test_large_falls_back_to_smaller_huge_pages(self):
        result = fit.fit(self._host(pages_1g=0),
                         hosts.request([(2, 0, 1024, -2, None)]))
        self.assertEqual(MIB2, result.topology.cells[0].pagesize)

    def test_small_takes_the_smallest_pool(self):
        result = fit.fit(self._host(),
                         hosts.request([(2, 0, 2048, -1, None)]))
        self.assertEqual(4, result.topology.cells[0].pagesize)

    def test_reserved_pages_are_not_free(self):
        result = fit.fit(self._host(used_2m=200, reserved_2m=300),
                         hosts.request([(2, 0, 64, MIB2, None)]))
        self.assertEqual("guest cell 0 fits on no host cell: host cell 0 "
                         "needs 32 free 2048 KiB pages, has 12",
                         result.reason)

    def test_forced_page_size_for_a_migrating_guest(self):
        request = hosts.request([(2, 0, 1024, -2, None)])
        result = fit.fit(self._host(), request, pagesize_kb=MIB2)
        self.assertEqual(MIB2, result.topology.cells[0].pagesize)
        result = fit.fit(self._host(pages_2m=0), request, pagesize_kb=MIB2)
        self.assertIn("needs 512 free 2048 KiB pages, has 0",
                      result.reason)

    def test_memory_not_a_multiple_of_the_forced_size(self):
        result = fit.fit(self._host(), hosts.request(
            [(2, 0, 1536, None, None)]), pagesize_kb=GIB)
        self.assertIn("1536 MiB is not a multiple of 1048576 KiB pages",
                      result.reason)


class GoldenLimitsTest(base.TestCase):

    def test_memory_ratio_applies_to_small_page_guests(self):
        host = hosts.make_host(cells=1, shared=2, memory_mb=4096,
                               memory_usage_mb=3072)
        request = hosts.request([(0, 1, 2048, None, None)])
        limits = objects.NUMALimits(ram_allocation_ratio=1.0)
        self.assertEqual(
            "guest cell 0 fits on no host cell: host cell 0 needs 2048 MiB, "
            "3072 of 4096 MiB (ram_allocation_ratio 1) are used",
            fit.fit(host, request, limits).reason)
        limits.ram_allocation_ratio = 1.5
        self.assertTrue(fit.fit(host, request, limits).fits)

    def test_cpu_ratio_applies_to_floating_vcpus(self):
        host = hosts.make_host(cells=1, cores=4, threads=1, shared=2,
                               cpu_usage=3)
        request = hosts.request([(0, 2, 512, None, None)])
        self.assertIn("needs 2 floating vCPUs, 3 of 4 "
                      "(cpu_allocation_ratio 2) are used",
                      fit.fit(host, request, objects.NUMALimits(
                          cpu_allocation_ratio=2.0)).reason)
        self.assertTrue(fit.fit(host, request, objects.NUMALimits(
            cpu_allocation_ratio=4.0)).fits)

    def test_floating_vcpus_need_a_shared_set(self):
        host = hosts.make_host(cells=1)
        self.assertIn("needs 2 shared pCPUs for floating vCPUs, has 0",
                      fit.fit(host, hosts.request(
                          [(0, 2, 512, None, None)])).reason)


def _no_pages_cell(memory_mb, memory_usage_mb):
    """One cell of 4 dedicated and 4 shared pCPUs that reports no page
    pools, only its memory."""
    return objects.HostNUMACell(
        id=0, pcpuset={0, 1, 2, 3}, cpuset={4, 5, 6, 7}, memory_mb=memory_mb,
        memory_usage_mb=memory_usage_mb)


GIB_MB = 1024


class GoldenPinnedMemoryTest(testscenarios.WithScenarios, base.TestCase):
    """Pinned guests never overcommit memory; no guest cell exceeds its
    host cell whatever the ratio (issue 16, written from the rules).

    The host cell: 64 GiB, ``used`` GiB in use; pools as ``pools`` says
    (none, or small pages for 48 GiB and 16 GiB of 1 GiB pages with
    ``huge_used`` of them used). The guest: 1 cell of ``memory`` GiB,
    ``pinned`` vCPUs pinned and ``floating`` floating.
    """

    scenarios = [
        # name, pools, used GiB, huge used, guest GiB, pinned, floating,
        # ram ratio (None: no limits), expected reason fragment or None
        (name, dict(zip(('pools', 'used', 'huge_used', 'memory', 'pinned',
                         'floating', 'ratio', 'why'), values, strict=True)))
        for name, *values in (
            ('issue_dedicated_6g_on_4g_free', False, 60, 0, 6, 2, 0, None,
             "needs 6144 MiB free for pinned vCPUs (never overcommitted), "
             "61440 of 65536 MiB are used"),
            ('dedicated_4g_on_4g_free', False, 60, 0, 4, 2, 0, None, None),
            ('dedicated_ratio_does_not_help', False, 60, 0, 6, 2, 0, 1.5,
             "needs 6144 MiB free for pinned vCPUs"),
            ('mixed_counts_as_pinned', False, 60, 0, 6, 1, 1, None,
             "needs 6144 MiB free for pinned vCPUs"),
            ('floating_overcommits_without_limits', False, 60, 0, 6, 0, 1,
             None, None),
            ('floating_overcommits_within_ratio', False, 60, 0, 6, 0, 1,
             1.5, None),
            ('floating_never_beyond_the_cell', False, 0, 0, 65, 0, 1, 2.0,
             "needs 66560 MiB, the cell has 65536 MiB"),
            ('dedicated_small_pages_free', True, 40, 8, 16, 2, 0, None,
             None),
            ('dedicated_small_pages_one_gib_short', True, 41, 8, 16, 2, 0,
             1.5, "needs 16384 MiB of small pages free for pinned vCPUs "
                  "(never overcommitted), 33792 of 49152 MiB outside huge "
                  "pages and reservations are used"),
            ('floating_small_pages_within_ratio', True, 41, 8, 16, 0, 1,
             1.5, None),
            ('floating_never_beyond_small_pages', True, 0, 0, 49, 0, 1, 2.0,
             "needs 50176 MiB of small pages, the cell has 49152 MiB "
             "outside huge pages and reservations"),
        )]

    def _host(self):
        cell = _no_pages_cell(64 * GIB_MB, self.used * GIB_MB)
        if self.pools:
            cell.mempages = [
                objects.NUMAPagesTopology(size_kb=4, total=48 * 262144),
                objects.NUMAPagesTopology(size_kb=GIB, total=16,
                                          used=self.huge_used)]
        return objects.HostNUMATopology(cells=[cell])

    def test_fit(self):
        policy = ('dedicated' if not self.floating else
                  'mixed' if self.pinned else None)
        request = objects.InstanceNUMATopology(cells=[
            objects.InstanceNUMACell(
                id=0, pcpuset=set(range(self.pinned)),
                cpuset=set(range(self.pinned, self.pinned + self.floating)),
                memory_mb=self.memory * GIB_MB, cpu_policy=policy)])
        limits = (None if self.ratio is None else objects.NUMALimits(
            cpu_allocation_ratio=1.0, ram_allocation_ratio=self.ratio))
        result = fit.fit(self._host(), request, limits)
        if self.why is None:
            self.assertTrue(result.fits, result.reason)
        else:
            self.assertFalse(result.fits)
            self.assertIn(self.why, result.reason)


class GoldenCaretMaskFitTest(base.TestCase):

    def test_issue_mixed_8_vcpus_2_nodes_caret_mask_fits(self):
        # ^0,4 pins vCPUs 1-7: guest node 0 floats vCPU 0 and pins 1-3,
        # node 1 pins 4-7. Each host cell: 1 shared and 4 dedicated pCPUs;
        # read as {4}, node 0 wanted 4 shared pCPUs and fitted nowhere.
        host = hosts.make_host(cells=2, cores=5, threads=1, shared=1)
        request = constraints.get_numa_request(
            8, 4096, {'hw:cpu_policy': 'mixed', 'hw:numa_nodes': '2',
                      'hw:cpu_dedicated_mask': '^0,4'}, {})
        result = fit.fit(host, request)
        self.assertTrue(result.fits, result.reason)
        pins = {}
        for cell, host_cell in zip(result.topology.cells, host.cells,
                                   strict=True):
            self.assertLessEqual(set(cell.cpu_pinning.values()),
                                 host_cell.pcpuset)
            pins.update(cell.cpu_pinning)
        self.assertEqual([1, 2, 3, 4, 5, 6, 7], sorted(pins))


class FitContractTest(base.TestCase):

    def test_inputs_unchanged_and_realtime_kept(self):
        host = hosts.make_host(cells=2, shared=1)
        request = hosts.request([(2, 1, 1024, None, 'isolate')])
        request.cells[0].realtime_vcpus = {1}
        before = (copy.deepcopy(host), copy.deepcopy(request))
        result = fit.fit(host, request, objects.NUMALimits())
        self.assertEqual(before, (host, request))
        self.assertEqual({1}, result.topology.cells[0].realtime_vcpus)
        self.assertEqual('mixed', result.topology.cells[0].cpu_policy)
        self.assertTrue(result.topology.is_placed)

    def test_invalid_parameters(self):
        host, request = hosts.make_host(), hosts.request(
            [(1, 0, 512, None, None)])
        self.assertRaisesMessage(exception.InvalidFitParameter,
                                 "strategy='dense'", fit.fit, host, request,
                                 strategy='dense')
        self.assertRaisesMessage(exception.InvalidFitParameter,
                                 "pagesize_kb=3000", fit.fit, host, request,
                                 pagesize_kb=3000)
        self.assertRaisesMessage(exception.InvalidFitParameter,
                                 "has no guest cells", fit.fit, host,
                                 objects.InstanceNUMATopology(cells=[]))

    def test_host_without_cells(self):
        result = fit.fit(objects.HostNUMATopology(cells=[]), hosts.request(
            [(1, 0, 512, None, None)]))
        self.assertEqual("guest cell 0: the host has no NUMA cells",
                         result.reason)

    def test_result_is_frozen(self):
        result = fit.fit(hosts.make_host(), hosts.request(
            [(1, 0, 512, None, None)]))
        self.assertRaises(AttributeError, setattr, result, 'fits', False)
