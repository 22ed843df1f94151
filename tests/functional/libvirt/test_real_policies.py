"""The real tier: the ``finish``, ``never_pause`` and observe-only
convergence policies on real QEMU.

The guest keeps rewriting DIRTY_MIB of its memory and its copy is
capped at BANDWIDTH_MIB MiB/s, so every pass resends all of it: the job
never converges by itself, and only a policy ends it. What each policy
did is checked twice: as numamig recorded it (the result's convergence
actions, the outcome) and as libvirt and QEMU saw it, independently of
numamig: the maximum downtime QEMU was given
(``virDomainMigrateGetMaxDowntime``), QEMU's vCPU throttle
(``auto_converge_throttle`` in the job statistics) and the source
domain's lifecycle events (suspended for post-copy, suspended by a
pause, or never suspended). Nothing depends on how long a step takes:
the completion timeouts end jobs that cannot converge at any speed, and
a pass lasts seconds while the watch (numamig_ci.job_watch) samples
every 50 ms.

Always run; about 15-40 s each on a 2-core machine (TCG).
"""

import logging
import os

import fixtures

from numamig import exception
from numamig.convergence import policy as convergence
from numamig_ci import job_watch
from numamig_ci import libvirt_hosts
from numamig_ci.job_watch import SUSPENDED_MIGRATED
from numamig_ci.job_watch import SUSPENDED_POSTCOPY
from tests.functional.libvirt import real_hosts

# Guests of these tests' own, so that no other real-tier test's lookup
# by uuid takes theirs (the pid keeps two test processes apart too).
GUEST = f'5a1e0000-bbbb-4ccc-8d0a-{os.getpid():012x}'
BLOCKER = f'5a1e0000-bbbb-4ccc-8d0b-{os.getpid():012x}'
# A pass resends the DIRTY_MIB the guest rewrote meanwhile: about 2 s
# at BANDWIDTH_MIB, in which a guest given even a tenth of a pCPU
# rewrites all of it again.
DIRTY_MIB = 8
BANDWIDTH_MIB = 4
# The completion timeout (seconds: the guest has less than 1 GiB); no
# schedule's tiers are reached by then.
TIMEOUT_S = 2
# The engine samples the job this often: short against a pass, so the
# remaining bytes it reads at a pass's start vary little.
PROGRESS_INTERVAL_S = 0.1


class PolicyTestCase(real_hosts.RealHostsTestCase):
    """Hosts src and dst (see real_hosts) and a guest dirtying DIRTY_MIB."""

    def setUp(self):
        self.useFixture(fixtures.MonkeyPatch(
            'tests.functional.libvirt.real_hosts.GUEST', GUEST))
        self.useFixture(fixtures.MonkeyPatch(
            'tests.functional.libvirt.real_hosts.BLOCKER', BLOCKER))
        super().setUp()
        with open(self.kernel, 'wb') as f:
            f.write(libvirt_hosts.dirtying_kernel(2 + DIRTY_MIB))

    def migrate(self, **settings):
        """Migrate the dirtying guest from a source with these
        MigrationSettings; return (run, watch) once the job ended."""
        settings.setdefault('progress_interval_s', PROGRESS_INTERVAL_S)
        source = self.driver('src', **settings)
        self.spawn_guest(dirty=True)
        watch = job_watch.JobWatch(self.hosts['src'].uri, GUEST).start()
        self.addCleanup(watch.stop)
        run = self.start_migration(source, bandwidth_mib=BANDWIDTH_MIB)
        run.wait_for_end()
        watch.stop()
        return run, watch

    def downtime_steps(self, actions, prefix=''):
        """The downtimes (ms) of the 'allow N ms' actions, in order."""
        allow = f'{prefix}allow '
        return [int(a[len(allow):].split(' ', 1)[0]) for a in actions
                if a.startswith(allow)]

    def assert_qemu_had(self, watch, steps):
        """QEMU's maximum downtime took exactly ``steps``, in order, and
        before the first only QEMU's default."""
        self.assertTrue(watch.steps_after_default(steps),
                        f"QEMU had {watch.downtimes}, numamig set {steps}")

    def assert_paused_to_converge(self, run, watch, policy):
        """libvirt's record of a job the source paused: suspended for
        the migration (libvirt names a pause during a migration so, as
        it names the switch-over of a converged pre-copy), never for
        post-copy, and standing still longer than ``policy`` allows any
        switch-over to take, which a converged pre-copy never does."""
        self.assertEqual([SUSPENDED_MIGRATED], watch.suspensions(),
                         watch.events)
        self.assertGreater(run.result.downtime_ms, max(policy.downtime_ms))


class FinishTestCase(PolicyTestCase):
    """``finish``: 100-500 ms, then auto-converge, post-copy, pause."""

    def test_stalled_passes_escalate_to_post_copy(self):
        finish = convergence.SHIPPED[convergence.FINISH]
        run, watch = self.migrate(policy=convergence.FINISH)

        self.assertIsNone(run.error)
        self.assertEqual(convergence.FINISH, run.result.convergence_policy)
        actions = run.result.convergence_actions
        # numamig's record: every downtime step, one per stalled pass,
        # then the tiers up to post-copy (where the job ends by itself).
        self.assertEqual(list(finish.downtime_ms),
                         self.downtime_steps(actions), actions)
        self.assertEqual('allow 100 ms of downtime (the job starts)',
                         actions[0])
        tiers = actions[len(finish.downtime_ms):]
        self.assertEqual(2, len(tiers), actions)
        self.assertTrue(tiers[0].startswith('auto-converge (pass '), tiers)
        self.assertTrue(tiers[1].startswith('post-copy (pass '), tiers)
        self.assertTrue(run.result.post_copy)
        self.assertFalse(run.result.paused)
        # QEMU's: the same downtime steps; the vCPUs throttled (the job
        # ran with auto-converge); libvirt: the source stopped for the
        # switch, then suspended for post-copy.
        self.assert_qemu_had(watch, list(finish.downtime_ms))
        self.assertGreater(watch.throttle, 0)
        self.assertEqual([SUSPENDED_MIGRATED, SUSPENDED_POSTCOPY],
                         watch.suspensions(), watch.events)
        self.assert_moved_to_dst()
        self.record(f"finish, stalled passes: {run.result.elapsed_ms} ms, "
                    f"{watch.passes} passes, throttle up to "
                    f"{watch.throttle} %, QEMU downtimes {watch.downtimes}"
                    f"; {actions}")

    def test_completion_timeout_pauses(self):
        run, watch = self.migrate(policy=convergence.FINISH,
                                  completion_timeout_s=TIMEOUT_S)

        self.assertIsNone(run.error)
        actions = run.result.convergence_actions
        self.assertEqual('allow 100 ms of downtime (the job starts)',
                         actions[0])
        self.assertEqual(f'pause (completion timeout of {TIMEOUT_S} s)',
                         actions[-1])
        steps = self.downtime_steps(actions)
        self.assertEqual(len(actions) - 1, len(steps), actions)
        self.assertTrue(run.result.paused)
        self.assertFalse(run.result.post_copy)
        # libvirt saw the guest paused (no post-copy), QEMU the recorded
        # downtimes only, and the guest resumed on dst.
        self.assert_paused_to_converge(
            run, watch, convergence.SHIPPED[convergence.FINISH])
        self.assert_qemu_had(watch, steps)
        self.assert_moved_to_dst()
        self.record(f"finish, timeout: {run.result.elapsed_ms} ms, "
                    f"downtime {run.result.downtime_ms} ms, QEMU downtimes "
                    f"{watch.downtimes}; {actions}")


class NeverPauseTestCase(PolicyTestCase):
    """``never_pause``: the same steps and tiers as ``finish``, but its
    last tier aborts instead of pausing."""

    def test_completion_timeout_aborts_without_pausing(self):
        # An aborted job returns no result: what the policy did is in
        # the source's log (and the abort's reason in the error).
        log = self.useFixture(fixtures.FakeLogger(
            name='numamig.virt.libvirt.migration', level=logging.INFO,
            format='%(message)s'))
        run, watch = self.migrate(policy=convergence.NEVER_PAUSE,
                                  completion_timeout_s=TIMEOUT_S)

        self.assertIsInstance(run.error, exception.MigrationAborted)
        self.assertIn(f'policy never_pause: completion timeout of '
                      f'{TIMEOUT_S} s', str(run.error))
        prefix = f'Migration of {GUEST}: policy never_pause: '
        actions = [line[len(prefix):] for line in log.output.splitlines()
                   if line.startswith(prefix)]
        self.assertEqual('allow 100 ms of downtime (the job starts)',
                         actions[0], log.output)
        self.assertEqual(f'abort (completion timeout of {TIMEOUT_S} s)',
                         actions[-1], log.output)
        steps = self.downtime_steps(actions)
        self.assertEqual(len(actions) - 1, len(steps), actions)
        # libvirt: the guest was never suspended, and still runs on the
        # source with its pins; QEMU had the logged downtimes.
        self.assertEqual([], watch.suspensions(), watch.events)
        self.assert_qemu_had(watch, steps)
        self.assert_still_on_src()
        self.record(f"never_pause, timeout: QEMU downtimes "
                    f"{watch.downtimes}; {actions}")


class ObserveOnlyTestCase(PolicyTestCase):
    """Observe-only: the policy's decisions are recorded as 'would ...'
    while the timer behaviour acts. The policy (never_pause) would abort
    at the completion timeout; the timer forces completion instead,
    which pauses the guest (post-copy not permitted)."""

    def test_policy_is_recorded_while_the_timer_acts(self):
        never_pause = convergence.SHIPPED[convergence.NEVER_PAUSE]
        run, watch = self.migrate(policy=convergence.NEVER_PAUSE,
                                  observe_only=True,
                                  completion_timeout_s=TIMEOUT_S,
                                  timeout_action='force_complete')

        self.assertIsNone(run.error)
        self.assertEqual(convergence.NEVER_PAUSE,
                         run.result.convergence_policy)
        actions = run.result.convergence_actions
        self.assertTrue(all(a.startswith('would ') for a in actions),
                        actions)
        self.assertEqual('would allow 100 ms of downtime (the job starts)',
                         actions[0])
        self.assertEqual(f'would abort (completion timeout of {TIMEOUT_S} '
                         f's)', actions[-1])
        self.assertEqual(len(actions) - 1,
                         len(self.downtime_steps(actions, 'would ')),
                         actions)
        # The timer acted: it paused the guest, which completed on dst.
        self.assertTrue(run.result.paused)
        self.assertFalse(run.result.post_copy)
        # QEMU had the timer's first downtime step, none of the policy's
        # (its first is 100 ms), no vCPU throttle (the job ran without
        # auto-converge); libvirt saw the timer's pause, not the
        # policy's abort.
        migration = self.drivers['src']._settings.migration
        timer_first = migration.downtime_ms // migration.downtime_steps
        self.assertNotIn(timer_first, never_pause.downtime_ms)
        self.assert_qemu_had(watch, [timer_first])
        self.assertEqual(0, watch.throttle)
        self.assert_paused_to_converge(run, watch, never_pause)
        self.assert_moved_to_dst()
        self.record(f"observe-only never_pause: {run.result.elapsed_ms} ms, "
                    f"QEMU downtimes {watch.downtimes}; {actions}")
