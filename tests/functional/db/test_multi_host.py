"""A PostgreSQL primary found among several hosts by libpq itself.

The deployment guide's HA section names the connection string a
conductor uses with a primary and a standby: libpq's multi-host form,
``?host=A:port&host=B:port&target_session_attrs=read-write``, which
tries each host and keeps the first that takes writes. Here the first
host listed is an address nobody listens on (a primary that is gone),
the second this machine's server: numamig's database layer, its direct
reads and its schema check must all reach the second.
"""

import socket
import subprocess
import sys

import fixtures
import sqlalchemy as sa

from numamig.db import api
from numamig.db import compute_nodes
from tests import base
from tests.fixtures import database


def _closed_port():
    with socket.socket() as probe:
        probe.bind(('127.0.0.1', 0))
        return probe.getsockname()[1]


class MultiHostTest(base.TestCase):

    def setUp(self):
        super().setUp()
        database.server_or_skip(self, 'postgresql')
        self.server = self.useFixture(database.ServerDatabase('postgresql'))
        live = sa.engine.make_url(self.server.url)
        gone = _closed_port()
        self.url = live.set(host=None, port=None, query={
            'host': [f'127.0.0.1:{gone}', f'{live.host}:{live.port or 5432}'],
            'target_session_attrs': 'read-write'}).render_as_string(
            hide_password=False)

    def test_the_layer_reaches_the_host_that_takes_writes(self):
        db = api.Database(self.url)
        self.addCleanup(db.dispose)
        db.check_schema()
        self.assertEqual([], compute_nodes.get_all(db))
        with db.writer() as session:
            self.assertFalse(session.execute(sa.text(
                'SELECT pg_is_in_recovery()')).scalar())

    def test_an_operators_read_reaches_it_too(self):
        conf = self.useFixture(fixtures.TempDir()).join('numamig.conf')
        with open(conf, 'w') as f:
            f.write(f'[database]\nconnection = {self.url}\n')
        run = subprocess.run(
            [sys.executable, '-m', 'numamig.cmd.manage', '--config-file',
             conf, 'host', 'list', '--format', 'json'],
            capture_output=True, text=True, timeout=60)
        self.assertEqual(0, run.returncode, run.stdout + run.stderr)
        self.assertIn('"hosts": []', run.stdout)
