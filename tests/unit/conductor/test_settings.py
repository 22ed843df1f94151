"""Tests of numamig.conductor.settings: every field from its option."""

import dataclasses

from numamig import exception
from numamig.conductor import settings
from numamig.conf import CONF
from numamig.db import queue
from tests import base


class FromConfTest(base.TestCase):

    def test_every_field_comes_from_its_option(self):
        self.flags(migrate_max_retries=7, rpc_response_timeout_migration=9,
                   foreign_numa_specs=['hw:watchdog_action'])
        self.flags(group='compute', cpu_allocation_ratio=2.0,
                   ram_allocation_ratio=1.5,
                   packing_host_numa_cells_allocation_strategy=True)
        self.flags(group='workarounds', enable_numa_live_migration=True)
        self.flags(group='conductor', max_concurrent_migrations=11,
                   max_outgoing_migrations_per_host=2,
                   max_incoming_migrations_per_host=3,
                   max_queued_migrations=12, convergence_prediction='choose',
                   convergence_fallback_policies=['finish'],
                   migration_workers=5, database_outage_wait=13,
                   migration_watchers=6, drain_replan_attempts=1,
                   defragment_verify_timeout=14, report_writers=21,
                   stalled_migration_interval=15, report_sync_interval=22,
                   migration_link_rate=24, migration_link_rates={'h1': 23},
                   live_migratable_interval=25, live_migratable_budget=26,
                   drain_estimate_max_age=27)
        self.flags(group='libvirt',
                   live_migration_policies=['slow: downtime=50'],
                   live_migration_policy='slow')
        self.flags(group='virtio_mem', resize_timeout=16, max_loss_mb=17,
                   placement_reclaim=True, placement_reclaim_max_mb=18,
                   placement_reclaim_max_hosts=19)
        self.flags(group='scheduler', strategy='pack', max_candidates=20)
        self.flags(group='upgrade_levels', compute='1.2')
        self.flags(group='pci', alias=['{"name": "vf", "numa_policy": '
                                       '"socket"}'])
        built = settings.from_conf(CONF)
        made = {field.name: getattr(built, field.name)
                for field in dataclasses.fields(built)}
        limits = made.pop('limits')
        policies = made.pop('migration_policies')
        self.assertEqual((2.0, 1.5), (limits.cpu_allocation_ratio,
                                      limits.ram_allocation_ratio))
        self.assertIn('slow', policies)
        self.assertEqual({
            'migrate_max_retries': 7, 'check_timeout': 9,
            'enable_numa_live_migration_workaround': True,
            'admission': queue.Limits(total=11, per_source=2, per_dest=3,
                                      queued=12),
            'foreign_numa_specs': ('hw:watchdog_action',),
            'default_migration_policy': 'slow',
            'convergence_prediction': 'choose',
            'convergence_fallback_policies': ('finish',),
            'virtio_mem': (16, 17, True, 18, 19),
            'migration_workers': 5, 'database_outage_wait': 13,
            'migration_watchers': 6, 'drain_replan_attempts': 1,
            'report_writers': 21, 'defragment_verify_timeout': 14,
            'report_sync_interval': 22,
            'scheduler_strategy': 'pack',
            'cell_strategy': 'pack', 'max_candidates': 20,
            'sweep_interval': 15, 'compute_version_cap': '1.2',
            'migration_links': (24, {'h1': 23}),
            'live_migratable_interval': 25, 'live_migratable_budget': 26,
            'drain_estimate_max_age': 27,
            'pci_aliases': {'vf': ('vf', None, None, None, 'socket')}},
            made)
        self.assertEqual((23, 24), (built.migration_links.rate('h1'),
                                    built.migration_links.rate('h2')))

    def test_a_default_naming_no_policy_is_refused(self):
        self.flags(group='libvirt', live_migration_policy='nowhere')
        self.assertRaisesMessage(
            exception.InvalidConfiguration, "'nowhere' is not a known policy",
            settings.from_conf, CONF)
