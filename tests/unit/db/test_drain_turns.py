"""numamig.db.drains.turns: which pending moves of a drain start now."""

import types

from numamig.db import drains
from tests import base


def move(name, host, status=drains.PENDING, source=None):
    return types.SimpleNamespace(name=name, planned_host=host,
                                 source_host=source, status=status,
                                 migration_uuid=f'm-{name}')


def names(moves):
    return [m.name for m in moves]


class TurnsTest(base.TestCase):

    def test_one_claim_at_a_time_per_destination_in_plan_order(self):
        moves = [move('a', 'd1'), move('b', 'd1'), move('c', 'd2')]
        self.assertEqual(['a', 'c'], names(drains.turns(moves, 4, set())))

    def test_the_next_move_follows_once_the_claim_is_taken(self):
        moves = [move('a', 'd1', drains.MIGRATING), move('b', 'd1'),
                 move('c', 'd1')]
        # a's migration has not claimed yet: b waits, and c behind it.
        self.assertEqual([], drains.turns(moves, 4, set()))
        # Claimed: b starts while a still copies; c waits for b's claim.
        self.assertEqual(['b'], names(drains.turns(moves, 4, {'m-a'})))

    def test_parallel_counts_every_migrating_move(self):
        moves = [move('a', 'd1', drains.MIGRATING),
                 move('b', 'd2', drains.MIGRATING), move('c', 'd3'),
                 move('d', 'd4')]
        claimed = {'m-a', 'm-b'}
        self.assertEqual(['c'], names(drains.turns(moves, 3, claimed)))
        self.assertEqual([], drains.turns(moves, 2, claimed))

    def test_a_move_into_a_host_waits_for_the_moves_off_it(self):
        moves = [move('x', 'd2', source='d1'), move('a', 'd1'),
                 move('c', 'd3')]
        self.assertEqual(['x', 'c'], names(drains.turns(moves, 4, set())))
        moves[0].status = drains.MIGRATING
        self.assertEqual(['c'], names(drains.turns(moves, 4, {'m-x'})))
        moves[0].status = drains.COMPLETED
        self.assertEqual(['a', 'c'], names(drains.turns(moves, 4, set())))
