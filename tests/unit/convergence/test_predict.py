"""The prediction arithmetic: idle, slow-dirtying, faster than the link."""

from numamig.convergence import emulated
from numamig.convergence import policy as pol
from numamig.convergence import predict
from tests import base

MIB = 2 ** 20
GIB = 2 ** 30


class PredictTestCase(base.TestCase):

    def test_idle_guest_one_pass(self):
        p = predict.predict(GIB, 0, 100 * MIB, 300)
        self.assertEqual(predict.CONVERGES, p.outcome)
        # Pass 1 sends 1 GiB in 10.24 s; nothing remains.
        self.assertEqual((10240, 0, 2), (p.elapsed_ms, p.downtime_ms,
                                         p.passes))

    def test_half_rate_geometric(self):
        # 1024 -> 512 -> 256 -> 128 -> 64 -> 32 -> 16 MiB; 300 ms at
        # 100 MiB/s fits 30 MiB: the pass of 16 MiB is the stop-copy.
        p = predict.predict(GIB, 50 * MIB, 100 * MIB, 300)
        self.assertEqual(predict.CONVERGES, p.outcome)
        self.assertEqual(7, p.passes)
        self.assertEqual(160, p.downtime_ms)
        self.assertEqual(int((1024 + 512 + 256 + 128 + 64 + 32 + 16) /
                             100 * 1000), p.elapsed_ms)

    def test_agrees_with_the_model(self):
        for dirty in (0, 10, 50, 90):
            p = predict.predict(GIB, dirty * MIB, 100 * MIB, 300)
            policy = pol.Policy('p', downtime_ms=(300,))
            out = emulated.run(policy, GIB, dirty * MIB, 100 * MIB)
            self.assertEqual(emulated.CONVERGED, out.outcome, dirty)
            self.assertEqual(out.downtime_ms, p.downtime_ms, dirty)
            self.assertAlmostEqual(out.elapsed_s * 1000, p.elapsed_ms,
                                   delta=1)

    def test_faster_than_the_link(self):
        p = predict.predict(GIB, 150 * MIB, 100 * MIB, 500)
        self.assertEqual(predict.WILL_NOT_CONVERGE, p.outcome)
        self.assertIn('dirtying 150.0 MiB/s against 100.0 MiB/s', p.reason)
        self.assertFalse(p.converges)

    def test_working_set_that_fits(self):
        p = predict.predict(GIB, 400 * MIB, 100 * MIB, 200,
                            working_set=20 * MIB)
        self.assertEqual((predict.CONVERGES, 200), (p.outcome,
                                                    p.downtime_ms))

    def test_tiers_in_order(self):
        for tiers, outcome in (
                ((pol.AUTO_CONVERGE, pol.ABORT),
                 predict.NEEDS_AUTO_CONVERGE),
                ((pol.POST_COPY, pol.ABORT), predict.NEEDS_POST_COPY),
                ((pol.PAUSE,), predict.NEEDS_PAUSE),
                ((pol.ABORT,), predict.WILL_NOT_CONVERGE)):
            p = predict.predict(GIB, 150 * MIB, 100 * MIB, 500, tiers=tiers)
            self.assertEqual(outcome, p.outcome, tiers)

    def test_auto_converge_cannot_beat_a_hundredfold_rate(self):
        p = predict.predict(GIB, 200 * 100 * MIB, 100 * MIB, 500,
                            tiers=(pol.AUTO_CONVERGE,))
        self.assertEqual(predict.WILL_NOT_CONVERGE, p.outcome)

    def test_too_slow_for_the_timeout(self):
        p = predict.predict(GIB, 99 * MIB, 100 * MIB, 300, timeout_s=60)
        self.assertEqual(predict.WILL_NOT_CONVERGE, p.outcome)
        self.assertIn('over the completion timeout of 60 s', p.reason)

    def test_unknown_is_never_guessed(self):
        self.assertEqual(predict.UNKNOWN,
                         predict.predict(GIB, None, 100 * MIB, 300).outcome)
        p = predict.predict(GIB, 10 * MIB, 0, 300)
        self.assertEqual(predict.UNKNOWN, p.outcome)
        self.assertIn('live_migration_bandwidth', p.reason)

    def test_for_policy(self):
        nfv = pol.SHIPPED[pol.NFV]
        p = predict.for_policy(nfv, GIB, 150 * MIB, 100 * MIB, 500, 800)
        self.assertEqual(predict.NEEDS_POST_COPY, p.outcome)
        timer = pol.SHIPPED[pol.TIMER]
        p = predict.for_policy(timer, GIB, 150 * MIB, 100 * MIB, 500, 800)
        self.assertEqual(predict.WILL_NOT_CONVERGE, p.outcome)
