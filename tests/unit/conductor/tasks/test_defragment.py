"""Defragmentations carried out: recorded as drains of kind defragment,
the room held, refused moves re-planned, a new worker carrying them on,
aborts, the room looked for after the moves, and refusals up front."""

import datetime

from oslo_utils import timeutils

from numamig import exception
from numamig import objects
from numamig.conductor import records
from numamig.db import compute_nodes
from numamig.db import drains
from numamig.db import instances
from numamig.db import migrations
from numamig.db import queue
from numamig.numa import usage
from tests.unit.compute import base as cbase
from tests.unit.conductor import base

DEFRAG = '5d0e2c4a-8b1f-4c6d-9e7a-2f3b4c5d6e7f'
WHOLE_NODE = {'hw:cpu_policy': 'dedicated', 'hw:numa_nodes': '1'}
CELL0 = dict(enumerate((0, 1, 2, 3, 8, 9, 10, 11)))
CELL1 = dict(enumerate((4, 5, 6, 7, 12, 13, 14, 15)))


class DefragmentRunTestCase(base.ConductorTestCase):
    """Every host: cell 0 full (8 pinned vCPUs), 2 pCPUs used in cell 1.
    Room for a whole node on src takes one move: its small guest."""

    def setUp(self):
        super().setUp()
        self.guests = {}
        for host in self.HOSTS:
            self.guests[host] = [self.guest(host, CELL0, 0),
                                 self.guest(host, {0: 4, 1: 12}, 1)]
            self.report_usage(host)
        self.small = self.guests['src'][1]
        self.driver = self.conductor.drains

    def guest(self, host, pins, cell):
        inst = cbase.instance(host=host, vcpus=len(pins), pins=pins,
                              host_cell=cell, memory_mb=512)
        instances.create(self.db, inst)
        return inst

    def report_usage(self, host, gone=()):
        """``host`` reports its guests' usage, but of ``gone``."""
        placed = [g.numa_topology for g in self.guests[host]
                  if g.uuid not in gone]
        self.report(host, topology=usage.host_with_usage(
            cbase.host_topology(), placed))

    def start(self, **kwargs):
        kwargs.setdefault('hosts', ['src'])
        return self.call('host_defragment_start', 8, 512, WHOLE_NODE,
                         DEFRAG, kwargs.pop('parallel', 2), **kwargs)

    def held(self, host, cache=None):
        """{key: counted} of the holds ``host`` has in the cache: counted
        when the cache's topology includes them."""
        state = (cache or self.conductor.cache).get(host)
        return {r.instance_uuid: r.held for r in state.reservations}

    def finish(self, migration, status='completed'):
        """Run ``migration`` to ``status`` as its conductor would."""
        queue.admit(self.db, self.conductor.admission, 1)
        migrations.set_dest_host(self.db, migration.uuid,
                                 migration.requested_host)
        for step in ('queued', 'running', status):
            records.set_status(self.worker, migration.uuid, step)

    def later_report(self, host, gone=()):
        """``host`` reports after the moves ended (the cache's clock
        moved on past them)."""
        self.now = timeutils.utcnow(with_timezone=True) + \
            datetime.timedelta(seconds=1)
        self.report_usage(host, gone)


class DefragmentStartTest(DefragmentRunTestCase):

    def test_a_plan_is_recorded_as_a_drain_of_kind_defragment(self):
        started = self.start()
        self.assertEqual(('defragment', 'src', 'running', 100),
                         (started['kind'], started['host'],
                          started['status'], started['priority']))
        (move,) = started['moves']
        self.assertEqual((self.small.uuid, 'src'),
                         (move['instance_uuid'], move['source_host']))
        self.assertNotEqual('src', move['planned_host'])
        # The target stays enabled; the room is held though its guest
        # is still there.
        self.assertEqual({}, compute_nodes.maintenance(self.db))
        self.driver.run_once()
        self.assertIn(DEFRAG, self.held('src'))
        self.assertEqual(started['uuid'], self.call(
            'host_drain_show', host='src')['uuid'])

    def test_a_repeat_answers_with_the_same_defragmentation(self):
        first = self.start()
        again = self.start()
        self.assertEqual(first['uuid'], again['uuid'])
        self.assertEqual([DEFRAG], drains.active(self.db))

    def test_unknown_host_changes_nothing(self):
        self.assertRaises(exception.HostNotFound, self.start,
                          hosts=['nowhere'])
        self.assertEqual([], drains.active(self.db))

    def test_a_guest_no_empty_host_holds_is_bad_input(self):
        error = self.assertRaises(
            exception.Invalid, self.call, 'host_defragment_start', 9, 512,
            WHOLE_NODE, DEFRAG, 1)
        self.assertIn('fits on none of the 4 host(s) known even were they '
                      'empty', str(error))
        self.assertEqual([], drains.active(self.db))

    def test_no_plan_within_the_moves_allowed_is_refused(self):
        error = self.assertRaises(exception.DefragmentRefused, self.start,
                                  max_moves=0)
        self.assertIn('no set of up to 0 guest(s) on 1 host(s) makes room',
                      str(error))
        self.assertIn('nothing was moved', str(error))
        self.assertEqual([], drains.active(self.db))
        self.assertEqual([], migrations.get_all(self.db))

    def test_a_drain_uuid_is_not_a_defragmentation(self):
        drains.create(self.db, {
            'uuid': DEFRAG, 'host': 'dst3', 'parallel': 1, 'priority': 100,
            'was_disabled': False, 'options': {}}, [])
        error = self.assertRaises(exception.Invalid, self.start)
        self.assertIn('not a defragmentation', str(error))

    def test_a_host_defragmented_already_is_not_again(self):
        self.start()
        error = self.assertRaises(
            exception.DrainInProgress, self.call, 'host_defragment_start',
            8, 512, WHOLE_NODE, '0b1c2d3e-4f5a-4b6c-8d7e-9f0a1b2c3d4e', 1,
            hosts=['src'])
        self.assertIn(DEFRAG, str(error))


class DefragmentDriveTest(DefragmentRunTestCase):

    def setUp(self):
        super().setUp()
        self.started = self.start()
        (self.move,) = self.started['moves']

    def data(self):
        return drains.get(self.db, DEFRAG)

    def test_the_moves_then_the_room_looked_for_on_a_new_report(self):
        self.driver.run_once()
        (migration,) = migrations.get_all(self.db)
        self.assertEqual((self.small.uuid, self.move['planned_host'], 100),
                         (migration.instance_uuid, migration.requested_host,
                          migration.priority))
        self.finish(migration)
        self.driver.run_once()
        data = self.data()
        # The move ended; src has not reported since: the end waits.
        self.assertEqual(('running', 'completed'),
                         (data['status'], data['moves'][0]['status']))
        self.later_report('src', gone={self.small.uuid})
        # The report leaves room for the hold: counted at once.
        self.assertIn(DEFRAG, self.held('src'))
        self.driver.run_once()
        ended = self.call('host_drain_show', drain_uuid=DEFRAG)
        self.assertEqual('completed', ended['status'])
        self.assertEqual((1, True, None), (
            ended['report']['moved'], ended['report']['room'],
            ended['report']['room_reason']))
        placement = objects.InstanceNUMATopology.obj_from_primitive(
            ended['outcome']['placement'])
        self.assertEqual(set(CELL1.values()),
                         set(placement.cells[0].cpu_pinning.values()))
        # The room is let go for the guest it was made for.
        self.assertEqual({}, self.held('src'))

    def test_a_target_that_does_not_report_ends_it_failed_with_why(self):
        self.driver.run_once()
        (migration,) = migrations.get_all(self.db)
        self.finish(migration)
        self.driver.verify_timeout = 0
        self.driver.run_once()
        ended = self.data()
        self.assertEqual(('failed', None), (ended['status'],
                                            ended['outcome']['room']))
        self.assertIn('host src has not reported since its last guest left',
                      ended['outcome']['reason'])

    def test_room_taken_meanwhile_fails_it_with_why(self):
        self.driver.run_once()
        (migration,) = migrations.get_all(self.db)
        self.finish(migration)
        # Another guest landed in the room (the report shows it).
        squatter = self.guest('src', CELL1, 1)
        self.guests['src'].append(squatter)
        self.later_report('src', gone={self.small.uuid})
        self.driver.run_once()
        ended = self.data()
        self.assertEqual(('failed', False), (ended['status'],
                                             ended['outcome']['room']))
        self.assertIn('the guest does not fit there',
                      ended['outcome']['reason'])

    def test_a_refused_destination_is_replanned_elsewhere(self):
        first = self.move['planned_host']
        # The planned destination is disabled before the move starts:
        # the request is refused at once and the guest planned again.
        self.call('host_set_disabled', first, True, 'fans')
        self.driver.run_once()
        (move,) = self.data()['moves']
        self.assertEqual(('pending', 1), (move['status'], move['attempts']))
        self.assertEqual([first], list(move['refused']))
        self.assertNotIn(move['planned_host'], (first, 'src'))
        self.driver.run_once()
        (migration,) = migrations.get_all(self.db)
        self.assertEqual(move['planned_host'], migration.requested_host)
        self.finish(migration)
        self.later_report('src', gone={self.small.uuid})
        self.driver.run_once()
        ended = self.call('host_drain_show', drain_uuid=DEFRAG)
        self.assertEqual(('completed', 1, True), (
            ended['status'], ended['report']['replanned'],
            ended['report']['room']))

    def test_a_new_worker_carries_it_on(self):
        self.driver.run_once()
        cache, restarted = self.new_worker()
        restarted.drains.run_once()
        # The room and the move's placement held again; nothing
        # recorded twice.
        self.assertIn(DEFRAG, self.held('src', cache))
        self.assertIn(self.small.uuid,
                      self.held(self.move['planned_host'], cache))
        (migration,) = migrations.get_all(self.db)
        self.finish(migration)
        self.later_report('src', gone={self.small.uuid})
        restarted.load_reports()
        restarted.drains.run_once()
        self.assertEqual('completed', self.data()['status'])
        self.assertEqual(1, len(migrations.get_all(self.db)))

    def test_abort_cancels_and_lets_the_room_go(self):
        self.driver.run_once()
        (migration,) = migrations.get_all(self.db)
        aborted = self.call('host_drain_abort', 'src')
        self.assertEqual('aborting', aborted['status'])
        self.assertEqual('cancelled', migrations.get(
            self.db, migration.uuid).status)
        self.driver.run_once()
        ended = self.call('host_drain_show', drain_uuid=DEFRAG)
        self.assertEqual(('aborted', 1), (ended['status'],
                                          ended['report']['cancelled']))
        self.assertEqual({}, self.held('src'))
        self.assertEqual({}, self.held(self.move['planned_host']))
