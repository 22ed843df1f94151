"""Usage accounting: apply and release of placed guests."""

import copy

from numamig import exception
from numamig.numa import fit
from numamig.numa import usage
from tests import base
from tests.unit.numa import hosts


def _placed(host, cells, emulator=None, **kwargs):
    result = fit.fit(host, hosts.request(cells, emulator), **kwargs)
    assert result.fits, result.reason
    return result.topology


class ApplyTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.host = hosts.make_host(
            cells=2, cores=4, threads=2, shared=1, memory_mb=4096,
            pages=hosts.hugepage_pools(4096, pages_2m=512))

    def test_apply_records_every_kind_of_usage(self):
        placed = _placed(self.host, [(2, 1, 512, 2048, 'isolate')],
                         emulator='isolate')
        before = copy.deepcopy(self.host)
        after = usage.apply(self.host, placed)
        self.assertEqual(before, self.host)
        cell = after.cell(placed.cells[0].host_cell)
        # vCPUs on cores {1,9} {2,10}, emulator on {3,11}: whole cores.
        self.assertEqual({1, 9, 2, 10, 3, 11}, cell.pinned_cpus)
        self.assertEqual(512, cell.memory_usage_mb)
        self.assertEqual(1, cell.cpu_usage)
        self.assertEqual(256, cell.pages_of(2048).used)

    def test_release_restores_exactly(self):
        placed = _placed(self.host, [(2, 0, 512, None, None)] * 2)
        applied = usage.apply(self.host, placed)
        self.assertNotEqual(self.host, applied)
        self.assertEqual(self.host, usage.release(applied, placed))

    def test_pin_already_taken(self):
        placed = _placed(self.host, [(2, 0, 512, None, None)])
        applied = usage.apply(self.host, placed)
        exc = self.assertRaises(exception.CPUAlreadyPinned, usage.apply,
                                applied, placed)
        self.assertIn("pCPUs [1, 9] are already pinned", str(exc))

    def test_pin_outside_the_dedicated_set(self):
        placed = _placed(self.host, [(1, 0, 512, None, None)])
        placed.cells[0].cpu_pinning = {0: 0}  # pCPU 0 is a shared one
        self.assertRaisesMessage(
            exception.CPUNotDedicated, "pCPUs [0] are not in its dedicated "
            "set [1, 2, 3, 9, 10, 11]", usage.apply, self.host, placed)

    def test_release_what_is_not_held(self):
        placed = _placed(self.host, [(2, 0, 512, None, None)])
        self.assertRaisesMessage(exception.UsageNotHeld,
                                 "cannot release pCPUs [1, 9]",
                                 usage.release, self.host, placed)

    def test_release_memory_not_held(self):
        placed = _placed(self.host, [(0, 1, 512, None, None)])
        self.assertRaisesMessage(exception.UsageNotHeld,
                                 "cannot release 512 memory",
                                 usage.release, self.host, placed)

    def test_pages_exhausted(self):
        placed = _placed(self.host, [(1, 0, 1024, 2048, None)])
        applied = usage.apply(self.host, placed)
        applied = usage.apply(applied, _placed(
            applied, [(1, 0, 512, 2048, None)], strategy='pack'))
        self.assertRaisesMessage(exception.PagesExhausted,
                                 "512 pages of 2048 KiB needed, 0 free",
                                 usage.apply, applied, placed)

    def test_unknown_host_cell(self):
        placed = _placed(self.host, [(1, 0, 512, None, None)])
        placed.cells[0].host_cell = 7
        self.assertRaises(exception.UnknownHostCell, usage.apply,
                          self.host, placed)

    def test_conflict_in_second_cell_changes_nothing(self):
        placed = _placed(self.host, [(1, 0, 512, None, None)] * 2)
        taken = copy.deepcopy(self.host)
        second = taken.cell(placed.cells[1].host_cell)
        second.pinned_cpus = set(placed.cells[1].cpu_pinning.values())
        before = copy.deepcopy(taken)
        self.assertRaises(exception.CPUAlreadyPinned, usage.apply, taken,
                          placed)
        self.assertEqual(before, taken)

    def test_host_with_usage_folds_guests(self):
        first = _placed(self.host, [(2, 0, 512, None, None)])
        after_first = usage.apply(self.host, first)
        second = _placed(after_first, [(2, 0, 512, None, None)])
        self.assertEqual(usage.apply(after_first, second),
                         usage.host_with_usage(self.host, [first, second]))
        self.assertRaises(exception.CPUAlreadyPinned,
                          usage.host_with_usage, self.host, [first, first])

    def test_host_with_usage_leaves_out_a_clashing_guest_whole(self):
        first = _placed(self.host, [(1, 0, 512, None, None)] * 2)
        after_first = usage.apply(self.host, first)
        # Same pins as ``first`` in its second cell only: the clash must
        # leave out all of ``clash``, its first cell included.
        clash = copy.deepcopy(first)
        clash.cells[0].cpu_pinning = {0: 2}
        seen = []
        before = copy.deepcopy(self.host)
        result = usage.host_with_usage(
            self.host, [first, clash],
            on_conflict=lambda placed, exc: seen.append((placed, exc)))
        self.assertEqual(after_first, result)
        self.assertEqual(before, self.host)
        self.assertEqual(1, len(seen))
        self.assertIs(clash, seen[0][0])
        self.assertIsInstance(seen[0][1], exception.CPUAlreadyPinned)

    def test_two_cells_of_one_guest_pinning_one_pcpu(self):
        placed = _placed(self.host, [(1, 0, 512, None, None)] * 2)
        for cell in placed.cells:
            cell.host_cell = placed.cells[0].host_cell
            cell.cpu_pinning = dict(placed.cells[0].cpu_pinning)
        before = copy.deepcopy(self.host)
        self.assertRaisesMessage(exception.UsageConflict,
                                 "another cell of the same guest holds",
                                 usage.apply, self.host, placed)
        self.assertEqual(before, self.host)

    def test_pages_summed_over_guest_cells_on_one_host_cell(self):
        # 2 x 300 pages fit one at a time in a 512-page pool, not together.
        placed = _placed(self.host, [(0, 1, 600, 2048, None)] * 2)
        for cell in placed.cells:
            cell.host_cell = placed.cells[0].host_cell
        self.assertRaisesMessage(exception.PagesExhausted,
                                 "600 pages of 2048 KiB needed, 512 free",
                                 usage.apply, self.host, placed)
