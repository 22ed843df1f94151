"""Tests of option registration, listing and the committed sample config."""

import difflib
import os
import pkgutil
import types

import fixtures
from oslo_config import cfg
from oslo_config import generator
from oslo_messaging import opts as oslo_messaging_opts

import numamig
from numamig.conf import CONF
from numamig.conf import opts
from tests import base

TOP = os.path.dirname(os.path.dirname(os.path.abspath(numamig.__file__)))
GENERATOR_CONF = os.path.join(TOP, 'etc', 'numamig',
                              'numamig-config-generator.conf')
SAMPLE = os.path.join(TOP, 'etc', 'numamig', 'numamig.conf.sample')

# The groups issue 2 requires; others may add more, never fewer.
REQUIRED_GROUPS = {'DEFAULT', 'compute', 'conductor', 'database', 'libvirt',
                   'scheduler', 'upgrade_levels', 'workarounds'}


def _listed():
    return {getattr(group, 'name', group): group_opts
            for group, group_opts in opts.list_opts()}


class RegistrationTest(base.TestCase):

    def test_required_groups_listed(self):
        self.assertEqual(set(), REQUIRED_GROUPS - set(_listed()))

    def test_every_listed_option_is_registered_on_conf(self):
        for group, group_opts in _listed().items():
            section = CONF if group == 'DEFAULT' else CONF[group]
            for opt in group_opts:
                # Raises NoSuchOptError if listed but not registered, and
                # proves every default is a valid value.
                getattr(section, opt.dest)

    def test_required_options_exist(self):
        listed = {group: {opt.name for opt in group_opts}
                  for group, group_opts in _listed().items()}
        required = {
            'DEFAULT': {'host', 'migrate_max_retries', 'report_interval',
                        'service_down_time'},
            'compute': {'cpu_dedicated_set', 'cpu_shared_set',
                        'reserved_host_memory_mb', 'reserved_huge_pages',
                        'cpu_allocation_ratio', 'ram_allocation_ratio',
                        'packing_host_numa_cells_allocation_strategy'},
            'libvirt': {'connection_uri', 'capabilities_file',
                        'live_migration_downtime',
                        'live_migration_downtime_steps',
                        'live_migration_downtime_delay',
                        'live_migration_completion_timeout',
                        'live_migration_timeout_action',
                        'live_migration_bandwidth',
                        'live_migration_permit_post_copy',
                        'live_migration_permit_auto_converge',
                        'live_migration_with_native_tls'},
            'conductor': {'workers'},
            'database': {'connection'},
            'upgrade_levels': {'compute', 'conductor'},
            'workarounds': {'enable_numa_live_migration'},
        }
        for group, names in required.items():
            self.assertEqual(set(), names - listed[group], group)

    def test_every_option_has_actionable_help(self):
        for group, group_opts in _listed().items():
            for opt in group_opts:
                self.assertGreater(len(opt.help or ''), 30,
                                   f'[{group}] {opt.name} help too short')

    def test_sqlite_is_the_default_database(self):
        self.assertTrue(CONF.database.connection.startswith('sqlite:///'))

    def test_host_sample_default_hides_the_build_machine(self):
        host = [opt for opt in _listed()['DEFAULT'] if opt.name == 'host']
        self.assertEqual('<host>', host[0].sample_default)


class ListOptsTest(base.TestCase):

    def test_group_module_without_list_opts_fails_loudly(self):
        real_iter = pkgutil.iter_modules
        real_import = opts.importlib.import_module
        stray = types.ModuleType('numamig.conf.stray')

        def iter_modules(path):
            yield from real_iter(path)
            yield pkgutil.ModuleInfo(None, 'stray', False)

        def import_module(name):
            return stray if name == 'numamig.conf.stray' else \
                real_import(name)

        self.useFixture(fixtures.MonkeyPatch(
            'numamig.conf.opts.pkgutil.iter_modules', iter_modules))
        self.useFixture(fixtures.MonkeyPatch(
            'numamig.conf.opts.importlib.import_module', import_module))
        self.assertRaisesMessage(AttributeError,
                                 'numamig.conf.stray defines no list_opts()',
                                 opts.list_opts)

    def test_non_group_modules_are_skipped(self):
        for name in ('checks', 'opts', 'types'):
            self.assertIn(name, opts._NOT_GROUPS)

    def test_groups_are_sorted_and_unique(self):
        names = [getattr(group, 'name', group)
                 for group, _opts in opts.list_opts()]
        self.assertEqual(sorted(set(names)), names)


class SampleConfigTest(base.TestCase):
    """The committed sample must equal a freshly generated one."""

    def test_sample_is_current(self):
        out = os.path.join(self.useFixture(fixtures.TempDir()).path,
                           'numamig.conf.sample')
        conf = cfg.ConfigOpts()
        generator.register_cli_opts(conf)
        conf(['--config-file', GENERATOR_CONF, '--output-file', out],
             default_config_files=[])
        generator.generate(conf)
        with open(SAMPLE) as committed, open(out) as fresh:
            old, new = committed.readlines(), fresh.readlines()
        diff = ''.join(difflib.unified_diff(old, new, 'committed',
                                            'generated', n=1))
        self.assertEqual(
            '', diff,
            'etc/numamig/numamig.conf.sample is stale: run '
            '"tox -e genconfig" (or oslo-config-generator --config-file '
            'etc/numamig/numamig-config-generator.conf) and commit it')


class LibraryDefaultsTest(base.TestCase):

    def test_rpc_and_sample_share_the_exchange(self):
        from numamig import rpc
        self.assertEqual(opts.CONTROL_EXCHANGE, rpc.CONTROL_EXCHANGE)

    def test_reconnects_to_rabbitmq_pause_at_most_4_s(self):
        # The library's 30 s made a daemon whose attempts failed while a
        # broker booted sleep through its return.
        opts.update_library_defaults()
        rabbit = dict(oslo_messaging_opts.list_opts())[
            'oslo_messaging_rabbit']
        interval, = [o for o in rabbit if o.name == 'rabbit_interval_max']
        self.assertEqual(opts.RABBIT_INTERVAL_MAX_S, interval.default)
        self.assertEqual(4, interval.default)

    def test_listeners_poll_in_1_s_slices(self):
        # A listener sees a stop only between two slices of
        # heartbeat_timeout_threshold / heartbeat_rate / 2 seconds: the
        # library's default made an idle daemon take up to 11 s to stop.
        opts.update_library_defaults()
        rabbit = {o.name: o for o in dict(oslo_messaging_opts.list_opts())[
            'oslo_messaging_rabbit']}
        self.assertEqual(opts.HEARTBEAT_RATE,
                         rabbit['heartbeat_rate'].default)
        self.assertEqual(1.0, rabbit['heartbeat_timeout_threshold'].default /
                         rabbit['heartbeat_rate'].default / 2)

    def test_update_sets_the_control_exchange_default(self):
        opts.update_library_defaults()
        messaging_opts = dict(oslo_messaging_opts.list_opts())[None]
        exchange, = [o for o in messaging_opts
                     if o.name == 'control_exchange']
        self.assertEqual('numamig', exchange.default)
