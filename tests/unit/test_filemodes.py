"""Modes of the files numamig writes (numamig.filemodes)."""

import os
import stat

import fixtures

from numamig import filemodes
from numamig.db import api as db_api
from tests import base


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


class FileModesTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        # The usual umask: without numamig's modes everything is 0644.
        os.umask(old := os.umask(0o022))
        self.addCleanup(os.umask, old)

    def test_sqlite_database_and_its_directory_are_private(self):
        path = os.path.join(self.dir, 'state', 'numamig.sqlite')
        db = db_api.Database(f'sqlite:///{path}')
        self.addCleanup(db.dispose)
        db.engine.connect().close()
        self.assertEqual(0o600, mode(path))
        self.assertEqual(0o750, mode(os.path.dirname(path)))

    def test_an_existing_database_keeps_its_mode(self):
        path = os.path.join(self.dir, 'numamig.sqlite')
        open(path, 'w').close()
        os.chmod(path, 0o640)
        db = db_api.Database(f'sqlite:///{path}')
        self.addCleanup(db.dispose)
        self.assertEqual(0o640, mode(path))

    def test_log_file_is_created_0640_in_log_dir(self):
        conf = type('Conf', (), {'log_file': 'compute.log',
                                 'log_dir': os.path.join(self.dir, 'log')})
        filemodes.prepare_log_file(conf)
        self.assertEqual(0o640, mode(os.path.join(self.dir, 'log',
                                                  'compute.log')))

    def test_no_log_file_creates_nothing(self):
        filemodes.prepare_log_file(type('Conf', (), {'log_file': None,
                                                     'log_dir': self.dir}))
        self.assertEqual([], os.listdir(self.dir))

    def test_private_write_narrows_an_older_copy(self):
        path = os.path.join(self.dir, 'conductor.conf')
        with open(path, 'w') as f:
            f.write('old')
        os.chmod(path, 0o644)
        filemodes.write_private(path, 'transport_url = rabbit://u:p@mq//')
        self.assertEqual(0o600, mode(path))
        with open(path) as f:
            self.assertEqual('transport_url = rabbit://u:p@mq//', f.read())

    def _conf_file(self, text, file_mode):
        path = os.path.join(self.dir, f'{len(os.listdir(self.dir))}.conf')
        with open(path, 'w') as f:
            f.write(text)
        os.chmod(path, file_mode)
        return path

    def test_readable_passwords_are_warned_about(self):
        secret = self._conf_file(
            '[database]\nconnection = postgresql://nm:pw@db/nm\n', 0o644)
        private = self._conf_file(
            '[DEFAULT]\ntransport_url = rabbit://nm:pw@mq//\n', 0o640)
        no_password = self._conf_file(
            '[DEFAULT]\ntransport_url = rabbit://mq//\n', 0o644)
        conf = type('Conf', (), {'config_file': [secret, private,
                                                 no_password]})
        with self.assertLogs(filemodes.__name__, 'WARNING') as logs:
            self.assertEqual([secret], filemodes.warn_readable_secrets(conf))
        self.assertIn(f'{secret} holds a password', logs.output[0])
        self.assertIn('mode 0644', logs.output[0])
