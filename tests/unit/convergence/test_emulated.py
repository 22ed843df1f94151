"""The modelled pre-copy: passes, stalls, and the engine's actions."""

from numamig.convergence import emulated
from numamig.convergence import policy as pol
from tests import base

MIB = 1024 * 1024
GIB = 1024 * MIB
TIMER = pol.SHIPPED[pol.TIMER]
# The timer defaults of [libvirt] for a 1 GiB guest: 500 ms in 10 steps
# 75 s apart, completion timeout 800 s, abort.
DEFAULT_TIMER = emulated.Timer(
    steps=tuple((75 * i, int(50 + 45 * i)) for i in range(11)),
    timeout_s=800)


class EmulatedCopyTestCase(base.TestCase):

    def test_idle_guest_converges_in_one_pass(self):
        out = emulated.run(TIMER, GIB, 0, 100 * MIB, DEFAULT_TIMER)
        self.assertEqual(emulated.CONVERGED, out.outcome)
        self.assertEqual(2, out.passes)
        self.assertEqual(0, out.downtime_ms)
        self.assertEqual(GIB, out.bytes_sent)
        self.assertAlmostEqual(10.24, out.elapsed_s, places=2)

    def test_samples_are_what_a_hypervisor_reports(self):
        out = emulated.run(TIMER, GIB, 50 * MIB, 100 * MIB, DEFAULT_TIMER)
        first, second = out.samples[:2]
        self.assertEqual((1, GIB, 50 * MIB, 100 * MIB),
                         (first.iteration, first.remaining,
                          first.dirty_rate, first.bandwidth))
        self.assertEqual((2, GIB // 2), (second.iteration,
                                         second.remaining))
        self.assertEqual(emulated.CONVERGED, out.outcome)

    def test_dirtier_than_the_link_times_out_under_the_timer(self):
        out = emulated.run(TIMER, GIB, 150 * MIB, 100 * MIB, DEFAULT_TIMER)
        self.assertEqual(emulated.ABORTED, out.outcome)
        self.assertIn('completion timeout of 800 s', out.reason)
        self.assertGreater(out.elapsed_s, 800)

    def test_stalled_copy_escalates_per_pass_under_nfv(self):
        out = emulated.run(pol.SHIPPED[pol.NFV], GIB, 150 * MIB, 100 * MIB)
        self.assertEqual(emulated.POST_COPY, out.outcome)
        self.assertEqual(5, len(out.actions))
        self.assertTrue(out.actions[-1].startswith('post-copy'))
        # Five passes of 10.24 s, not 800 s of timer.
        self.assertLess(out.elapsed_s, 70)

    def test_working_set_converges_sooner_by_pass_than_by_timer(self):
        # 20 MiB kept dirty over 100 MiB/s: 200 ms of downtime is needed.
        args = (GIB, 400 * MIB, 100 * MIB)
        by_timer = emulated.run(TIMER, *args, timer=DEFAULT_TIMER,
                                working_set=20 * MIB)
        by_pass = emulated.run(pol.SHIPPED[pol.NFV], *args,
                               working_set=20 * MIB)
        self.assertEqual(emulated.CONVERGED, by_timer.outcome)
        self.assertEqual(emulated.CONVERGED, by_pass.outcome)
        self.assertEqual(200, by_pass.downtime_ms)
        self.assertGreater(by_timer.elapsed_s, 225)
        self.assertLess(by_pass.elapsed_s, 12)

    def test_auto_converge_throttles_until_it_converges(self):
        policy = pol.Policy('t', downtime_ms=(300,),
                            tiers=(pol.AUTO_CONVERGE, pol.ABORT),
                            stall_iterations=1, min_progress=0)
        out = emulated.run(policy, GIB, 110 * MIB, 100 * MIB)
        self.assertEqual(emulated.CONVERGED, out.outcome)
        self.assertTrue(any(a.startswith('auto-converge')
                            for a in out.actions))
        self.assertLess(out.samples[-1].dirty_rate, 100 * MIB)

    def test_pause_tier_reports_its_downtime(self):
        policy = pol.Policy('p', downtime_ms=(10,), tiers=(pol.PAUSE,))
        out = emulated.run(policy, GIB, 200 * MIB, 100 * MIB)
        self.assertEqual(emulated.PAUSED, out.outcome)
        self.assertEqual(10240, out.downtime_ms)

    def test_policy_timeout_applies_last_tier(self):
        policy = pol.Policy('p', downtime_ms=(10,), tiers=(pol.ABORT,),
                            stall_iterations=100)
        out = emulated.run(policy, GIB, 200 * MIB, 100 * MIB, timeout_s=30)
        self.assertEqual(emulated.ABORTED, out.outcome)
        self.assertIn('completion timeout of 30 s', out.reason)

    def test_timer_force_complete_post_copy(self):
        timer = emulated.Timer(steps=((0, 50),), timeout_s=30,
                               timeout_action='force_complete',
                               post_copy=True)
        out = emulated.run(TIMER, GIB, 200 * MIB, 100 * MIB, timer)
        self.assertEqual(emulated.POST_COPY, out.outcome)
