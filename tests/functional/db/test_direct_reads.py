"""``migration list`` and ``migration show`` read through the DB-API
driver (numamig.db.direct) exactly what they read through numamig.db's
repositories: the same output, table and JSON, the same errors and exit
codes, on PostgreSQL, MariaDB and SQLite.

Each command runs twice against the same database: as shipped (the
direct read), then with numamig.db.direct told not to serve the URL,
which sends the command through SQLAlchemy and the versioned objects as
before issue 43; the two runs must print the same bytes.
"""

import contextlib
import datetime
import io
import os
from unittest import mock

import fixtures
import sqlalchemy as sa

from numamig.cmd import manage
from numamig.cmd.manage_commands import host as host_cmd
from numamig.db import direct
from numamig.db import instances
from numamig.db import migration_satellites
from numamig.db import migration_threads
from numamig.db import migrations
from tests.functional.db import base
from tests.unit.db import base as unit_base
from tests.unit.objects import samples


class DirectReadsTestCase(base.ServerDBTestCase):

    def setUp(self):
        super().setUp()
        url = self.db.url.render_as_string(hide_password=False)
        # The drivers numamig.db.direct serves, named as deployments
        # name them.
        self.assertIsNotNone(direct.parse_url(url).backend, url)
        self.config = os.path.join(
            self.useFixture(fixtures.TempDir()).path, 'numamig.conf')
        self.configure(url)

    def configure(self, url):
        with open(self.config, 'w') as handle:
            handle.write(f"[database]\nconnection = {url}\n")

    def run_cli(self, *argv):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(err):
            code = manage.main(['--config-file', self.config, *argv])
        return code, out.getvalue(), err.getvalue()

    def assert_same(self, *argv):
        """Run ``argv`` direct, then through the ORM: the same answer."""
        served = []
        real = direct.connect

        def spy(url, *args, **kwargs):
            # An error raised here was the direct read's answer too.
            # (The rest: the [database] libpq bounds, passed on.)
            served.append(True)
            reader = real(url, *args, **kwargs)
            if reader is None:
                served[-1] = False
            return reader
        with mock.patch.object(direct, 'connect', spy):
            fast = self.run_cli(*argv)
        self.assertEqual([True], served, argv)
        with mock.patch.object(direct, 'connect', return_value=None):
            slow = self.run_cli(*argv)
        self.assertEqual(slow, fast, argv)
        return fast

    def record_migrations(self):
        """Migrations of every shape a read words: history, refusals,
        results, convergence, reclaim, recovery, threads, devices, the
        queue."""
        guest = unit_base.make_instance()
        other = unit_base.make_instance()
        instances.create(self.db, guest)
        instances.create(self.db, other)
        done = migrations.create(self.db, unit_base.make_migration(
            guest.uuid), policy='nfv')
        migrations.add_refused_host(self.db, done.uuid, 'dst1',
                                    'NUMA topology does not fit')
        migration_satellites.set_prediction(self.db, done.uuid, {
            'prediction': 'needs-post-copy', 'predicted_elapsed_ms': 9000,
            'predicted_downtime_ms': 12,
            'sampled_dirty_rate': 150 * 2 ** 20})
        migration_satellites.set_reclaim(self.db, done.uuid, [{
            'host': 'dst', 'host_node': 1, 'instance_uuid': other.uuid,
            'cell': 0, 'before_mb': 512, 'after_mb': 256,
            'current_mb': None, 'released_mb': 256, 'outcome': 'kept'}])
        for status in ('queued', 'running'):
            migrations.set_status(self.db, done.uuid, status,
                                  detail=f'to {status}')
        migration_satellites.record_recovery(self.db, done.uuid, [
            {'event': 'link-lost', 'at': '2026-01-01T00:00:00',
             'attempt': 1, 'detail': 'stream broke'},
            {'event': 'recovered', 'at': '2026-01-01T00:00:02',
             'attempt': None, 'detail': None}])
        for side in ('source', 'dest'):
            migration_threads.record_threads(self.db, done.uuid, side,
                                             samples.THREADS[side])
        migration_satellites.record_devices(
            self.db, done.uuid, 'dst', samples.migration_devices().devices)
        migrations.set_status(self.db, done.uuid, 'completed', result={
            'emulated': False, 'elapsed_ms': 10032, 'downtime_ms': 6,
            'post_copy': True, 'paused': False,
            'convergence_actions': ['pre-copy', 'post-copy at 80%']})
        failed = migrations.create(self.db, unit_base.make_migration(
            other.uuid, dest_host='dst2'))
        for status in ('queued', 'running'):
            migrations.set_status(self.db, failed.uuid, status)
        migrations.set_status(self.db, failed.uuid, 'failed',
                              error='no host', result={'emulated': True,
                                                       'elapsed_ms': 5})
        waiting = []
        for priority in (0, 50, 50):
            guest = unit_base.make_instance()
            instances.create(self.db, guest)
            waiting.append(migrations.create(self.db, unit_base.make_migration(
                guest.uuid, priority=priority), max_queued=10).uuid)
        return done, failed, waiting

    def test_list_and_show_print_the_same(self):
        done, failed, waiting = self.record_migrations()
        for output in ('human', 'json'):
            code, out, _ = self.assert_same('migration', 'list', '--format',
                                            output)
            self.assertEqual(0, code)
            for uuid in [done.uuid, failed.uuid, *waiting]:
                self.assertIn(uuid, out)
            for argv in (['--status', 'failed'],
                         ['--instance', done.instance_uuid],
                         ['--host', 'dst2'], ['--status', 'accepted']):
                self.assertEqual(0, self.assert_same(
                    'migration', 'list', '--format', output, *argv)[0])
            for uuid in [done.uuid, failed.uuid, *waiting]:
                code, out, _ = self.assert_same('migration', 'show', uuid,
                                                '--format', output)
                self.assertEqual(0, code)
        out = self.assert_same('migration', 'show', done.uuid)[1]
        for shown in ('post-copy recovery', 'migration threads:',
                      'devices verified on dst: all 1 plugged',
                      'memory reclaimed to place it', 'dst1: NUMA',
                      'prediction: needs-post-copy', 'to running'):
            self.assertIn(shown, out)
        self.assertIn('queued #1', self.assert_same('migration', 'list')[1])

    def record_hosts(self):
        """Two hosts, one disabled, one with guests pinned and pages
        used (its usage recomputed from them, as an agent reports)."""
        from numamig.db import compute_nodes
        from numamig.numa import usage
        now = datetime.datetime.now(datetime.UTC)
        topology = unit_base.make_host_topology()
        guests = [unit_base.make_instance('src') for _ in range(2)]
        for guest in guests:
            instances.create(self.db, guest)
        topology = usage.host_with_usage(
            topology, [g.numa_topology for g in guests],
            on_conflict=lambda *a: None)
        for host, used in (('src', topology), ('dst', None)):
            overrides = {'topology': used} if used is not None else {}
            compute_nodes.save_report(self.db, unit_base.make_report(
                host, reported_at=now, **overrides))
        compute_nodes.set_disabled(self.db, 'dst', 'new DIMMs')

    def test_host_list_prints_the_same(self):
        self.assertIn('No compute host has reported yet',
                      self.assert_same('host', 'list')[1])
        self.record_hosts()
        # The reports' age, from their reported_at, at one instant for
        # both runs.
        frozen = datetime.datetime.now(datetime.UTC)
        real = host_cmd.report_age
        with mock.patch.object(host_cmd, 'report_age',
                               lambda report, now=None: real(report,
                                                             frozen)):
            for output in ('human', 'json'):
                code, out, _ = self.assert_same('host', 'list', '--format',
                                                output)
                self.assertEqual(0, code)
                self.assertIn('new DIMMs', out)

    def test_errors_are_the_same(self):
        unknown = unit_base.new_uuid()
        for output in ('human', 'json'):
            self.assertEqual(127, self.assert_same(
                'migration', 'show', unknown, '--format', output)[0])
            self.assertEqual(127, self.assert_same(
                'migration', 'list', '--host', 'nowhere', '--format',
                output)[0])

    def test_a_schema_behind_is_the_same_error(self):
        with self.db.writer() as session:
            session.execute(sa.text(
                "UPDATE alembic_version SET version_num = '0001'"))
        code, _, err = self.assert_same('migration', 'list')
        self.assertEqual(255, code)
        self.assertIn("run 'numamig-manage db sync'", err)

    def test_an_unreachable_database_is_the_same_error(self):
        url = self.db.url
        if self.backend == 'sqlite':
            url = url.set(database=url.database + '.missing')
        else:
            # A port nothing listens on.
            url = url.set(port=9)
        self.configure(url.render_as_string(hide_password=False))
        code, _, err = self.assert_same('migration', 'show',
                                        unit_base.new_uuid())
        self.assertEqual(255, code)
        self.assertTrue(err.startswith('error: Database '), err)

    def test_a_database_missing_on_its_server_is_the_same_error(self):
        if self.backend == 'sqlite':
            # A missing file: test_an_unreachable_database_...
            url = self.db.url.set(database=self.db.url.database + '.none')
        else:
            url = self.db.url.set(database='numamig_no_such_database')
        self.configure(url.render_as_string(hide_password=False))
        code, _, err = self.assert_same('host', 'list', '--format', 'json')
        self.assertEqual(255, code)
        self.assertTrue(err.startswith('error: Database '), err)
