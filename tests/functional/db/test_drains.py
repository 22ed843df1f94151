"""Drains and their moves on PostgreSQL, MariaDB and SQLite: one active
drain per host, the turn of each move, conditional ends and re-plans."""

import itertools

from numamig import exception
from numamig.db import drains
from numamig.db import instances
from numamig.db import migration_satellites
from numamig.db import migrations
from tests.functional.db import base
from tests.unit.db import base as unit_base

UUIDS = [f'00000000-0000-4000-8000-{n:012d}' for n in range(1, 60)]


def _drain(uuid=UUIDS[0], host='src', parallel=2, link_rate_mib=None):
    return {'uuid': uuid, 'host': host, 'parallel': parallel,
            'priority': 100, 'was_disabled': False,
            'options': {'to': None, 'keep_free_nodes': 0,
                        'link_rate_mib': link_rate_mib}}


def _move(n, host):
    return {'instance_uuid': UUIDS[10 + n], 'name': f'g{n}',
            'planned_host': host, 'planned_topology': {'cells': [n]}}


class DrainRecordsTestCase(base.ServerDBTestCase):

    def setUp(self):
        super().setUp()
        self.ids = (f'10000000-0000-4000-8000-{n:012d}'
                    for n in itertools.count(1))
        # g0 and g2 to dst1 (in that order), g1 to dst2, g3 to dst3.
        drains.create(self.db, _drain(), [
            _move(0, 'dst1'), _move(1, 'dst2'), _move(2, 'dst1'),
            _move(3, 'dst3')])

    def start(self):
        return [m['name'] for m in drains.start_moves(
            self.db, UUIDS[0], lambda: next(self.ids))]

    def test_recorded_in_the_plans_order(self):
        data = drains.get(self.db, UUIDS[0])
        self.assertEqual(('running', 1, 2), (data['status'],
                                             data['revision'],
                                             data['parallel']))
        self.assertEqual(['g0', 'g1', 'g2', 'g3'],
                         [m['name'] for m in data['moves']])
        self.assertEqual({'cells': [0]}, data['moves'][0]['planned_topology'])
        self.assertEqual([UUIDS[0]], drains.active(self.db))
        self.assertEqual(UUIDS[0], drains.latest_for_host(self.db,
                                                          'src')['uuid'])

    def test_one_active_drain_per_host(self):
        error = self.assertRaises(exception.DrainInProgress, drains.create,
                                  self.db, _drain(UUIDS[1]), [])
        self.assertIn(UUIDS[0], str(error))
        drains.create(self.db, _drain(UUIDS[2], host='other'), [])
        self.assertEqual([UUIDS[0], UUIDS[2]], drains.active(self.db))

    def test_a_move_into_a_host_waits_for_the_moves_off_it(self):
        # A defragmentation's chain: x leaves dst1 for dst2, then a
        # leaves src for dst1; c (to dst3) does not wait.
        chain = [dict(_move(5, 'dst2'), source_host='dst1'),
                 dict(_move(6, 'dst1'), source_host='src'),
                 dict(_move(7, 'dst3'), source_host='src')]
        drains.create(self.db, dict(_drain(UUIDS[3], host='t'),
                                    kind=drains.DEFRAGMENT, parallel=3),
                      chain)
        data = drains.get(self.db, UUIDS[3])
        self.assertEqual(('defragment', ['dst1', 'src', 'src']), (
            data['kind'], [m['source_host'] for m in data['moves']]))
        started = drains.start_moves(self.db, UUIDS[3],
                                     lambda: next(self.ids))
        self.assertEqual(['g5', 'g7'], [m['name'] for m in started])
        first = started[0]
        self.assertTrue(drains.end_move(
            self.db, UUIDS[3], first['instance_uuid'],
            first['migration_uuid'], drains.COMPLETED, dest_host='dst2'))
        self.assertEqual(['g6'], [m['name'] for m in drains.start_moves(
            self.db, UUIDS[3], lambda: next(self.ids))])
        # A drain's moves name no source: nothing waits.
        self.assertEqual('drain', drains.get(self.db, UUIDS[0])['kind'])

    def test_parallel_and_one_move_per_destination_in_order(self):
        self.assertEqual(['g0', 'g1'], self.start())
        self.assertEqual([], self.start())      # two migrate already
        first = drains.get(self.db, UUIDS[0])['moves'][0]
        self.assertTrue(drains.end_move(
            self.db, UUIDS[0], first['instance_uuid'],
            first['migration_uuid'], drains.COMPLETED, dest_host='dst1'))
        # dst1's next move (g2) comes before g3: the plan's order.
        self.assertEqual(['g2'], self.start())
        data = drains.get(self.db, UUIDS[0])
        self.assertEqual(['completed', 'migrating', 'migrating', 'pending'],
                         [m['status'] for m in data['moves']])
        self.assertEqual(1, data['moves'][2]['attempts'])

    def test_the_next_move_into_a_host_starts_once_its_claim_is_taken(self):
        drains.create(self.db, _drain(UUIDS[4], host='other', parallel=3),
                      [_move(20, 'dst1'), _move(21, 'dst1'),
                       _move(22, 'dst1')])

        def start():
            return [m['name'] for m in drains.start_moves(
                self.db, UUIDS[4], lambda: next(self.ids))]

        (first,) = drains.start_moves(self.db, UUIDS[4],
                                      lambda: next(self.ids))
        self.assertEqual('g20', first['name'])
        # Its migration is not recorded yet, then waits for admission:
        # no claim on dst1 yet, g21 waits.
        self.assertEqual([], start())
        instance = unit_base.make_instance(uuid=first['instance_uuid'])
        instances.create(self.db, instance)
        migrations.create(self.db, unit_base.make_migration(
            instance.uuid, uuid=first['migration_uuid']))
        migrations.set_status(self.db, first['migration_uuid'], 'queued')
        self.assertEqual([], start())
        # Running: dst1 holds its claim; g21 claims next, g22 after it.
        migrations.set_status(self.db, first['migration_uuid'], 'running')
        self.assertEqual(['g21'], start())
        self.assertEqual([], start())

    def test_a_dirtying_guest_keeps_its_share_of_the_link(self):
        drains.create(self.db, _drain(UUIDS[5], host='other', parallel=4,
                                      link_rate_mib=32),
                      [_move(23, 'dst1'), _move(24, 'dst1'),
                       _move(25, 'dst2'), _move(26, 'dst3')])

        def start():
            return [m['name'] for m in drains.start_moves(
                self.db, UUIDS[5], lambda: next(self.ids))]

        # Nothing sampled yet: as without a link rate (g24 waits for
        # dst1's claim).
        self.assertEqual(['g23', 'g25', 'g26'], start())
        moves = {m['name']: m for m in drains.get(self.db,
                                                   UUIDS[5])['moves']}
        for name in ('g23', 'g25', 'g26'):
            instance = unit_base.make_instance(
                uuid=moves[name]['instance_uuid'])
            instances.create(self.db, instance)
            migrations.create(self.db, unit_base.make_migration(
                instance.uuid, uuid=moves[name]['migration_uuid']))
            for status in ('queued', 'running'):
                migrations.set_status(self.db,
                                      moves[name]['migration_uuid'], status)
        # g23's pre-flight prediction sampled 12 MiB/s: it needs 15 of
        # the 32 MiB/s, so g24 (dst1 claimed) waits while two others
        # copy beside g23, and starts once one does.
        migration_satellites.set_prediction(
            self.db, moves['g23']['migration_uuid'],
            {'prediction': 'converges', 'sampled_dirty_rate': 12 * 2 ** 20})
        self.assertEqual([], start())

        def end(name):
            self.assertTrue(drains.end_move(
                self.db, UUIDS[5], moves[name]['instance_uuid'],
                moves[name]['migration_uuid'], drains.COMPLETED))

        end('g26')
        self.assertEqual([], start())
        end('g25')
        self.assertEqual(['g24'], start())

    def test_the_estimate_orders_holds_back_and_records_policies(self):
        mib = 2 ** 20
        drains.create(self.db, _drain(UUIDS[6], host='est', parallel=4,
                                      link_rate_mib=32),
                      [_move(27, 'dst1'), _move(28, 'dst2'),
                       _move(29, 'dst3'), _move(30, 'dst1')])
        rates = {27: 0, 28: 2, 29: 40, 30: 40}
        estimate = {'guests': {UUIDS[10 + n]: {'dirty_rate': r * mib,
                                               'memory': 128 * mib}
                               for n, r in rates.items()},
                    'figures': {'downtime_ms': 500},
                    'reason': None}
        self.assertTrue(drains.set_estimate(self.db, UUIDS[6], estimate))
        # Once only: a second worker's estimate changes nothing.
        self.assertFalse(drains.set_estimate(self.db, UUIDS[6], {}))
        chosen = []

        def choose(move, cost, share):
            chosen.append((move.name, cost.dirty_rate, share))
            if cost.dirty_rate > share:
                return {'name': 'nfv', 'post_copy': True}
            return None

        started = drains.start_moves(self.db, UUIDS[6],
                                     lambda: next(self.ids), choose)
        # g29 (40 MiB/s) first: the dirtiest whose destination's turn
        # has come (g30, as dirty, waits behind g27 on dst1). Even the
        # whole link is too little for its pre-copy: post-copy chosen,
        # it needs no share, and g28 (2 MiB/s) and g27 (idle) copy
        # beside it.
        self.assertEqual([('g29', 'nfv'), ('g28', None), ('g27', None)],
                         [(m['name'], m['policy']) for m in started])
        self.assertEqual([('g29', 40 * mib, 32 * mib),
                          ('g28', 2 * mib, 16 * mib),
                          ('g27', 0, 32 * mib / 3)], chosen)
        data = drains.get(self.db, UUIDS[6])
        self.assertEqual({UUIDS[39]: {'name': 'nfv', 'post_copy': True}},
                         data['options']['policies'])
        self.assertEqual(estimate, data['options']['estimate'])

    def test_an_estimated_rate_holds_back_without_post_copy(self):
        mib = 2 ** 20
        drains.create(self.db, _drain(UUIDS[7], host='est2', parallel=3,
                                      link_rate_mib=32),
                      [_move(31, 'dst1'), _move(32, 'dst2'),
                       _move(33, 'dst3')])
        drains.set_estimate(self.db, UUIDS[7], {'guests': {
            UUIDS[41]: {'dirty_rate': 40 * mib, 'memory': 128 * mib},
            UUIDS[42]: {'dirty_rate': 0, 'memory': 256 * mib},
            UUIDS[43]: {'dirty_rate': 0, 'memory': 128 * mib}},
            'figures': None, 'reason': None})

        def start(choose=None):
            return [m['name'] for m in drains.start_moves(
                self.db, UUIDS[7], lambda: next(self.ids), choose)]

        # g31's estimate (40 MiB/s) holds the idle guests back while it
        # copies in pre-copy (it needs 50 MiB/s of the 32)...
        self.assertEqual(['g31'], start(lambda move, cost, share: None))
        # ... and not once it runs under post-copy (a drain recorded
        # anew: the choice is made as a move starts).
        drains.create(self.db, _drain(UUIDS[8], host='est3', parallel=3,
                                      link_rate_mib=32),
                      [_move(34, 'dst1'), _move(35, 'dst2'),
                       _move(36, 'dst3')])
        drains.set_estimate(self.db, UUIDS[8], {'guests': {
            UUIDS[44]: {'dirty_rate': 40 * mib, 'memory': 128 * mib},
            UUIDS[45]: {'dirty_rate': 0, 'memory': 128 * mib},
            UUIDS[46]: {'dirty_rate': 0, 'memory': 256 * mib}},
            'figures': None, 'reason': None})
        started = drains.start_moves(
            self.db, UUIDS[8], lambda: next(self.ids),
            lambda move, cost, share: {'name': 'nfv', 'post_copy': True}
            if cost.dirty_rate else None)
        # The larger idle guest before the smaller.
        self.assertEqual(['g34', 'g36', 'g35'],
                         [m['name'] for m in started])

    def test_an_end_is_conditional_on_the_migration(self):
        self.start()
        move = drains.get(self.db, UUIDS[0])['moves'][0]
        args = (self.db, UUIDS[0], move['instance_uuid'])
        self.assertFalse(drains.end_move(*args, UUIDS[5], drains.FAILED))
        self.assertTrue(drains.end_move(*args, move['migration_uuid'],
                                        drains.FAILED, error='why'))
        revision = drains.get(self.db, UUIDS[0])['revision']
        self.assertFalse(drains.end_move(*args, move['migration_uuid'],
                                         drains.COMPLETED))
        data = drains.get(self.db, UUIDS[0])
        self.assertEqual(('failed', 'why', revision),
                         (data['moves'][0]['status'],
                          data['moves'][0]['error'], data['revision']))

    def test_replan_sends_the_move_back_with_its_refusals(self):
        self.start()
        move = drains.get(self.db, UUIDS[0])['moves'][0]
        self.assertTrue(drains.replan_move(
            self.db, UUIDS[0], move['instance_uuid'],
            move['migration_uuid'], 'dst4', {'cells': [9]},
            {'dst1': 'claim refused'}))
        again = drains.get(self.db, UUIDS[0])['moves'][0]
        self.assertEqual(('pending', 'dst4', None, {'dst1': 'claim refused'},
                          {'cells': [9]}),
                         (again['status'], again['planned_host'],
                          again['migration_uuid'], again['refused'],
                          again['planned_topology']))
        self.assertFalse(drains.replan_move(
            self.db, UUIDS[0], move['instance_uuid'],
            move['migration_uuid'], 'dst5', None, {}))

    def test_abort_cancels_pending_and_starts_nothing_more(self):
        self.start()
        self.assertTrue(drains.set_status(self.db, UUIDS[0],
                                          drains.ABORTING, [drains.RUNNING]))
        self.assertFalse(drains.set_status(self.db, UUIDS[0],
                                           drains.ABORTING, [drains.RUNNING]))
        self.assertEqual(2, drains.cancel_pending(self.db, UUIDS[0], 'x'))
        self.assertEqual(0, drains.cancel_pending(self.db, UUIDS[0], 'x'))
        self.assertEqual([], self.start())
        self.assertTrue(drains.set_status(self.db, UUIDS[0], drains.ABORTED,
                                          list(drains.ACTIVE)))
        data = drains.get(self.db, UUIDS[0])
        self.assertIsNotNone(data['ended_at'])
        self.assertEqual([], drains.active(self.db))
        self.assertRaises(exception.DrainNotFound, drains.get, self.db,
                          UUIDS[9])
        self.assertRaises(exception.DrainNotFound, drains.latest_for_host,
                          self.db, 'nope')
