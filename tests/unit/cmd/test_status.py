"""numamig-status upgrade check: one named test per deployment state."""

import json
import os

import sqlalchemy as sa
import testscenarios

from numamig.cmd import status
from numamig.db import api
from numamig.db import compute_nodes
from tests.unit.cmd import cli_base

load_tests = testscenarios.load_tests_apply_scenarios


class UpgradeCheckTestCase(cli_base.CLITestCase):

    main = staticmethod(status.main)

    def check(self):
        code, out, err = self.run_cli('upgrade', 'check', '--json')
        self.assertEqual('', err)
        data = json.loads(out)
        return code, {c['check']: c for c in data['checks']}

    def test_current_deployment_passes(self):
        self.add_report('cn1')
        code, out, _ = self.run_cli('upgrade', 'check')
        self.assertEqual(0, code, out)
        self.assertIn('ready for NUMA-aware live migration', out)
        self.assertNotIn('NOT ready', out)

    def test_old_host_fails_naming_it(self):
        self.add_report('cn1')
        self.add_report('cn-old', service_version=1)
        code, checks = self.check()
        self.assertEqual(2, code)
        entry = checks['Compute service versions']
        self.assertEqual(2, entry['result'])
        self.assertIn('cn-old (version 1)', entry['details'])
        self.assertNotIn('cn1', entry['details'])

    def test_old_host_with_workaround_warns(self):
        self.add_report('cn-old', service_version=1)
        self.flags(group='workarounds', enable_numa_live_migration=True)
        code, checks = self.check()
        self.assertEqual(1, code)
        self.assertIn('old path',
                      checks['Compute service versions']['details'])

    def test_no_host_reported_warns(self):
        code, checks = self.check()
        self.assertEqual(1, code)
        self.assertEqual(1, checks['Compute service versions']['result'])

    def test_unsynced_database_fails(self):
        empty = self.useFixture(cli_base.database.SQLiteDatabase(sync=False))
        open(empty.url[len('sqlite:///'):], 'w').close()
        self.write_config(f"[database]\nconnection = {empty.url}\n")
        code, checks = self.check()
        self.assertEqual(2, code)
        self.assertIn("numamig-manage db sync",
                      checks['Database schema']['details'])
        self.assertEqual(None, api.Database(empty.url).version())

    def test_development_revision_fails_saying_to_recreate(self):
        # A database synced to one of release 2's development steps,
        # which no release shipped and no revision upgrades.
        dev = self.useFixture(cli_base.database.SQLiteDatabase(sync=False))
        dev.db.sync('release-1')
        with dev.db.writer() as session:
            session.execute(sa.text(
                "UPDATE alembic_version SET version_num = '0007'"))
        self.write_config(f"[database]\nconnection = {dev.url}\n")
        code, checks = self.check()
        self.assertEqual(2, code)
        self.assertEqual(
            "schema revision 0007 is a development step of release 2 that "
            "no release shipped and that cannot be upgraded: recreate the "
            "database (drop it, then run 'numamig-manage db sync')",
            checks['Database schema']['details'])
        code, out, err = self.run_cli('upgrade', 'check')
        self.assertEqual((2, ''), (code, err))
        self.assertNotIn('Traceback', out)
        self.assertEqual('0007', dev.db.version())

    def test_run_where_no_database_is_creates_none(self):
        # A compute node's configuration names no conductor database.
        missing = os.path.join(self.conf.conf.state_path, 'none', 'x.sqlite')
        self.write_config(f"[database]\nconnection = sqlite:///{missing}\n")
        code, checks = self.check()
        self.assertEqual(2, code)
        self.assertIn("must name the conductor's database",
                      checks['Database schema']['details'])
        self.assertFalse(os.path.exists(os.path.dirname(missing)))

    def test_changes_nothing(self):
        self.add_report('cn1')
        before = compute_nodes.get(self.db, 'cn1')
        self.check()
        self.assertEqual(before.reported_at,
                         compute_nodes.get(self.db, 'cn1').reported_at)


class MigrationGuardCheckTestCase(cli_base.CLITestCase):
    """One named scenario per cloud: (host, service version, guard)."""

    main = staticmethod(status.main)
    scenarios = [
        ('all-new-guarded', {'hosts': [('cn1', 2, 'on'), ('cn2', 2, 'on')],
                             'result': 0, 'named': 'on: cn1, cn2'}),
        ('all-new-no-guard', {'hosts': [('cn1', 2, 'off')], 'result': 0,
                              'named': 'off: cn1'}),
        ('mixed-unguarded', {'hosts': [('cn-old', 1, None),
                                       ('cn1', 2, 'on'), ('cn2', 2, 'off')],
                             'result': 1, 'named': 'off: cn2; on: cn1'}),
        ('mixed-guarded', {'hosts': [('cn-old', 1, None), ('cn1', 2, 'on')],
                           'result': 0, 'named': 'on: cn1'}),
        ('failed', {'hosts': [('cn1', 2, 'failed')], 'result': 1,
                    'named': 'failed: cn1'}),
        ('mixed-not-reported', {'hosts': [('cn-old', 1, None),
                                          ('cn1', 2, None)],
                                'result': 1, 'named': 'not reported: cn1'}),
    ]

    def test_migration_guard(self):
        for host, version, guard in self.hosts:
            self.add_report(host, service_version=version,
                            migration_guard=guard)
        self.flags(group='workarounds', enable_numa_live_migration=True)
        _code, out, err = self.run_cli('upgrade', 'check', '--json')
        self.assertEqual('', err)
        (entry,) = [c for c in json.loads(out)['checks']
                    if c['check'] == 'Migration guard']
        self.assertEqual(self.result, entry['result'], entry['details'])
        self.assertIn(self.named, entry['details'])
        self.assertNotIn('cn-old', entry['details'])


class UpgradeLevelsTestCase(cli_base.CLITestCase):
    """[upgrade_levels] caps: one row per value."""

    main = staticmethod(status.main)

    scenarios = [
        ('no_cap', {'caps': {}, 'code': 0, 'fragment': 'no cap'}),
        ('current_cap', {'caps': {'compute': '1.1'}, 'code': 0,
                         'fragment': 'no cap'}),
        ('cap_below_numa', {'caps': {'compute': '1.0'}, 'code': 1,
                            'fragment': 'compute = 1.0 is below 1.1'}),
        ('release_alias', {'caps': {'compute': 'release-1'}, 'code': 1,
                           'fragment': 'compute = 1.0 is below 1.1'}),
        ('current_release_alias', {'caps': {'compute': 'release-2',
                                            'conductor': 'release-2'},
                                   'code': 0, 'fragment': 'no cap'}),
        ('cap_not_a_version', {'caps': {'compute': 'newton'}, 'code': 2,
                               'fragment': "'newton' is not a version"}),
        ('conductor_not_a_version', {'caps': {'conductor': '1.2'},
                                     'code': 2,
                                     'fragment': "conductor = '1.2'"}),
        ('conductor_release_2', {'caps': {'conductor': '2.0'}, 'code': 0,
                                 'fragment': 'no cap'}),
    ]

    def test_cap(self):
        self.add_report('cn1')
        self.flags(group='upgrade_levels', **self.caps)
        code, out, _ = self.run_cli('upgrade', 'check', '--json')
        entry = {c['check']: c for c in json.loads(out)['checks']}[
            'RPC version caps']
        self.assertEqual(self.code, entry['result'])
        self.assertEqual(self.code, code)
        self.assertIn(self.fragment, entry['details'])


class PretendServiceVersionTestCase(cli_base.CLITestCase):
    """[testing] pretend_service_version, a testing aid, is reported."""

    main = staticmethod(status.main)

    scenarios = [
        ('unset', {'version': None, 'code': 0, 'fragment': 'no cap'}),
        ('current', {'version': 2, 'code': 0, 'fragment': 'no cap'}),
        ('older', {'version': 1, 'code': 1,
                   'fragment': 'pretend_service_version = 1 runs'}),
    ]

    def test_pretend(self):
        self.add_report('cn1')
        self.flags(group='testing', pretend_service_version=self.version)
        code, out, _ = self.run_cli('upgrade', 'check', '--json')
        entry = {c['check']: c for c in json.loads(out)['checks']}[
            'RPC version caps']
        self.assertEqual((self.code, self.code), (entry['result'], code))
        self.assertIn(self.fragment, entry['details'])


class ConfigurationCheckTestCase(cli_base.CLITestCase):

    main = staticmethod(status.main)

    def test_cpu_both_dedicated_and_shared_fails(self):
        self.add_report('cn1')
        self.flags(group='compute', cpu_dedicated_set='2-5',
                   cpu_shared_set='0-2')
        code, out, _ = self.run_cli('upgrade', 'check')
        self.assertEqual(2, code)
        self.assertIn('CPUs 2 are also in [compute] cpu_shared_set', out)

    def test_deprecated_option_in_use_warns(self):
        from oslo_config import cfg

        from numamig.conf import opts
        old = cfg.BoolOpt('old_knob', default=False,
                          deprecated_for_removal=True,
                          deprecated_reason="it does nothing any more")
        self.conf.register_opt(old, group='workarounds')
        real = opts.list_opts
        self.useFixture(cli_base.fixtures.MockPatch(
            'numamig.conf.opts.list_opts',
            side_effect=lambda: real() + [('workarounds', [old])]))
        self.add_report('cn1')
        self.write_config(self._config_text() + "[workarounds]\n"
                          "old_knob = true\n")
        code, out, _ = self.run_cli('upgrade', 'check', '--json')
        self.assertEqual(1, code, out)
        checks = {c['check']: c for c in json.loads(out)['checks']}
        self.assertIn('[workarounds] old_knob: it does nothing any more',
                      checks['Configuration']['details'])

    def _config_text(self):
        with open(self.config) as handle:
            return handle.read()


class ContractTestCase(cli_base.CLITestCase):
    """oslo.upgradecheck's output and numamig's one-line errors."""

    main = staticmethod(status.main)

    def test_json_is_the_standard_shape_alone_on_stdout(self):
        self.add_report('cn1')
        code, out, err = self.run_cli('upgrade', 'check', '--json')
        data = json.loads(out)
        self.assertEqual((0, ''), (code, err))
        self.assertEqual('numamig upgrade check', data['name'])
        self.assertEqual({'check', 'result', 'details'},
                         set(data['checks'][0]))

    def test_a_check_that_cannot_run_is_255_in_one_line(self):
        def broken(conf, sources):
            raise RuntimeError('boom')
        self.useFixture(cli_base.fixtures.MockPatch(
            'numamig.upgradecheck.checks.CHECKS', (('Broken', broken),)))
        code, out, err = self.run_cli('upgrade', 'check', '--json')
        self.assertEqual(255, code)
        self.assertEqual('error: unexpected RuntimeError: boom\n', err)
        self.assertEqual({'error': 'unexpected RuntimeError: boom',
                          'exit_code': 255}, json.loads(out))

    def test_unreadable_config_is_255_in_one_line(self):
        with open(self.config, 'w') as handle:
            handle.write('[database\n')
        code, out, err = self.run_cli('upgrade', 'check')
        self.assertEqual(255, code)
        self.assertTrue(err.startswith('error: '), err)
        self.assertEqual(1, len(err.splitlines()), err)

    def test_runs_twice_in_one_process(self):
        self.add_report('cn1')
        for _ in range(2):
            self.assertEqual(0, self.run_cli('upgrade', 'check', '--json')[0])


class UsageTestCase(cli_base.CLITestCase):
    """A wrong command line: one line and 255, never argparse's 2 (which
    reads as "NOT ready") nor a check run for a misspelt action."""

    main = staticmethod(status.main)

    def test_wrong_command_lines_are_one_line_and_255(self):
        for argv, fragment in (
                ((), 'arguments are required: command'),
                (('--bogus', 'upgrade', 'check'),
                 'unrecognized arguments: --bogus'),
                (('upgrade', 'check', '--bogus'),
                 'unrecognized arguments: --bogus'),
                (('upgrade', 'chek'), "unknown action 'chek'"),
                (('update', 'check'), "invalid choice: 'update'")):
            code, out, err = self.run_cli(*argv)
            self.assertEqual((255, 1), (code, len(err.splitlines())),
                             (argv, out, err))
            self.assertTrue(err.startswith('error: '), err)
            self.assertIn(fragment, err)
            self.assertNotIn('Database schema', out)

    def test_wrong_command_line_with_json_is_a_json_error(self):
        code, out, _ = self.run_cli('upgrade', 'chek', '--json')
        self.assertEqual(255, code)
        self.assertEqual({'error': "unknown action 'chek' of 'upgrade'; "
                                   "the only one is 'check'",
                          'exit_code': 255}, json.loads(out))
