"""Tests of LibvirtSettings: from CONF once, validated, then frozen."""

import dataclasses

import testscenarios

from numamig import exception
from numamig.conf import CONF
from numamig.virt.libvirt import driver
from numamig.virt.libvirt import settings as lv_settings
from tests import base
from tests import libvirt_settings

load_tests = testscenarios.load_tests_apply_scenarios


class FromConfTestCase(base.TestCase):

    def test_options_mapped(self):
        self.flags(host='node7')
        self.flags(group='compute', cpu_dedicated_set='2-5',
                   cpu_shared_set='0-1', reserved_host_memory_mb=256,
                   reserved_huge_pages=['node:1,size:1G,count:2'])
        self.flags(group='libvirt', connection_uri='qemu:///system',
                   virt_type='qemu', realtime_scheduler_priority=9,
                   live_migration_inbound_addr='10.0.0.7',
                   live_migration_libvirtd_port=16600,
                   live_migration_timeout_action='force_complete',
                   live_migration_permit_post_copy=True,
                   live_migration_bandwidth=100)
        settings = lv_settings.LibvirtSettings.from_conf(CONF)
        self.assertEqual('node7', settings.host)
        self.assertEqual(frozenset({2, 3, 4, 5}), settings.cpu_dedicated_set)
        self.assertEqual(frozenset({0, 1}), settings.cpu_shared_set)
        self.assertEqual((lv_settings.ReservedPages(1, 1048576, 2),),
                         settings.reserved_huge_pages)
        self.assertEqual(9, settings.realtime_priority)
        self.assertEqual(16600, settings.migration.libvirtd_port)
        self.assertEqual('force_complete', settings.migration.timeout_action)
        self.assertTrue(settings.migration.permit_post_copy)
        self.assertEqual(100, settings.migration.bandwidth_mib)
        self.assertFalse(settings.is_test_driver)

    def test_test_driver_in_process_or_served_by_libvirtd(self):
        for uri, expected in (
                ('test:///default', True),
                ('test+unix:///default?socket=/tmp/s', True),
                ('testing+unix:///default', False),
                ('qemu+unix:///system?socket=/tmp/test', False),
                ('qemu+tcp://test/system', False)):
            self.flags(group='libvirt', connection_uri=uri)
            settings = lv_settings.LibvirtSettings.from_conf(CONF)
            self.assertEqual(expected, settings.is_test_driver, uri)

    def test_unset_cpu_sets_stay_none(self):
        settings = lv_settings.LibvirtSettings.from_conf(CONF)
        self.assertIsNone(settings.cpu_dedicated_set)
        self.assertIsNone(settings.cpu_shared_set)

    def test_frozen_and_independent_of_later_conf(self):
        self.flags(group='libvirt', virt_type='qemu')
        settings = lv_settings.LibvirtSettings.from_conf(CONF)
        self.flags(group='libvirt', virt_type='kvm')
        self.assertEqual('qemu', settings.virt_type)
        self.assertRaises(dataclasses.FrozenInstanceError, setattr,
                          settings, 'virt_type', 'kvm')


class InvalidSettingsTestCase(base.TestCase):

    scenarios = [
        ('virt_type', {'kwargs': {'virt_type': 'xen'},
                       'fragment': "'xen' is not one of kvm, qemu"}),
        ('overlap', {'kwargs': {'cpu_dedicated_set': frozenset({1, 2}),
                                'cpu_shared_set': frozenset({2})},
                     'fragment': 'CPUs 2 are also in cpu_shared_set'}),
        ('priority', {'kwargs': {'realtime_priority': 100},
                      'fragment': 'must be within 1-99, got 100'}),
        ('memory', {'kwargs': {'reserved_host_memory_mb': -1},
                    'fragment': 'must not be negative, got -1'}),
    ]

    def test_rejected(self):
        self.assertRaisesMessage(exception.InvalidConfiguration,
                                 self.fragment, libvirt_settings.host,
                                 host='h', **self.kwargs)

    def test_migration_rejected(self):
        self.assertRaisesMessage(
            exception.InvalidConfiguration, "'pause' is not one of abort",
            libvirt_settings.migration, timeout_action='pause')
        self.assertRaisesMessage(
            exception.InvalidConfiguration, 'must be positive',
            libvirt_settings.migration, progress_interval_s=0)


class MigrationTargetTestCase(base.TestCase):

    scenarios = [
        ('host_name', {'mig': {}, 'host': 'node7',
                       'expect': ('qemu+tcp://node7/system',
                                  'tcp://node7')}),
        ('addr_and_port', {'mig': {'inbound_addr': '127.0.0.1',
                                   'libvirtd_port': 16600},
                           'host': 'node7',
                           'expect': ('qemu+tcp://127.0.0.1:16600/system',
                                      'tcp://127.0.0.1')}),
        ('ipv6_tls_scheme', {'mig': {'inbound_addr': 'fd00::7',
                                     'scheme': 'tls'},
                             'host': 'node7',
                             'expect': ('qemu+tls://[fd00::7]/system',
                                        'tcp://[fd00::7]')}),
    ]

    def test_target(self):
        drv = driver.LibvirtDriver(libvirt_settings.host(
            host=self.host,
            migration=libvirt_settings.migration(**self.mig)))
        self.assertEqual(self.expect, drv.migration_target())
        self.assertTrue(drv.supports_native_migration)
        self.assertEqual('kvm', drv.hypervisor_type)
