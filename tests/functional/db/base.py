"""Functional persistence tests: one fresh database per test per server."""

import testscenarios

from numamig.db import instances
from numamig.db import migrations
from tests import base
from tests.fixtures import database
from tests.unit.db import base as unit_base

BACKENDS = [('postgresql', {'backend': 'postgresql'}),
            ('mariadb', {'backend': 'mysql'}),
            ('sqlite', {'backend': 'sqlite'})]
# What only a database server does (SQLite serializes its writers).
SERVERS = [scenario for scenario in BACKENDS if scenario[0] != 'sqlite']


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


class RunningMigrationTestCase(ServerDBTestCase):
    """As ServerDBTestCase, with one migration recorded ``running``
    (``self.uuid``): what a source reports on while its job runs."""

    def setUp(self):
        super().setUp()
        instance = unit_base.make_instance()
        instances.create(self.db, instance)
        self.uuid = migrations.create(self.db, unit_base.make_migration(
            instance.uuid)).uuid
        for status in ('queued', 'running'):
            migrations.set_status(self.db, self.uuid, status)
