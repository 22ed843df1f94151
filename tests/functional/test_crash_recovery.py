"""A crash at any step of a migration is recoverable: the crash matrix.

For each step of a migration and each process role (conductor, source
agent, destination agent), the role's process dies
(tests/fixtures/crash.py: no graceful cleanup, no RPC reply, no further
database or hypervisor access) right there, and is restarted at once on
the same database and hypervisor. The steps (compute and conductor API
1.3)::

    accepted  the destination answered with its claim; the conductor has
              not recorded it (the most dangerous point of that status)
    queued    the claim and 'queued' are recorded; the source not told
    running   the source recorded 'running' (after pre_live_migration)
    left      the guest left the source (the destination is asked to
              count it); 'completed' not recorded yet

and, for sources whose conductor client is capped below API 1.3 (they
walk every status), right after 'preparing' and 'post-migrating' are
recorded. After the restarted services have
reconciled, the test holds the world to the truth:

* the migration ended, in a status that says where the guest is
  (``completed``: the destination; anything else: the source);
* the guest runs on exactly one host, whose placement is in the record
  and in the domain XML (live and persistent);
* every host's usage is exactly its guests' placements (the tracker,
  the last report and the records agree; no claim is left anywhere).

Embedded tier, fake:// transport, with
short timeouts so that a lost answer costs seconds::

    host-a  2 cells x 4 cores x 2 threads (the mover's source)
    host-b  the same, with a resident guest holding the mover's pins
"""

import functools
import threading
import time

from oslo_utils import uuidutils
import testscenarios

from numamig import objects
from numamig.compute import manager as compute_manager
from numamig.conductor import records
from numamig.conductor import records_rpcapi
from numamig.db import instances
from numamig.db import migrations
from numamig.numa import usage
from numamig.objects import fields
from tests import base
from tests.fixtures import crash
from tests.fixtures import deployment
from tests.functional import test_live_migration as lm

load_tests = testscenarios.load_tests_apply_scenarios
STATUS = fields.MigrationStatus
DONE, FAILED, ERROR = STATUS.COMPLETED, STATUS.FAILED, STATUS.ERROR
# Not a status: the guest left the source, 'completed' is not recorded.
LEFT = 'left'
# Recorded only by sources walking the long way (conductor API < 1.3).
LONG_PATH = (STATUS.PREPARING, STATUS.POST_MIGRATING)

# (status, role) -> final statuses a truthful recovery may reach. Where a
# restarted agent can still take part (its requests stay queued for it),
# the migration may complete; where the crash lost the step for good it
# must fail.
OUTCOMES = {
    (STATUS.ACCEPTED, 'conductor'): {ERROR},
    (STATUS.ACCEPTED, 'source'): {DONE, FAILED},
    # The destination answered before it died; its restart recovers the
    # claim from the records.
    (STATUS.ACCEPTED, 'dest'): {DONE, FAILED},
    # The start request died with the conductor; the restarted one sends
    # it again from the records (conductor/restarts.py).
    (STATUS.QUEUED, 'conductor'): {DONE},
    (STATUS.QUEUED, 'source'): {DONE, FAILED},
    (STATUS.QUEUED, 'dest'): {DONE, FAILED},
    (STATUS.PREPARING, 'conductor'): {DONE},
    (STATUS.PREPARING, 'source'): {FAILED},
    (STATUS.PREPARING, 'dest'): {DONE, FAILED},
    (STATUS.RUNNING, 'conductor'): {DONE},
    (STATUS.RUNNING, 'source'): {FAILED},
    (STATUS.RUNNING, 'dest'): {DONE, FAILED},
    (STATUS.POST_MIGRATING, 'conductor'): {DONE},
    (STATUS.POST_MIGRATING, 'source'): {DONE},
    (STATUS.POST_MIGRATING, 'dest'): {DONE},
    # After the guest left the source the migration must complete.
    (LEFT, 'conductor'): {DONE},
    (LEFT, 'source'): {DONE},
    (LEFT, 'dest'): {DONE},
}
ROLE_HOSTS = {'source': 'host-a', 'dest': 'host-b'}


class CrashTrigger:
    """Kill ``role`` right after a migration reaches ``status``.

    Hooks the conductor's record changes (whichever thread records the
    status runs the crash, so a conductor dies inside its own request)
    and, for ``left``, the destination's post_live_migration_at_destination
    (a destination dies inside its own request).
    """

    def __init__(self, dep, status, role):
        self.dep = dep
        self.status = status
        self.role = role
        self.fired = threading.Event()
        self._lock = threading.Lock()

    def install(self, test):
        if self.status in LONG_PATH:
            test.patch(records_rpcapi.RecordAPI, 'supports_short_path',
                       lambda api: False)
        set_status = records.set_status
        queue = records.queue_with_claim
        post = compute_manager.ComputeManager.\
            post_live_migration_at_destination

        def status_hook(conductor, migration_uuid, status, **kwargs):
            result = set_status(conductor, migration_uuid, status, **kwargs)
            if status == self.status:
                self._fire('conductor')
            return result

        def queue_hook(conductor, context, detail, **kwargs):
            if self.status == STATUS.ACCEPTED:
                self._fire('conductor')
            result = queue(conductor, context, detail, **kwargs)
            if self.status == STATUS.QUEUED:
                self._fire('conductor')
            return result

        # Wrapped so that it stays a declared endpoint (numamig.wire).
        @functools.wraps(post)
        def post_hook(manager, *args, **kwargs):
            if self.status == LEFT:
                self._fire('dest')
            return post(manager, *args, **kwargs)
        test.patch(records, 'set_status', status_hook)
        test.patch(records, 'queue_with_claim', queue_hook)
        test.patch(compute_manager.ComputeManager,
                   'post_live_migration_at_destination', post_hook)

    def _fire(self, thread_of):
        """Crash the role; die with it if this thread is the role's."""
        with self._lock:
            if self.fired.is_set():
                return
            if self.role == 'conductor':
                crash.crash_conductor(self.dep)
            else:
                crash.crash_agent(self.dep, ROLE_HOSTS[self.role])
            self.fired.set()
        if self.role == thread_of:
            raise crash.SimulatedCrash(f"{self.role} killed by the test")

    def restart(self):
        if self.role == 'conductor':
            self.dep.restart_conductor()
        else:
            self.dep.restart_agent(ROLE_HOSTS[self.role])


class CrashMatrixTest(base.TestCase):

    scenarios = [
        (f'{status}-{role}', {'status': status, 'role': role})
        for status in (STATUS.ACCEPTED, STATUS.QUEUED, STATUS.PREPARING,
                       STATUS.RUNNING, STATUS.POST_MIGRATING, LEFT)
        for role in ('conductor', 'source', 'dest')]

    def setUp(self):
        super().setUp()
        # One destination, answering within a second.
        self.flags(migrate_max_retries=0, rpc_response_timeout_migration=1)
        self.dep = self.useFixture(deployment.DeploymentFixture(
            'fake', [lm.host('host-a'), lm.host('host-b')],
            sweep_interval=0.5,
            call_timeout=4, report_interval=3600)).deployment
        # A request whose answer died with its receiver times out fast.
        self.flags(rpc_response_timeout=2)
        self.ctxt = self.dep.context

    def create(self, host):
        uuid = uuidutils.generate_uuid()
        return self.dep.api.instance_create(self.ctxt, objects.Instance(
            uuid=uuid, name=f'guest-{uuid[:8]}', project_id='demo', vcpus=2,
            memory_mb=1024, extra_specs=dict(lm.DEDICATED)), host)

    def test_crash_and_restart(self):
        self.create('host-b')
        mover = self.create('host-a')
        trigger = CrashTrigger(self.dep, self.status, self.role)
        trigger.install(self)
        operator = threading.Thread(target=self._request_migration,
                                    args=(mover,), daemon=True)
        operator.start()
        self.assertTrue(trigger.fired.wait(30), "the crash never happened")
        trigger.restart()
        migration = self._wait_for_end(mover)
        operator.join(15)
        self.dep.report_all()
        self.assertIn(migration.status,
                      OUTCOMES[(self.status, self.role)], migration.error)
        dest = 'host-b' if migration.status == DONE else 'host-a'
        self.assert_placed_once(mover, dest)
        for name in ('host-a', 'host-b'):
            self.assert_usage_is_the_guests(name)

    def _request_migration(self, mover):
        try:
            self.dep.api.live_migrate_instance(self.ctxt, mover.uuid,
                                               'host-b')
        except Exception:  # noqa: BLE001 - the crash may eat the answer
            pass

    def _wait_for_end(self, guest, timeout=30):
        deadline = time.monotonic() + timeout
        while True:
            found = migrations.get_all(self.dep.db,
                                       instance_uuid=guest.uuid)
            if found and found[-1].status in STATUS.FINAL:
                return found[-1]
            self.assertLess(time.monotonic(), deadline,
                            f"migration still {found and found[-1].status}")
            time.sleep(0.1)

    def assert_placed_once(self, guest, host):
        record = instances.get(self.dep.db, guest.uuid).instance
        self.assertEqual(host, record.host)
        self.assertIsNone(record.get('migration_context'))
        for name in ('host-a', 'host-b'):
            present = guest.uuid in self.dep.agent(name).driver.list_guests()
            where = 'missing on' if name == host else 'left on'
            self.assertEqual(name == host, present, f"guest {where} {name}")
        expected = {v: str(p) for v, p in
                    record.numa_topology.cpu_pinning.items()}
        nodes = {c.id: str(c.host_cell) for c in record.numa_topology.cells}
        driver = self.dep.agent(host).driver
        for persistent in (False, True):
            pins, memnodes, _ = lm.xml_placement(driver.get_domain_xml(
                guest.uuid, persistent=persistent))
            self.assertEqual((expected, nodes), (pins, memnodes))

    def assert_usage_is_the_guests(self, name):
        tracker = self.dep.agent(name).tracker
        self.assertEqual([], tracker.claims(), f"claims left on {name}")
        placed = [r.instance.numa_topology for r in
                  instances.get_all(self.dep.db, host=name)]
        expected = usage.host_with_usage(tracker.base_topology, placed)
        self.assertEqual(_usage(expected), _usage(tracker.usage_topology()),
                         f"usage of {name}")
        reported = self.dep.conductor.manager.cache.get(name).report
        self.assertEqual(_usage(expected), _usage(reported.topology),
                         f"reported usage of {name}")
        self.assertEqual(
            [], [r.instance.uuid for r in
                 instances.get_claims_on_host(self.dep.db, name)])


def _usage(topology):
    return {c.id: (sorted(c.pinned_cpus), c.cpu_usage, c.memory_usage_mb,
                   sorted((p.size_kb, p.used) for p in c.mempages))
            for c in topology.cells}
