"""Finding QEMU's migration threads in a /proc tree, and pinning them."""

import os
import shutil

import fixtures

from numamig.virt.libvirt import migration_threads as mt
from tests import base

UUID = '5a1e0000-aaaa-4bbb-8ccc-000000000001'


class ProcTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.proc = self.useFixture(fixtures.TempDir()).path
        self._process(41, [b'/usr/bin/python3', b'-uuid', UUID.encode()],
                      {})
        self._process(42, [b'/usr/bin/qemu-system-x86_64', b'-name',
                           b'guest', b'-uuid', UUID.encode()],
                      {42: 'qemu-system-x86', 43: 'CPU 0/TCG',
                       44: 'live_migration', 45: 'multifdsend_0',
                       46: 'return path'})

    def _process(self, pid, args, threads, allowed='0-1'):
        os.makedirs(f'{self.proc}/{pid}/task')
        with open(f'{self.proc}/{pid}/cmdline', 'wb') as f:
            f.write(b'\0'.join(args) + b'\0')
        for tid, name in threads.items():
            self._thread(pid, tid, name, allowed)

    def _thread(self, pid, tid, name, allowed='0-1'):
        os.makedirs(f'{self.proc}/{pid}/task/{tid}', exist_ok=True)
        with open(f'{self.proc}/{pid}/task/{tid}/comm', 'w') as f:
            f.write(name + '\n')
        self._allowed(pid, tid, allowed)

    def _allowed(self, pid, tid, cpus):
        """What the kernel would show: the fake setaffinity writes it."""
        with open(f'{self.proc}/{pid}/task/{tid}/status', 'w') as f:
            f.write(f"Name:\tx\nCpus_allowed:\t3\n"
                    f"Cpus_allowed_list:\t{cpus}\n")

    def setaffinity(self, pid, calls=None, refuse=()):
        """A sched_setaffinity writing into the fake /proc."""
        def pin(tid, cpus):
            if calls is not None:
                calls.append((tid, sorted(cpus)))
            if tid in refuse:
                raise PermissionError(1, 'Operation not permitted')
            self._allowed(pid, tid, ','.join(map(str, sorted(cpus))))
        return pin

    def test_qemu_found_by_its_uuid(self):
        self.assertEqual(42, mt.qemu_pid(UUID, self.proc))
        self.assertIsNone(mt.qemu_pid('other', self.proc))

    def test_the_older_qemu_when_two_run_the_guest(self):
        # Two hosts on one machine while a migration runs: the source's
        # QEMU started before the destination's, whatever the pids.
        self._process(7, [b'/usr/bin/qemu-system-x86_64', b'-uuid',
                          UUID.encode(), b'-incoming', b'defer'], {})
        for pid, started in ((42, 1000), (7, 5000)):
            with open(f'{self.proc}/{pid}/stat', 'w') as f:
                # Field 22, start time; the name may hold spaces.
                f.write(f"{pid} (qemu-system x86) S 1 2 3 4 5 6 7 8 9 10 "
                        f"11 12 13 14 15 16 17 18 {started} 20 21\n")
        self.assertEqual(42, mt.qemu_pid(UUID, self.proc))

    def test_only_migration_threads(self):
        self.assertEqual({44: 'live_migration', 45: 'multifdsend_0',
                          46: 'return path'},
                         mt.migration_threads(42, self.proc))

    def test_pinned_once_each_and_failures_skipped(self):
        calls = []

        def setaffinity(tid, cpus):
            calls.append((tid, sorted(cpus)))
            if tid == 46:
                raise ProcessLookupError(3, 'No such process')
        pinner = mt.ThreadPinner(UUID, {1, 9}, setaffinity, self.proc)
        pinner.poll()
        pinner.poll()
        self.assertEqual({44: 'live_migration', 45: 'multifdsend_0'},
                         pinner.pinned)
        # 44 and 45 once; 46 failed, so it is tried again.
        self.assertEqual([(44, [1, 9]), (45, [1, 9]), (46, [1, 9]),
                          (46, [1, 9])], sorted(calls))

    def test_where_each_thread_ran_is_recorded(self):
        pinner = mt.ThreadPinner(UUID, {1}, self.setaffinity(42),
                                 self.proc)
        pinner.poll()
        self.assertEqual({'live_migration': [1], 'multifdsend_0': [1],
                          'return path': [1]}, pinner.threads)
        # The guest's own threads are never touched.
        self.assertNotIn('CPU 0/TCG', pinner.threads)

    def test_no_cpus_only_records_where_they_run(self):
        calls = []
        pinner = mt.ThreadPinner(UUID, frozenset(),
                                 self.setaffinity(42, calls), self.proc)
        pinner.poll()
        self.assertEqual([], calls)
        self.assertEqual([0, 1], pinner.threads['multifdsend_0'])

    def test_a_refused_pin_is_recorded_where_it_runs_and_tried_again(self):
        calls = []
        pinner = mt.ThreadPinner(UUID, {1},
                                 self.setaffinity(42, calls, refuse={46}),
                                 self.proc)
        pinner.poll()
        pinner.poll()
        self.assertEqual([0, 1], pinner.threads['return path'])
        self.assertEqual(2, sum(1 for tid, _ in calls if tid == 46))

    def test_threads_recorded_are_bounded(self):
        for tid in range(100, 100 + mt.record.MAX_THREADS + 5):
            self._thread(42, tid, f'multifdsend_{tid}')
        pinner = mt.ThreadPinner(UUID, {1}, self.setaffinity(42),
                                 self.proc)
        pinner.poll()
        self.assertEqual(mt.record.MAX_THREADS, len(pinner.threads))

    def test_receiving_threads_are_migration_threads(self):
        self._thread(42, 50, 'multifdrecv_0')
        self._thread(42, 51, 'postcopy/listen')
        self._thread(42, 52, 'fault-default')
        self.assertLessEqual({50, 51, 52},
                             set(mt.migration_threads(42, self.proc)))

    def test_ignored_qemu_is_left_alone(self):
        # The destination's watch on a machine shared with the source:
        # the QEMU running before the migration is the source's.
        self._process(7, [b'/usr/bin/qemu-system-x86_64', b'-uuid',
                          UUID.encode()], {8: 'multifdrecv_0'})
        pinner = mt.ThreadPinner(UUID, {1}, self.setaffinity(7),
                                 self.proc, ignore_pids={42})
        pinner.poll()
        self.assertEqual(7, pinner.pid)
        self.assertEqual({'multifdrecv_0': [1]}, pinner.threads)

    def test_alive_until_its_qemu_exits(self):
        pinner = mt.ThreadPinner(UUID, {1}, self.setaffinity(42),
                                 self.proc)
        self.assertTrue(pinner.alive())
        pinner.poll()
        self.assertTrue(pinner.alive())
        shutil.rmtree(f'{self.proc}/42')
        self.assertFalse(pinner.alive())

    def test_the_sending_qemu_whatever_else_runs_the_guest(self):
        # A QEMU of the guest a failed run left behind, older than the
        # source's: the source's is the one with a sending thread.
        self._process(7, [b'/usr/bin/qemu-system-x86_64', b'-uuid',
                          UUID.encode()], {8: 'postcopy/listen'})
        for pid, started in ((7, 10), (42, 1000)):
            with open(f'{self.proc}/{pid}/stat', 'w') as f:
                f.write(f"{pid} (qemu) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 "
                        f"15 16 17 18 {started} 20 21\n")
        pinner = mt.ThreadPinner(UUID, {1}, self.setaffinity(42),
                                 self.proc, sending=True)
        pinner.poll()
        self.assertEqual(42, pinner.pid)
        self.assertNotIn('postcopy/listen', pinner.threads)
