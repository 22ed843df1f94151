"""Tests of numamig.compute.settings: every field from its option."""

import dataclasses

from numamig.compute import settings
from numamig.conf import CONF
from tests import base


class FromConfTest(base.TestCase):

    def _made(self, status_timeout=4):
        built = settings.from_conf(CONF, status_timeout)
        return {field.name: getattr(built, field.name)
                for field in dataclasses.fields(built)}

    def test_every_field_comes_from_its_option(self):
        self.flags(report_interval=3, rpc_response_timeout_migration=7)
        self.flags(group='compute',
                   packing_host_numa_cells_allocation_strategy=True,
                   max_concurrent_live_migrations=2,
                   min_change_report_interval=0.5, reconcile_interval=11,
                   update_resources_interval=12, device_detach_timeout=9)
        self.flags(group='upgrade_levels', compute='1.4')
        self.assertEqual({
            'strategy': 'pack', 'max_concurrent_live_migrations': 2,
            'unrecorded_claim_timeout': 14, 'min_change_report_interval': 0.5,
            'report_interval': 3, 'reconcile_interval': 11,
            'update_resources_interval': 12, 'status_timeout': 4,
            'compute_version_cap': '1.4', 'device_detach_timeout': 9},
            self._made())

    def test_unset_intervals_follow_the_report_interval(self):
        self.flags(report_interval=3)
        made = self._made()
        self.assertEqual((3, 3), (made['reconcile_interval'],
                                  made['update_resources_interval']))
