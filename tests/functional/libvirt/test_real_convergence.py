"""The real tier: jobs that never converge by themselves, and their ends.

The guest keeps dirtying 94 MiB while its migration is throttled (see
real_hosts), so only numamig can end the job: a caller's force_complete
(post-copy when permitted, else a pause), or the completion timeout's
action (abort or force_complete).
"""

import os
import time

import testscenarios

from numamig import exception
from tests.functional.libvirt import real_hosts
from tests.functional.libvirt.real_hosts import GUEST

load_tests = testscenarios.load_tests_apply_scenarios

# Precopy at 1 MiB/s lasts minutes: the job is surely in flight when the
# test acts. Post-copy has no bandwidth limit of its own, so it ends fast.
CRAWL_MIB = 1
# Paused, the guest's 94 MiB of dirtied pages still have to be sent; at
# this rate that takes over a second (the downtime) but never minutes,
# while the running guest could only converge at > 1.8 GiB/s (94 MiB in
# the first max downtime step of 50 ms).
PAUSED_MIB = 64
DIRTY_MIB = 94
TIMEOUT_S = 2
OPT_IN = 'NUMAMIG_TEST_REAL_CONVERGENCE'


class ConvergenceTestCase(real_hosts.RealHostsTestCase):
    """Opt-in: these race a TCG guest's dirtying against a 2 s timeout,
    and on a 2-core machine they lose now and then (the guest converges
    first, or QEMU drops the stream). ``tox -e py3`` and CI run the rest
    of the real tier; set NUMAMIG_TEST_REAL_CONVERGENCE=1 to run these.
    """

    def setUp(self):
        if not os.environ.get(OPT_IN):
            self.skipTest(f"timing-sensitive real-tier convergence tests "
                          f"are opt-in: set {OPT_IN}=1")
        super().setUp()


class ForceCompleteTestCase(ConvergenceTestCase):
    """A caller forces the job to complete."""

    def _force_complete(self, source, run):
        """Force the job once its copy is under way; return the ms from
        the force to the end, which must be a success."""
        run.wait_for_progress()
        forced = time.monotonic()
        source.live_migration_force_complete(GUEST)
        run.wait_for_end()
        self.assertIsNone(run.error)
        return int((time.monotonic() - forced) * 1000)

    def test_post_copy(self):
        source = self.driver('src', permit_post_copy=True)
        self.spawn_guest(dirty=True)
        run = self.start_migration(source, bandwidth_mib=CRAWL_MIB)
        tail_ms = self._force_complete(source, run)
        self.assertTrue(run.result.post_copy)
        self.assertFalse(run.result.paused)
        self.assert_moved_to_dst()
        self.assert_coherent_progress(run)
        # Post-copy stops the guest only to switch over: far less than
        # the time the remaining memory took to arrive.
        self.assertIsNotNone(run.result.downtime_ms)
        self.assertLess(run.result.downtime_ms, tail_ms)
        self.record(f"post-copy: {run.result.elapsed_ms} ms in all, "
                    f"{tail_ms} ms after force_complete, downtime "
                    f"{run.result.downtime_ms} ms, "
                    f"{len(run.samples)} samples")

    def test_pause(self):
        source = self.drivers['src']
        self.spawn_guest(dirty=True)
        run = self.start_migration(bandwidth_mib=PAUSED_MIB)
        tail_ms = self._force_complete(source, run)
        self.assertTrue(run.result.paused)
        self.assertFalse(run.result.post_copy)
        # libvirt resumes the guest on the destination.
        self.assert_moved_to_dst()
        self.assert_coherent_progress(run)
        # The guest stood still while its dirtied pages crossed at
        # PAUSED_MIB: that is the downtime. How much of the dirty set is
        # still unsent at the instant of the pause varies from run to run
        # (measured 0.99-2.9 s), so the floor assumes only a quarter of
        # it: still an order of magnitude above any pre-copy downtime.
        floor_ms = 1000 * DIRTY_MIB // 4 // PAUSED_MIB
        self.assertGreaterEqual(run.result.downtime_ms, floor_ms)
        self.assertLessEqual(run.result.downtime_ms, run.result.elapsed_ms)
        self.record(f"pause: {run.result.elapsed_ms} ms in all, {tail_ms} "
                    f"ms after force_complete, downtime "
                    f"{run.result.downtime_ms} ms, "
                    f"{len(run.samples)} samples")

    def test_abort_after_pause_resumes_the_guest_on_the_source(self):
        source = self.drivers['src']
        self.spawn_guest(dirty=True)
        run = self.start_migration(bandwidth_mib=CRAWL_MIB)
        run.wait_for_progress()
        source.live_migration_force_complete(GUEST)
        source.live_migration_abort(GUEST)
        run.wait_for_end()

        self.assertIsInstance(run.error, exception.MigrationAborted)
        self.assert_still_on_src()
        self.assert_coherent_progress(run)


class CompletionTimeoutTestCase(ConvergenceTestCase):
    """The monitor acts once the job outlives its completion timeout."""

    def test_abort(self):
        source = self.driver('src', completion_timeout_s=TIMEOUT_S)
        self.spawn_guest(dirty=True)
        run = self.start_migration(source, bandwidth_mib=CRAWL_MIB)
        run.wait_for_end()

        self.assertIsInstance(run.error, exception.MigrationAborted)
        self.assertIn(f'completion timeout of {TIMEOUT_S} s exceeded',
                      str(run.error))
        self.assert_still_on_src()
        # The monitor acts on a sample, so at least one was reported.
        self.assert_coherent_progress(run, require_moved=False)


class CompletionTimeoutForceTestCase(ConvergenceTestCase):

    scenarios = [
        ('post_copy', {'settings': {'permit_post_copy': True},
                       'bandwidth': CRAWL_MIB}),
        ('pause', {'settings': {}, 'bandwidth': PAUSED_MIB}),
    ]

    def test_force_complete(self):
        source = self.driver('src', completion_timeout_s=TIMEOUT_S,
                             timeout_action='force_complete',
                             **self.settings)
        self.spawn_guest(dirty=True)
        run = self.start_migration(source, bandwidth_mib=self.bandwidth)
        run.wait_for_end()

        self.assertIsNone(run.error)
        post_copy = bool(self.settings)
        self.assertEqual((post_copy, not post_copy),
                         (run.result.post_copy, run.result.paused))
        self.assertGreater(run.result.elapsed_ms, TIMEOUT_S * 1000)
        self.assert_moved_to_dst()
        self.assert_coherent_progress(run, require_moved=False)
        self.assertIsNotNone(run.result.downtime_ms)
        self.record(f"timeout -> {'post-copy' if post_copy else 'pause'}: "
                    f"{run.result.elapsed_ms} ms, downtime "
                    f"{run.result.downtime_ms} ms")


class IterationPolicyTestCase(ConvergenceTestCase):
    """A convergence policy escalates a stalled job pass by pass
    (numamig.convergence.policy): the dirtying guest's 94 MiB never fit
    50 ms at 32 MiB/s, so every pass after the first stalls, and the
    policy's tier (post-copy) ends the job, with no timer involved."""

    def test_stalled_passes_escalate_to_post_copy(self):
        source = self.driver(
            'src', policy='stall',
            policies=('stall: downtime=50; then=post_copy,abort',),
            completion_timeout_s=0)
        self.spawn_guest(dirty=True)
        run = self.start_migration(source, bandwidth_mib=32)
        run.wait_for_end()
        self.assertIsNone(run.error)
        self.assertTrue(run.result.post_copy)
        self.assert_moved_to_dst()
        actions = run.result.convergence_actions
        self.assertEqual('stall', run.result.convergence_policy)
        self.assertEqual(2, len(actions), actions)
        self.assertTrue(actions[0].startswith('allow 50 ms'))
        self.assertTrue(actions[1].startswith('post-copy (pass '), actions)
        passes = max(s.iteration for s in run.samples)
        self.record(f"iteration policy: {run.result.elapsed_ms} ms, "
                    f"downtime {run.result.downtime_ms} ms, {passes} "
                    f"passes seen; {actions}")
