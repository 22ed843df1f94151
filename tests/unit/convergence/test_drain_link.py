"""numamig.convergence.drain_link: a drain's moves sharing their link."""

import itertools
import random

from numamig.convergence import drain_link
from numamig.convergence import policy as pol
from numamig.convergence import predict
from tests import base

MIB = 2 ** 20
LINK = 32 * MIB


def cost(dirty_mib=None, memory_mib=128, post_copy=False):
    return drain_link.Cost(memory_mib * MIB,
                           None if dirty_mib is None else dirty_mib * MIB,
                           post_copy)


class CostTest(base.TestCase):

    def test_needs_a_margin_over_the_dirty_rate(self):
        self.assertEqual(10 * MIB, cost(8).needs())
        self.assertEqual(12 * MIB, cost(8).needs(margin=1.5))

    def test_idle_unknown_and_post_copy_need_no_share(self):
        self.assertEqual(0, cost(0).needs())
        self.assertEqual(0, cost(None).needs())
        self.assertEqual(0, cost(6, post_copy=True).needs())


class MayStartTest(base.TestCase):

    def test_the_first_move_always_starts(self):
        # Even one the whole link cannot give its share: only its policy
        # ends it, and holding it back would never start it.
        self.assertTrue(drain_link.may_start(LINK, [], cost(30)))

    def test_unknown_link_holds_nothing_back(self):
        self.assertTrue(drain_link.may_start(None, [cost(30)], cost(30)))
        self.assertTrue(drain_link.may_start(0, [cost(30)], cost(30)))

    def test_a_running_dirtying_guest_keeps_its_share(self):
        # 12 MiB/s needs 15 of 32: two at once (16 each), not three.
        self.assertTrue(drain_link.may_start(LINK, [cost(12)], cost(0)))
        self.assertFalse(drain_link.may_start(LINK, [cost(12), cost(0)],
                                              cost(0)))

    def test_the_candidate_needs_its_own_share(self):
        self.assertFalse(drain_link.may_start(
            LINK, [cost(0), cost(0)], cost(9)))
        self.assertTrue(drain_link.may_start(
            LINK, [cost(0), cost(0)], cost(8)))

    def test_idle_guests_fill_the_link(self):
        running = [cost(0)] * 15
        self.assertTrue(drain_link.may_start(LINK, running, cost(0)))

    def test_post_copy_needs_no_share(self):
        self.assertTrue(drain_link.may_start(
            LINK, [cost(20, post_copy=True), cost(0)], cost(0)))


def order_of(moves):
    """drain_link.order of (name, host, Cost) tuples, as names."""
    return [m[0] for m in drain_link.order(moves, lambda m: m[1],
                                           lambda m: m[2])]


def interleavings(moves):
    """Every order of ``moves`` that keeps each host's moves in their
    order (brute force)."""
    for perm in itertools.permutations(moves):
        seen = {}
        ok = True
        for move in perm:
            last = seen.get(move[1], -1)
            index = moves.index(move)
            if index < last:
                ok = False
                break
            seen[move[1]] = index
        if ok:
            yield list(perm)


def rank(move, moves):
    return (-(move[2].dirty_rate or 0), -move[2].memory, moves.index(move))


class OrderTest(base.TestCase):

    def test_dirtiest_first_then_largest(self):
        moves = [('a', 'h1', cost(0)), ('b', 'h2', cost(6)),
                 ('c', 'h3', cost(0, memory_mib=512)), ('d', 'h4', cost(2))]
        self.assertEqual(['b', 'd', 'c', 'a'], order_of(moves))

    def test_a_destination_keeps_the_plans_order(self):
        # c is dirtiest but follows a into h1: a's claim comes first.
        moves = [('a', 'h1', cost(0)), ('b', 'h2', cost(2)),
                 ('c', 'h1', cost(6))]
        self.assertEqual(['b', 'a', 'c'], order_of(moves))

    def test_ties_keep_the_plans_order(self):
        moves = [(n, f'h{n}', cost(0)) for n in 'abcd']
        self.assertEqual(list('abcd'), order_of(moves))

    def test_unknown_rate_ranks_as_idle(self):
        moves = [('a', 'h1', cost(None)), ('b', 'h2', cost(0)),
                 ('c', 'h3', cost(1))]
        self.assertEqual(['c', 'a', 'b'], order_of(moves))

    def test_against_brute_force(self):
        """On 3000 generated drains of up to 6 moves into up to 3 hosts:
        the order keeps every host's moves in the plan's order, and of
        all the orders that do, it starts the dirtiest (then largest,
        then earliest planned) move it can at every step: its sequence
        of ranks is the least of every such order's."""
        rng = random.Random(38)
        for _ in range(3000):
            count = rng.randint(1, 6)
            moves = [(f'm{i}', f'h{rng.randint(1, 3)}',
                      cost(rng.choice([None, 0, 0, 1, 2, 6]),
                           rng.choice([64, 128, 128, 512])))
                     for i in range(count)]
            got = drain_link.order(moves, lambda m: m[1], lambda m: m[2])
            orders = list(interleavings(moves))
            self.assertIn(got, orders)
            best = min(orders,
                       key=lambda o: [rank(m, moves) for m in o])
            self.assertEqual(best, got)


class PolicyForTest(base.TestCase):

    catalog = dict(pol.SHIPPED)

    def prediction(self, memory, dirty):
        def predicted(name, share):
            return predict.for_policy(self.catalog[name], memory, dirty,
                                      share, 500, 0, ())
        return predicted

    def choose(self, dirty_mib, share_mib, own='finish', fallbacks=('nfv',),
               working_set_mib=None):
        c = cost(dirty_mib)
        return drain_link.policy_for(
            c, share_mib * MIB, own, fallbacks,
            self.prediction(c.memory, c.dirty_rate))

    def test_a_converging_pre_copy_keeps_its_policy(self):
        self.assertEqual('finish', self.choose(2, 16))

    def test_pre_copy_that_cannot_converge_at_its_share_falls_back(self):
        # 20 MiB/s against a share of 8: finish would only end it by its
        # tiers; nfv switches to post-copy.
        self.assertEqual('nfv', self.choose(20, 8))

    def test_no_fallback_that_ends_it_keeps_its_own(self):
        self.catalog = dict(pol.SHIPPED, never=pol.Policy(
            'never', downtime_ms=(100,), tiers=(pol.ABORT,)))
        self.assertEqual('finish', self.choose(20, 8, fallbacks=('never',)))

    def test_unknown_rate_or_share_keeps_its_own(self):
        self.assertEqual('finish', self.choose(None, 8))
        self.assertEqual('finish', self.choose(20, 0))


class PredictorTest(base.TestCase):
    """drain_link.predictor: what the conductor predicts a move with,
    from the figures its source sent with the estimate."""

    figures = {'downtime_ms': 500, 'timeout_s_per_gib': 0,
               'timer_tiers': []}

    def choose(self, dirty_mib, share_mib, figures=None, own='timer',
               fallbacks=('never_pause', 'finish')):
        c = cost(dirty_mib)
        return drain_link.policy_for(
            c, share_mib * MIB, own, fallbacks,
            drain_link.predictor(dict(pol.SHIPPED), figures or self.figures,
                                 c))

    def test_as_predict_for_policy_with_the_sources_figures(self):
        c = cost(12)
        predicted = drain_link.predictor(dict(pol.SHIPPED), self.figures, c)
        for name in pol.SHIPPED:
            for share in (4, 8, 16, 32):
                self.assertEqual(
                    predict.for_policy(pol.SHIPPED[name], c.memory,
                                       c.dirty_rate, share * MIB, 500, 0,
                                       ()),
                    predicted(name, share * MIB))

    def test_idle_and_slow_guests_keep_their_own(self):
        for dirty in (0, 2, 6):
            self.assertEqual('timer', self.choose(dirty, 8))

    def test_a_guest_faster_than_its_share_gets_a_fallback(self):
        # 40 MiB/s against the whole 32 MiB/s link: the timer policy
        # (no forced completion) never ends it; never_pause does.
        self.assertEqual('never_pause', self.choose(40, 32))
        # 12 MiB/s against a share of 8 likewise; against 16 it
        # converges in pre-copy.
        self.assertEqual('never_pause', self.choose(12, 8))
        self.assertEqual('timer', self.choose(12, 16))

    def test_the_timeout_per_gib_scales_with_memory(self):
        seen = []
        original = predict.for_policy

        def spy(*args, **kwargs):
            seen.append(args[5])
            return original(*args, **kwargs)

        self.patch(predict, 'for_policy', spy)
        drain_link.predictor(dict(pol.SHIPPED), dict(
            self.figures, timeout_s_per_gib=100), cost(1, 3072))(
                'timer', MIB)
        drain_link.predictor(dict(pol.SHIPPED), dict(
            self.figures, timeout_s_per_gib=100), cost(1, 128))(
                'timer', MIB)
        self.assertEqual([300, 100], seen)
