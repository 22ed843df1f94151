"""The destination's verification of a guest's passed-through devices,
recorded through a real conductor over inproc:// and RabbitMQ (records
API 2.0, ``migration_record_devices``, release 2).

The verification is kept once (a redelivered cast changes nothing) and
read back by an operator as its own object (MigrationDevices, operations
API ``migration_get_satellites``); one out of shape is refused where it
arrives, crossing the broker as one numamig error, with nothing
recorded; a client capped at release 1 sends nothing.
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

load_tests = testscenarios.load_tests_apply_scenarios

WAIT_S = 20
NIC = {'alias': 'nic', 'address': '0000:82:00.0', 'guest_cell': '1',
       'cell_nodes': '1', 'device_node': '1', 'plugged': 'yes',
       'local': 'yes'}
GPU_ASTRAY = {'alias': 'gpu', 'address': '0000:03:00.0', 'guest_cell': '0',
              'cell_nodes': '0', 'device_node': '1', 'plugged': 'yes',
              'local': 'no'}


class RecordDevicesTestCase(base.TestCase):

    scenarios = rpc_fixture.TRANSPORT_SCENARIOS

    def setUp(self):
        super().setUp()
        hosts = [embedded.HostDefinition(name, 'numa-2cell-a.xml')
                 for name in ('host-a', 'host-b')]
        self.dep = self.useFixture(deployment.DeploymentFixture(
            self.transport_kind, hosts)).deployment
        self.api, self.ctxt = self.dep.api, self.dep.context
        # What the destination agent sends: its records API.
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

    def _devices(self):
        read = self.api.migration_get_satellites(
            self.ctxt, self.migration.uuid, ['devices'])
        self.assertEqual(['devices'], list(read))
        self.assertIsInstance(read['devices'], objects.MigrationDevices)
        return read['devices']

    def _recorded(self, count):
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            found = self._devices()
            if len(found.devices) == count:
                return found
            time.sleep(0.05)
        self.fail(f"{count} device(s) not recorded within {WAIT_S} s")

    def test_recorded_once_and_read_back(self):
        for _ in range(2):
            # The second: a redelivered arrival verifies again.
            self.assertTrue(self.agents.migration_record_devices(
                self.ctxt, self.migration.uuid, 'host-b',
                [NIC, GPU_ASTRAY]))
        found = self._recorded(2)
        self.assertEqual(('host-b', [NIC, GPU_ASTRAY], False),
                         (found.host, found.devices, found.all_local))

    def test_an_unusable_record_is_refused_over_the_wire(self):
        client = self.agents.link.route(
            api_versions.RECORDS, self.agents.agent_topic).client.prepare(
            version=api_versions.RECORDS.version)
        exc = self.assertRaises(
            exception.InvalidRPCArgument, client.call, self.ctxt,
            'migration_record_devices', migration_uuid=self.migration.uuid,
            host='host-b', devices=[dict(NIC, local='perhaps')])
        self.assertIn('devices', str(exc))
        self.assertRaises(exception.InvalidRPCArgument, client.call,
                          self.ctxt, 'migration_record_devices',
                          migration_uuid=self.migration.uuid,
                          host='host-b', devices=[NIC] * 65)
        self.assertEqual([], self._devices().devices)

    def test_a_client_capped_at_release_1_sends_nothing(self):
        capped = self.dep.names.records_api(self.dep._transport,
                                            version_cap='release-1')
        self.assertFalse(capped.migration_record_devices(
            self.ctxt, self.migration.uuid, 'host-b', [NIC]))
        # What an uncapped client sends after it is recorded: the capped
        # one's never arrived before it.
        self.agents.migration_record_devices(
            self.ctxt, self.migration.uuid, 'host-b', [GPU_ASTRAY])
        self.assertEqual([GPU_ASTRAY], self._recorded(1).devices)
