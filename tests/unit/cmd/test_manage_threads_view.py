"""How migration show words where a migration's threads ran."""

import json

from numamig.cmd.manage_commands import threads_view as tv
from numamig.db import migration_threads
from numamig.db import migrations
from tests import base
from tests.unit.cmd import cli_base
from tests.unit.objects import samples


class ThreadsViewTestCase(base.TestCase):

    def test_one_line_per_host_then_per_thread(self):
        data = tv.view(samples.migration_threads().sides)
        self.assertEqual(
            ['migration threads:',
             '  source src: CPUs 6-7 (shared-guest-nodes), 2 parallel '
             'connection(s)',
             '    live_migration: 6-7',
             '    multifdsend_0: 6-7',
             '    multifdsend_1: 6-7',
             '  dest dst: CPUs none (none)',
             '    multifdrecv_0: 3',
             '    multifdrecv_1: 3'],
            tv.lines(data))

    def test_nothing_recorded_prints_nothing(self):
        self.assertIsNone(tv.view(None))
        self.assertIsNone(tv.view({}))
        self.assertEqual([], tv.lines(None))


class ShowThreadsTestCase(cli_base.CLITestCase):
    """Recorded through the conductor's database code, read back by
    numamig-manage: the satellite record's round trip."""

    def test_text_and_json(self):
        guest = self.add_instance('src')
        mig = migrations.create(self.db, cli_base.make_migration(
            guest.uuid, status='running', dest_host='dst'))
        for side in ('source', 'dest'):
            self.assertTrue(migration_threads.record_threads(
                self.db, mig.uuid, side, samples.THREADS[side]))
        code, out, _ = self.run_cli('migration', 'show', mig.uuid)
        self.assertEqual(0, code)
        self.assertIn('  migration threads:\n'
                      '    source src: CPUs 6-7 (shared-guest-nodes), 2 '
                      'parallel connection(s)\n'
                      '      live_migration: 6-7\n', out)
        self.assertIn('    dest dst: CPUs none (none)\n'
                      '      multifdrecv_0: 3\n', out)
        code, out, _ = self.run_cli('migration', 'show', mig.uuid,
                                    '--format', 'json')
        self.assertEqual(0, code)
        self.assertEqual(samples.THREADS, json.loads(out)['migration_threads'])

    def test_json_null_when_nothing_recorded(self):
        guest = self.add_instance('src')
        mig = migrations.create(self.db, cli_base.make_migration(guest.uuid))
        code, out, _ = self.run_cli('migration', 'show', mig.uuid,
                                    '--format', 'json')
        self.assertIsNone(json.loads(out)['migration_threads'])
        self.assertNotIn('migration threads', self.run_cli(
            'migration', 'show', mig.uuid)[1])
