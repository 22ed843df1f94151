"""Host maintenance in the conductor: disabled hosts and drain plans."""

from numamig import exception
from numamig.conductor import settings
from numamig.conf import CONF
from numamig.db import compute_nodes
from numamig.db import instances
from numamig.db import migrations
from numamig.db import queue
from tests.unit.compute import base as cbase
from tests.unit.conductor import base


class DisableTestCase(base.ConductorTestCase):

    def test_disable_enable_round_trip_and_idempotence(self):
        first = self.call('host_set_disabled', 'dst1', True, 'new DIMMs')
        again = self.call('host_set_disabled', 'dst1', True, 'new DIMMs')
        self.assertEqual(first, again)
        self.assertEqual({'host': 'dst1', 'disabled': True,
                          'reason': 'new DIMMs'},
                         {k: first[k] for k in ('host', 'disabled',
                                                'reason')})
        enabled = self.call('host_set_disabled', 'dst1', False)
        self.assertEqual((False, None, None), (
            enabled['disabled'], enabled['disabled_at'], enabled['reason']))
        self.assertEqual({}, compute_nodes.maintenance(self.db))

    def test_without_a_reason_one_is_recorded(self):
        self.call('host_set_disabled', 'dst1', True)
        self.assertEqual('no reason given',
                         compute_nodes.maintenance(self.db)['dst1'].reason)

    def test_unknown_host_changes_nothing(self):
        self.assertRaises(exception.HostNotFound, self.call,
                          'host_set_disabled', 'nope', True, 'x')
        self.assertEqual({}, compute_nodes.maintenance(self.db))

    def test_scheduler_skips_disabled_hosts_and_says_why(self):
        self.answer_with(True)
        inst = self.create_instance()
        for host in ('dst1', 'dst2', 'dst3'):
            self.call('host_set_disabled', host, True, 'rack move')
        self.assertRaises(exception.NoValidHost, self.migrate, inst.uuid)
        (ended,) = migrations.get_all(self.db)
        self.assertIn('dst1: disabled for maintenance: rack move',
                      ended.error)
        self.call('host_set_disabled', 'dst3', False)
        self.assertEqual('dst3', self.migrate(inst.uuid).dest_host)

    def test_a_disabled_destination_named_is_refused_at_request(self):
        inst = self.create_instance()
        self.call('host_set_disabled', 'dst1', True, 'firmware')
        error = self.assertRaises(exception.InvalidDestination, self.call,
                                  'live_migrate_instance', inst.uuid, 'dst1')
        self.assertIn('disabled for maintenance: firmware', str(error))
        self.assertEqual([], migrations.get_all(self.db))


class DrainPlanTestCase(base.ConductorTestCase):
    """src holds guests; dst1-dst3 are empty 2-cell hosts of 8 pCPUs per
    cell (cbase.host_topology) unless a test fills them."""

    def _guest(self, pins, host='src', vcpus=None, host_cell=0):
        inst = cbase.instance(host=host, vcpus=vcpus or len(pins),
                              pins=pins, host_cell=host_cell)
        instances.create(self.db, inst)
        return inst

    def _nothing_recorded(self):
        self.assertEqual([], migrations.get_all(self.db))
        for host in self.HOSTS:
            self.assertEqual((), self.conductor.cache.get(host).reservations)
        self.compute_api.check_can_live_migrate_destination.\
            assert_not_called()

    def test_every_guest_placed_and_nothing_recorded(self):
        guests = [self._guest({0: 0, 1: 8}), self._guest({0: 1, 1: 9})]
        plan = self.call('host_drain_plan', 'src')
        self.assertTrue(plan['emptiable'])
        self.assertEqual({g.uuid for g in guests},
                         {m['instance_uuid'] for m in plan['moves']})
        for move in plan['moves']:
            self.assertIn(move['dest_host'], ('dst1', 'dst2', 'dst3'))
            self.assertEqual(2, len(move['numa_topology'].cells[0]
                                    .cpu_pinning))
        self.assertEqual([], plan['unplaced'])
        self.assertEqual({'waves': 1, 'queue_room': 10000,
                          'refused': None}, plan['admission'])
        self._nothing_recorded()

    def test_link_rate_unknown_by_default(self):
        self._guest({0: 0, 1: 8})
        self._guest({0: 1, 1: 9})
        plan = self.call('host_drain_plan', 'src')
        self.assertEqual({'rate_mib': None, 'memory_mb': 2048,
                          'least_seconds': None}, plan['link'])

    def test_link_rate_of_the_source_bounds_the_plan(self):
        self._guest({0: 0, 1: 8})
        self._guest({0: 1, 1: 9})
        self._guest({0: 2}, host='dst1')      # not on src: not counted
        self.flags(migration_link_rate=1000, group='conductor')
        self.flags(migration_link_rates={'src': 300, 'dst1': 7},
                   group='conductor')
        self.reconfigure(
            migration_links=settings.from_conf(CONF).migration_links)
        plan = self.call('host_drain_plan', 'src')
        # 2 x 1024 MiB over 300 MiB/s.
        self.assertEqual({'rate_mib': 300, 'memory_mb': 2048,
                          'least_seconds': 6.8}, plan['link'])
        self.flags(migration_link_rates={}, group='conductor')
        self.reconfigure(
            migration_links=settings.from_conf(CONF).migration_links)
        plan = self.call('host_drain_plan', 'src')
        self.assertEqual((1000, 2.0), (plan['link']['rate_mib'],
                                       plan['link']['least_seconds']))

    def test_disabled_hosts_and_to(self):
        self._guest({0: 0, 1: 8})
        self.call('host_set_disabled', 'dst1', True, 'new DIMMs')
        plan = self.call('host_drain_plan', 'src', to=['dst1', 'dst2'])
        self.assertEqual({'dst1': 'disabled for maintenance: new DIMMs'},
                         plan['left_out'])
        self.assertEqual(['dst2'], [m['dest_host'] for m in plan['moves']])

    def test_a_host_that_cannot_be_emptied(self):
        # A guest of 10 pinned vCPUs on one node fits no cell of 8.
        big = self._guest({v: v for v in range(10)})
        small = self._guest({0: 8, 1: 9}, host_cell=1)
        plan = self.call('host_drain_plan', 'src')
        self.assertFalse(plan['emptiable'])
        (unplaced,) = plan['unplaced']
        self.assertEqual(big.uuid, unplaced['instance_uuid'])
        self.assertIn('fits on none of the 3 destination(s)',
                      unplaced['reason'])
        self.assertEqual([small.uuid],
                         [m['instance_uuid'] for m in plan['moves']])
        self._nothing_recorded()

    def test_a_guest_already_leaving_is_named(self):
        leaving = self._guest({0: 0, 1: 8})
        migration = self.call('live_migrate_instance', leaving.uuid)
        plan = self.call('host_drain_plan', 'src')
        self.assertFalse(plan['emptiable'])
        self.assertIn(f"it is leaving already, by migration "
                      f"{migration.uuid} (accepted)",
                      plan['unplaced'][0]['reason'])

    def test_a_guest_whose_policy_is_unknown_is_left_unplaced(self):
        # Issue 44: a guest recorded with a policy this conductor does not
        # know can move nowhere; the plan says so instead of planning a
        # move every destination refuses.
        stuck = cbase.instance(host='src', pins={0: 0, 1: 8}, extra_specs={
            'hw:cpu_policy': 'dedicated', 'hw:live_migration_policy': 'gold'})
        instances.create(self.db, stuck)
        fine = self._guest({0: 1, 1: 9})
        plan = self.call('host_drain_plan', 'src')
        self.assertFalse(plan['emptiable'])
        (unplaced,) = plan['unplaced']
        self.assertEqual(stuck.uuid, unplaced['instance_uuid'])
        self.assertIn("it cannot be migrated: Unknown live-migration policy "
                      "gold (flavor key hw:live_migration_policy)",
                      unplaced['reason'])
        self.assertEqual([fine.uuid],
                         [m['instance_uuid'] for m in plan['moves']])
        error = self.assertRaises(exception.DrainRefused, self.call,
                                  'host_drain_start', 'src',
                                  '6a1e0c3b-9f2d-4e7a-8b5c-1d2e3f4a5b6c', 1)
        self.assertIn('Unknown live-migration policy gold', str(error))
        self._nothing_recorded()
        self.assertEqual({}, compute_nodes.maintenance(self.db))

    def test_the_admission_queue_must_have_room(self):
        self._guest({0: 0, 1: 8})
        self._guest({0: 1, 1: 9})
        self.reconfigure(admission=queue.Limits(total=64, per_source=1,
                                                per_dest=4, queued=1))
        plan = self.call('host_drain_plan', 'src')
        self.assertFalse(plan['emptiable'])
        self.assertIn('the admission queue has room for 1 more',
                      plan['admission']['refused'])
        self.assertEqual(2, plan['admission']['waves'])

    def test_unknown_hosts_and_the_host_itself_in_to(self):
        self.assertRaises(exception.HostNotFound, self.call,
                          'host_drain_plan', 'nope')
        self.assertRaises(exception.HostNotFound, self.call,
                          'host_drain_plan', 'src', to=['nope'])
        error = self.assertRaises(exception.Invalid, self.call,
                                  'host_drain_plan', 'src', to=['src'])
        self.assertIn('--to names src, the host to drain itself',
                      str(error))

    def test_wire_refuses_bad_arguments(self):
        for kwargs in ({'keep_free_nodes': -1}, {'to': 'dst1'},
                       {'keep_free_nodes': 65}):
            self.assertRaises(exception.Invalid, self.call,
                              'host_drain_plan', 'src', **kwargs)
