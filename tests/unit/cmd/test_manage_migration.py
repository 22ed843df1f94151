"""numamig-manage migration start / list / show / abort / force-complete."""

import io
import json
from unittest import mock

from numamig import exception
from numamig.cmd.manage_commands import migration as migration_cmd
from numamig.db import direct
from numamig.db import migrations
from tests.unit.cmd import cli_base


class ManageMigrationTestCase(cli_base.CLITestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(cli_base.fixtures.MonkeyPatch(
            'numamig.cmd.manage_commands.migration.POLL_INTERVAL', 0))
        self.guest = self.add_instance('src')

    def record(self, **overrides):
        return migrations.create(self.db, cli_base.make_migration(
            self.guest.uuid, **overrides))

    def test_show_history_and_refusals(self):
        mig = self.record()
        migrations.add_refused_host(self.db, mig.uuid, 'dst1',
                                    'NUMA topology does not fit')
        migrations.set_status(self.db, mig.uuid, 'error', error='no host')
        code, out, _ = self.run_cli('migration', 'show', mig.uuid)
        self.assertEqual(0, code)
        self.assertIn(f'Migration {mig.uuid}: ERROR', out)
        self.assertIn('dst1: NUMA topology does not fit', out)
        self.assertIn('accepted', out)
        self.assertIn('error: no host', out)
        data = json.loads(self.run_cli('migration', 'show', mig.uuid,
                                       '--format', 'json')[1])
        self.assertEqual(['accepted', 'error'],
                         [h['status'] for h in data['history']])

    def _finished(self, status='running', **result):
        mig = self.record(status=status, dest_host='dst')
        return migrations.set_status(
            self.db, mig.uuid, 'post-migrating' if status == 'running'
            else 'completed', result=result)

    def test_show_native_result(self):
        mig = self._finished(elapsed_ms=412, downtime_ms=18, emulated=False,
                             post_copy=True, paused=False)
        migrations.set_status(self.db, mig.uuid, 'completed')
        code, out, _ = self.run_cli('migration', 'show', mig.uuid)
        self.assertEqual(0, code)
        self.assertIn('duration: 412 ms\n', out)
        self.assertIn('downtime: 18 ms', out)
        self.assertIn('emulated: no', out)
        self.assertIn('post-copy: yes, paused to converge: no', out)
        data = json.loads(self.run_cli('migration', 'show', mig.uuid,
                                       '--format', 'json')[1])
        self.assertEqual({'elapsed_ms': 412, 'downtime_ms': 18,
                          'emulated': False, 'post_copy': True,
                          'paused': False}, data['result'])

    def test_show_emulated_result(self):
        mig = self._finished(elapsed_ms=3, emulated=True)
        code, out, _ = self.run_cli('migration', 'show', mig.uuid)
        self.assertIn('duration: 3 ms\n', out)
        self.assertIn('emulated: yes, numamig defined the guest', out)
        # No live copy: neither downtime nor convergence applies.
        self.assertNotIn('downtime', out)
        self.assertNotIn('post-copy', out)
        data = json.loads(self.run_cli('migration', 'show', mig.uuid,
                                       '--format', 'json')[1])
        self.assertIs(True, data['result']['emulated'])

    def test_show_aborted_emulated_run(self):
        # An emulated run aborted during its modelled copy: the guest
        # never reached the destination, whatever the copy had reached.
        for status, downtime in (('cancelled', None), ('failed', 40)):
            mig = self.record(status='running', dest_host='dst')
            migrations.set_status(self.db, mig.uuid, status, error='stop',
                                  result={'elapsed_ms': 50, 'emulated': True,
                                          'downtime_ms': downtime})
            out = self.run_cli('migration', 'show', mig.uuid)[1]
            self.assertIn('the guest stayed on its source', out)
            self.assertNotIn('defined the guest on the destination by '
                             'numamig', out)
            self.assertNotIn('emulated: yes, numamig defined the guest',
                             out)

    def test_show_partial_run(self):
        mig = self.record(status='running', dest_host='dst')
        migrations.set_status(self.db, mig.uuid, 'failed', error='link',
                              result={'elapsed_ms': 50, 'emulated': False})
        out = self.run_cli('migration', 'show', mig.uuid)[1]
        self.assertIn('duration: 50 ms (before it failed)', out)
        self.assertIn('downtime: unknown', out)
        self.assertIn('post-copy: unknown, paused to converge: unknown',
                      out)

    def test_show_without_result(self):
        mig = self.record()
        out = self.run_cli('migration', 'show', mig.uuid)[1]
        self.assertNotIn('duration', out)
        data = json.loads(self.run_cli('migration', 'show', mig.uuid,
                                       '--format', 'json')[1])
        self.assertIsNone(data['result'])
        migrations.set_status(self.db, mig.uuid, 'error', error='no host')
        out = self.run_cli('migration', 'show', mig.uuid)[1]
        self.assertIn('result: not reported', out)

    def test_list_shows_downtime(self):
        native = self._finished(elapsed_ms=400, downtime_ms=21,
                                emulated=False)
        emulated = self._finished(elapsed_ms=3, emulated=True)
        pending = self.record()
        out = self.run_cli('migration', 'list')[1]
        self.assertIn('DOWNTIME', out.splitlines()[0])
        rows = {line.split()[0]: line for line in out.splitlines()[1:]}
        self.assertIn(' 21 ms ', rows[native.uuid])
        self.assertIn(' emulated ', rows[emulated.uuid])
        self.assertRegex(rows[pending.uuid], r'queued #1 +0 +- ')

    def test_waiting_migrations_show_their_place(self):
        low = self.record()
        other = self.add_instance('src')
        high = migrations.create(self.db, cli_base.make_migration(
            other.uuid, priority=100))
        data = json.loads(self.run_cli('migration', 'list', '--format',
                                       'json')[1])
        self.assertEqual({low.uuid: (0, 2), high.uuid: (100, 1)},
                         {m['uuid']: (m['priority'], m['queue_position'])
                          for m in data['migrations']})
        out = self.run_cli('migration', 'show', low.uuid)[1]
        self.assertIn('waiting for admission: position 2 in the queue', out)

    def test_start_priority(self):
        self.api.live_migrate_instance.return_value = cli_base.make_migration(
            self.guest.uuid, queue_position=4)
        for given, sent in (('drain', 100), ('maintenance', 50),
                            ('7', 7), (None, None)):
            argv = ['--priority', given] if given else []
            code, out, _ = self.run_cli('migration', 'start',
                                        self.guest.uuid, *argv)
            self.assertEqual(0, code)
            self.assertEqual(sent, self.api.live_migrate_instance.call_args[
                1]['priority'])
        self.assertIn('position 4 in the queue', out)

    def test_start_bad_priority_changes_nothing(self):
        self.api.live_migrate_instance.reset_mock()
        for bad in ('urgent', '101', '-1', '2.5'):
            code, _, err = self.run_cli('migration', 'start',
                                        self.guest.uuid, '--priority', bad)
            self.assertEqual(127, code, bad)
            self.assertIn('use one of routine, maintenance, drain', err)
        self.api.live_migrate_instance.assert_not_called()

    def test_list_filters(self):
        mig = self.record()
        self.add_report('other')
        self.assertIn(mig.uuid, self.run_cli('migration', 'list')[1])
        for argv in (['--status', 'completed'], ['--host', 'other']):
            self.assertIn('No migration matches',
                          self.run_cli('migration', 'list', *argv)[1])
        self.assertIn(mig.uuid, self.run_cli('migration', 'list', '--host',
                                             'src')[1])
        self.assertEqual(127, self.run_cli('migration', 'list', '--instance',
                                           'x')[0])
        # Before: 0 and "No migration matches" for a misspelt host.
        code, out, err = self.run_cli('migration', 'list', '--host', 'nope')
        self.assertEqual((127, '', 'error: Compute host nope is not known '
                                   'to the conductor.\n'), (code, out, err))

    def test_unknown_migration(self):
        self.assertEqual(127, self.run_cli('migration', 'show',
                                           cli_base.new_uuid())[0])

    def test_start_returns_when_queued(self):
        self.api.live_migrate_instance.return_value = cli_base.make_migration(
            self.guest.uuid, status='queued', dest_host='dst')
        code, out, _ = self.run_cli('migration', 'start', self.guest.uuid,
                                    '--host', 'dst')
        self.assertEqual(0, code)
        self.assertIn('QUEUED', out)
        self.assertEqual('dst', self.api.live_migrate_instance.call_args[0][2])

    def test_start_and_list_by_name(self):
        self.api.live_migrate_instance.return_value = cli_base.make_migration(
            self.guest.uuid, status='queued', dest_host='dst')
        code, out, _ = self.run_cli('migration', 'start', self.guest.name,
                                    '--host', 'dst')
        self.assertEqual(0, code, out)
        self.assertEqual(self.guest.uuid,
                         self.api.live_migrate_instance.call_args[0][1])
        mig = self.record()
        out = self.run_cli('migration', 'list', '--instance',
                           self.guest.name)[1]
        self.assertIn(mig.uuid, out)

    def test_start_no_valid_host(self):
        self.api.live_migrate_instance.side_effect = exception.NoValidHost(
            reason='2 destination(s) tried')
        code, _, err = self.run_cli('migration', 'start', self.guest.uuid)
        self.assertEqual(1, code)
        self.assertIn('2 destination(s) tried', err)

    def test_start_wait_follows_until_the_end(self):
        steps = [self._mig('running', 1 << 30, 1 << 29),
                 self._mig('completed', 1 << 30, 1 << 30)]
        self.api.live_migrate_instance.return_value = self._mig('queued')
        self.api.migration_get.side_effect = steps
        code, out, err = self.run_cli('migration', 'start', self.guest.uuid,
                                      '--wait')
        self.assertEqual(0, code)
        self.assertIn(' 50%  0.5/1.0 GiB', err)
        self.assertIn('COMPLETED', out)

    def test_start_wait_failed_is_no(self):
        self.api.live_migrate_instance.return_value = self._mig('queued')
        self.api.migration_get.return_value = self._mig('failed')
        code, _, _ = self.run_cli('migration', 'start', self.guest.uuid,
                                  '--wait')
        self.assertEqual(1, code)

    def test_interrupted_wait_says_the_migration_goes_on(self):
        queued = self._mig('queued')
        self.api.live_migrate_instance.return_value = queued
        self.api.migration_get.side_effect = KeyboardInterrupt
        code, out, err = self.run_cli('migration', 'start', self.guest.uuid,
                                      '--wait')
        self.assertEqual(130, code)
        self.assertIn(queued.uuid, out)
        # Progress lines, then one error line.
        self.assertEqual(1, err.count('error: '), err)
        self.assertIn(f"error: interrupted: migration {queued.uuid} goes "
                      f"on", err.strip().splitlines()[-1])
        self.assertIn(f"migration abort {queued.uuid}", err)
        self.assertNotIn('Traceback', out + err)

    def test_interrupted_request_says_where_to_look(self):
        self.api.live_migrate_instance.side_effect = KeyboardInterrupt
        code, out, err = self.run_cli('migration', 'start', self.guest.uuid,
                                      '--format', 'json')
        self.assertEqual(130, code)
        self.assertIn(f"migration list --instance {self.guest.uuid}", err)
        self.assertEqual(130, json.loads(out)['exit_code'])

    def test_interrupt_anywhere_is_one_line(self):
        # The read goes through numamig.db.direct (a SQLite file).
        self.patch(direct.Reader, 'migrations',
                   mock.Mock(side_effect=KeyboardInterrupt))
        code, _out, err = self.run_cli('migration', 'show',
                                       cli_base.new_uuid())
        self.assertEqual(130, code, err)
        self.assertEqual(['error: interrupted; anything the command had '
                          'asked the services to do goes on'],
                         err.strip().splitlines())

    def test_dry_run(self):
        topology = self.guest.numa_topology
        self.api.live_migration_dry_run.return_value = {
            'instance_uuid': self.guest.uuid, 'source_host': 'src',
            'dest_host': 'dst', 'numa_topology': topology,
            'candidates': ['dst'], 'refused': {}}
        code, out, _ = self.run_cli('migration', 'start', self.guest.uuid,
                                    '--dry-run')
        self.assertEqual(0, code)
        self.assertIn('would go to dst', out)
        self.assertNotIn('NUMA distance', out)   # a release 1 conductor
        self.api.live_migrate_instance.assert_not_called()
        distance = {'cost': 21, 'excess': 9,
                    'reason': 'host cells 0, 2: distance cost 21 (the only '
                              'fitting set of host cells)'}
        self.api.live_migration_dry_run.return_value = dict(
            self.api.live_migration_dry_run.return_value, distance=distance)
        code, out, _ = self.run_cli('migration', 'start', self.guest.uuid,
                                    '--dry-run')
        self.assertEqual(0, code)
        self.assertIn('NUMA distance: host cells 0, 2: distance cost 21 '
                      '(the only fitting set of host cells); 9 beyond the '
                      "host's nearest pairs", out)
        code, out, _ = self.run_cli('migration', 'start', self.guest.uuid,
                                    '--dry-run', '--format', 'json')
        self.assertEqual(0, code, out)
        self.assertEqual(distance, json.loads(out)['distance'])
        self.api.live_migration_dry_run.return_value = dict(
            self.api.live_migration_dry_run.return_value, dest_host=None,
            numa_topology=None, refused={'dst': 'full'})
        code, out, _ = self.run_cli('migration', 'start', self.guest.uuid,
                                    '--dry-run')
        self.assertEqual(1, code)
        self.assertIn('dst refused: full', out)

    def test_start_bad_input(self):
        self.assertEqual(127, self.run_cli('migration', 'start', 'x')[0])
        self.assertEqual(127, self.run_cli('migration', 'start',
                                           self.guest.uuid, '--dry-run',
                                           '--wait')[0])
        self.api.live_migrate_instance.side_effect = \
            exception.InstanceNotFound(instance_uuid='y')
        self.assertEqual(127, self.run_cli('migration', 'start',
                                           cli_base.new_uuid())[0])

    def test_abort_and_force_complete(self):
        mig = self._mig('cancelled')
        self.api.migration_abort.return_value = mig
        self.assertEqual(0, self.run_cli('migration', 'abort', mig.uuid)[0])
        self.api.migration_force_complete.side_effect = \
            exception.MigrationNotAbortable(
                migration_uuid=mig.uuid, status='cancelled',
                reason='only a running migration can be forced')
        code, _, err = self.run_cli('migration', 'force-complete', mig.uuid)
        self.assertEqual(127, code)
        self.assertIn('only a running migration', err)

    def test_progress_line(self):
        line = migration_cmd.progress_line(self._mig('running', 4 << 30,
                                                     1 << 30))
        self.assertTrue(line.startswith('[' + '#' * 7 + '.' * 23 + ']'))
        self.assertIn('25%', line)
        stream = io.StringIO()
        migration_cmd.follow(None, None, self._mig('completed'), 'json',
                             stream=stream)
        self.assertEqual('', stream.getvalue())

    def _mig(self, status, total=0, done=0):
        return cli_base.make_migration(
            self.guest.uuid, status=status, dest_host='dst',
            memory_total=total, memory_processed=done,
            memory_remaining=total - done)
