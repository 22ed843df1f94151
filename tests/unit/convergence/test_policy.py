"""The convergence engine fed iteration sequences; the policy format."""

from numamig import exception
from numamig.convergence import policy as pol
from tests import base


def _run(policy, samples):
    """Feed ``samples`` ((iteration, remaining) pairs); return the state
    and every action, the start's included."""
    state, actions = pol.start(policy)
    for iteration, remaining in samples:
        state, more = pol.observe(policy, state,
                                  pol.Sample(iteration, remaining))
        actions += more
    return state, actions


def _kinds(actions):
    return [a.downtime_ms if a.kind == pol.DOWNTIME else a.kind
            for a in actions]


STEPS = pol.Policy('p', downtime_ms=(100, 200, 300),
                   tiers=(pol.POST_COPY, pol.ABORT))


class EngineTestCase(base.TestCase):

    def test_first_step_at_start(self):
        state, actions = pol.start(STEPS)
        self.assertEqual([100], _kinds(actions))
        self.assertEqual(1, state.step)

    def test_shrinking_passes_never_escalate(self):
        samples = [(1, 1000), (1, 600), (2, 500), (2, 300), (3, 200),
                   (4, 90), (5, 10)]
        _state, actions = _run(STEPS, samples)
        self.assertEqual([100], _kinds(actions))

    def test_each_stalled_pass_raises_downtime_then_tiers(self):
        # Pass 1 starts at 1000; every later pass starts at 1000 again:
        # each one stalls.
        samples = [(1, 1000)] + [(i, 1000) for i in range(2, 7)]
        state, actions = _run(STEPS, samples)
        self.assertEqual([100, 200, 300, 'post_copy'], _kinds(actions))
        self.assertTrue(state.ended)

    def test_samples_within_a_pass_do_not_count(self):
        samples = [(2, 1000)] + [(2, 990)] * 20
        _state, actions = _run(STEPS, samples)
        self.assertEqual([100], _kinds(actions))

    def test_growth_is_a_stall(self):
        _state, actions = _run(STEPS, [(1, 1000), (2, 1500)])
        self.assertEqual([100, 200], _kinds(actions))

    def test_progress_below_min_progress_is_a_stall(self):
        policy = pol.Policy('p', downtime_ms=(1, 2), min_progress=10)
        _state, actions = _run(policy, [(1, 1000), (2, 950)])
        self.assertEqual([1, 2], _kinds(actions))
        _state, actions = _run(policy, [(1, 1000), (2, 890)])
        self.assertEqual([1], _kinds(actions))

    def test_progress_resets_the_stall_count(self):
        policy = pol.Policy('p', downtime_ms=(1, 2), stall_iterations=2)
        samples = [(1, 1000), (2, 1000), (3, 500), (4, 500), (5, 500)]
        _state, actions = _run(policy, samples)
        # Pass 2 stalls once, pass 3 progresses (reset), passes 4 and 5
        # are two stalls in a row: one escalation.
        self.assertEqual([1, 2], _kinds(actions))

    def test_skipped_passes_are_one_comparison(self):
        _state, actions = _run(STEPS, [(1, 1000), (7, 1000)])
        self.assertEqual([100, 200], _kinds(actions))
        self.assertIn('6 passes before', actions[1].reason)

    def test_first_pass_is_never_a_stall(self):
        # The first pass sends all memory; its start is no comparison.
        _state, actions = _run(STEPS, [(1, 5000)])
        self.assertEqual([100], _kinds(actions))

    def test_nothing_after_a_final_tier(self):
        policy = pol.Policy('p', downtime_ms=(1,), tiers=(pol.PAUSE,))
        samples = [(i, 1000) for i in range(1, 10)]
        state, actions = _run(policy, samples)
        self.assertEqual([1, 'pause'], _kinds(actions))
        self.assertTrue(state.ended)

    def test_schedule_exhausted_without_tiers_ends(self):
        policy = pol.Policy('p', downtime_ms=(1,))
        state, actions = _run(policy, [(i, 1000) for i in range(1, 5)])
        self.assertEqual([1], _kinds(actions))
        self.assertTrue(state.ended)

    def test_timeout_applies_the_last_tier(self):
        state, _ = pol.start(STEPS)
        state, actions = pol.timed_out(STEPS, state, 800)
        self.assertEqual(['abort'], _kinds(actions))
        self.assertIn('800 s', actions[0].reason)
        self.assertEqual((state, []), pol.timed_out(STEPS, state, 800))

    def test_timeout_without_tiers_aborts(self):
        policy = pol.Policy('p', downtime_ms=(1,))
        _state, actions = pol.timed_out(policy, pol.start(policy)[0], 5)
        self.assertEqual(['abort'], _kinds(actions))

    def test_refused_post_copy_falls_to_the_next_tier(self):
        state, actions = _run(STEPS, [(i, 1000) for i in range(1, 6)])
        self.assertEqual('post_copy', actions[-1].kind)
        state, actions = pol.failed(STEPS, state, actions[-1])
        self.assertEqual(['abort'], _kinds(actions))
        self.assertTrue(state.ended)

    def test_timer_policy_decides_nothing(self):
        timer = pol.SHIPPED[pol.TIMER]
        state, actions = _run(timer, [(i, 1000) for i in range(1, 9)])
        self.assertEqual([], actions)
        self.assertEqual(([]), pol.timed_out(timer, state, 1)[1])

    def test_dirty_rate_named_in_reason(self):
        state, _ = pol.start(STEPS)
        state, _ = pol.observe(STEPS, state, pol.Sample(1, 1000))
        _, actions = pol.observe(STEPS, state,
                                 pol.Sample(2, 1000, dirty_rate=80,
                                            bandwidth=50))
        self.assertIn('dirtying 80 B/s against 50 B/s', actions[0].reason)

    def test_inputs_not_mutated(self):
        state, _ = pol.start(STEPS)
        before = state
        pol.observe(STEPS, state, pol.Sample(5, 1))
        self.assertEqual(before, state)

    def test_shipped_nfv_never_exceeds_200_ms(self):
        nfv = pol.SHIPPED[pol.NFV]
        _state, actions = _run(nfv, [(i, 1000) for i in range(1, 20)])
        self.assertEqual([50, 100, 150, 200, 'post_copy'], _kinds(actions))

    def test_shipped_finish_ends_paused(self):
        finish = pol.SHIPPED[pol.FINISH]
        state, actions = _run(finish, [(i, 1000) for i in range(1, 20)])
        self.assertEqual('auto_converge', actions[6].kind)
        self.assertEqual('post_copy', actions[7].kind)
        state, more = pol.failed(finish, state, actions[7])
        self.assertEqual(['pause'], _kinds(more))

    def test_shipped_never_pause_never_pauses(self):
        policy = pol.SHIPPED[pol.NEVER_PAUSE]
        state, actions = _run(policy, [(i, 1000) for i in range(1, 20)])
        state, more = pol.failed(policy, state, actions[-1])
        kinds = _kinds(actions + more)
        self.assertNotIn('pause', kinds)
        self.assertEqual('abort', kinds[-1])


class FormatTestCase(base.TestCase):

    def test_parse_and_describe_round_trip(self):
        text = ("gold: downtime=100,150,200; then=post_copy,abort; "
                "stall_iterations=2; min_progress=10")
        policy = pol.parse(text)
        self.assertEqual(pol.Policy('gold', (100, 150, 200),
                                    (pol.POST_COPY, pol.ABORT), 2, 10.0),
                         policy)
        self.assertEqual(text, policy.describe())
        self.assertEqual(policy, pol.parse(policy.describe()))

    def test_timer(self):
        self.assertTrue(pol.parse('legacy: timer').timer)

    def test_shipped_describe_round_trips(self):
        for policy in pol.SHIPPED.values():
            self.assertEqual(policy, pol.parse(policy.describe()))

    def test_bad_lines(self):
        for text, fragment in (
                ('no colon', "expected 'NAME: key=value"),
                ('p: downtime=', 'downtime needs 1-32 steps'),
                ('p: downtime=300,100', 'must not decrease'),
                ('p: downtime=100; then=explode', "unknown tier 'explode'"),
                ('p: downtime=100; then=abort,pause', 'nothing can follow'),
                ('p: downtime=100; then=pause,pause', 'named once'),
                ('p: downtime=x', "downtime='x' is not a valid value"),
                ('p: speed=3', "'speed=3' is not one of"),
                ('p q: downtime=1', 'a name is'),
                ('p: downtime=1; stall_iterations=0', 'stall_iterations'),
                ('p: downtime=1; min_progress=100', 'min_progress'),
                ('p: downtime=0', '1-60000 ms')):
            exc = self.assertRaises(exception.InvalidMigrationPolicy,
                                    pol.parse, text)
            self.assertIn(fragment, str(exc), text)

    def test_catalog_overrides_shipped_and_refuses_twice(self):
        policies = pol.catalog(['nfv: downtime=20', 'x: downtime=5'])
        self.assertEqual((20,), policies['nfv'].downtime_ms)
        self.assertIn('finish', policies)
        self.assertRaises(exception.InvalidMigrationPolicy, pol.catalog,
                          ['x: downtime=5', 'x: downtime=6'])


class SelectTestCase(base.TestCase):

    def test_precedence(self):
        policies = pol.catalog([])
        self.assertEqual(('nfv', 'requested for the migration'),
                         (pol.select(policies, 'nfv', 'finish', 'timer')[0]
                          .name, pol.select(policies, 'nfv')[1]))
        self.assertEqual('finish', pol.select(policies, None, 'finish',
                                              'nfv')[0].name)
        self.assertEqual('nfv', pol.select(policies, None, None,
                                           'nfv')[0].name)
        self.assertEqual('timer', pol.select(policies)[0].name)

    def test_unknown_names_where(self):
        exc = self.assertRaises(exception.UnknownMigrationPolicy,
                                pol.select, pol.catalog([]), None, 'gold')
        self.assertIn('flavor key hw:live_migration_policy', str(exc))
        self.assertIn('finish, never_pause, nfv, timer', str(exc))
