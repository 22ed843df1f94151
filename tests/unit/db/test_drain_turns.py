"""numamig.db.drains.turns: which pending moves of a drain start now."""

import random
import types

from numamig.convergence import drain_link
from numamig.db import drains
from tests import base

MIB = 2 ** 20


def move(name, host, status=drains.PENDING, source=None, dirty_mib=0):
    return types.SimpleNamespace(name=name, planned_host=host,
                                 source_host=source, status=status,
                                 migration_uuid=f'm-{name}',
                                 cost=drain_link.Cost(128 * MIB,
                                                      dirty_mib * MIB))


def cost_of(m):
    return m.cost


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


class SharedLinkTurnsTest(base.TestCase):
    """turns with the link's rate and the moves' costs."""

    def test_idle_guests_start_up_to_parallel(self):
        moves = [move(n, f'd{n}') for n in 'abcde']
        self.assertEqual(list('abcd'), names(drains.turns(
            moves, 4, set(), 32 * MIB, cost_of)))

    def test_a_dirtying_guest_keeps_its_share(self):
        # b dirties 12 MiB/s: it needs 15 of the 32 MiB/s, so two copy
        # while it does, where four would without the costs.
        moves = [move('b', 'd1', drains.MIGRATING, dirty_mib=12),
                 move('a', 'd2'), move('c', 'd3'), move('d', 'd4')]
        self.assertEqual(['a'], names(drains.turns(
            moves, 4, {'m-b'}, 32 * MIB, cost_of)))
        self.assertEqual(['a', 'c', 'd'], names(drains.turns(
            moves, 4, {'m-b'})))

    def test_a_dirtying_guest_held_back_holds_the_rest_back(self):
        # e cannot have its share beside two copies: the idle f behind
        # it waits too, so that e starts once a copy ends.
        moves = [move('a', 'd1', drains.MIGRATING),
                 move('b', 'd2', drains.MIGRATING),
                 move('e', 'd3', dirty_mib=12), move('f', 'd4')]
        self.assertEqual([], drains.turns(moves, 4, {'m-a', 'm-b'},
                                          32 * MIB, cost_of))
        moves[0].status = drains.COMPLETED
        self.assertEqual(['e'], names(drains.turns(
            moves, 4, {'m-b'}, 32 * MIB, cost_of)))

    def test_unknown_link_is_the_fixed_rule(self):
        moves = [move('b', 'd1', drains.MIGRATING, dirty_mib=12),
                 move('a', 'd2'), move('c', 'd3')]
        self.assertEqual(['a', 'c'], names(drains.turns(
            moves, 4, {'m-b'}, None, cost_of)))

    def test_generated_states(self):
        """On 5000 generated drains: the moves started with the link
        shared are the first of those the rule without it starts; once
        a move started beside another, every pre-copy copying keeps its
        share; and a drain with nothing migrating starts a move
        whenever the rule without the link would."""
        rng = random.Random(38)
        link = 32 * MIB
        statuses = [drains.PENDING] * 3 + [drains.MIGRATING,
                                           drains.COMPLETED]
        for _ in range(5000):
            moves = [move(f'm{i}', f'd{rng.randint(1, 3)}',
                          rng.choice(statuses),
                          dirty_mib=rng.choice([0, 0, 0, 2, 6, 12, 40]))
                     for i in range(rng.randint(1, 7))]
            claimed = {m.migration_uuid for m in moves
                       if m.status == drains.MIGRATING and rng.random() < .7}
            parallel = rng.randint(1, 5)
            fixed = drains.turns(moves, parallel, claimed)
            shared = drains.turns(moves, parallel, claimed, link, cost_of)
            self.assertEqual(fixed[:len(shared)], shared)
            running = [m.cost for m in moves
                       if m.status == drains.MIGRATING]
            together = running + [m.cost for m in shared]
            if shared and len(together) > 1:
                share = link / len(together)
                for c in together:
                    self.assertLessEqual(c.needs(), share)
            if not running and fixed:
                self.assertTrue(shared)
