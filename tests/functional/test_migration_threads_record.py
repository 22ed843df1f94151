"""Where a migration's threads ran, recorded through a real conductor
over fake:// and RabbitMQ (records API 2.0, release 2).

An agent's report is kept and read back by an operator as its own object
(MigrationThreads, operations API ``migration_get_satellites``); one out
of shape or too large is refused where it arrives, crossing the broker
as one numamig error, with nothing recorded; a client capped at release
1 sends nothing, and an operator's client capped there is refused the
read (release 1 recorded none).
"""

import time

from oslo_utils import uuidutils
import testscenarios

from numamig import embedded
from numamig import exception
from numamig import objects
from numamig.conductor import api_versions
from tests import base
from tests.fixtures import deployment
from tests.fixtures import rpc as rpc_fixture
from tests.unit.objects import samples

load_tests = testscenarios.load_tests_apply_scenarios

WAIT_S = 20


class RecordThreadsTestCase(base.TestCase):

    scenarios = rpc_fixture.TRANSPORT_SCENARIOS

    def setUp(self):
        super().setUp()
        hosts = [embedded.HostDefinition(name, 'numa-2cell-a.xml')
                 for name in ('host-a', 'host-b')]
        self.dep = self.useFixture(deployment.DeploymentFixture(
            self.transport_kind, hosts)).deployment
        self.api, self.ctxt = self.dep.api, self.dep.context
        # What the agents send: their records API.
        self.agents = self.dep.names.records_api(self.dep._transport,
                                                 timeout=30)
        uuid = uuidutils.generate_uuid()
        instance = self.api.instance_create(self.ctxt, objects.Instance(
            uuid=uuid, name=f'guest-{uuid[:8]}', project_id='demo',
            vcpus=2, memory_mb=1024,
            extra_specs={'hw:cpu_policy': 'dedicated'}), 'host-a')
        migration = self.api.live_migrate_instance(self.ctxt, instance.uuid,
                                                   'host-b')
        self.migration = self.dep.wait_for_migration(migration.uuid)

    def _threads(self):
        read = self.api.migration_get_satellites(
            self.ctxt, self.migration.uuid, ['threads'])
        self.assertEqual(['threads'], list(read))
        self.assertIsInstance(read['threads'], objects.MigrationThreads)
        self.assertEqual(self.migration.uuid, read['threads'].migration_uuid)
        return read['threads'].sides

    def _recorded(self, side):
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            found = self._threads()
            if found and side in found:
                return found
            time.sleep(0.05)
        self.fail(f"{side} not recorded within {WAIT_S} s")

    def test_both_sides_recorded_and_read_back(self):
        for side in ('source', 'dest'):
            self.assertTrue(self.agents.migration_record_threads(
                self.ctxt, self.migration.uuid, side,
                samples.THREADS[side]))
        self._recorded('source')
        self.assertEqual(samples.THREADS, self._recorded('dest'))

    def test_an_oversized_record_is_refused_over_the_wire(self):
        too_many = dict(samples.THREADS['source'], threads={
            f'multifdsend_{i}': [1] for i in range(65)})
        client = self.agents.link.route(
            api_versions.RECORDS, self.agents.agent_topic).client.prepare(
            version=api_versions.RECORDS.version)
        exc = self.assertRaises(
            exception.InvalidRPCArgument, client.call, self.ctxt,
            'migration_record_threads', migration_uuid=self.migration.uuid,
            side='source', record=too_many)
        self.assertIn('record', str(exc))
        self.assertIn('at most 64 threads', str(exc))
        self.assertRaises(exception.InvalidRPCArgument, client.call,
                          self.ctxt, 'migration_record_threads',
                          migration_uuid=self.migration.uuid,
                          side='elsewhere',
                          record=samples.THREADS['source'])
        self.assertEqual({}, self._threads())

    def test_a_client_capped_at_release_1_neither_sends_nor_reads_it(self):
        self.agents.migration_record_threads(self.ctxt, self.migration.uuid,
                                          'source', samples.THREADS['source'])
        self._recorded('source')
        capped = self.dep.names.records_api(self.dep._transport,
                                            version_cap='release-1')
        self.assertFalse(capped.migration_record_threads(
            self.ctxt, self.migration.uuid, 'dest',
            samples.THREADS['dest']))
        read = capped.migration_get(self.ctxt, self.migration.uuid)
        self.assertEqual('1.0', read.VERSION)
        self.assertEqual({'source'}, set(self._threads()))
        operator = self.dep.names.conductor_api(self.dep._transport,
                                                version_cap='release-1')
        exc = self.assertRaises(
            exception.Invalid, operator.migration_get_satellites,
            self.ctxt, self.migration.uuid, ['threads'])
        self.assertIn("satellite records", str(exc))

    def test_an_unknown_satellite_is_refused_over_the_wire(self):
        exc = self.assertRaises(
            exception.InvalidRPCArgument, self.api.migration_get_satellites,
            self.ctxt, self.migration.uuid, ['colour'])
        self.assertIn('reclaim, threads', str(exc))
