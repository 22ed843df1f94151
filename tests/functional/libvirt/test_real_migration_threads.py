"""The real tier, measured first (issue 19 item 3): where QEMU's
migration threads run on the source.

Linux threads start with their creator's affinity. The guest's vCPU and
emulator threads are pinned to pCPU 0 here; while a throttled migration
with two parallel connections runs, the source QEMU's threads are read
from /proc (name and Cpus_allowed_list) and recorded. Nothing is changed
by numamig yet: this records what the placement feature must fix.

Measured (libvirt 9.0, QEMU 7.2, TCG; vCPU and emulator pinned to pCPU
0, pCPU 1 free): before the migration the threads are qemu-system-x86
(x2), IO mon_iothread and CPU 0/TCG, all on 0; during it QEMU adds
live_migration, multifdsend_0, multifdsend_1 and return path, every one
allowed on pCPU 0 only: the migration's copy threads share the guest's
own pCPU while pCPU 1 idles.
"""

import os
import time

from tests.functional.libvirt import real_hosts
from tests.functional.libvirt.real_hosts import GUEST


def threads(pid):
    """{thread name: [Cpus_allowed_list, ...]} of process ``pid``."""
    found = {}
    for tid in sorted(os.listdir(f'/proc/{pid}/task')):
        base = f'/proc/{pid}/task/{tid}'
        try:
            with open(f'{base}/comm') as f:
                name = f.read().strip()
            with open(f'{base}/status') as f:
                allowed = next(line.split()[1] for line in f
                               if line.startswith('Cpus_allowed_list'))
        except (OSError, StopIteration):
            continue  # the thread ended meanwhile
        found.setdefault(name, []).append(allowed)
    return found


class MigrationThreadsTestCase(real_hosts.RealHostsTestCase):

    def test_where_migration_threads_run(self):
        self.spawn_guest(dirty=True)
        source = self.driver('src', parallel_connections=2)
        name = self.drivers['src'].list_guests()[GUEST]
        pid = self.hosts['src'].qemu_pid(name)
        before = threads(pid)
        run = self.start_migration(source, bandwidth_mib=8)
        run.wait_for_progress()
        during = threads(pid)
        source.live_migration_abort(GUEST)
        run.wait_for_end()
        self.record(f"before: {before}\nduring: {during}")
        migration_threads = {n: a for n, a in during.items()
                             if n.startswith(('live_migration',
                                              'multifdsend', 'mig/'))}
        self.assertTrue(migration_threads, during)
        self.assert_still_on_src()


    def test_migration_threads_pinned_away_from_the_guest(self):
        self.spawn_guest(dirty=True)
        source = self.driver('src', parallel_connections=2,
                             thread_cpus=frozenset({1}))
        name = self.drivers['src'].list_guests()[GUEST]
        pid = self.hosts['src'].qemu_pid(name)
        run = self.start_migration(source, bandwidth_mib=8)
        run.wait_for_progress()
        # The monitor pins on each poll; give it one more.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            during = threads(pid)
            mig = {n: a for n, a in during.items()
                   if n.startswith(('live_migration', 'multifdsend'))}
            if mig and all(a == ['1'] for a in mig.values()):
                break
            time.sleep(0.2)
        source.live_migration_abort(GUEST)
        run.wait_for_end()
        self.record(f"pinned: {during}")
        self.assertEqual({'live_migration': ['1'], 'multifdsend_0': ['1'],
                          'multifdsend_1': ['1']}, mig)
        # The guest's own threads stay where they were.
        self.assertEqual(['0'], during['CPU 0/TCG'])
        self.assert_still_on_src()
