"""numamig-manage db sync / version: output and exit codes."""

import contextlib
import io
import json
import os

import sqlalchemy as sa

from numamig.cmd import common
from numamig.cmd import manage
from numamig.db import api
from numamig.db import schema
from tests import base


class ManageDbTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.state = os.path.join(self.conf.conf.state_path, 'state')
        self.config = os.path.join(self.conf.conf.state_path, 'nm.conf')
        self._write_config(f'sqlite:///{self.state}/numamig.sqlite')

    def _write_config(self, connection):
        with open(self.config, 'w') as f:
            f.write(f"[database]\nconnection = {connection}\n")

    def _run(self, *argv):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(err):
            code = manage.main(['--config-file', self.config, 'db', *argv])
        return code, out.getvalue(), err.getvalue()

    def test_version_without_a_database_creates_none(self):
        # No configuration names the conductor's database: saying "run
        # db sync" would make the operator create a new, empty one.
        code, out, err = self._run('version')
        self.assertEqual(common.EXIT_UNEXPECTED, code)
        self.assertIn('there is no database file', err)
        self.assertNotIn('db sync', out + err)
        self.assertFalse(os.path.exists(self.state))

    def test_version_of_an_empty_database_says_to_sync(self):
        os.makedirs(self.state)
        open(os.path.join(self.state, 'numamig.sqlite'), 'w').close()
        code, out, _ = self._run('version')
        self.assertEqual(common.EXIT_NO, code)
        self.assertIn('revision none', out)
        self.assertIn("numamig-manage db sync", out)

    def test_sync_then_version_json(self):
        code, out, _ = self._run('sync')
        self.assertEqual(common.EXIT_OK, code)
        self.assertIn(f'none -> {schema.head()}', out)
        code, out, _ = self._run('version', '--format', 'json')
        self.assertEqual(common.EXIT_OK, code)
        data = json.loads(out)
        self.assertEqual((schema.head(), True),
                         (data['current'], data['up_to_date']))

    def test_version_behind_then_at_head(self):
        head = schema.head()
        self._run('sync', '--version', '0001')
        code, out, _ = self._run('version', '--format', 'json')
        self.assertEqual(common.EXIT_NO, code)
        self.assertEqual(('0001', head),
                         (json.loads(out)['current'], json.loads(out)['head']))
        code, out, _ = self._run('sync')
        self.assertIn(f'0001 -> {head}', out)
        code, out, _ = self._run('version')
        self.assertEqual(common.EXIT_OK, code)
        self.assertIn(head, out)

    def test_sync_to_a_release(self):
        code, out, _ = self._run('sync', '--version', 'release-1')
        self.assertEqual(common.EXIT_OK, code)
        self.assertIn('none -> 0001', out)
        code, out, _ = self._run('sync', '--version', 'release-2')
        self.assertEqual(common.EXIT_OK, code)
        self.assertIn(f'0001 -> {schema.head()}', out)

    def test_development_revision_says_to_recreate_in_one_line(self):
        # A database synced to one of release 2's development steps:
        # no revision upgrades it, so neither command touches it.
        self._run('sync', '--version', '0001')
        db = api.Database(f'sqlite:///{self.state}/numamig.sqlite')
        self.addCleanup(db.dispose)
        with db.writer() as session:
            session.execute(sa.text(
                "UPDATE alembic_version SET version_num = '0014'"))
        for command in ('sync', 'version'):
            code, out, err = self._run(command)
            self.assertEqual((common.EXIT_UNEXPECTED, ''), (code, out))
            self.assertEqual(
                f"error: Database sqlite:///{self.state}/numamig.sqlite: "
                "schema revision 0014 is a development step of release 2 "
                "that no release shipped and that cannot be upgraded: "
                "recreate the database (drop it, then run "
                "'numamig-manage db sync')\n", err)
        self.assertEqual('0014', db.version())

    def test_sync_json_names_previous_revision(self):
        self._run('sync')
        code, out, _ = self._run('sync', '--format', 'json')
        self.assertEqual(common.EXIT_OK, code)
        self.assertEqual(schema.head(), json.loads(out)['previous'])

    def test_unknown_revision_is_bad_input(self):
        code, _, err = self._run('sync', '--version', 'nope')
        self.assertEqual(common.EXIT_BAD_INPUT, code)
        self.assertIn("'nope'", err)
        self.assertIn('revision none', self._run('version')[1])

    def test_unreachable_database_is_unexpected(self):
        self._write_config('postgresql+psycopg2://u:pw@127.0.0.1:1/x')
        code, _, err = self._run('version')
        self.assertEqual(common.EXIT_UNEXPECTED, code)
        self.assertIn('127.0.0.1:1', err)
        self.assertNotIn(':pw@', err)
