"""numamig-manage migration top: the migrations in flight, refreshed."""

import io
import json
from unittest import mock

from numamig.cmd.manage_commands import migration_top
from numamig.convergence import policy
from numamig.db import compute_nodes
from numamig.db import migration_satellites
from numamig.db import migrations
from tests.unit.cmd import cli_base
from tests.unit.db import base as db_base


class NextStepTest(cli_base.base.TestCase):

    def test_the_schedule_then_the_tiers(self):
        finish = policy.SHIPPED[policy.FINISH]
        steps = [migration_top.next_step(finish, taken)
                 for taken in range(len(finish.downtime_ms) + 4)]
        self.assertEqual(
            [f"allow {ms} ms of downtime" for ms in finish.downtime_ms] +
            ['auto-converge', 'post-copy', 'pause', None], steps)

    def test_none_for_the_timer_or_an_unknown_policy(self):
        self.assertIsNone(migration_top.next_step(
            policy.SHIPPED[policy.TIMER], 0))
        self.assertIsNone(migration_top.next_step(None, 0))


class TopTest(cli_base.CLITestCase):

    def setUp(self):
        super().setUp()
        self.guest = self.add_instance('src')
        compute_nodes.save_report(self.db, db_base.make_report('src'))
        compute_nodes.save_report(self.db, db_base.make_report('dst'))
        self.copying = migrations.create(self.db, cli_base.make_migration(
            self.guest.uuid, dest_host='dst',
            memory_total=4 << 30, memory_processed=1 << 30,
            memory_remaining=3 << 30), policy='nfv')
        # The rate the prediction sampled: MigrationPrediction's.
        migration_satellites.set_prediction(
            self.db, self.copying.uuid, {'sampled_dirty_rate': 10 << 20})
        for status in ('queued', 'preparing'):
            migrations.set_status(self.db, self.copying.uuid, status)
        # What the policy did so far: MigrationConvergence's, reported
        # with a status change as a source does.
        migrations.set_status(
            self.db, self.copying.uuid, 'running',
            result={'convergence_actions': ['allow 50 ms of downtime (the '
                                            'job starts)']})
        other = self.add_instance('src')
        migrations.create(self.db, cli_base.make_migration(other.uuid))
        done = self.add_instance('src')
        ended = migrations.create(self.db, cli_base.make_migration(
            done.uuid))
        migrations.set_status(self.db, ended.uuid, 'cancelled')

    def test_json_one_document_per_refresh(self):
        self.patch(migration_top.time, 'sleep', lambda s: None)
        code, out, err = self.run_cli('migration', 'top', '--format',
                                      'json', '--count', '3',
                                      '--interval', '0.5')
        self.assertEqual(0, code, err)
        frames = [json.loads(line) for line in out.splitlines()]
        self.assertEqual(3, len(frames))
        frame = frames[0]
        self.assertEqual(1, frame['waiting'])
        row, = frame['migrations']
        self.assertEqual(
            (self.copying.uuid, 'running', 25.0, 3 << 30, 10 << 20, 'nfv',
             1, 'allow 100 ms of downtime'),
            (row['uuid'], row['status'], row['progress_percent'],
             row['memory_remaining'], row['dirty_rate'], row['policy'],
             row['actions_taken'], row['next_step']))

    def test_the_predictions_in_one_read_per_refresh(self):
        # A second migration in flight: still one satellite read for the
        # frame (every row's prediction and convergence at once), not one
        # per row.
        guest = self.add_instance('src')
        second = migrations.create(self.db, cli_base.make_migration(
            guest.uuid, dest_host='dst'))
        for status in ('queued', 'preparing', 'running'):
            migrations.set_status(self.db, second.uuid, status)
        reads = []
        real = migration_satellites.get_many

        def counted(db, uuids, names):
            reads.append((sorted(uuids), tuple(names)))
            return real(db, uuids, names)
        self.patch(migration_satellites, 'get_many', counted)
        code, out, err = self.run_cli('migration', 'top', '--format',
                                      'json')
        self.assertEqual(0, code, err)
        self.assertEqual(
            [(sorted([self.copying.uuid, second.uuid]),
              ('prediction', 'convergence'))], reads)
        rates = {r['uuid']: r['dirty_rate']
                 for r in json.loads(out)['migrations']}
        self.assertEqual({self.copying.uuid: 10 << 20, second.uuid: None},
                         rates)

    def test_human_once_when_not_a_terminal(self):
        code, out, _ = self.run_cli('migration', 'top')
        self.assertEqual(0, code)
        self.assertNotIn(migration_top.CLEAR, out)
        self.assertIn('1 in flight, 1 waiting for admission', out)
        self.assertIn(f'{self.copying.uuid[:8]}   src -> dst', out)
        self.assertIn('25.0%', out)
        self.assertIn('nfv (allow 100 ms of downtime)', out)

    def test_in_place_on_a_terminal_until_ctrl_c(self):
        screen = io.StringIO()
        screen.isatty = lambda: True
        sleeps = []

        def sleep(seconds):
            sleeps.append(seconds)
            if len(sleeps) == 2:
                raise KeyboardInterrupt
        self.patch(migration_top.time, 'sleep', sleep)
        with mock.patch('sys.stdout', screen):
            code = self.main(['--config-file', self.config, 'migration',
                              'top', '--interval', '1'])
        self.assertEqual(0, code)
        # Drawn, slept, drawn again; Ctrl-C in the second sleep.
        self.assertEqual(2, screen.getvalue().count(migration_top.CLEAR))
        self.assertEqual([1.0, 1.0], [round(s) for s in sleeps])

    def test_host_filter_and_an_unknown_host(self):
        code, out, _ = self.run_cli('migration', 'top', '--host', 'dst',
                                    '--format', 'json')
        self.assertEqual(0, code)
        self.assertEqual(1, len(json.loads(out)['migrations']))
        code, out, _ = self.run_cli('migration', 'top', '--host', 'dts',
                                    '--format', 'json')
        self.assertEqual(127, code)
        self.assertEqual('Compute host dts is not known to the conductor.',
                         json.loads(out)['error'])

    def test_bad_options_are_refused_before_reading(self):
        for argv, message in (
                (('--interval', '0.1'), '--interval 0.1 is not between'),
                (('--interval', '7200'), '--interval 7200 is not between'),
                (('--count', '0'), '--count 0 is not between')):
            code, out, _ = self.run_cli('migration', 'top', *argv,
                                        '--format', 'json')
            self.assertEqual(127, code, argv)
            self.assertIn(message, json.loads(out)['error'])
