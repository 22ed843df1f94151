"""numamig-manage refusals over the real wire: 127, one line, nothing written.

The console script's main() runs in this process against an embedded
deployment whose services listen where the CLI's ``control_exchange``
leads (RabbitMQ and in-process), so each refusal is an expected remote
error that crossed the transport. "Nothing changed" is checked on the
row counts of every table, before and after.
"""

import contextlib
import io
import json

import sqlalchemy as sa
import testscenarios

from numamig import embedded
from numamig.cmd import manage
from numamig.db import models
from tests import base
from tests.fixtures import deployment
from tests.fixtures import rpc as rpc_fixture

load_tests = testscenarios.load_tests_apply_scenarios

UNKNOWN_UUID = '00000000-0000-4000-8000-00000000dead'


def row_counts(db_url):
    """Rows per table of the deployment's database."""
    engine = sa.create_engine(db_url)
    try:
        with engine.connect() as conn:
            return {name: conn.execute(sa.select(sa.func.count()).select_from(
                table)).scalar_one()
                for name, table in models.Base.metadata.tables.items()}
    finally:
        engine.dispose()


class ManageRefusalsTestCase(base.TestCase):

    scenarios = rpc_fixture.TRANSPORT_SCENARIOS

    def setUp(self):
        super().setUp()
        fixture = self.useFixture(deployment.DeploymentFixture(
            self.transport_kind,
            [embedded.HostDefinition('host-a', 'numa-2cell-a.xml'),
             embedded.HostDefinition('host-b', 'numa-2cell-b.xml')],
            cli_names=True))
        self.dep = fixture.deployment
        self.config = fixture.cli_config()

    def cli(self, *argv):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(err):
            code = manage.main(['--config-file', self.config, *argv])
        return code, out.getvalue(), err.getvalue()

    def assert_refused(self, argv, *words):
        """127, one line naming ``words``, and not one row written."""
        before = row_counts(self.dep.db_url)
        code, _, err = self.cli(*argv)
        self.assertEqual(127, code, f"{argv}: {err}")
        self.assertEqual(1, len(err.strip().splitlines()), err)
        for word in words:
            self.assertIn(word, err)
        self.assertEqual(before, row_counts(self.dep.db_url),
                         "a refused request changes nothing")
        return err

    def create_guest(self):
        code, out, err = self.cli('instance', 'create', '--host', 'host-a',
                                  '--vcpus', '2', '--memory', '1024',
                                  '--property', 'hw:cpu_policy=dedicated',
                                  '--format', 'json')
        self.assertEqual(0, code, err)
        return json.loads(out)['uuid']

    def test_unknown_destination_host(self):
        uuid = self.create_guest()
        self.assert_refused(('migration', 'start', uuid, '--host', 'host-z'),
                            'host-z')

    def test_unknown_convergence_policy(self):
        uuid = self.create_guest()
        err = self.assert_refused(('migration', 'start', uuid, '--policy',
                                   'goldd'), 'goldd')
        self.assertIn('known policies: finish, never_pause, nfv, timer', err)

    def test_unknown_instance(self):
        self.assert_refused(('migration', 'start', UNKNOWN_UUID),
                            UNKNOWN_UUID)

    def test_create_on_unknown_host(self):
        self.assert_refused(('instance', 'create', '--host', 'host-z',
                             '--vcpus', '2', '--memory', '1024'), 'host-z')

    def test_flavor_key_typo(self):
        err = self.assert_refused(
            ('instance', 'create', '--host', 'host-a', '--vcpus', '2',
             '--memory', '1024', '--property', 'hw:cpu_polcy=dedicated'),
            'hw:cpu_polcy')
        self.assertIn('did you mean hw:cpu_policy?', err)

    def test_unknown_policy_of_a_new_guest(self):
        # Issue 44 H2: such a guest could never be migrated.
        err = self.assert_refused(
            ('instance', 'create', '--host', 'host-a', '--vcpus', '2',
             '--memory', '1024', '--property',
             'hw:live_migration_policy=gold'),
            'gold', 'hw:live_migration_policy')
        self.assertIn('known policies: finish, never_pause, nfv, timer', err)

    def test_defragment_for_checks_specs_as_create_does(self):
        # Issue 44: --for dropped misspelt keys and planned for another
        # guest; --execute would have moved guests for it.
        for action in ('--dry-run', '--execute'):
            for spec, words in (
                    ('hw:mem_pgae_size=1GB',
                     ('hw:mem_pgae_size', 'did you mean hw:mem_page_size?')),
                    ('hw:live_migration_policy=gold', ('gold',))):
                self.assert_refused(
                    ('host', 'defragment', action, '--for',
                     f'vcpus=2,memory_mb=512,hw:cpu_policy=dedicated,'
                     f'{spec}'), *words)

    def test_dry_run_refuses_an_unknown_policy_as_a_start_does(self):
        uuid = self.create_guest()
        for dry_run in ((), ('--dry-run',)):
            self.assert_refused(('migration', 'start', uuid, '--policy',
                                 'goldd', *dry_run),
                                'goldd', 'known policies')

    def test_dry_run_under_the_requested_policy(self):
        code, out, err = self.cli(
            'instance', 'create', '--host', 'host-a', '--vcpus', '2',
            '--memory', '1024', '--property', 'hw:cpu_policy=dedicated',
            '--property', 'hw:live_migration_policy=finish', '--format',
            'json')
        self.assertEqual(0, code, err)
        uuid = json.loads(out)['uuid']
        for argv, policy, where in (
                ((), 'finish', 'flavor key hw:live_migration_policy'),
                (('--policy', 'nfv'), 'nfv', 'requested for the migration')):
            code, out, err = self.cli('migration', 'start', uuid,
                                      '--dry-run', *argv, '--format', 'json')
            self.assertEqual(0, code, err)
            answer = json.loads(out)
            self.assertEqual((policy, where), (answer['policy'],
                                               answer['policy_from']))
            self.assertEqual(policy, answer['prediction']['policy'])
        code, out, err = self.cli('migration', 'start', uuid, '--dry-run',
                                  '--policy', 'nfv')
        self.assertIn('would run under convergence policy nfv (requested '
                      'for the migration)', out)
        # The request itself: the requested policy comes first too.
        code, out, err = self.cli('migration', 'start', uuid, '--policy',
                                  'nfv', '--wait', '--format', 'json')
        self.assertEqual(0, code, err)
        # The policy is MigrationConvergence's, a satellite record that
        # show reads (the answer of --wait is the migration's own record).
        code, out, err = self.cli('migration', 'show',
                                  json.loads(out)['uuid'], '--format',
                                  'json')
        self.assertEqual(0, code, err)
        self.assertEqual('nfv', json.loads(out)['convergence']['policy'])

    def test_second_migration_of_a_guest_in_flight(self):
        uuid = self.create_guest()
        self.dep.conductor.executor.stop()      # the first stays queued
        code, out, err = self.cli('migration', 'start', uuid, '--format',
                                  'json')
        self.assertEqual(0, code, err)
        first = json.loads(out)['uuid']
        self.assert_refused(('migration', 'start', uuid, '--host', 'host-b'),
                            uuid, f'migration {first}', 'accepted')

    def test_every_unknown_name_is_bad_input(self):
        # Not 'instance delete': deleting what is not recorded is a safe
        # retry (0), as its help says.
        uuid = self.create_guest()
        for argv, word in (
                (('migration', 'start', uuid, '--host', 'host-z',
                  '--dry-run'), 'host-z'),
                (('migration', 'show', UNKNOWN_UUID), UNKNOWN_UUID),
                (('migration', 'abort', UNKNOWN_UUID), UNKNOWN_UUID),
                (('migration', 'force-complete', UNKNOWN_UUID), UNKNOWN_UUID),
                (('instance', 'show', UNKNOWN_UUID), UNKNOWN_UUID),
                (('instance', 'adopt', 'host-z'), 'host-z'),
                (('host', 'show', 'host-z'), 'host-z'),
                (('host', 'export-topology', 'host-z'), 'host-z'),
                (('instance', 'list', '--host', 'host-z'), 'host-z')):
            self.assert_refused(argv, word)
