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

With shared emulator threads (a guest with no pins at all, its XML
copied as the release before did) every source thread, and the
destination's multifdrecv_0 and multifdrecv_1, were allowed on pCPUs
0-1: on the destination that includes pCPU 0, the blocker's dedicated
pCPU. ``test_placed_from_the_topology_on_both_hosts`` shows the fix:
with pCPU 0 dedicated and 1 shared on both hosts, the CPUs derived from
the topology (numamig.numa.migration_cpus) are {1}, the threads of both
hosts end up allowed on pCPU 1 only, and that is what is recorded.
"""

import os
import time

from numamig import objects
from numamig.numa import migration_cpus
from numamig.virt.libvirt import driver as lv_driver
from tests import libvirt_settings
from tests.fixtures import libvirt_guests as guests
from tests.functional.libvirt import real_hosts
from tests.functional.libvirt.real_hosts import BLOCKER
from tests.functional.libvirt.real_hosts import GUEST

# The copy is capped so low that even a guest the loaded machine starves
# of CPU (so that it dirties nothing) is still copying when the test
# looks: 128 MiB take a minute at this rate.
CAP_MIB = 2


def threads(pid):
    """{thread name: [Cpus_allowed_list, ...]} of process ``pid``.

    :raises AssertionError: the process is gone.
    """
    found = {}
    try:
        tids = os.listdir(f'/proc/{pid}/task')
    except FileNotFoundError:
        raise AssertionError(f"QEMU {pid} is gone: its migration ended "
                             f"before the test looked") from None
    for tid in sorted(tids):
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
        run = self.start_migration(source, bandwidth_mib=CAP_MIB)
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
        run = self.start_migration(source, bandwidth_mib=CAP_MIB)
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


class ChosenThreads:
    """What a source agent hands live_migrate (numamig.compute.
    migration_threads.SourceThreads), its report kept."""

    def __init__(self, chosen):
        self.cpus, self.basis = chosen.cpus, chosen.basis
        self.reports = []

    def report(self, record):
        self.reports.append(record)


class TopologyPlacedThreadsTestCase(real_hosts.RealHostsTestCase):
    """pCPU 0 dedicated and 1 shared on both hosts; the blocker holds
    pCPU 0 of dst, the guest floats (no pins: shared emulator threads)."""

    SHARED, DEDICATED = frozenset({1}), frozenset({0})

    def driver(self, name, **migration):
        daemon = self.hosts[name]
        migration.setdefault('progress_interval_s',
                             real_hosts.PROGRESS_INTERVAL_S)
        drv = lv_driver.LibvirtDriver(libvirt_settings.host(
            host=name, uri=daemon.uri, virt_type='qemu',
            cpu_dedicated_set=self.DEDICATED, cpu_shared_set=self.SHARED,
            reserved_host_memory_mb=0,
            migration=libvirt_settings.migration(
                inbound_addr='127.0.0.1', libvirtd_port=daemon.port,
                **migration)))
        self.addCleanup(drv.cleanup_host)
        drv.init_host(name)
        return drv

    def usage(self, name, pinned):
        """Host ``name``'s usage topology with ``pinned`` pCPUs held."""
        host = self.drivers[name].get_host_topology()
        cell = host.cells[0]
        cell.pinned_cpus = set(pinned)
        return objects.HostNUMATopology(cells=[cell])

    def test_placed_from_the_topology_on_both_hosts(self):
        base_xml = (
            "<domain type='qemu'><os><type arch='x86_64'>hvm</type>"
            f"<kernel>{self.kernel}</kernel></os><devices>"
            "<memballoon model='none'/></devices></domain>")
        self.drivers['src'].spawn(
            guests.instance(1, real_hosts.MEMORY_MB, 'guest-1', GUEST),
            None, base_xml=base_xml)
        src_chosen = migration_cpus.place(self.usage('src', ()), set())
        dst_chosen = migration_cpus.place(self.usage('dst', {0}), {0})
        self.assertEqual((frozenset({1}), frozenset({1})),
                         (src_chosen.cpus, dst_chosen.cpus))
        source = self.driver('src', parallel_connections=4)
        pid = self.hosts['src'].qemu_pid('guest-1')
        ended = []
        watch = self.drivers['dst'].watch_incoming_migration(
            GUEST, (dst_chosen.cpus, dst_chosen.basis), real_hosts.MEMORY_MB,
            ended.append)
        self.addCleanup(watch.stop)
        threads_arg = ChosenThreads(src_chosen)
        xml = self.drivers['src'].get_destination_xml(GUEST, None)
        run = real_hosts.MigrationRun(source, xml, self.migrate_data(CAP_MIB),
                                      threads=threads_arg).start()
        run.wait_for_progress()
        src_seen, dst_seen = self._until_pinned(pid)
        source.live_migration_abort(GUEST)
        run.wait_for_end()
        watch.stop()
        self.record(f"source: {src_seen}\ndestination: {dst_seen}\n"
                    f"source record: {threads_arg.reports}\n"
                    f"destination record: {ended}")
        self.assertEqual({'live_migration': ['1'], 'multifdsend_0': ['1'],
                          'multifdsend_1': ['1'], 'return path': ['1']},
                         src_seen)
        self.assertEqual({'multifdrecv_0': ['1'], 'multifdrecv_1': ['1']},
                         dst_seen)
        (src_record,) = threads_arg.reports
        self.assertEqual(('src', [1], 2, 'shared-any-node'), (
            src_record['host'], src_record['cpus'],
            src_record['connections'], src_record['basis']))
        self.assertEqual({[1] == c for c in src_record['threads'].values()},
                         {True})
        (dst_record,) = ended
        self.assertEqual({'multifdrecv_0': [1], 'multifdrecv_1': [1]},
                         dst_record['threads'])
        self.assertIn(BLOCKER, self.drivers['dst'].list_guests())
        self.assertIn(GUEST, self.drivers['src'].list_guests())

    def _until_pinned(self, src_pid):
        """The migration threads of both QEMUs once all are pinned (or
        after 15 s): {name: [Cpus_allowed_list]} each."""
        deadline = time.monotonic() + 15
        while True:
            src = _migration_only(threads(src_pid))
            dst_pid = self.hosts['dst'].qemu_pid('guest-1')
            dst = _migration_only(threads(dst_pid))
            done = src and dst and all(
                a == ['1'] for a in list(src.values()) + list(dst.values()))
            if done or time.monotonic() > deadline:
                return src, dst
            time.sleep(0.2)


def _migration_only(found):
    return {n: a for n, a in found.items()
            if n.startswith(('live_migration', 'multifdsend', 'multifdrecv',
                             'return path'))}
