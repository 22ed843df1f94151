"""Finding QEMU's migration threads in a /proc tree, and pinning them."""

import os

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

    def _process(self, pid, args, threads):
        os.makedirs(f'{self.proc}/{pid}/task')
        with open(f'{self.proc}/{pid}/cmdline', 'wb') as f:
            f.write(b'\0'.join(args) + b'\0')
        for tid, name in threads.items():
            os.makedirs(f'{self.proc}/{pid}/task/{tid}')
            with open(f'{self.proc}/{pid}/task/{tid}/comm', 'w') as f:
                f.write(name + '\n')

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
