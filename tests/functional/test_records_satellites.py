"""An agent's read of a migration with its satellite records through a
real conductor over fake:// and RabbitMQ (records API 2.0,
``migration_get_with_satellites``).

A compute agent resuming a post-copy reads the migration with its
MigrationConvergence and MigrationRecovery in one round trip; a
satellite only operators read is refused where it arrives, as one
numamig error; a client capped at release 1 sends nothing and the agent
reads ``migration_get`` instead, with the satellites empty (release 1
records neither).
"""

from unittest import mock

import oslo_messaging as messaging
from oslo_utils import uuidutils
import testscenarios

from numamig import embedded
from numamig import exception
from numamig import objects
from numamig.compute import postcopy_paused
from numamig.db import migration_satellites
from numamig.db import migrations
from tests import base
from tests.fixtures import deployment
from tests.fixtures import rpc as rpc_fixture

load_tests = testscenarios.load_tests_apply_scenarios

HISTORY = [{'event': 'link-lost', 'at': '2026-11-28T10:00:00+00:00',
            'attempt': None, 'detail': 'stream broke'},
           {'event': 'gave-up', 'at': '2026-11-28T10:10:00+00:00',
            'attempt': '20', 'detail': '20 resume attempts failed'}]


class MigrationWithSatellitesTestCase(base.TestCase):

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
        # A migration as a broken post-copy leaves it: recorded with its
        # policy, running, its recovery history reported by the source.
        self.uuid = migrations.create(self.dep.db, objects.Migration(
            uuid=uuidutils.generate_uuid(), instance_uuid=instance.uuid,
            source_host='host-a', dest_host='host-b'), policy='nfv').uuid
        for status in ('queued', 'preparing', 'running'):
            migrations.set_status(self.dep.db, self.uuid, status)
        migration_satellites.record_recovery(self.dep.db, self.uuid,
                                             HISTORY)

    def test_the_migration_and_both_satellites_in_one_call(self):
        migration, found = self.agents.migration_get_with_satellites(
            self.ctxt, self.uuid, ('convergence', 'recovery'))
        self.assertIsInstance(migration, objects.Migration)
        self.assertEqual((self.uuid, 'running', '1.1'),
                         (migration.uuid, migration.status,
                          migration.VERSION))
        self.assertEqual(['convergence', 'recovery'], sorted(found))
        self.assertIsInstance(found['convergence'],
                              objects.MigrationConvergence)
        self.assertEqual(('nfv', None), (found['convergence'].policy,
                                         found['convergence'].actions))
        self.assertEqual(HISTORY, found['recovery'].events)
        # Only what is asked.
        _migration, found = self.agents.migration_get_with_satellites(
            self.ctxt, self.uuid, ['recovery'])
        self.assertEqual(['recovery'], list(found))

    def test_an_operators_satellite_is_refused_over_the_wire(self):
        for names in (['prediction'], ['threads', 'recovery'],
                      ['recovery'] * 3):
            exc = self.assertRaises(
                exception.InvalidRPCArgument,
                self.agents.migration_get_with_satellites, self.ctxt,
                self.uuid, names)
            self.assertIn('convergence, recovery', str(exc), names)
        self.assertRaises(
            exception.MigrationNotFound,
            self.agents.migration_get_with_satellites, self.ctxt,
            uuidutils.generate_uuid(), ['convergence'])

    def test_a_client_capped_at_release_1_reads_migration_get(self):
        capped = self.dep.names.records_api(self.dep._transport,
                                            version_cap='release-1')
        self.assertRaises(messaging.UnsupportedVersion,
                          capped.migration_get_with_satellites, self.ctxt,
                          self.uuid, ['convergence'])
        # The agent's fallback: release 1's read, no satellites.
        agent = mock.Mock(conductor_api=capped)
        migration, found = postcopy_paused.read_with_satellites(
            agent, self.ctxt, self.uuid, postcopy_paused.RESUME_READS)
        self.assertEqual(('1.0', self.uuid),
                         (migration.VERSION, migration.uuid))
        self.assertEqual(
            {'convergence': objects.MigrationConvergence(
                migration_uuid=self.uuid),
             'recovery': objects.MigrationRecovery(
                 migration_uuid=self.uuid)}, found)
