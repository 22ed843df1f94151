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
                   update_resources_interval=12,
                   cpu_dedicated_set='2-5', cpu_power_management=True,
                   cpu_power_management_strategy='governor',
                   cpu_power_governor_low='ondemand',
                   cpu_power_governor_high='schedutil',
                   cpu_power_sysfs_root='/tmp/cpus', device_detach_timeout=9,
                   dirty_rate_sample_interval=15)
        self.flags(group='upgrade_levels', compute='1.4')
        self.flags(group='locality', policy='act', interval=7,
                   remote_share_threshold=0.25, intervals_above=4,
                   pages_per_interval=99, moves_per_guest=5, flap_window=6,
                   proc_root='/x/proc')
        self.flags(group='pci', alias=['{"name": "gpu"}'])
        self.assertEqual({
            'cpu_power': settings.CPUPowerSettings(
                strategy='governor', cpu_dedicated_set='2-5',
                governor_low='ondemand', governor_high='schedutil',
                sysfs_root='/tmp/cpus'),
            'locality': {'mode': 'act', 'threshold': 0.25, 'intervals': 4,
                         'pages_per_interval': 99, 'moves_per_guest': 5,
                         'flap_window': 6},
            'locality_interval': 7, 'proc_root': '/x/proc',
            'strategy': 'pack', 'max_concurrent_live_migrations': 2,
            'unrecorded_claim_timeout': 14, 'min_change_report_interval': 0.5,
            'report_interval': 3, 'reconcile_interval': 11,
            'update_resources_interval': 12, 'status_timeout': 4,
            'compute_version_cap': '1.4',
            'pci_alias': ('{"name": "gpu"}',), 'device_detach_timeout': 9,
            'dirty_rate_sample_interval': 15},
            self._made())

    def test_unset_intervals_follow_the_report_interval(self):
        self.flags(report_interval=3)
        made = self._made()
        self.assertEqual((3, 3), (made['reconcile_interval'],
                                  made['update_resources_interval']))

    def test_power_management_unset_is_off_whatever_the_strategy(self):
        self.flags(group='compute', cpu_power_management=False,
                   cpu_power_management_strategy='governor')
        self.assertEqual('off', self._made()['cpu_power'].strategy)
