"""Post-copy recovery against a fake libvirt: attempts, interruptions,
the history, giving up; and the migration job that hands over to it."""

import threading
import time

import libvirt

from numamig import exception
from numamig.convergence import recovery as rec
from numamig.virt.libvirt import migration
from numamig.virt.libvirt import postcopy
from tests import base
from tests import libvirt_settings
from tests.unit.virt.libvirt import test_migration as tm

WHERE = ('uuid-1', 'src', 'dst')
STILL_RUNNING = 'Requested operation is not valid: QEMU reports migration ' \
                'is still running'


def _error(code, message):
    return tm._libvirt_error(code, message)


def _refused():
    return _error(libvirt.VIR_ERR_OPERATION_FAILED,
                  'operation failed: migration out: Connection refused')


def _broken():
    return _error(libvirt.VIR_ERR_OPERATION_FAILED,
                  "operation failed: job 'migration in' failed in "
                  "post-copy phase")


class FakeDomain:
    """The source domain of a broken post-copy. Each resume attempt
    takes the next entry of ``outcomes``: None succeeds, an exception is
    raised, 'hang' blocks until post-copy is interrupted, ('move', exc)
    moves memory then raises ``exc`` (the link dropped again)."""

    def __init__(self, outcomes, version=9000000):
        self.outcomes = list(outcomes)
        self.version = version
        self.calls = []
        self.processed = 1000
        self.interrupted = threading.Event()

    def UUIDString(self):  # noqa: N802 (libvirt API)
        return 'uuid-1'

    def state(self):
        return [libvirt.VIR_DOMAIN_PAUSED, postcopy.PAUSED_POSTCOPY_FAILED]

    def connect(self):
        conn = tm.FakeConnection()
        conn.version = self.version
        return conn

    def jobStats(self):  # noqa: N802
        return {'type': libvirt.VIR_DOMAIN_JOB_UNBOUNDED,
                'memory_processed': self.processed}

    def abortJobFlags(self, flags):  # noqa: N802
        self.calls.append(('interrupt', flags))
        self.interrupted.set()

    def migrate(self, extra_flags):
        self.calls.append(('resume', extra_flags))
        outcome = self.outcomes.pop(0)
        if outcome == 'hang':
            self.interrupted.wait(10)
            self.interrupted.clear()
            raise _broken()
        if isinstance(outcome, tuple):
            self.processed += 4096
            raise outcome[1]
        if outcome is not None:
            raise outcome


class FakeTime:
    """A monotonic clock that waits advance; ``waits`` lists them."""

    def __init__(self):
        self.now = 1000.0
        self.waits = []

    def __call__(self):
        return self.now

    def wait(self, seconds):
        self.waits.append(seconds)
        self.now += seconds
        return False


def _recovery(dom, settings=None, clock=None, events=None):
    clock = clock or FakeTime()
    stamps = iter(range(1, 1000))
    return postcopy.Recovery(
        dom, settings or libvirt_settings.recovery(
            timeout_s=60, max_attempts=5, attempt_timeout_s=5),
        WHERE, dom.migrate,
        on_event=None if events is None else events.append,
        clock=clock, wall_clock=lambda: f't{next(stamps)}',
        wait=getattr(clock, 'wait', None))


def _kinds(history):
    return [(e['event'], e['attempt']) for e in history]


class RecoveryTestCase(base.TestCase):

    def test_resumes_once_the_link_returns(self):
        dom = FakeDomain([_refused(), _refused(), None])
        clock, events = FakeTime(), []
        recovery = _recovery(dom, clock=clock, events=events)
        recovery.recover(_broken())
        self.assertEqual(
            [(rec.LINK_LOST, None), (rec.ATTEMPT_FAILED, 1),
             (rec.ATTEMPT_FAILED, 2), (rec.RESUMED, 3)],
            _kinds(recovery.history))
        # Every resume repeats the migration with RESUME added.
        self.assertEqual([('resume', postcopy.POSTCOPY_RESUME)] * 3,
                         dom.calls)
        self.assertEqual([1.0, 2.0, 4.0], clock.waits)
        self.assertEqual('t1', recovery.history[0]['at'])
        self.assertIn('failed in post-copy phase',
                      recovery.history[0]['detail'])
        self.assertIn('Connection refused', recovery.history[1]['detail'])
        # The operator sees the history grow event by event.
        self.assertEqual([1, 2, 3, 4], [len(h) for h in events])

    def test_gives_up_at_the_timeout_saying_where_the_guest_is(self):
        dom = FakeDomain([_refused()] * 10)
        settings = libvirt_settings.recovery(timeout_s=5, max_attempts=10)
        recovery = _recovery(dom, settings)
        exc = self.assertRaises(exception.PostCopyPaused, recovery.recover,
                                _broken())
        message = str(exc)
        self.assertIn('the guest is PAUSED', message)
        self.assertIn('pages sent on dst, the rest of its memory on src',
                      message)
        self.assertIn('did not come back within 5 s (3 attempts)', message)
        self.assertEqual((rec.GAVE_UP, None),
                         _kinds(recovery.history)[-1])
        # At 1 s, 3 s, then at the deadline (5 s) rather than at 7 s.
        self.assertEqual(3, len(dom.calls))

    def test_still_running_interrupts_post_copy_before_the_next(self):
        dom = FakeDomain([_error(libvirt.VIR_ERR_OPERATION_INVALID,
                                 STILL_RUNNING), None])
        _recovery(dom).recover(_broken())
        self.assertEqual(
            [('resume', postcopy.POSTCOPY_RESUME),
             ('interrupt', postcopy.ABORT_JOB_POSTCOPY),
             ('resume', postcopy.POSTCOPY_RESUME)], dom.calls)

    def test_attempt_that_moves_nothing_is_interrupted_at_its_deadline(self):
        dom = FakeDomain(['hang', None])
        settings = libvirt_settings.recovery(timeout_s=60, max_attempts=3,
                                attempt_timeout_s=0.05)
        # The watch waits in real time (0.05 s): the fake clock stands
        # still during an attempt.
        recovery = _recovery(dom, settings)
        started = time.monotonic()
        recovery.recover(_broken())
        self.assertLess(time.monotonic() - started, 5)
        self.assertIn(('interrupt', postcopy.ABORT_JOB_POSTCOPY), dom.calls)
        failed = recovery.history[1]
        self.assertEqual(rec.ATTEMPT_FAILED, failed['event'])
        self.assertIn('no data moved within 0.05 s, interrupted',
                      failed['detail'])
        self.assertEqual(rec.RESUMED, recovery.history[-1]['event'])

    def test_a_second_loss_after_progress_starts_a_new_count(self):
        dom = FakeDomain([_refused(), ('move', _broken()), _refused(),
                          _refused(), None])
        settings = libvirt_settings.recovery(timeout_s=600, max_attempts=3)
        recovery = _recovery(dom, settings)
        recovery.recover(_broken())
        self.assertEqual(
            [(rec.LINK_LOST, None), (rec.ATTEMPT_FAILED, 1),
             (rec.LINK_LOST, None), (rec.ATTEMPT_FAILED, 1),
             (rec.ATTEMPT_FAILED, 2), (rec.RESUMED, 3)],
            _kinds(recovery.history))

    def test_stop_gives_up_without_another_attempt(self):
        dom = FakeDomain([_refused()] * 5)
        recovery = _recovery(dom)
        dom.outcomes[0] = _refused()
        original = dom.migrate

        def migrate_then_stop(flags):
            recovery.stop('aborted by request')
            return original(flags)
        recovery._migrate = migrate_then_stop
        exc = self.assertRaises(exception.PostCopyPaused, recovery.recover,
                                _broken())
        self.assertIn('recovery stopped: aborted by request', str(exc))
        self.assertEqual(1, len(dom.calls))

    def test_old_libvirt_gives_up_at_once(self):
        dom = FakeDomain([None], version=8004000)
        recovery = _recovery(dom)
        exc = self.assertRaises(exception.PostCopyPaused, recovery.recover,
                                _broken())
        self.assertIn('cannot resume post-copy (needs 8.5 or later)',
                      str(exc))
        self.assertEqual([], dom.calls)

    def test_event_reporting_failure_does_not_stop_recovery(self):
        dom = FakeDomain([None])

        def report(history):
            raise RuntimeError('conductor away')
        clock = FakeTime()
        recovery = postcopy.Recovery(dom, libvirt_settings.recovery(), WHERE,
                                     dom.migrate, on_event=report,
                                     clock=clock, wait=clock.wait)
        recovery.recover(_broken())
        self.assertEqual(rec.RESUMED, recovery.history[-1]['event'])

    def test_broken_reads_the_paused_reason(self):
        dom = FakeDomain([])
        self.assertTrue(postcopy.broken(dom))
        dom.state = lambda: [libvirt.VIR_DOMAIN_PAUSED,
                             libvirt.VIR_DOMAIN_PAUSED_USER]
        self.assertFalse(postcopy.broken(dom))


class PostCopyJobDomain(tm.FakeDomain):
    """A migration whose stream breaks after the switch to post-copy;
    resumes (flag POSTCOPY_RESUME) take ``resumes`` in turn."""

    def __init__(self, clock, resumes):
        super().__init__(clock, polls_to_finish=1000)
        self.resumes = list(resumes)
        self.switched = False

    def migrateToURI3(self, uri, params, flags):  # noqa: N802
        self.calls.append(('migrateToURI3', uri, params, flags))
        if flags & postcopy.POSTCOPY_RESUME:
            outcome = self.resumes.pop(0)
            if outcome is not None:
                raise outcome
            return
        self.finished.wait(10)
        if self.switched:
            raise _broken()

    def migrateStartPostCopy(self, flags):  # noqa: N802
        self.switched = True
        super().migrateStartPostCopy(flags)

    def state(self):
        return [libvirt.VIR_DOMAIN_PAUSED, postcopy.PAUSED_POSTCOPY_FAILED]

    def jobStats(self):  # noqa: N802
        stats = super().jobStats()
        stats.setdefault('memory_processed', 7)
        return stats


class JobRecoveryTestCase(base.TestCase):

    def _job(self, dom, recovery_settings, events):
        settings = libvirt_settings.migration(
            permit_post_copy=True, progress_interval_s=0.01,
            postcopy_recovery=recovery_settings)
        job = migration.MigrationJob(
            dom, settings, 'src', 'dst', clock=dom.clock,
            completion=tm.FakeCompletion({'downtime': 12}),
            recovery_callback=events.append)
        # The recovery's waits advance the fake clock, never sleep.
        job._recover_wait = lambda seconds: setattr(
            dom.clock, 'now', dom.clock.now + seconds)
        return job

    def _run_forced(self, job):
        runner = threading.Thread(target=lambda: setattr(
            self, 'outcome', self._run(job)))
        runner.start()
        while not job._dom.calls:
            time.sleep(0.01)
        job.force_complete()
        runner.join(20)

    def _run(self, job):
        try:
            return job.run('qemu+tcp://dst/system', '<domain/>', 'tcp://dst')
        except exception.NumamigException as exc:
            return exc

    def test_broken_post_copy_is_resumed_and_reported(self):
        clock = tm.FakeClock()
        dom = PostCopyJobDomain(clock, [_refused(), None])
        events = []
        job = self._job(dom, libvirt_settings.recovery(timeout_s=600,
                                                       max_attempts=5),
                        events)
        self._run_forced(job)
        result = self.outcome
        self.assertNotIsInstance(result, Exception, result)
        self.assertTrue(result.post_copy)
        self.assertEqual([rec.LINK_LOST, rec.ATTEMPT_FAILED, rec.RESUMED],
                         [e['event'] for e in result.postcopy_recovery])
        resume_calls = [c for c in dom.calls if c[0] == 'migrateToURI3']
        first_flags = resume_calls[0][3]
        # The same parameters, the same flags plus RESUME.
        self.assertEqual([first_flags | postcopy.POSTCOPY_RESUME] * 2,
                         [c[3] for c in resume_calls[1:]])
        self.assertEqual({id(resume_calls[0][2])},
                         {id(c[2]) for c in resume_calls})
        self.assertTrue(first_flags & libvirt.VIR_MIGRATE_POSTCOPY)
        self.assertEqual(result.postcopy_recovery, events[-1])

    def test_unrecoverable_post_copy_raises_paused_never_resumes_src(self):
        clock = tm.FakeClock()
        dom = PostCopyJobDomain(clock, [_refused()] * 3)
        job = self._job(dom, libvirt_settings.recovery(timeout_s=600,
                                                       max_attempts=3),
                        [])
        self._run_forced(job)
        self.assertIsInstance(self.outcome, exception.PostCopyPaused)
        self.assertIn('3 resume attempts failed', str(self.outcome))
        # The source's half of the guest is not resumed: it cannot run.
        self.assertNotIn(('resume',), dom.calls)
        self.assertEqual(rec.GAVE_UP, job.recovery.history[-1]['event'])

    def test_pre_copy_failure_is_not_recovered(self):
        clock = tm.FakeClock()
        dom = tm.FakeDomain(clock, polls_to_finish=1000,
                            error=_refused())
        dom.finished.set()
        job = self._job(dom, libvirt_settings.recovery(), [])
        self.assertIsInstance(self._run(job), exception.LiveMigrationFailed)
        self.assertIsNone(job.recovery)


class PausedTestCase(base.TestCase):
    """The driver's answer to reconcile: a guest paused in a broken
    post-copy, never a missing or running one."""

    def _driver(self, lookup):
        from unittest import mock

        from numamig.virt.libvirt import driver
        drv = driver.LibvirtDriver(libvirt_settings.host(host='src'))
        drv._lookup = mock.Mock(side_effect=lookup)
        return drv

    def test_paused_in_a_broken_postcopy(self):
        self.assertTrue(self._driver(
            lambda uuid: FakeDomain([])).postcopy_paused('uuid-1'))

    def test_running_or_missing(self):
        class Running(FakeDomain):
            def state(self):
                return [libvirt.VIR_DOMAIN_RUNNING, 1]

        def missing(uuid):
            raise exception.InstanceNotFound(instance_uuid=uuid)
        self.assertFalse(self._driver(
            lambda uuid: Running([])).postcopy_paused('uuid-1'))
        self.assertFalse(self._driver(missing).postcopy_paused('uuid-1'))
