"""The migration monitor under convergence policies: statistics in,
libvirt calls out (the decisions are numamig.convergence's)."""

import libvirt

from numamig import exception
from numamig.convergence import policy as pol
from tests import base
from tests import libvirt_settings
from tests.unit.virt.libvirt import test_migration as tm


class PassesDomain(tm.FakeDomain):
    """A job whose samples follow ``passes``: (iteration, remaining) per
    poll; the last pair repeats until something ends the job."""

    def __init__(self, clock, passes, step=1.0, refuse_post_copy=False,
                 memory_gib=1):
        super().__init__(clock, memory_gib=memory_gib, step=step,
                         polls_to_finish=10 ** 6)
        self.passes = list(passes)
        self.refuse_post_copy = refuse_post_copy

    def jobStats(self):  # noqa: N802
        if self.finished.is_set():
            return {'type': libvirt.VIR_DOMAIN_JOB_NONE}
        self.clock.now += self.step
        iteration, remaining = self.passes[min(self.polls,
                                               len(self.passes) - 1)]
        self.polls += 1
        if self.polls > 200:
            self.finished.set()
        return {'type': libvirt.VIR_DOMAIN_JOB_UNBOUNDED,
                'memory_total': 1000, 'memory_processed': 0,
                'memory_remaining': remaining, 'memory_iteration': iteration,
                'memory_dirty_rate': 25, 'memory_page_size': 4096,
                'memory_bps': 50000}

    def migrateSetMaxDowntime(self, ms, flags):  # noqa: N802
        super().migrateSetMaxDowntime(ms, flags)
        if ms >= 10 ** 4:
            self.finished.set()

    def migrateStartPostCopy(self, flags):  # noqa: N802
        if self.refuse_post_copy:
            self.calls.append(('postcopy refused',))
            raise tm._libvirt_error(libvirt.VIR_ERR_OPERATION_INVALID,
                                    'post-copy is not supported')
        super().migrateStartPostCopy(flags)


STALLED = [(1, 1000)] + [(i, 1000) for i in range(2, 40)]


def _run(dom, clock, policy, **settings):
    settings.setdefault('completion_timeout_s', 0)
    job = tm.migration.MigrationJob(
        dom, libvirt_settings.migration(progress_interval_s=0.001,
                                              **settings),
        'src', 'dst', None, clock=clock, completion=tm.FakeCompletion(),
        policy=policy)
    return job, job.run('u', '<d/>', None)


def _flags(dom):
    return next(c[3] for c in dom.calls if c[0] == 'migrateToURI3')


def _ops(dom):
    return [c[1] if c[0] == 'downtime' else c[0] for c in dom.calls
            if c[0] != 'migrateToURI3']


class IterationPolicyTestCase(base.TestCase):

    def test_stalled_passes_escalate_then_post_copy(self):
        clock = tm.FakeClock()
        dom = PassesDomain(clock, STALLED)
        job, result = _run(dom, clock, pol.SHIPPED[pol.NFV])
        self.assertEqual([50, 100, 150, 200, 'postcopy'], _ops(dom))
        self.assertTrue(result.post_copy)
        self.assertEqual('nfv', result.convergence_policy)
        self.assertEqual(5, len(result.convergence_actions))
        self.assertIn('dirtying 102400 B/s against 50000 B/s',
                      result.convergence_actions[1])
        flags = _flags(dom)
        self.assertTrue(flags & libvirt.VIR_MIGRATE_POSTCOPY)
        self.assertFalse(flags & libvirt.VIR_MIGRATE_AUTO_CONVERGE)

    def test_shrinking_job_is_never_escalated(self):
        clock = tm.FakeClock()
        passes = [(1, 1000), (2, 500), (3, 250), (4, 100), (5, 40),
                  (6, 10)]
        dom = PassesDomain(clock, passes)
        dom.passes += [(7, 5)]
        orig = dom.jobStats

        def stats():
            if dom.polls == len(dom.passes):
                dom.finished.set()
            return orig()

        dom.jobStats = stats
        _run(dom, clock, pol.SHIPPED[pol.NFV])
        self.assertEqual([50], _ops(dom))

    def test_refused_post_copy_aborts(self):
        clock = tm.FakeClock()
        dom = PassesDomain(clock, STALLED, refuse_post_copy=True)
        exc = self.assertRaises(exception.MigrationAborted, _run, dom,
                                clock, pol.SHIPPED[pol.NFV])
        self.assertEqual([50, 100, 150, 200, 'postcopy refused', 'abort'],
                         _ops(dom))
        self.assertIn('policy nfv: post_copy failed', str(exc))

    def test_finish_pauses_after_refused_post_copy(self):
        clock = tm.FakeClock()
        dom = PassesDomain(clock, STALLED, refuse_post_copy=True)
        job, result = _run(dom, clock, pol.SHIPPED[pol.FINISH])
        self.assertEqual([100, 150, 200, 300, 400, 500, 'postcopy refused',
                          'suspend'], _ops(dom))
        self.assertTrue(result.paused)
        self.assertIn('auto-converge (pass 7', ' '.join(job.actions))
        flags = _flags(dom)
        self.assertTrue(flags & libvirt.VIR_MIGRATE_AUTO_CONVERGE)
        self.assertTrue(flags & libvirt.VIR_MIGRATE_POSTCOPY)

    def test_timeout_applies_the_last_tier(self):
        clock = tm.FakeClock()
        # Passes never end: no stall is ever judged; the timeout acts.
        dom = PassesDomain(clock, [(1, 1000)], step=15)
        exc = self.assertRaises(exception.MigrationAborted, _run, dom,
                                clock, pol.SHIPPED[pol.NEVER_PAUSE],
                                completion_timeout_s=20)
        self.assertEqual([100, 'abort'], _ops(dom))
        self.assertIn('completion timeout of 20 s', str(exc))

    def test_observe_only_logs_and_runs_the_timer(self):
        clock = tm.FakeClock()
        dom = PassesDomain(clock, STALLED, step=10)
        log = self.useFixture(base.fixtures.FakeLogger(level='INFO'))
        job, _result = _run(dom, clock, pol.SHIPPED[pol.NFV],
                            observe_only=True, downtime_ms=10 ** 4,
                            downtime_steps=3, downtime_delay_s=10)
        # The timer's steps acted (the last one ends the job), the policy
        # did not: no 50 ms step, no post-copy.
        self.assertEqual([3333, 5555, 7777, 10000], _ops(dom))
        self.assertIn('observe-only: policy nfv would allow 50 ms',
                      log.output)
        self.assertTrue(job.actions[0].startswith('would allow 50 ms'))
        self.assertFalse(_flags(dom) & libvirt.VIR_MIGRATE_POSTCOPY)

    def test_timer_policy_is_the_default(self):
        clock = tm.FakeClock()
        dom = PassesDomain(clock, STALLED, step=10)
        job, _ = _run(dom, clock, None, downtime_ms=10 ** 4,
                      downtime_steps=3, downtime_delay_s=10)
        self.assertEqual([3333, 5555, 7777, 10000], _ops(dom))
        self.assertEqual([], job.actions)


class SelectionTestCase(base.TestCase):

    def test_configured_policy_and_default(self):
        settings = libvirt_settings.migration(
            policy='gold', policies=('gold: downtime=10; then=abort',))
        self.assertEqual(('gold', 'the configured default'),
                         (settings.select_policy()[0].name,
                          settings.select_policy()[1]))
        self.assertEqual('nfv', settings.select_policy(
            None, 'nfv', 'finish')[0].name)

    def test_bad_configuration(self):
        exc = self.assertRaises(
            exception.InvalidConfiguration,
            libvirt_settings.migration, policy='nope')
        self.assertIn("'nope' is not a known policy", str(exc))
        exc = self.assertRaises(
            exception.InvalidConfiguration,
            libvirt_settings.migration, policies=('x: downtime=-1',))
        self.assertIn('live_migration_policies', str(exc))
