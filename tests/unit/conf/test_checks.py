"""Tests that bad configuration fails at start, naming the option."""

import os
import re

import fixtures
import testscenarios

from numamig import exception
from numamig.conf import checks
from tests import base

load_tests = testscenarios.load_tests_apply_scenarios


class ConfFileMixin:

    def load(self, text):
        """Parse ``text`` as numamig.conf into the (test-scoped) CONF."""
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'numamig.conf')
        with open(path, 'w') as handle:
            handle.write(text)
        self.conf.conf(['--config-file', path], project='numamig',
                       default_config_files=[])
        return self.conf.conf


class InvalidValueTest(ConfFileMixin, base.TestCase):
    """One row per kind of bad value: check() names [group] option."""

    scenarios = [
        ('report_interval_below_min',
         {'text': '[DEFAULT]\nreport_interval = 0\n',
          'option': '[DEFAULT] report_interval',
          'fragment': 'greater than or equal to 1'}),
        ('service_down_time_below_min',
         {'text': '[DEFAULT]\nservice_down_time = 0\n',
          'option': '[DEFAULT] service_down_time',
          'fragment': 'greater than or equal to 1'}),
        ('migrate_max_retries_below_min',
         {'text': '[DEFAULT]\nmigrate_max_retries = -2\n',
          'option': '[DEFAULT] migrate_max_retries',
          'fragment': 'greater than or equal to -1'}),
        ('report_interval_not_a_number',
         {'text': '[DEFAULT]\nreport_interval = often\n',
          'option': '[DEFAULT] report_interval',
          'fragment': "often"}),
        ('dedicated_set_bad_range',
         {'text': '[compute]\ncpu_dedicated_set = 2-x\n',
          'option': '[compute] cpu_dedicated_set',
          'fragment': "invalid CPU range '2-x'"}),
        ('shared_set_only_exclusions',
         {'text': '[compute]\ncpu_shared_set = ^3\n',
          'option': '[compute] cpu_shared_set',
          'fragment': 'only excludes CPUs'}),
        ('dedicated_set_backwards',
         {'text': '[compute]\ncpu_dedicated_set = 7-2\n',
          'option': '[compute] cpu_dedicated_set',
          'fragment': 'runs backwards'}),
        ('reserved_memory_negative',
         {'text': '[compute]\nreserved_host_memory_mb = -1\n',
          'option': '[compute] reserved_host_memory_mb',
          'fragment': 'greater than or equal to 0'}),
        ('cpu_ratio_zero',
         {'text': '[compute]\ncpu_allocation_ratio = 0\n',
          'option': '[compute] cpu_allocation_ratio',
          'fragment': 'greater than or equal to 0.0001'}),
        ('ram_ratio_negative',
         {'text': '[compute]\nram_allocation_ratio = -1\n',
          'option': '[compute] ram_allocation_ratio',
          'fragment': 'greater than or equal to 0.0001'}),
        ('huge_pages_missing_key',
         {'text': '[compute]\nreserved_huge_pages = node:0,size:2M\n',
          'option': '[compute] reserved_huge_pages',
          'fragment': "missing ['count']"}),
        ('huge_pages_unknown_key',
         {'text': '[compute]\nreserved_huge_pages = '
                  'node:0,size:2M,count:1,numa:1\n',
          'option': '[compute] reserved_huge_pages',
          'fragment': "unknown ['numa']"}),
        ('huge_pages_bad_size',
         {'text': '[compute]\nreserved_huge_pages = node:0,size:3M,count:4\n',
          'option': '[compute] reserved_huge_pages',
          'fragment': "page size '3M' is not a power of two"}),
        ('huge_pages_size_not_a_number',
         {'text': '[compute]\nreserved_huge_pages = node:0,size:big,count:4\n',
          'option': '[compute] reserved_huge_pages',
          'fragment': "page size 'big' is not a number"}),
        ('huge_pages_negative_count',
         {'text': '[compute]\nreserved_huge_pages = node:0,size:2M,count:-4\n',
          'option': '[compute] reserved_huge_pages',
          'fragment': "count '-4' is not a non-negative integer"}),
        ('virt_type_choice',
         {'text': '[libvirt]\nvirt_type = xen\n',
          'option': '[libvirt] virt_type',
          'fragment': "Valid values are [kvm, qemu], but found 'xen'"}),
        ('timeout_action_choice',
         {'text': '[libvirt]\nlive_migration_timeout_action = explode\n',
          'option': '[libvirt] live_migration_timeout_action',
          'fragment': "but found 'explode'"}),
        ('downtime_below_min',
         {'text': '[libvirt]\nlive_migration_downtime = 50\n',
          'option': '[libvirt] live_migration_downtime',
          'fragment': 'greater than or equal to 100'}),
        ('downtime_steps_below_min',
         {'text': '[libvirt]\nlive_migration_downtime_steps = 1\n',
          'option': '[libvirt] live_migration_downtime_steps',
          'fragment': 'greater than or equal to 3'}),
        ('keepalives_idle_negative',
         {'text': '[database]\nkeepalives_idle = -1\n',
          'option': '[database] keepalives_idle',
          'fragment': 'greater than or equal to 0'}),
        ('tcp_user_timeout_not_a_number',
         {'text': '[database]\ntcp_user_timeout = 30s\n',
          'option': '[database] tcp_user_timeout',
          'fragment': '30s'}),
        ('bandwidth_negative',
         {'text': '[libvirt]\nlive_migration_bandwidth = -5\n',
          'option': '[libvirt] live_migration_bandwidth',
          'fragment': 'greater than or equal to 0'}),
        ('post_copy_not_a_bool',
         {'text': '[libvirt]\nlive_migration_permit_post_copy = maybe\n',
          'option': '[libvirt] live_migration_permit_post_copy',
          'fragment': 'maybe'}),
        ('conductor_workers_zero',
         {'text': '[conductor]\nworkers = 0\n',
          'option': '[conductor] workers',
          'fragment': 'greater than or equal to 1'}),
        ('scheduler_candidates_zero',
         {'text': '[scheduler]\nmax_candidates = 0\n',
          'option': '[scheduler] max_candidates',
          'fragment': 'greater than or equal to 1'}),
        ('database_debug_above_max',
         {'text': '[database]\nconnection_debug = 101\n',
          'option': '[database] connection_debug',
          'fragment': 'less than or equal to 100'}),
    ]

    def test_check_names_option(self):
        conf = self.load(self.text)
        exc = self.assertRaises(exception.InvalidConfiguration,
                                checks.check, conf)
        self.assertIn(f'Invalid configuration option {self.option}: ',
                      str(exc))
        self.assertIn(self.fragment, str(exc))
        self.assertNotIn('LocationInfo', str(exc))


class CrossOptionTest(ConfFileMixin, base.TestCase):

    def test_defaults_pass(self):
        checks.check(self.load(''))

    def test_valid_full_host_config_passes(self):
        checks.check(self.load(
            '[DEFAULT]\nreport_interval = 5\nservice_down_time = 30\n'
            '[compute]\ncpu_dedicated_set = 2-15,^8\n'
            'cpu_shared_set = 0-1,8\n'
            'reserved_huge_pages = node:0,size:2M,count:64\n'
            'reserved_huge_pages = node:1,size:1GiB,count:1\n'))

    def test_cpu_both_dedicated_and_shared(self):
        conf = self.load('[compute]\ncpu_dedicated_set = 2-7\n'
                         'cpu_shared_set = 0-3\n')
        self.assertRaisesMessage(
            exception.InvalidConfiguration,
            'Invalid configuration option [compute] cpu_dedicated_set: '
            'CPUs 2-3 are also in [compute] cpu_shared_set',
            checks.check, conf)

    def test_migration_guard_paths_must_be_absolute(self):
        conf = self.load('[libvirt]\nmigration_guard = true\n'
                         'migration_guard_claims_file = guard.json\n')
        self.assertRaisesMessage(
            exception.InvalidConfiguration,
            "[libvirt] migration_guard_claims_file: 'guard.json' is not an "
            "absolute path", checks.check, conf)

    def test_migration_guard_defaults_pass(self):
        checks.check(self.load('[libvirt]\nmigration_guard = true\n'))

    def test_exclusion_resolves_overlap(self):
        checks.check(self.load('[compute]\ncpu_dedicated_set = 0-7,^0-1\n'
                               'cpu_shared_set = 0-1\n'))

    def test_report_interval_equal_to_down_time(self):
        conf = self.load('[DEFAULT]\nreport_interval = 60\n')
        self.assertRaisesMessage(
            exception.InvalidConfiguration,
            '[DEFAULT] report_interval: 60 s is not below service_down_time '
            '(60 s)', checks.check, conf)

    def test_report_interval_above_down_time(self):
        conf = self.load('[DEFAULT]\nreport_interval = 10\n'
                         'service_down_time = 5\n')
        self.assertRaises(exception.InvalidConfiguration, checks.check, conf)

    def test_same_huge_page_pool_twice(self):
        conf = self.load('[compute]\n'
                         'reserved_huge_pages = node:0,size:2048,count:64\n'
                         'reserved_huge_pages = node:0,size:2M,count:8\n')
        self.assertRaisesMessage(
            exception.InvalidConfiguration,
            '[compute] reserved_huge_pages: node 0 size 2048 KiB is given '
            'twice', checks.check, conf)

    def test_flags_are_checked_too(self):
        self.flags(cpu_dedicated_set='1', cpu_shared_set='1',
                   group='compute')
        self.assertRaises(exception.InvalidConfiguration, checks.check,
                          self.conf.conf)


class ShippedPlaceholderTest(ConfFileMixin, base.TestCase):
    """A placeholder of etc/numamig/deploy left in place refuses start."""

    def test_host_left_as_hostname_is_refused(self):
        exc = self.assertRaises(exception.InvalidConfiguration, checks.check,
                                self.load('[DEFAULT]\nhost = HOSTNAME\n'))
        self.assertIn('[DEFAULT] host', str(exc))
        self.assertIn('HOSTNAME', str(exc))

    def test_placeholder_in_the_database_url_named_not_the_url(self):
        exc = self.assertRaises(
            exception.InvalidConfiguration, checks.check, self.load(
                '[database]\nconnection = postgresql+psycopg2://numamig:'
                'secret@CONTROLLER/numamig\n'))
        self.assertIn('[database] connection', str(exc))
        self.assertIn('CONTROLLER', str(exc))
        self.assertNotIn('secret', str(exc))

    def test_the_list_is_the_shipped_files_placeholders(self):
        deploy = os.path.join(os.path.dirname(__file__), '..', '..', '..',
                              'etc', 'numamig', 'deploy')
        found = set()
        for name in os.listdir(deploy):
            if name.endswith('.conf'):
                with open(os.path.join(deploy, name)) as handle:
                    for line in handle:
                        if '=' in line and not line.startswith('#'):
                            found |= set(re.findall(
                                r'\b[A-Z][A-Z_]{3,}\b',
                                line.split('=', 1)[1]))
        self.assertEqual(found, set(checks.SHIPPED_PLACEHOLDERS))
