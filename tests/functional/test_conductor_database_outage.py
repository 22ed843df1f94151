"""A conductor whose database is out, asked over RabbitMQ.

Each request that meets the outage is answered with numamig's
DatabaseError (the caller can tell an outage from a refusal and ask
again) and costs the conductor's log one warning line naming the method
and the database error, not a traceback per request.
"""

import logging

import fixtures
import oslo_messaging as messaging

from numamig import exception
from numamig import rpc
from numamig.conductor import api_versions
from numamig.conductor import manager
from numamig.conductor import settings
from numamig.conf import CONF
from numamig.db import api as db_api
from numamig.scheduler import host_state
from numamig.scheduler import scheduler
from tests import base
from tests.fixtures import rpc as rpc_fixture
from tests.unit.compute import base as cbase

# Nothing listens there: every transaction fails to connect.
UNREACHABLE = 'postgresql+psycopg2://numamig@127.0.0.1:1/numamig'


class DatabaseOutageOverRabbitTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.rpc = self.useFixture(rpc_fixture.RPCFixture('rabbit'))
        self.log = self.useFixture(fixtures.FakeLogger(
            level=logging.DEBUG, format='%(levelname)s %(name)s %(message)s'))
        db = db_api.Database(UNREACHABLE)
        self.addCleanup(db.dispose)
        cache = host_state.HostStateCache()
        self.flags(migrate_max_retries=0, rpc_response_timeout_migration=5)
        conductor = manager.ConductorManager(
            db, cache, scheduler.Scheduler(cache), compute_api=None,
            settings=settings.from_conf(CONF))
        topic = self.rpc.topic('conductor')
        self.rpc.start_server([conductor, conductor.records], topic)
        # An operator's read and an agent's record, each on its API.
        self.operations, self.records = (
            rpc.get_client(self.rpc.transport, messaging.Target(
                exchange=self.rpc.exchange, topic=topic, server='host1',
                namespace=api.namespace, version=api.version)).prepare(
                timeout=rpc_fixture.CALL_TIMEOUT)
            for api in (api_versions.OPERATIONS, api_versions.RECORDS))

    def test_each_request_gets_numamig_error_and_one_warning_line(self):
        uuid = cbase.new_uuid()
        exc = self.assertRaises(
            exception.DatabaseError, self.operations.call, self.rpc.context,
            'migration_get', migration_uuid=uuid)
        self.assertIn('127.0.0.1:1', str(exc))
        self.assertRaises(
            exception.DatabaseError, self.records.call, self.rpc.context,
            'migration_set_status', migration_uuid=uuid, status='running')
        lines = self.log.output.splitlines()
        warnings = [line for line in lines if line.startswith('WARNING')]
        self.assertEqual(
            ['migration_get', 'migration_set_status'],
            [line.split()[2] for line in warnings], self.log.output)
        for line in warnings:
            self.assertIn('not served: Database postgresql', line)
        self.assertNotIn('Traceback', self.log.output)
        self.assertEqual([], [line for line in lines
                              if line.startswith(('ERROR', 'CRITICAL'))])
