"""Drains executed end to end: embedded deployments over fake:// and
RabbitMQ (every error an operator meets crosses the real broker).

Hosts are 2 cells x 4 cores x 2 threads (8 dedicated pCPUs per cell,
numa-2cell-a.xml). host-a is drained; host-b and host-c receive.
"""

import functools
import threading
import time
from unittest import mock

import fixtures
from oslo_utils import uuidutils
import testscenarios

from numamig import embedded
from numamig import exception
from numamig import objects
from numamig.compute import manager as compute_manager
from numamig.db import compute_nodes
from numamig.db import drains
from numamig.db import instances
from numamig.db import migrations
from tests import base
from tests.fixtures import crash
from tests.fixtures import deployment
from tests.fixtures import rpc as rpc_fixture

load_tests = testscenarios.load_tests_apply_scenarios

NAMES = ('host-a', 'host-b', 'host-c')
ONE_NODE = {'hw:cpu_policy': 'dedicated', 'hw:numa_nodes': '1'}


class DrainTestCase(base.TestCase):

    scenarios = rpc_fixture.TRANSPORT_SCENARIOS

    def setUp(self):
        super().setUp()
        hosts = [embedded.HostDefinition(name, 'numa-2cell-a.xml')
                 for name in NAMES]
        self.dep = self.useFixture(deployment.DeploymentFixture(
            self.transport_kind, hosts)).deployment
        self.api, self.ctxt = self.dep.api, self.dep.context

    def create(self, host, vcpus, name=None):
        uuid = uuidutils.generate_uuid()
        instance = objects.Instance(
            uuid=uuid, name=name or f'guest-{uuid[:8]}', project_id='demo',
            vcpus=vcpus, memory_mb=512, extra_specs=dict(ONE_NODE))
        return self.api.instance_create(self.ctxt, instance, host)

    def start(self, host='host-a', parallel=2, **kwargs):
        return self.api.host_drain_start(self.ctxt, host, parallel, **kwargs)

    def wait_for_drain(self, data, timeout=90):
        """Follow the drain by host_drain_wait until it ends."""
        deadline = time.monotonic() + timeout
        while data['status'] not in ('completed', 'failed', 'aborted'):
            left = deadline - time.monotonic()
            if left <= 0:
                self.fail(f"drain still {data['status']}: {data['moves']}")
            data = self.api.host_drain_wait(self.ctxt, data, min(left, 10))
        return data

    def host_of(self, guest):
        return self.api.instance_get(self.ctxt, guest.uuid).host

    def fill_destinations(self):
        """host-b: one whole cell free; host-c: 2 pCPUs free in a cell.
        Only 'big first' empties host-a: a small guest that takes
        host-b's free cell leaves the big one nowhere to go."""
        self.create('host-b', 8)
        self.create('host-c', 8)
        self.create('host-c', 6)


class DrainExecutionTest(DrainTestCase):

    def test_the_order_that_empties_the_host_is_executed(self):
        self.fill_destinations()
        small = self.create('host-a', 2, name='small')
        big = self.create('host-a', 8, name='big')
        started = self.start()
        self.assertEqual('running', started['status'])
        self.assertEqual({'host-a'}, set(compute_nodes.maintenance(
            self.dep.db)))
        self.assertEqual({big.uuid: 'host-b', small.uuid: 'host-c'},
                         {m['instance_uuid']: m['planned_host']
                          for m in started['moves']})
        ended = self.wait_for_drain(started)
        self.assertEqual('completed', ended['status'], ended['moves'])
        self.assertEqual(2, ended['report']['moved'])
        self.assertEqual([], ended['report']['failed'])
        self.assertEqual(('host-b', 'host-c'),
                         (self.host_of(big), self.host_of(small)))
        # The host stays disabled after its drain; its migrations went
        # through the queue with the drain priority.
        self.assertIn('host-a', compute_nodes.maintenance(self.dep.db))
        self.assertEqual({100}, {m.priority for m in
                                 migrations.get_all(self.dep.db)})
        shown = self.api.host_drain_show(self.ctxt, host='host-a')
        self.assertEqual(ended['uuid'], shown['uuid'])

    def test_a_repeated_start_answers_with_the_same_drain(self):
        self.create('host-a', 2)
        uuid = uuidutils.generate_uuid()
        first = self.start(drain_uuid=uuid)
        again = self.start(drain_uuid=uuid)
        self.assertEqual(first['uuid'], again['uuid'])
        self.wait_for_drain(again)
        self.assertEqual(1, len(migrations.get_all(self.dep.db)))

    def test_a_second_drain_of_the_host_is_refused(self):
        self.create('host-a', 2)
        self.create('host-a', 2)
        first = self.start(parallel=1)
        error = self.assertRaises(exception.DrainInProgress, self.start)
        self.assertIn(first['uuid'], str(error))
        self.wait_for_drain(first)

    def test_the_plan_holds_its_capacity_against_other_requests(self):
        # One guest planned into host-b's only free cell; the driver is
        # held so that the move waits.
        self.fill_destinations()
        self.create('host-a', 8)
        with mock.patch.object(self.dep.conductor.manager.drains,
                               'run_once') as held:
            held.side_effect = lambda: None
            started = self.start()
            self.dep.conductor.manager.drains._reserve(
                drains.get(self.dep.db, started['uuid']))
            reservations = self.dep.conductor.manager.cache.get(
                'host-b').reservations
            self.assertEqual([started['moves'][0]['instance_uuid']],
                             [r.instance_uuid for r in reservations])
            # A new guest of a whole cell, scheduled, finds no room: the
            # only free cell (host-b's) is the plan's.
            error = self.assertRaises(exception.InstanceBuildError,
                                      self.create, None, 8)
            self.assertIn('host-b', str(error))
        self.dep.conductor.manager.drains.wake()
        self.assertEqual('completed',
                         self.wait_for_drain(started)['status'])


class DrainRefusedTest(DrainTestCase):

    def _nothing_moved(self):
        self.assertEqual([], migrations.get_all(self.dep.db))
        self.assertEqual([], drains.active(self.dep.db))

    def test_a_host_that_cannot_be_emptied_is_refused_up_front(self):
        self.create('host-b', 8)
        self.create('host-b', 8)
        self.create('host-c', 8)
        self.create('host-c', 8)
        self.create('host-a', 2)
        error = self.assertRaises(exception.DrainRefused, self.start)
        self.assertIn('cannot be drained', str(error))
        self.assertIn('no plan exists: 1 guest(s) have no destination',
                      str(error))
        self.assertIn('nothing was moved', str(error))
        self._nothing_moved()
        self.assertEqual({}, compute_nodes.maintenance(self.dep.db))

    def test_a_disabled_host_stays_disabled_when_refused(self):
        for host in ('host-b', 'host-c'):
            self.create(host, 8)
            self.create(host, 8)
        self.create('host-a', 2)
        self.api.host_set_disabled(self.ctxt, 'host-a', True, 'fans')
        self.assertRaises(exception.DrainRefused, self.start)
        self._nothing_moved()
        self.assertEqual('fans', compute_nodes.maintenance(
            self.dep.db)['host-a'].reason)


class DrainPolicyTest(DrainTestCase):

    def test_a_guest_that_can_never_migrate_is_refused_up_front(self):
        # Issue 44 H2: a guest recorded by an earlier release with a
        # policy no conductor knows (instance create refuses it now).
        # The plan said the host could be emptied; the drain then
        # re-planned it onto every host and left the host disabled.
        self.create('host-a', 2)
        gold = objects.Instance(
            uuid=uuidutils.generate_uuid(), name='gold', project_id='demo',
            host='host-a', vcpus=2, memory_mb=512,
            extra_specs=dict(ONE_NODE, **{
                'hw:live_migration_policy': 'gold'}))
        instances.create(self.dep.db, gold)
        plan = self.api.host_drain_plan(self.ctxt, 'host-a')
        self.assertFalse(plan['emptiable'])
        self.assertEqual(['gold'], [u['name'] for u in plan['unplaced']])
        error = self.assertRaises(exception.DrainRefused, self.start)
        self.assertIn('gold: it cannot be migrated: Unknown live-migration '
                      'policy gold', str(error))
        self.assertEqual([], migrations.get_all(self.dep.db))
        self.assertEqual({}, compute_nodes.maintenance(self.dep.db))


class KeepFreeNodesTest(DrainTestCase):

    def test_a_floating_guest_avoids_hosts_whose_nodes_are_all_kept(self):
        # Issue 44: --keep-free-nodes put a guest without a NUMA request
        # on a host whose every node was kept free. host-c is idle (both
        # cells kept with 2); host-b has a pinned guest in a cell.
        self.create('host-b', 2)
        floating = self.api.instance_create(self.ctxt, objects.Instance(
            uuid=uuidutils.generate_uuid(), name='floating',
            project_id='demo', vcpus=2, memory_mb=512, extra_specs={}),
            'host-a')
        plan = self.api.host_drain_plan(self.ctxt, 'host-a',
                                        keep_free_nodes=2)
        self.assertEqual({'host-b': [1], 'host-c': [0, 1]},
                         plan['kept_free'])
        self.assertEqual([(floating.uuid, 'host-b')],
                         [(m['instance_uuid'], m['dest_host'])
                          for m in plan['moves']])
        ended = self.wait_for_drain(self.start(keep_free_nodes=2))
        self.assertEqual('completed', ended['status'], ended['moves'])
        self.assertEqual('host-b', self.host_of(floating))


class DrainReplanTest(DrainTestCase):

    def test_a_destination_refusing_its_claim_is_replanned(self):
        guest = self.create('host-a', 2)
        refused = threading.Event()

        def refuse_once(real, manager, ctxt, *args, **kwargs):
            if not refused.is_set():
                refused.set()
                raise exception.MigrationPreCheckError(
                    reason=f"{manager.host}: the claim does not fit")
            return real(manager, ctxt, *args, **kwargs)

        self.useFixture(_refusing(refuse_once))
        started = self.start()
        first = started['moves'][0]['planned_host']
        ended = self.wait_for_drain(started)
        self.assertEqual('completed', ended['status'], ended['moves'])
        (move,) = ended['moves']
        self.assertEqual(2, move['attempts'])
        self.assertEqual([first], list(move['refused']))
        self.assertIn('the claim does not fit', move['refused'][first])
        self.assertNotEqual(first, move['dest_host'])
        self.assertEqual(move['dest_host'], self.host_of(guest))
        self.assertEqual(1, ended['report']['replanned'])

    def test_a_guest_that_can_no_longer_be_placed_fails_with_why(self):
        self.create('host-a', 2, name='picky')

        def refuse(real, manager, ctxt, *args, **kwargs):
            raise exception.MigrationPreCheckError(
                reason=f"{manager.host}: no room after all")

        self.useFixture(_refusing(refuse))
        ended = self.wait_for_drain(self.start())
        self.assertEqual('failed', ended['status'])
        (failed,) = ended['report']['failed']
        self.assertEqual('picky', failed['name'])
        self.assertIn('no room after all', failed['reason'])
        self.assertEqual(0, ended['report']['moved'])


class DrainAbortTest(DrainTestCase):

    def test_abort_cancels_the_queued_moves(self):
        guests = [self.create('host-a', 2) for _ in range(3)]
        with mock.patch.object(self.dep.conductor.manager.drains,
                               'run_once'):
            started = self.start(parallel=1)
            aborted = self.api.host_drain_abort(self.ctxt, 'host-a')
        self.assertEqual('aborting', aborted['status'])
        self.dep.conductor.manager.drains.wake()
        ended = self.wait_for_drain(aborted)
        self.assertEqual('aborted', ended['status'])
        self.assertEqual(3, ended['report']['cancelled'])
        self.assertEqual([], migrations.get_all(self.dep.db))
        self.assertEqual({'host-a'}, {self.host_of(g) for g in guests})
        self.assertEqual(started['uuid'], ended['uuid'])
        error = self.assertRaises(exception.DrainNotFound,
                                  self.api.host_drain_abort, self.ctxt,
                                  'host-a')
        self.assertIn('host-a', str(error))


class DrainRestartTest(DrainTestCase):
    """The in-process crash (tests/fixtures/crash.py), as the crash
    matrix uses it: on the in-process transport only. Over RabbitMQ a
    crashed server's consumer lingers in this process and a call to the
    restarted conductor timed out; a real kill over RabbitMQ and PostgreSQL is
    test_drain_multiprocess's."""

    scenarios = rpc_fixture.TRANSPORT_SCENARIOS[:1]

    def test_a_restarted_conductor_carries_the_drain_on(self):
        guests = [self.create('host-a', 2) for _ in range(3)]
        started = self.start(parallel=1)
        crash.crash_conductor(self.dep)
        self.dep.restart_conductor()
        ended = self.wait_for_drain(
            self.api.host_drain_show(self.ctxt, drain_uuid=started['uuid']))
        self.assertEqual('completed', ended['status'], ended['moves'])
        placed = {m['instance_uuid']: m['dest_host'] for m in ended['moves']}
        for guest in guests:
            self.assertEqual(placed[guest.uuid], self.host_of(guest))
        # Each guest moved once. A migration the crash caught while its
        # destination was chosen ends 'error' (its lease ran out) and the
        # guest is planned again: nothing of it ran.
        recorded = migrations.get_all(self.dep.db)
        self.assertEqual(sorted(g.uuid for g in guests), sorted(
            m.instance_uuid for m in recorded if m.status == 'completed'))
        self.assertEqual(set(), {m.status for m in recorded} -
                         {'completed', 'error'})


def _refusing(how):
    """Patch every destination's check-and-claim with ``how(real,
    manager, ctxt, ...)``, keeping what the RPC dispatcher reads of the
    endpoint (its wire declaration)."""
    real = compute_manager.ComputeManager.check_can_live_migrate_destination

    @functools.wraps(real)
    def check(manager, ctxt, *args, **kwargs):
        return how(real, manager, ctxt, *args, **kwargs)
    return fixtures.MonkeyPatch(
        'numamig.compute.manager.ComputeManager.'
        'check_can_live_migrate_destination', check)


class DefragmentTestCase(DrainTestCase):

    WHOLE_NODE = {'hw:cpu_policy': 'dedicated', 'hw:numa_nodes': '1'}

    def setUp(self):
        super().setUp()
        # Every host: 6 pCPUs used in one cell, 2 in the other; no whole
        # cell of 8 is free anywhere.
        self.guests = {host: {self.create(host, 6).uuid,
                              self.create(host, 2).uuid} for host in NAMES}


class DefragmentPlanTest(DefragmentTestCase):

    def test_one_move_makes_room_and_nothing_moves(self):
        plan = self.api.host_defragment_plan(self.ctxt, 8, 512,
                                             self.WHOLE_NODE)
        self.assertTrue(plan['found'], plan['reason'])
        # Either guest of the host, moved alone, frees its cell.
        (move,) = plan['moves']
        self.assertIn(move['instance_uuid'], self.guests[plan['host']])
        self.assertNotEqual(plan['host'], move['dest_host'])
        self.assertEqual(8, len(plan['placement'].cells[0].cpu_pinning))
        self.assertEqual([], migrations.get_all(self.dep.db))

    def test_no_room_within_the_moves_allowed(self):
        plan = self.api.host_defragment_plan(
            self.ctxt, 8, 512, self.WHOLE_NODE, hosts=['host-b'],
            max_moves=0)
        self.assertEqual((False, None), (plan['found'], plan['host']))
        self.assertIn('no plan exists: no set of up to 0 guest(s) on 1 '
                      'host(s)', plan['reason'])
        self.assertEqual('none', plan['search']['outcome'])

    def test_specs_that_make_no_request_are_refused(self):
        error = self.assertRaises(
            exception.InvalidNUMARequest, self.api.host_defragment_plan,
            self.ctxt, 2, 512, {'hw:numa_nodes': '3'})
        self.assertIn('hw:numa_nodes', str(error))
        error = self.assertRaises(exception.Invalid,
                                  self.api.host_defragment_plan,
                                  self.ctxt, 2, 512, {})
        self.assertIn('nothing to defragment for', str(error))


class DefragmentExecutionTest(DefragmentTestCase):
    """``host defragment --execute``: the plan carried out as a drain of
    kind defragment, over fake:// and RabbitMQ."""

    def execute(self, **kwargs):
        return self.api.host_defragment_start(
            self.ctxt, 8, 512, self.WHOLE_NODE, kwargs.pop('parallel', 2),
            **kwargs)

    def test_the_room_is_made_and_found_after_the_moves(self):
        started = self.execute(hosts=['host-b'])
        self.assertEqual(('defragment', 'host-b', 'running'), (
            started['kind'], started['host'], started['status']))
        (move,) = started['moves']
        self.assertIn(move['instance_uuid'], self.guests['host-b'])
        ended = self.wait_for_drain(started)
        self.assertEqual('completed', ended['status'], ended)
        self.assertEqual((1, True), (ended['report']['moved'],
                                     ended['report']['room']))
        guest = self.api.instance_get(self.ctxt, move['instance_uuid'])
        self.assertEqual(move['planned_host'], guest.host)
        # The target was never disabled; the move went through the queue
        # at the drain priority.
        self.assertEqual({}, compute_nodes.maintenance(self.dep.db))
        self.assertEqual({100}, {m.priority for m in
                                 migrations.get_all(self.dep.db)})
        # Room now: a plan needs no move on host-b.
        plan = self.api.host_defragment_plan(self.ctxt, 8, 512,
                                             self.WHOLE_NODE,
                                             hosts=['host-b'])
        self.assertEqual([], plan['moves'])

    def test_refusals_move_nothing(self):
        for error, kwargs, said in (
                (exception.HostNotFound, {'hosts': ['host-z']}, 'host-z'),
                (exception.DefragmentRefused,
                 {'hosts': ['host-b'], 'max_moves': 0},
                 'no set of up to 0 guest(s) on 1 host(s) makes room')):
            raised = self.assertRaises(error, self.execute, **kwargs)
            self.assertIn(said, str(raised))
        raised = self.assertRaises(
            exception.Invalid, self.api.host_defragment_start, self.ctxt,
            9, 512, self.WHOLE_NODE, 1)
        self.assertIn('fits on none of the 3 host(s) known even were they '
                      'empty', str(raised))
        self.assertEqual([], drains.active(self.dep.db))
        self.assertEqual([], migrations.get_all(self.dep.db))
