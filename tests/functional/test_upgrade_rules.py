"""The rules around the upgrade matrix, on the embedded tier and over RPC.

* A conductor of the current release refuses NUMA guests while a
  compute host is older, naming it, unless [workarounds]
  enable_numa_live_migration is set (then it warns and proceeds).
* ``[upgrade_levels] compute`` below 1.1 silently selects the old path
  even in a fully upgraded cloud (numamig-status warns about it).
* An agent running as the release before answers newer messages exactly
  as that release's RPC server would: UnsupportedVersion for API 1.1,
  NoSuchMethod for the drop it did not have, and a refusal naming any
  object newer than it reads; over fake:// and RabbitMQ alike.
"""

import logging

import fixtures
import oslo_messaging as messaging
from oslo_utils import uuidutils
import testscenarios

from numamig import embedded
from numamig import exception
from numamig import objects
from numamig import releases
from numamig import rpc
from numamig.compute import rpcapi as compute_rpcapi
from tests import base
from tests.fixtures import deployment
from tests.fixtures import rpc as rpc_fixture
from tests.unit.compute import base as cbase
from tests.unit.objects import samples

load_tests = testscenarios.load_tests_apply_scenarios

SHARED = frozenset({0, 8, 4, 12})


def _host(name, version=2):
    return embedded.HostDefinition(name, 'numa-2cell-a.xml',
                                   cpu_shared_set=SHARED,
                                   service_version=version)


# Any well-formed UUID: the endpoints refuse anything else (numamig.wire).
GUEST_UUID = '7b1c2d3e-4f50-4a6b-8c7d-9e0f1a2b3c4d'

class EmbeddedRulesTestCase(base.TestCase):

    def start(self, hosts, workaround=False, **kwargs):
        self.logs = self.useFixture(fixtures.FakeLogger(
            name='numamig', level=logging.INFO))
        self.flags(group='workarounds', enable_numa_live_migration=workaround)
        self.dep = self.useFixture(deployment.DeploymentFixture(
            'fake', hosts, **kwargs)).deployment
        uuid = uuidutils.generate_uuid()
        self.guest = self.dep.api.instance_create(
            self.dep.context, objects.Instance(
                uuid=uuid, name=f'guest-{uuid[:8]}', project_id='demo',
                vcpus=2, memory_mb=1024,
                extra_specs={'hw:cpu_policy': 'dedicated'}), 'src')

    def migrate(self):
        migration = self.dep.api.live_migrate_instance(
            self.dep.context, self.guest.uuid, 'dst')
        return self.dep.wait_for_migration(migration.uuid)


class ConductorRefusalTest(EmbeddedRulesTestCase):

    def test_refused_naming_the_old_host(self):
        self.start([_host('src'), _host('dst'), _host('old-one', 1)])
        exc = self.assertRaises(exception.NUMALiveMigrationUnsupported,
                                self.migrate)
        self.assertIn('old-one', str(exc))
        self.assertIn('enable_numa_live_migration', str(exc))
        record = self.dep.api.instance_get(self.dep.context, self.guest.uuid)
        self.assertEqual(('src', None), (record.host,
                                         record.migration_context))
        self.assertEqual([], self.dep.agent('dst').tracker.claims())

    def test_workaround_warns_and_migrates(self):
        self.start([_host('src'), _host('dst'), _host('old-one', 1)],
                   workaround=True)
        migration = self.migrate()
        self.assertEqual('completed', migration.status, migration.error)
        self.assertIn('while hosts old-one are older than NUMA-aware live '
                      'migration', self.logs.output)


class UpgradeLevelsPinTest(EmbeddedRulesTestCase):

    def test_cap_below_1_1_selects_the_old_path(self):
        self.start([_host('src'), _host('dst')],
                   conductor_compute_version_cap='1.0')
        migration = self.migrate()
        self.assertEqual('completed', migration.status, migration.error)
        self.assertIn('old path for the destination NUMA objects and claim: '
                      'the conductor sent compute API 1.0', self.logs.output)
        self.assertIn('old path for the source XML', self.logs.output)
        record = self.dep.api.instance_get(self.dep.context, self.guest.uuid)
        # The XML was copied: the guest keeps its source pins.
        self.assertEqual(self.guest.numa_topology.cpu_pinning,
                         record.numa_topology.cpu_pinning)


class OldAgentServerTest(base.TestCase):
    """An agent of release 1 behind a real RPC server."""

    scenarios = rpc_fixture.TRANSPORT_SCENARIOS

    def setUp(self):
        super().setUp()
        self.rpc = self.useFixture(rpc_fixture.RPCFixture(
            self.transport_kind))
        old = releases.RELEASES[1]
        self.agent = cbase.manager()
        self.agent.driver.get_domain_xml.return_value = '<domain/>'
        topic = self.rpc.topic('compute')
        server = rpc.get_server(
            self.rpc.transport, self.rpc.target(topic, server='old'),
            releases.endpoints_for(self.agent, old),
            version_manifest=old.object_versions,
            known_versions=old.object_versions)
        self.rpc._queues.update({topic, f'{topic}.old'})
        server.start()
        self.addCleanup(server.wait)
        self.addCleanup(server.stop)
        self.topic = topic

    def client(self, version):
        return self.rpc.client(self.topic, server='old', version=version)

    def test_serves_api_1_0(self):
        self.assertEqual('<domain/>', self.client('1.0').call(
            self.rpc.context, 'get_domain_xml', instance_uuid=GUEST_UUID))

    def test_refuses_api_1_1(self):
        self.assertRaises(messaging.UnsupportedVersion,
                          self.client('1.1').call, self.rpc.context,
                          'get_domain_xml', instance_uuid=GUEST_UUID)

    def test_has_no_drop_method(self):
        inst = cbase.instance()
        self.assertRaises(messaging.NoSuchMethod, self.client('1.0').call,
                          self.rpc.context, 'drop_move_claim_at_destination',
                          instance=inst, migration=cbase.migration(inst))
        self.agent.conductor_api.migration_context_drop.assert_not_called()

    def test_refuses_a_newer_object(self):
        exc = self.assertRaises(
            exception.ObjectValidationError, self.client('1.0').call,
            self.rpc.context, 'pre_live_migration',
            instance=cbase.instance(),
            migrate_data=samples.live_migrate_data())
        self.assertIn(f'LiveMigrateData: version '
                      f'{objects.LiveMigrateData.VERSION} is newer than 1.0',
                      str(exc))

    def test_new_client_sends_it_1_0_as_its_version_says(self):
        # The agent reports service version 1: the new client sends it
        # API 1.0 at once (the server above would refuse anything newer).
        api = compute_rpcapi.ComputeAPI(self.rpc.transport, topic=self.topic,
                                        exchange=self.rpc.exchange,
                                        peer_versions={'old': 1}.get)
        self.assertEqual('<domain/>', api.get_domain_xml(
            self.rpc.context, 'old', GUEST_UUID))
        self.agent.driver.list_guests.return_value = {}
        inst = cbase.instance(host='old')
        self.assertRaisesMessage(
            exception.MigrationPreCheckError, 'not running on source host',
            api.check_can_live_migrate_source, self.rpc.context, inst,
            samples.live_migrate_data())
