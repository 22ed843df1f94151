"""How migration show words the memory reclaimed to place a guest."""

from numamig.cmd.manage_commands import reclaim_view as rv
from tests import base
from tests.unit.objects import samples


class ReclaimViewTestCase(base.TestCase):

    def test_numbers_as_numbers_and_one_line_per_device(self):
        reclaim = samples.migration_reclaim()
        reclaim.entries = reclaim.entries + [dict(
            reclaim.entries[0], cell='1', current_mb=None,
            released_mb='0', outcome='given back')]
        entries = rv.view(reclaim.entries)
        self.assertEqual((1, 1024, 512, 'kept'), (
            entries[0]['host_node'], entries[0]['before_mb'],
            entries[0]['current_mb'], entries[0]['outcome']))
        other = reclaim.entries[0]['instance_uuid']
        self.assertEqual(
            ['memory reclaimed to place it: 512 MiB kept',
             f'  dst node 1: guest {other} cell 0: 1024 -> 512 MiB asked, '
             f'512 MiB plugged, released 512 MiB, kept',
             f'  dst node 1: guest {other} cell 1: 1024 -> 512 MiB asked, '
             f'? MiB plugged, released 0 MiB, given back'],
            rv.lines(entries))

    def test_nothing_reclaimed_prints_nothing(self):
        for nothing in (None, []):
            self.assertEqual(([], []), (rv.view(nothing),
                                        rv.lines(rv.view(nothing))))
