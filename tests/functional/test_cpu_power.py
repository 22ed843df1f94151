"""CPU power management across live migrations, on the embedded tier.

Two test-driver hosts (2 cells x 4 cores x 2 threads: pCPUs 0-15, the
shared ones 0,8,4,12), each with ``[compute] cpu_power_management`` on
(strategy cpu_state) and a sysfs tree of its own (tests.fixtures.
sysfs_cpus) that its agent writes for real. A real conductor and real
agents over fake:// and RabbitMQ; what is checked is what the sysfs
files say, read back, not numamig's records:

- at start every dedicated pCPU no guest pins is offline;
- the destination's claimed pCPUs are online when the guest arrives
  (read at the moment the destination starts it);
- after the move the source's are offline again;
- a migration that fails at the destination leaves its claimed pCPUs
  offline again (rollback), the source's guest running on online ones;
- an agent restarted after a pCPU of its guest was taken offline behind
  its back (a crash mid-change) brings it online at start.
"""

import time

import fixtures
from oslo_utils import uuidutils
import testscenarios

from numamig import embedded
from numamig import exception
from numamig import objects
from numamig.compute import settings as compute_settings
from numamig.db import compute_nodes
from tests import base
from tests.fixtures import deployment
from tests.fixtures import rpc as rpc_fixture
from tests.fixtures import sysfs_cpus

load_tests = testscenarios.load_tests_apply_scenarios

SHARED = frozenset({0, 8, 4, 12})
DEDICATED = frozenset(range(16)) - SHARED


class CPUPowerMigrationTestCase(base.TestCase):

    scenarios = rpc_fixture.TRANSPORT_SCENARIOS

    def setUp(self):
        super().setUp()
        self.sysfs = {}
        hosts = []
        for name in ('host-a', 'host-b'):
            tree = self.sysfs[name] = self.useFixture(
                sysfs_cpus.SysfsCPUs(16))
            power = compute_settings.CPUPowerSettings(
                strategy='cpu_state',
                cpu_dedicated_set=','.join(map(str, sorted(DEDICATED))),
                governor_low='powersave', governor_high='performance',
                sysfs_root=tree.root)
            hosts.append(embedded.HostDefinition(
                name, 'numa-2cell-a.xml', cpu_shared_set=SHARED,
                cpu_power=power))
        self.dep = self.useFixture(deployment.DeploymentFixture(
            self.transport_kind, hosts)).deployment
        self.api, self.ctxt = self.dep.api, self.dep.context

    def create(self, host_name):
        uuid = uuidutils.generate_uuid()
        return self.api.instance_create(self.ctxt, objects.Instance(
            uuid=uuid, name=f'guest-{uuid[:8]}', project_id='demo',
            vcpus=2, memory_mb=1024,
            extra_specs={'hw:cpu_policy': 'dedicated'}), host_name)

    def pins(self, instance):
        record = self.api.instance_get(self.ctxt, instance.uuid)
        return set().union(*(c.cpu_pinning.values()
                             for c in record.numa_topology.cells)), record

    def offline(self, host_name):
        return self.sysfs[host_name].offline()

    def settled(self, host_name, wanted, timeout=10.0):
        """``host_name``'s offline pCPUs once they are ``wanted``, or as
        they are after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while self.offline(host_name) != wanted and \
                time.monotonic() < deadline:
            time.sleep(0.05)
        return self.offline(host_name)

    def watch_arrival(self, host_name, fail=False):
        """Read ``host_name``'s offline pCPUs when its driver starts an
        arriving guest; ``fail``: then refuse it (the move rolls back)."""
        seen = []
        driver = self.dep.agent(host_name).driver
        accept = driver.accept_emulated_migration

        def watched(instance_uuid, dest_xml):
            seen.append(self.offline(host_name))
            if fail:
                raise exception.HypervisorError(
                    host=host_name, action='start the arriving guest',
                    reason="refused by the test")
            return accept(instance_uuid, dest_xml)
        self.useFixture(fixtures.MockPatchObject(
            driver, 'accept_emulated_migration', watched))
        return seen

    def test_start_offlines_every_unused_dedicated_pcpu(self):
        for name in ('host-a', 'host-b'):
            self.assertEqual(set(DEDICATED), self.offline(name))
        self.dep.report_all()
        report = compute_nodes.get(self.dep.db, 'host-a')
        self.assertEqual('cpu_state', report.cpu_power.strategy)
        self.assertEqual(set(DEDICATED), set().union(
            *(c.powered_down for c in report.cpu_power.cells)))

    def test_move_powers_the_destination_up_first_the_source_down_after(self):
        guest = self.create('host-a')
        source_pins, _ = self.pins(guest)
        self.assertEqual(DEDICATED - source_pins, self.offline('host-a'))
        seen = self.watch_arrival('host-b')
        migration = self.api.live_migrate_instance(self.ctxt, guest.uuid,
                                                   'host-b')
        ended = self.dep.wait_for_migration(migration.uuid)
        self.assertEqual('completed', ended.status, ended.get('error'))
        dest_pins, record = self.pins(guest)
        self.assertEqual('host-b', record.host)
        # When the guest arrived, its pCPUs there were online already.
        (at_arrival,) = seen
        self.assertEqual(set(), dest_pins & at_arrival)
        self.assertEqual(DEDICATED - dest_pins, self.offline('host-b'))
        # The source frees the guest's share once the records moved it,
        # which may follow the migration's recorded end by a moment.
        self.assertEqual(set(DEDICATED), self.settled('host-a',
                                                      set(DEDICATED)))

    def test_a_failed_move_leaves_the_claim_offline_the_guest_online(self):
        guest = self.create('host-a')
        source_pins, _ = self.pins(guest)
        seen = self.watch_arrival('host-b', fail=True)
        migration = self.api.live_migrate_instance(self.ctxt, guest.uuid,
                                                   'host-b')
        ended = self.dep.wait_for_migration(migration.uuid)
        self.assertNotEqual('completed', ended.status)
        self.assertIn('refused by the test', ended.get('error') or '')
        (at_arrival,) = seen
        # The claim had powered two pCPUs up on host-b ...
        self.assertEqual(len(DEDICATED) - 2, len(at_arrival))
        # ... the rollback took them down again.
        self.assertEqual(set(DEDICATED), self.settled('host-b',
                                                      set(DEDICATED)))
        self.assertEqual([], self.dep.agent('host-b').tracker.claims())
        _pins, record = self.pins(guest)
        self.assertEqual('host-a', record.host)
        self.assertEqual(DEDICATED - source_pins, self.offline('host-a'))

    def test_agent_start_brings_up_what_its_guest_pins(self):
        guest = self.create('host-a')
        pins, _ = self.pins(guest)
        for cpu in pins:
            self.sysfs['host-a'].set_online(cpu, False)
        self.dep.agents['host-a'].stop()
        self.dep.restart_agent('host-a')
        self.assertEqual(DEDICATED - pins, self.offline('host-a'))
