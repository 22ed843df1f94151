"""Tests of the live migration job: flags, parameters, monitor decisions."""

import threading

import fixtures
import libvirt
import testscenarios

from numamig import exception
from numamig.virt.libvirt import migration
from tests import base
from tests import libvirt_settings

load_tests = testscenarios.load_tests_apply_scenarios

GIB_KIB = 1024 * 1024


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class FakeDomain:
    """A domain whose migration runs until the test ends it.

    Each jobStats() call advances the clock by ``step`` seconds, so the
    monitor sees time pass without the test sleeping.
    """

    def __init__(self, clock, memory_gib=2, step=10.0, polls_to_finish=5,
                 error=None):
        self.clock, self.step = clock, step
        self.memory_kib = memory_gib * GIB_KIB
        self.polls_to_finish = polls_to_finish
        self.error = error
        self.calls = []
        self.polls = 0
        self.finished = threading.Event()

    def UUIDString(self):  # noqa: N802 (libvirt API)
        return 'uuid-1'

    def info(self):
        return [1, self.memory_kib, self.memory_kib, 1, 0]

    def connect(self):
        return FakeConnection()

    def migrateToURI3(self, uri, params, flags):  # noqa: N802
        self.calls.append(('migrateToURI3', uri, params, flags))
        self.finished.wait(10)
        if self.error is not None:
            raise self.error

    def jobStats(self):  # noqa: N802
        if self.finished.is_set():
            return {'type': libvirt.VIR_DOMAIN_JOB_NONE}
        self.polls += 1
        self.clock.now += self.step
        if self.polls >= self.polls_to_finish:
            self.finished.set()
        return {'type': libvirt.VIR_DOMAIN_JOB_UNBOUNDED,
                'memory_total': 100, 'memory_processed': self.polls,
                'memory_remaining': 100 - self.polls,
                'memory_dirty_rate': 7, 'memory_iteration': 2,
                'time_elapsed': int(self.clock.now * 1000)}

    def migrateSetMaxDowntime(self, ms, flags):  # noqa: N802
        self.calls.append(('downtime', ms))

    def abortJob(self):  # noqa: N802
        self.calls.append(('abort',))
        self.error = _libvirt_error(libvirt.VIR_ERR_OPERATION_ABORTED,
                                    'operation aborted: job canceled')
        self.finished.set()

    def migrateStartPostCopy(self, flags):  # noqa: N802
        self.calls.append(('postcopy',))
        self.finished.set()

    def suspend(self):
        self.calls.append(('suspend',))
        self.finished.set()

    def resume(self):
        self.calls.append(('resume',))


class FakeConnection:
    """The source's connection: its libvirt version (9.0.0 as here)."""

    version = 9000000

    def getLibVersion(self):  # noqa: N802
        return self.version


class FakeCompletion:
    """Stands in for the job-completed event: ``stats`` or nothing."""

    def __init__(self, stats=None):
        self.stats = stats
        self.calls = []

    def start(self):
        self.calls.append('start')

    def wait(self, timeout):
        self.calls.append('wait')
        return self.stats

    def stop(self):
        self.calls.append('stop')


def _libvirt_error(code, message):
    exc = libvirt.libvirtError(message)
    exc.err = (code, 0, message, 0, '', None, None, 0, 0)
    return exc


def _job(dom, clock, callback=None, completion=None, abort_requested=None,
         **settings):
    settings.setdefault('progress_interval_s', 0.001)
    return migration.MigrationJob(
        dom, libvirt_settings.migration(**settings), 'src', 'dst',
        callback, clock=clock, completion=completion or FakeCompletion(),
        abort_requested=abort_requested)


class FlagsAndParamsTestCase(base.TestCase):

    scenarios = [
        ('defaults', {'opts': {}, 'extra': 0}),
        ('post_copy_wins_over_auto_converge',
         {'opts': {'permit_post_copy': True, 'permit_auto_converge': True},
          'extra': libvirt.VIR_MIGRATE_POSTCOPY}),
        ('auto_converge',
         {'opts': {'permit_auto_converge': True},
          'extra': libvirt.VIR_MIGRATE_AUTO_CONVERGE}),
        ('tls', {'opts': {'native_tls': True},
                 'extra': libvirt.VIR_MIGRATE_TLS}),
        ('parallel', {'opts': {'parallel_connections': 4},
                      'extra': libvirt.VIR_MIGRATE_PARALLEL}),
    ]

    def test_flags(self):
        flags = migration.migration_flags(
            libvirt_settings.migration(**self.opts))
        self.assertEqual(migration.BASE_FLAGS | self.extra, flags)


class ParamsTestCase(base.TestCase):

    def test_dest_and_persist_xml_uri_bandwidth(self):
        params = migration.migration_params(
            libvirt_settings.migration(bandwidth_mib=50,
                                          parallel_connections=3),
            '<domain/>', 'tcp://10.0.0.2', None)
        self.assertEqual({
            libvirt.VIR_MIGRATE_PARAM_DEST_XML: '<domain/>',
            libvirt.VIR_MIGRATE_PARAM_PERSIST_XML: '<domain/>',
            libvirt.VIR_MIGRATE_PARAM_URI: 'tcp://10.0.0.2',
            libvirt.VIR_MIGRATE_PARAM_BANDWIDTH: 50,
            libvirt.VIR_MIGRATE_PARAM_PARALLEL_CONNECTIONS: 3}, params)

    def test_live_xml_is_dest_xml_the_rewrite_persistent(self):
        params = migration.migration_params(
            libvirt_settings.migration(), '<persist/>', None,
            live_xml='<live/>')
        self.assertEqual(
            ('<live/>', '<persist/>'),
            (params[libvirt.VIR_MIGRATE_PARAM_DEST_XML],
             params[libvirt.VIR_MIGRATE_PARAM_PERSIST_XML]))

    def test_per_migration_bandwidth_wins(self):
        params = migration.migration_params(
            libvirt_settings.migration(bandwidth_mib=50), '<d/>', None, 1)
        self.assertEqual(1, params[libvirt.VIR_MIGRATE_PARAM_BANDWIDTH])
        self.assertNotIn(libvirt.VIR_MIGRATE_PARAM_URI, params)

    def test_downtime_steps(self):
        steps = migration.downtime_steps(libvirt_settings.migration(
            downtime_ms=400, downtime_steps=4, downtime_delay_s=10), 2)
        self.assertEqual([(0, 100), (20, 175), (40, 250), (60, 325),
                          (80, 400)], steps)


class StartingDomain(FakeDomain):
    """A job not active for ``inactive_polls`` polls, then ended by the
    first downtime it is given."""

    def __init__(self, clock, inactive_polls):
        super().__init__(clock, polls_to_finish=99)
        self.inactive_polls = inactive_polls

    def jobStats(self):  # noqa: N802
        if self.polls < self.inactive_polls:
            self.polls += 1
            return {'type': libvirt.VIR_DOMAIN_JOB_NONE}
        return super().jobStats()

    def migrateSetMaxDowntime(self, ms, flags):  # noqa: N802
        super().migrateSetMaxDowntime(ms, flags)
        self.finished.set()


class MonitorTestCase(base.TestCase):

    def test_progress_and_downtime_steps(self):
        clock, samples = FakeClock(), []
        dom = FakeDomain(clock, memory_gib=1, step=10, polls_to_finish=4)
        result = _job(dom, clock, samples.append, downtime_ms=300,
                      downtime_steps=3, downtime_delay_s=10).run(
            'qemu+tcp://dst/system', '<domain/>', 'tcp://dst')
        self.assertEqual(4, len(samples))
        self.assertEqual((100, 1, 99, 7, 2),
                         (samples[0].memory_total,
                          samples[0].memory_processed,
                          samples[0].memory_remaining,
                          samples[0].dirty_rate, samples[0].iteration))
        downtimes = [c[1] for c in dom.calls if c[0] == 'downtime']
        self.assertEqual([100, 166, 233, 300], downtimes)
        self.assertFalse(result.emulated)
        self.assertEqual(100, result.memory_total)

    def test_first_downtime_step_when_the_job_starts(self):
        # A progress interval longer than the whole job: the first step
        # must not wait for it (the domain ends the job once it is set).
        clock = FakeClock()
        dom = StartingDomain(clock, inactive_polls=3)
        _job(dom, clock, progress_interval_s=60, downtime_ms=500,
             downtime_steps=10, downtime_delay_s=75).run(
            'qemu+tcp://dst/system', '<domain/>', 'tcp://dst')
        self.assertEqual([('downtime', 50)],
                         [c for c in dom.calls if c[0] == 'downtime'])
        self.assertEqual(4, dom.polls)

    def test_backoff_doubles_up_to_the_cap(self):
        delays = migration.backoff(0.01, 0.05)
        self.assertEqual([0.01, 0.02, 0.04, 0.05, 0.05],
                         [next(delays) for _ in range(5)])

    def test_timeout_aborts(self):
        clock = FakeClock()
        dom = FakeDomain(clock, memory_gib=2, step=15, polls_to_finish=99)
        job = _job(dom, clock, completion_timeout_s=20)
        exc = self.assertRaises(exception.MigrationAborted, job.run,
                                'qemu+tcp://dst/system', '<d/>', None)
        self.assertIn('completion timeout of 40 s exceeded', str(exc))
        self.assertIn('the guest stays on src', str(exc))

    def test_timeout_force_completes_with_post_copy(self):
        clock = FakeClock()
        dom = FakeDomain(clock, memory_gib=1, step=15, polls_to_finish=99)
        result = _job(dom, clock, completion_timeout_s=20,
                      timeout_action='force_complete',
                      permit_post_copy=True).run('u', '<d/>', None)
        self.assertIn(('postcopy',), dom.calls)
        self.assertTrue(result.post_copy)

    def test_timeout_force_completes_by_pausing(self):
        clock = FakeClock()
        dom = FakeDomain(clock, memory_gib=1, step=15, polls_to_finish=99)
        result = _job(dom, clock, completion_timeout_s=20,
                      timeout_action='force_complete').run('u', '<d/>', None)
        self.assertIn(('suspend',), dom.calls)
        self.assertTrue(result.paused)

    def test_no_timeout_when_zero(self):
        clock = FakeClock()
        dom = FakeDomain(clock, memory_gib=1, step=1000, polls_to_finish=3)
        _job(dom, clock, completion_timeout_s=0).run('u', '<d/>', None)
        self.assertNotIn(('abort',), dom.calls)


class EarlyAbortDomain(StartingDomain):
    """A job libvirt has not created yet: abortJob is refused (as libvirt
    refuses it with no job) and no job is reported until the test says
    the job exists (``created``), whatever the monitor polled before:
    under load the monitor thread polls before migrateToURI3 runs."""

    def __init__(self, clock, inactive_polls):
        super().__init__(clock, inactive_polls)
        self.created = threading.Event()

    def jobStats(self):  # noqa: N802
        if not self.created.is_set():
            return {'type': libvirt.VIR_DOMAIN_JOB_NONE}
        return super().jobStats()

    def abortJob(self):  # noqa: N802
        if not self.created.is_set():
            self.calls.append(('abort refused',))
            raise _libvirt_error(libvirt.VIR_ERR_OPERATION_INVALID,
                                 'no job is active on the domain')
        super().abortJob()

    def migrateSetMaxDowntime(self, ms, flags):  # noqa: N802
        self.calls.append(('downtime', ms))


class EarlyAbortTestCase(base.TestCase):
    """An abort asked before libvirt's job exists is not lost."""

    def test_abort_before_the_run_starts_nothing(self):
        clock, asked = FakeClock(), threading.Event()
        asked.set()
        dom = FakeDomain(clock)
        job = _job(dom, clock, abort_requested=asked)
        exc = self.assertRaises(exception.MigrationAborted, job.run,
                                'qemu+tcp://dst/system', '<d/>', None)
        self.assertIn('before the job started', str(exc))
        self.assertEqual([], dom.calls)

    def test_abort_refused_before_the_job_exists_is_sent_again(self):
        clock, asked = FakeClock(), threading.Event()
        dom = EarlyAbortDomain(clock, inactive_polls=2)
        job = _job(dom, clock, abort_requested=asked)

        def operator_abort(uri, params, flags):
            # The caller's abort lands while libvirt has no job yet.
            asked.set()
            self.assertRaises(libvirt.libvirtError, job.abort)
            dom.created.set()
            FakeDomain.migrateToURI3(dom, uri, params, flags)
        dom.migrateToURI3 = operator_abort
        exc = self.assertRaises(exception.MigrationAborted, job.run,
                                'qemu+tcp://dst/system', '<d/>', None)
        self.assertIn('aborted by request', str(exc))
        aborts = [c for c in dom.calls if c[0].startswith('abort')]
        self.assertEqual([('abort refused',), ('abort',)], aborts)

    def test_no_abort_without_a_request(self):
        clock = FakeClock()
        dom = FakeDomain(clock, memory_gib=1, polls_to_finish=3)
        _job(dom, clock, abort_requested=threading.Event(),
             completion_timeout_s=0).run('u', '<d/>', None)
        self.assertNotIn(('abort',), dom.calls)


class ErrorMappingTestCase(base.TestCase):

    scenarios = [
        ('numa_node', {'code': libvirt.VIR_ERR_CONFIG_UNSUPPORTED,
                       'msg': 'unsupported configuration: NUMA node 1 is '
                              'unavailable',
                       'cls': exception.NUMANodeUnavailable}),
        ('affinity', {'code': libvirt.VIR_ERR_SYSTEM_ERROR,
                      'msg': 'cannot set CPU affinity on process 1: '
                             'Invalid argument',
                      'cls': exception.CPUAffinityFailed}),
        ('hugetlbfs', {'code': libvirt.VIR_ERR_INTERNAL_ERROR,
                       'msg': 'internal error: hugetlbfs filesystem is not '
                              'mounted or disabled by administrator config',
                       'cls': exception.HugepagesUnavailable}),
        ('peer', {'code': libvirt.VIR_ERR_SYSTEM_ERROR,
                  'msg': "unable to connect to server at '127.0.0.1:1': "
                         "Connection refused",
                  'cls': exception.MigrationPeerUnreachable}),
        ('aborted', {'code': libvirt.VIR_ERR_OPERATION_ABORTED,
                     'msg': 'operation aborted: migration out job: '
                            'canceled by client',
                     'cls': exception.MigrationAborted}),
        ('other', {'code': libvirt.VIR_ERR_OPERATION_FAILED,
                   'msg': 'operation failed: something else',
                   'cls': exception.LiveMigrationFailed}),
    ]

    def test_mapped(self):
        clock = FakeClock()
        dom = FakeDomain(clock, polls_to_finish=1,
                         error=_libvirt_error(self.code, self.msg))
        exc = self.assertRaises(exception.LiveMigrationFailed,
                                _job(dom, clock).run, 'u', '<d/>', None)
        self.assertIs(self.cls, type(exc))
        self.assertIn('uuid-1 from src to dst', str(exc))
        if self.cls is not exception.MigrationAborted:
            self.assertIn(self.msg, str(exc))


class CompletedStatsTestCase(base.TestCase):
    """What the finished job reports, and what a failed one leaves."""

    def test_downtime_and_bytes_from_the_completed_job(self):
        clock = FakeClock()
        dom = FakeDomain(clock, polls_to_finish=2)
        completion = FakeCompletion({'downtime': 17, 'memory_total': 100,
                                     'memory_processed': 130})
        result = _job(dom, clock, completion=completion).run(
            'u', '<d/>', None)
        self.assertEqual((17, 100, 130), (result.downtime_ms,
                                          result.memory_total,
                                          result.memory_processed))
        self.assertEqual(['start', 'wait', 'stop'], completion.calls)

    def test_no_event_leaves_downtime_unknown(self):
        clock = FakeClock()
        dom = FakeDomain(clock, polls_to_finish=3)
        result = _job(dom, clock).run('u', '<d/>', None)
        self.assertIsNone(result.downtime_ms)
        # The last sample's figures stand in for the final ones.
        self.assertEqual((100, 3), (result.memory_total,
                                    result.memory_processed))

    def test_elapsed_excludes_the_wait_for_the_event(self):
        clock = FakeClock()
        dom = FakeDomain(clock, step=1.0, polls_to_finish=2)

        class SlowCompletion(FakeCompletion):
            def wait(self, timeout):
                clock.now += 1000
                return None

        result = _job(dom, clock, completion=SlowCompletion()).run(
            'u', '<d/>', None)
        self.assertLess(result.elapsed_ms, 1000 * 1000)

    def test_failed_job_stops_watching(self):
        clock = FakeClock()
        completion = FakeCompletion({'downtime': 5})
        dom = FakeDomain(clock, polls_to_finish=1, error=_libvirt_error(
            libvirt.VIR_ERR_OPERATION_FAILED, 'operation failed: x'))
        self.assertRaises(exception.LiveMigrationFailed,
                          _job(dom, clock, completion=completion).run,
                          'u', '<d/>', None)
        self.assertEqual(['start', 'stop'], completion.calls)

    def test_guest_paused_to_converge_is_resumed_when_the_job_fails(self):
        clock = FakeClock()
        dom = FakeDomain(clock, memory_gib=1, step=15, polls_to_finish=99,
                         error=_libvirt_error(
                             libvirt.VIR_ERR_OPERATION_FAILED,
                             'operation failed: migration failed'))
        job = _job(dom, clock, completion_timeout_s=20,
                   timeout_action='force_complete')
        self.assertRaises(exception.LiveMigrationFailed, job.run, 'u',
                          '<d/>', None)
        ops = [c[0] for c in dom.calls]
        self.assertEqual(['suspend', 'resume'],
                         [op for op in ops if op in ('suspend', 'resume')])

    def test_failed_job_not_paused_is_not_resumed(self):
        clock = FakeClock()
        dom = FakeDomain(clock, polls_to_finish=1, error=_libvirt_error(
            libvirt.VIR_ERR_OPERATION_FAILED, 'operation failed: x'))
        self.assertRaises(exception.LiveMigrationFailed,
                          _job(dom, clock).run, 'u', '<d/>', None)
        self.assertNotIn(('resume',), dom.calls)


class ForceCompleteTestCase(base.TestCase):

    scenarios = [
        ('pause', {'post_copy': False, 'call': ('suspend',)}),
        ('post_copy', {'post_copy': True, 'call': ('postcopy',)}),
    ]

    def test_second_call_does_nothing(self):
        clock = FakeClock()
        dom = FakeDomain(clock)
        job = _job(dom, clock, permit_post_copy=self.post_copy)
        job.force_complete()
        job.force_complete()
        self.assertEqual([self.call], dom.calls)


class EndedJobTestCase(base.TestCase):

    scenarios = [
        ('cancelled', {'job_type': libvirt.VIR_DOMAIN_JOB_CANCELLED}),
        ('failed', {'job_type': libvirt.VIR_DOMAIN_JOB_FAILED}),
        ('completed', {'job_type': libvirt.VIR_DOMAIN_JOB_COMPLETED}),
    ]

    def test_ended_job_is_not_progress(self):
        # libvirt reports an ended job, before migrateToURI3 returns,
        # with every figure zero.
        clock, samples = FakeClock(), []
        dom = FakeDomain(clock, polls_to_finish=2)
        stats = dom.jobStats

        def job_stats():
            result = stats()
            if dom.polls == 2:
                return {'type': self.job_type, 'memory_total': 0,
                        'memory_processed': 0}
            return result

        dom.jobStats = job_stats
        _job(dom, clock, samples.append).run('u', '<d/>', None)
        self.assertEqual([1], [s.memory_processed for s in samples])


class ChosenThreads:
    """The ``threads`` a compute agent hands live_migrate."""

    def __init__(self, cpus, basis='shared-guest-nodes'):
        self.cpus, self.basis = frozenset(cpus), basis
        self.reports = []

    def report(self, record):
        self.reports.append(record)


class ThreadsTestCase(base.TestCase):

    def _run(self, threads, **settings):
        clock = FakeClock()
        dom = FakeDomain(clock, memory_gib=1, polls_to_finish=2)
        job = migration.MigrationJob(
            dom, libvirt_settings.migration(
                progress_interval_s=0.001, **settings), 'src', 'dst',
            clock=clock, completion=FakeCompletion(), threads=threads)
        job.threads._proc = self.useFixture(fixtures.TempDir()).path
        job.run('qemu+tcp://dst/system', '<domain/>', 'tcp://dst')
        return job, dom

    @staticmethod
    def _migrate_call(dom):
        """(params, flags) of the migrateToURI3 call."""
        (call,) = [c for c in dom.calls if c[0] == 'migrateToURI3']
        return call[2], call[3]

    def test_connections_follow_the_cpus_and_are_reported(self):
        threads = ChosenThreads({4, 5})
        job, dom = self._run(threads, parallel_connections=8)
        params, flags = self._migrate_call(dom)
        self.assertEqual(
            2, params[libvirt.VIR_MIGRATE_PARAM_PARALLEL_CONNECTIONS])
        self.assertTrue(flags & libvirt.VIR_MIGRATE_PARALLEL)
        self.assertEqual([{'host': 'src', 'basis': 'shared-guest-nodes',
                           'cpus': [4, 5], 'connections': 2,
                           'threads': {}}], threads.reports)

    def test_one_cpu_still_two_connections(self):
        job, dom = self._run(ChosenThreads({4}), parallel_connections=4)
        self.assertEqual(2, self._migrate_call(dom)[0][
            libvirt.VIR_MIGRATE_PARAM_PARALLEL_CONNECTIONS])
        self.assertEqual(2, job.connections)

    def test_no_cpus_chosen_records_only(self):
        threads = ChosenThreads((), basis='none')
        job, dom = self._run(threads, parallel_connections=4)
        self.assertEqual(4, self._migrate_call(dom)[0][
            libvirt.VIR_MIGRATE_PARAM_PARALLEL_CONNECTIONS])
        self.assertEqual(('none', [], 4), (
            threads.reports[0]['basis'], threads.reports[0]['cpus'],
            threads.reports[0]['connections']))

    def test_reported_when_the_job_fails_too(self):
        threads = ChosenThreads({4})
        clock = FakeClock()
        dom = FakeDomain(clock, polls_to_finish=1, error=_libvirt_error(
            libvirt.VIR_ERR_OPERATION_FAILED, 'migration failed'))
        job = migration.MigrationJob(
            dom, libvirt_settings.migration(progress_interval_s=0.001),
            'src', 'dst', clock=clock, completion=FakeCompletion(),
            threads=threads)
        job.threads._proc = self.useFixture(fixtures.TempDir()).path
        self.assertRaises(exception.NumamigException, job.run, 'qemu+tcp://dst/system',
                          '<domain/>', 'tcp://dst')
        self.assertEqual(1, len(threads.reports))
