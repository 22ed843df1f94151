"""Operators' waits in the conductor: woken by ends, bounded, re-read."""

import threading

import fixtures

from numamig.conductor import watch
from tests import base


class Record:
    """A migration record another thread changes."""

    def __init__(self, status='running'):
        self.uuid = 'm-1'
        self.status = status
        self.reads = 0

    def read(self):
        self.reads += 1
        return (self.uuid, self.status)


def changed_from(status):
    return lambda seen: seen[1] != status


class WatchTestCase(base.TestCase):

    def test_a_changed_migration_is_answered_at_once(self):
        record = Record('completed')
        got = watch.MigrationWatch(4).wait(record.read, 'm-1',
                                           changed_from('running'), 30)
        self.assertEqual(('m-1', 'completed'), got)
        self.assertEqual(1, record.reads)

    def test_an_end_heard_here_wakes_the_wait(self):
        record = Record()
        watcher, done, answers = _waiting(self, record)
        record.status = 'completed'
        watcher.heard(Record())
        self.assertTrue(done.wait(10), "the end did not wake the wait")
        self.assertEqual([('m-1', 'completed')], answers)

    def test_a_change_recorded_elsewhere_is_read_again(self):
        record = Record()
        self.useFixture(fixtures.MonkeyPatch(
            'numamig.conductor.watch.FIRST_RECHECK_S', 0.01))
        timer = threading.Timer(0.05, setattr, (record, 'status', 'error'))
        timer.start()
        self.addCleanup(timer.cancel)
        got = watch.MigrationWatch(4).wait(record.read, 'm-1',
                                           changed_from('running'), 10)
        self.assertEqual('error', got[1])

    def test_the_wait_ends_at_its_timeout(self):
        record = Record()
        got = watch.MigrationWatch(4).wait(record.read, 'm-1',
                                           changed_from('running'), 0.2)
        self.assertEqual('running', got[1])

    def test_beyond_the_waiters_it_answers_at_once(self):
        record = Record()
        watcher = watch.MigrationWatch(1)
        self.assertTrue(watcher._slots.acquire(blocking=False))
        self.addCleanup(watcher._slots.release)
        got = watcher.wait(record.read, 'm-1', changed_from('running'), 30)
        self.assertEqual(('m-1', 'running'), got)
        self.assertEqual(1, record.reads)
        self.assertEqual(('m-1', 'running'), watch.MigrationWatch(0).wait(
            record.read, 'm-1', changed_from('running'), 30))


class StoppingWatchTestCase(base.TestCase):
    """A stopping conductor worker answers the waits it holds: its RPC
    server waits for them before the worker can stop."""

    def test_a_held_wait_is_answered_at_the_stop(self):
        record = Record()
        watcher, done, answers = _waiting(self, record)
        watcher.stop()
        self.assertTrue(done.wait(5), "the stop did not answer the wait")
        self.assertEqual([('m-1', 'running')], answers)

    def test_a_wait_after_the_stop_is_answered_at_once(self):
        record = Record()
        watcher = watch.MigrationWatch(4)
        watcher.stop()
        self.assertEqual(('m-1', 'running'), watcher.wait(
            record.read, 'm-1', changed_from('running'), 30))
        self.assertEqual(1, record.reads)


def _waiting(test, record):
    """(watch, event set when answered, answers) of a wait on
    ``record`` held in a thread, returned once the wait first read it;
    no recheck comes within the test."""
    watcher = watch.MigrationWatch(4)
    test.useFixture(fixtures.MonkeyPatch(
        'numamig.conductor.watch.FIRST_RECHECK_S', 30))
    done = threading.Event()
    answers = []

    def waiter():
        answers.append(watcher.wait(record.read, 'm-1',
                                    changed_from('running'), 30))
        done.set()
    threading.Thread(target=waiter, daemon=True).start()
    while record.reads == 0:
        done.wait(0.01)
    return watcher, done, answers
