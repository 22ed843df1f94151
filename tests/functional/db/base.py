"""Functional persistence tests: one fresh database per test per server."""

import testscenarios

from tests import base
from tests.fixtures import database

BACKENDS = [('postgresql', {'backend': 'postgresql'}),
            ('mariadb', {'backend': 'mysql'})]


class ServerDBTestCase(testscenarios.WithScenarios, base.TestCase):
    """Runs each test on PostgreSQL and on MariaDB, in its own database.

    A server that cannot be reached skips its half with the reason.
    """

    scenarios = BACKENDS
    sync = True

    def setUp(self):
        super().setUp()
        database.server_or_skip(self, self.backend)
        self.fixture = self.useFixture(
            database.ServerDatabase(self.backend, sync=self.sync))
        self.db = self.fixture.db
