"""The migration executor: admits within its threads, runs, wakes."""

import threading
import time
from unittest import mock

import sqlalchemy as sa

from numamig import exception
from numamig.conductor import executor
from numamig.db import instances
from numamig.db import migrations
from numamig.db import models
from numamig.db import queue
from tests.unit.db import base as db_base

LIMITS = queue.Limits(total=10, per_source=10, per_dest=10, queued=10)
# Seconds a task waits for an unreachable database: the tests whose
# database stays up never reach it.
OUTAGE_WAIT = 60
# Long enough that a test passing by the fallback look would be slow to
# notice, never long enough to hang: every wait below is bounded.
WAIT = 10


class ExecutorTestCase(db_base.DBTestCase):

    def setUp(self):
        super().setUp()
        self.release = threading.Event()
        self.started = []
        self.lock = threading.Lock()
        self.all_started = threading.Event()

    def _run(self, uuid):
        with self.lock:
            self.started.append(uuid)
            if len(self.started) == self.expected:
                self.all_started.set()
        self.release.wait(WAIT)

    def request(self, source='src'):
        instance = instances.create(self.db, db_base.make_instance(
            host=source)).instance
        return migrations.create(self.db, db_base.make_migration(
            instance.uuid, source_host=source), max_queued=10).uuid

    def start(self, workers, recheck=60):
        runner = executor.MigrationExecutor(self.db, LIMITS, workers,
                                            self._run, recheck=recheck,
                                            outage_wait=OUTAGE_WAIT)
        self.addCleanup(runner.stop)
        self.addCleanup(self.release.set)
        runner.start()
        return runner

    def test_runs_every_waiting_migration(self):
        self.expected = 3
        uuids = [self.request(source=s) for s in 'abc']
        self.start(workers=3)
        self.assertTrue(self.all_started.wait(WAIT))
        self.assertEqual(sorted(uuids), sorted(self.started))

    def test_admits_no_more_than_its_threads(self):
        self.expected = 2
        uuids = [self.request(source=s) for s in 'abc']
        runner = self.start(workers=2)
        self.assertTrue(self.all_started.wait(WAIT))
        self.assertEqual(2, runner.busy)
        self.assertEqual({uuids[2]: 1}, queue.positions(self.db))
        # A finished task frees its thread and the next one is admitted
        # at once, without waiting for the fallback look.
        self.expected = 3
        self.all_started.clear()
        self.release.set()
        self.assertTrue(self.all_started.wait(WAIT))
        self.assertEqual(sorted(uuids), sorted(self.started))

    def test_a_task_that_ends_with_threads_to_spare_looks_no_further(self):
        """Its migration stays in flight: the end of the task freed no
        slot of the limits, and no migration waited for a thread."""
        self.expected = 1
        self.request()
        looks = []
        real = queue.admit

        def admit(*args, **kwargs):
            looks.append(args)
            return real(*args, **kwargs)
        self.patch(queue, 'admit', admit)
        self.start(workers=3)
        self.assertTrue(self.all_started.wait(WAIT))
        self.release.set()
        time.sleep(0.3)
        self.assertEqual(1, len(looks))

    def test_a_request_wakes_it(self):
        self.expected = 1
        looked = threading.Event()
        real = queue.admit

        def admit(*args, **kwargs):
            try:
                return real(*args, **kwargs)
            finally:
                looked.set()
        with mock.patch.object(queue, 'admit', admit):
            runner = self.start(workers=1)
            self.assertTrue(looked.wait(WAIT), "the first look at start")
            uuid = self.request()
            self.assertFalse(self.all_started.wait(0.2), "nothing woke it")
            # What live_migrate_instance does after recording a request.
            runner.wake()
            self.assertTrue(self.all_started.wait(WAIT))
        self.assertEqual([uuid], self.started)

    def test_a_database_error_is_retried(self):
        self.expected = 1
        uuid = self.request()
        with mock.patch.object(queue, 'admit', _once_then(
                RuntimeError('database gone'), queue.admit)):
            self.start(workers=1, recheck=0.05)
            self.assertTrue(self.all_started.wait(WAIT))
        self.assertEqual([uuid], self.started)

    def test_stop_lets_the_waiting_wait(self):
        self.expected = 1
        first, second = self.request(source='a'), self.request(source='b')
        runner = self.start(workers=1)
        self.assertTrue(self.all_started.wait(WAIT))
        self.release.set()
        runner.stop()
        self.assertEqual([first], self.started)
        self.assertIn(second, queue.positions(self.db))

    def test_once_stopping_it_admits_nothing_while_a_task_runs(self):
        """SIGTERM: the stop begins while a task runs (the service then
        waits for its RPC servers); a request or an end waking it then
        must not let a queued migration in, though threads are free."""
        self.expected = 1
        first = self.request(source='a')
        runner = self.start(workers=2)
        self.assertTrue(self.all_started.wait(WAIT))
        runner.stop_admitting()
        second = self.request(source='b')
        runner.wake()
        time.sleep(0.3)
        self.assertEqual([first], self.started)
        self.assertEqual({second: 1}, queue.positions(self.db))

    def test_admitted_as_the_stop_begins_goes_back_to_the_queue(self):
        self.expected = 1
        uuid = self.request()
        runner = executor.MigrationExecutor(self.db, LIMITS, 1, self._run,
                                            recheck=60,
                                            outage_wait=OUTAGE_WAIT)
        self.addCleanup(runner.stop)
        real = queue.admit

        def admit(*args, **kwargs):
            admitted = real(*args, **kwargs)
            runner.stop_admitting()     # SIGTERM during the admission
            return admitted
        with mock.patch.object(queue, 'admit', admit):
            runner._dispatch()
        self.assertEqual([], self.started)
        self.assertEqual(0, runner.busy)
        self.assertEqual({uuid: 1}, queue.positions(self.db))

def _once_then(error, real):
    calls = []

    def admit(*args, **kwargs):
        calls.append(args)
        if len(calls) == 1:
            raise error
        return real(*args, **kwargs)
    return admit


class RequeueTest(ExecutorTestCase):

    def test_a_migration_back_in_the_queue_does_not_wake_it(self):
        uuid = self.request()
        looks = []
        ran = threading.Event()
        real = queue.admit

        def admit(*args, **kwargs):
            looks.append(1)
            return real(*args, **kwargs)

        def run(migration_uuid):
            # What run_admitted does when every destination was busy.
            queue.requeue(self.db, migration_uuid)
            ran.set()
            return False
        with mock.patch.object(queue, 'admit', admit):
            runner = executor.MigrationExecutor(self.db, LIMITS, 1, run,
                                                recheck=60,
                                                outage_wait=OUTAGE_WAIT)
            self.addCleanup(runner.stop)
            runner.start()
            self.assertTrue(ran.wait(WAIT))
            self.assertFalse(runner._wake.wait(0.3),
                             "its own end took it straight back")
        self.assertEqual(1, len(looks))
        self.assertEqual({uuid: 1}, queue.positions(self.db))


class LeaseTest(ExecutorTestCase):

    def lease_of(self, uuid):
        with self.db.reader() as session:
            return session.scalar(sa.select(
                models.Migration.lease_expires_at).where(
                    models.Migration.uuid == uuid))

    def test_admission_leases_and_a_running_task_renews(self):
        self.expected = 1
        uuid = self.request()
        runner = self.start(workers=1, recheck=0.05)
        self.assertTrue(self.all_started.wait(WAIT))
        first = self.lease_of(uuid)
        self.assertIsNotNone(first)
        self.assertEqual({uuid}, runner.held())
        deadline = time.monotonic() + WAIT
        while self.lease_of(uuid) == first:
            self.assertLess(time.monotonic(), deadline, "never renewed")
            time.sleep(0.02)
        self.assertGreater(self.lease_of(uuid), first)


class DatabaseFailureTest(ExecutorTestCase):

    def test_a_task_that_met_a_dead_database_goes_back_when_it_answers(self):
        uuid = self.request()
        down = exception.DatabaseError(url='db', reason='connection refused')
        recovered = threading.Event()
        tries = []

        def run(migration_uuid):
            if not tries:
                raise down
            return True

        def recover(migration_uuid):
            tries.append(migration_uuid)
            if len(tries) == 1:
                raise down      # still down at the first try
            queue.requeue(self.db, migration_uuid)
            recovered.set()
        runner = executor.MigrationExecutor(self.db, LIMITS, 1, run,
                                            recheck=0.05, recover=recover,
                                            outage_wait=OUTAGE_WAIT)
        self.addCleanup(runner.stop)
        runner.start()
        self.assertTrue(recovered.wait(WAIT))
        self.assertEqual([uuid, uuid], tries[:2])
        # Held (its lease renewed) until it was back in the queue.
        deadline = time.monotonic() + WAIT
        while uuid in runner.held():
            self.assertLess(time.monotonic(), deadline, "still held")
            time.sleep(0.02)


class DatabaseOutageTest(ExecutorTestCase):
    """A task that meets the database gone waits for it in its thread
    (bounded by outage_wait) and goes on as soon as it answers."""

    def setUp(self):
        super().setUp()
        self.down = exception.DatabaseError(url='db',
                                            reason='connection refused')

    def executor(self, run, recover, give_up=None, outage_wait=30):
        # A recheck far longer than every wait below: only the task's own
        # wait can make these tests pass in time.
        runner = executor.MigrationExecutor(
            self.db, LIMITS, 1, run, recheck=60, recover=recover,
            give_up=give_up, outage_wait=outage_wait)
        self.addCleanup(runner.stop, False)
        runner.start()
        return runner

    def test_goes_on_within_seconds_of_the_database_answering(self):
        uuid = self.request()
        runs, recovered = [], threading.Event()

        def run(migration_uuid):
            runs.append(migration_uuid)
            if len(runs) == 1:
                raise self.down
            return True

        answers = iter([self.down, self.down, None])

        def recover(migration_uuid):
            answer = next(answers)
            if answer is not None:
                raise answer
            queue.requeue(self.db, migration_uuid)
            recovered.set()
        started = time.monotonic()
        self.executor(run, recover)
        self.assertTrue(recovered.wait(WAIT))
        # Two refusals: 0.25 s, then 0.5 s of waiting.
        self.assertLess(time.monotonic() - started, 5)
        deadline = time.monotonic() + WAIT
        while len(runs) < 2:
            self.assertLess(time.monotonic(), deadline, "not run again")
            time.sleep(0.02)
        self.assertEqual([uuid, uuid], runs)

    def test_held_while_it_waits(self):
        uuid = self.request()
        waiting, answer = threading.Event(), threading.Event()

        def recover(migration_uuid):
            waiting.set()
            if not answer.is_set():
                raise self.down
            queue.requeue(self.db, migration_uuid)

        def run(migration_uuid):
            if not answer.is_set():
                raise self.down
            return True
        runner = self.executor(run, recover)
        self.assertTrue(waiting.wait(WAIT))
        self.assertIn(uuid, runner.held())
        answer.set()

    def test_past_its_wait_it_ends_with_that_reason_once_it_answers(self):
        uuid = self.request()
        back, ended = threading.Event(), []
        given_up = threading.Event()

        def run(migration_uuid):
            raise self.down

        def recover(migration_uuid):
            raise self.down

        def give_up(migration_uuid, waited):
            if not back.is_set():
                raise self.down
            ended.append((migration_uuid, waited))
            given_up.set()
        runner = executor.MigrationExecutor(
            self.db, LIMITS, 1, run, recheck=0.05, recover=recover,
            give_up=give_up, outage_wait=0.3)
        self.addCleanup(runner.stop, False)
        runner.start()
        deadline = time.monotonic() + WAIT
        while uuid not in runner._expired:
            self.assertLess(time.monotonic(), deadline, "never expired")
            time.sleep(0.02)
        self.assertIn(uuid, runner.held())
        back.set()
        self.assertTrue(given_up.wait(WAIT))
        (what, waited), = ended
        self.assertEqual(uuid, what)
        self.assertGreaterEqual(waited, 0.3)
        deadline = time.monotonic() + WAIT
        while uuid in runner.held():
            self.assertLess(time.monotonic(), deadline, "still held")
            time.sleep(0.02)

    def test_an_admission_whose_answer_was_lost_runs_all_the_same(self):
        # The connection died with the COMMIT under way: the migration is
        # admitted, with this worker's lease, and the dispatcher got an
        # error. Nobody else will drive it; this worker must.
        self.expected = 1
        uuid = self.request()
        lost, real = [], queue.admit

        def admit(db, *args, **kwargs):
            admitted = real(db, *args, **kwargs)
            if not lost:
                lost.extend(admitted)
                raise self.down
            return admitted
        with mock.patch.object(queue, 'admit', admit):
            runner = executor.MigrationExecutor(self.db, LIMITS, 1,
                                                self._run, recheck=60,
                                                outage_wait=OUTAGE_WAIT)
            self.addCleanup(runner.stop)
            self.addCleanup(self.release.set)
            runner.start()
            self.assertTrue(self.all_started.wait(WAIT))
        self.assertEqual([uuid], lost)
        self.assertEqual([uuid], self.started)
        self.assertEqual({uuid}, runner.held())
