"""What one live migration costs the control plane: RPCs and wall time.

Counts every RPC call and cast one migration makes, from the operator's
request to the source's ``completed``, on the embedded tier (emulated
migration, so the time is the control plane's alone), and prints the
wall time. The count is exact: a new round trip must be a decision, so
this test fails until the expected table below is updated.
"""

import collections
import time

import fixtures
from oslo_messaging.rpc import client as rpc_client
from oslo_utils import uuidutils
import testscenarios

from numamig import embedded
from numamig import objects
from numamig.db import migrations
from tests import base
from tests.fixtures import deployment
from tests.fixtures import rpc as rpc_fixture

load_tests = testscenarios.load_tests_apply_scenarios

# method -> (calls, casts) of one NUMA-aware emulated migration.
EXPECTED = {
    'live_migrate_instance': (1, 0),
    'check_can_live_migrate_destination': (1, 0),
    'check_can_live_migrate_source': (1, 0),
    'migration_context_set': (1, 0),
    'live_migration': (0, 1),
    'migration_set_status': (4, 0),
    'pre_live_migration': (1, 0),
    'accept_emulated_migration': (1, 0),
    'post_live_migration_at_destination': (1, 0),
    'migration_context_apply': (1, 0),
    # Destination and source report at once, so that operators' views of
    # both hosts are current when the migration is seen completed.
    'report_compute_node': (2, 0),
}


class ControlPlaneCostTest(base.TestCase):

    scenarios = rpc_fixture.TRANSPORT_SCENARIOS

    def setUp(self):
        super().setUp()
        hosts = [embedded.HostDefinition(name, 'numa-2cell-a.xml')
                 for name in ('host-a', 'host-b')]
        self.dep = self.useFixture(deployment.DeploymentFixture(
            self.transport_kind, hosts)).deployment
        self.counts = collections.defaultdict(lambda: [0, 0])
        self._patch('call', 0)
        self._patch('cast', 1)

    def _patch(self, kind, index):
        original = getattr(rpc_client._BaseCallContext, kind)
        counts = self.counts

        def counted(cctxt, ctxt, method, **kwargs):
            counts[method][index] += 1
            return original(cctxt, ctxt, method, **kwargs)
        self.useFixture(fixtures.MonkeyPatch(
            f'oslo_messaging.rpc.client._BaseCallContext.{kind}', counted))

    def test_one_migration(self):
        api, ctxt = self.dep.api, self.dep.context
        guest = api.instance_create(ctxt, objects.Instance(
            uuid=uuidutils.generate_uuid(), name='cost', project_id='demo',
            vcpus=2, memory_mb=1024,
            extra_specs={'hw:cpu_policy': 'dedicated'}), 'host-a')
        self.counts.clear()
        started = time.monotonic()
        migration = api.live_migrate_instance(ctxt, guest.uuid, 'host-b')
        while migration.status != 'completed':
            self.assertNotIn(migration.status, ('failed', 'error'))
            time.sleep(0.005)
            # Straight from the database: polling over RPC would count.
            migration = migrations.get(self.dep.db, migration.uuid)
        elapsed = time.monotonic() - started
        counted = {m: tuple(c) for m, c in self.counts.items()}
        self.assertEqual(EXPECTED, counted)
        calls = sum(c for c, _ in counted.values())
        casts = sum(c for _, c in counted.values())
        print(f"one migration over {self.transport_kind}: {calls} RPC "
              f"calls + {casts} cast, {elapsed * 1000:.0f} ms wall time")

