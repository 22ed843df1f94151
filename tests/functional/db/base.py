"""Functional persistence tests: one fresh database per test per server."""

import testscenarios

from tests import base
from tests.fixtures import database

BACKENDS = [('postgresql', {'backend': 'postgresql'}),
            ('mariadb', {'backend': 'mysql'}),
            ('sqlite', {'backend': 'sqlite'})]


class ServerDBTestCase(testscenarios.WithScenarios, base.TestCase):
    """Runs each test on PostgreSQL, MariaDB and SQLite (the embedded
    default), each time in a database of its own.

    A server that cannot be reached skips its tests with the reason.
    """

    scenarios = BACKENDS
    sync = True

    def setUp(self):
        super().setUp()
        if self.backend == 'sqlite':
            fixture = database.SQLiteDatabase(sync=self.sync)
        else:
            database.server_or_skip(self, self.backend)
            fixture = database.ServerDatabase(self.backend, sync=self.sync)
        self.db = self.useFixture(fixture).db
