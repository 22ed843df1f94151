"""Two real libvirtd hosts and a TCG guest that moves between them.

This machine has one NUMA node and pCPUs 0-1, so placements move between
pCPU 0 and 1::

    host A (src): guest-1 vCPU 0 -> pCPU 0
    host B (dst): blocker vCPU 0 -> pCPU 0, so the claim gives pCPU 1

A test that must catch a job in flight spawns the guest with a kernel that
keeps dirtying 94 MiB of its memory, and limits the bandwidth: such a job
never converges by itself while the guest runs. Tests skip, with the
reason printed, only where the machine cannot run libvirtd hosts (no root,
no unshare, no libvirtd or QEMU).
"""

import itertools
import os
import threading
import time

import fixtures
import libvirt
from lxml import etree
from testtools import content

from numamig import exception
from numamig import objects
from numamig.virt.libvirt import driver
from tests import base
from tests import libvirt_settings
from tests.fixtures import libvirt_daemons
from tests.fixtures import libvirt_guests as guests

# numamig finds a guest's QEMU in /proc by its uuid (migration threads),
# and CI runs real-tier tests in two processes at once: a uuid of each
# process's own keeps one test from taking the other's QEMU for its own.
GUEST = f'5a1e0000-aaaa-4bbb-8c0a-{os.getpid():012x}'
BLOCKER = f'5a1e0000-aaaa-4bbb-8c0b-{os.getpid():012x}'
MEMORY_MB = 128
MIB = 1024 * 1024
# The monitor samples the job this often; every sample proves the job is
# alive, so waits extend while samples arrive instead of using one fixed
# deadline (a loaded 2-core machine can take long to set a job up).
PROGRESS_INTERVAL_S = 0.2
STALL_LIMIT_S = 30
HARD_LIMIT_S = 240
# vCPU time in which the dirtying kernel writes its 94 MiB at least once
# (page sampling measures 84-96 MiB/s on an idle machine), and how long
# a loaded machine may take to give it that.
DIRTY_WARMUP_CPU_NS = 1_500_000_000
DIRTY_WARMUP_LIMIT_S = 120
# A halted vCPU's CPU time holds still this long.
HALT_SETTLE_S = 0.5


def placement(pcpu, host_cell=0):
    """A one-cell guest placement with vCPU 0 pinned to ``pcpu``."""
    return guests.topology(
        guests.cell(0, host_cell=host_cell, vcpus=[0], pins={0: pcpu},
                    memory_mb=MEMORY_MB, cpu_policy='dedicated'),
        instance_uuid=None)


class MigrationRun:
    """One ``live_migrate`` in a thread, watched through its samples.

    ``samples`` are the MigrationProgress callbacks; ``result`` or
    ``error`` hold the outcome once ``ended``.
    """

    def __init__(self, source, dest_xml, migrate_data, threads=None):
        self.samples = []
        # The CPUs chosen for the job's threads (see live_migrate).
        self.threads = threads
        # The post-copy recovery history, each time it grew.
        self.recovery = []
        self.result = self.error = None
        self.ended = False
        self._changed = threading.Condition()
        self._thread = threading.Thread(
            target=self._migrate, args=(source, dest_xml, migrate_data),
            name='real-tier-migration', daemon=True)

    def start(self):
        self._thread.start()
        return self

    def _migrate(self, source, dest_xml, migrate_data):
        try:
            self.result = source.live_migrate(
                GUEST, dest_xml, migrate_data, self._progress,
                recovery_callback=self._recovered, threads=self.threads)
        except exception.NumamigException as exc:
            self.error = exc
        finally:
            with self._changed:
                self.ended = True
                self._changed.notify_all()

    def _progress(self, sample):
        with self._changed:
            self.samples.append(sample)
            self._changed.notify_all()

    def _recovered(self, history):
        with self._changed:
            self.recovery.append(history)
            self._changed.notify_all()

    def moved_memory(self):
        return any(s.memory_processed for s in self.samples)

    def wait_for_progress(self):
        """Return once the job has sent memory; fail if it ended first.

        :raises AssertionError: naming the outcome or the last sample.
        """
        self._wait(lambda: self.moved_memory() or self.ended)
        if not self.moved_memory():
            raise AssertionError(
                f"migration ended before it sent any memory: result "
                f"{self.result and self.result.as_dict()}, error "
                f"{self.error!r}")

    def wait_for_end(self):
        self._wait(lambda: self.ended)
        self._thread.join()

    def _wait(self, done):
        """Wait until ``done()``, as long as the job keeps reporting.

        Fails after STALL_LIMIT_S without a new sample, or HARD_LIMIT_S
        in all, with what was last seen.
        """
        started = last_change = time.monotonic()
        seen = len(self.samples) + len(self.recovery)
        with self._changed:
            while not done():
                now = time.monotonic()
                # A recovery event is a sign of life as a sample is.
                if len(self.samples) + len(self.recovery) != seen:
                    seen = len(self.samples) + len(self.recovery)
                    last_change = now
                if now - last_change > STALL_LIMIT_S or \
                        now - started > HARD_LIMIT_S:
                    last = self.samples[-1].as_dict() if self.samples \
                        else None
                    raise AssertionError(
                        f"migration stalled: {len(self.samples)} samples, "
                        f"last {last}, {now - started:.0f} s")
                self._changed.wait(PROGRESS_INTERVAL_S)


def start_root(test):
    """Skip ``test`` (saying why) where this machine cannot run libvirtd
    hosts; else return a temporary directory for them."""
    reason = libvirt_daemons.missing_requirements()
    if reason:
        print(f"SKIP real libvirt tier: {reason}")
        test.skipTest(reason)
    return test.useFixture(fixtures.TempDir()).path


class RealHostsTestCase(base.TestCase):
    """Hosts 'src' and 'dst', the blocker on dst, the dirtying kernel."""

    def setUp(self):
        super().setUp()
        root = start_root(self)
        self.hosts, self.drivers = {}, {}
        self.root = root
        for name in ('src', 'dst'):
            daemon = self.useFixture(libvirt_daemons.LibvirtDaemon(
                name, root, before_start=self.before_start(name)))
            self.hosts[name] = daemon
            self.drivers[name] = self.driver(name)
        self.kernel = os.path.join(root, 'dirty.bin')
        with open(self.kernel, 'wb') as f:
            f.write(libvirt_daemons.dirtying_kernel())
        self.drivers['dst'].spawn(
            guests.instance(1, MEMORY_MB, 'blocker', BLOCKER), placement(0))

    def before_start(self, name):
        """What to do in host ``name``'s directory before its libvirtd
        starts (a callable, or None)."""
        return None

    def guard_settings(self, name):
        """Host ``name``'s migration guard settings (None: no guard)."""
        return None

    def driver(self, name, **migration):
        """A driver of host ``name`` with these MigrationSettings."""
        daemon = self.hosts[name]
        migration.setdefault('progress_interval_s', PROGRESS_INTERVAL_S)
        settings = libvirt_settings.host(
            host=name, uri=daemon.uri, virt_type='qemu',
            cpu_dedicated_set=frozenset({0, 1}),
            reserved_host_memory_mb=0,
            migration=libvirt_settings.migration(
                inbound_addr='127.0.0.1', libvirtd_port=daemon.port,
                **migration),
            migration_guard=self.guard_settings(name))
        drv = driver.LibvirtDriver(settings)
        self.addCleanup(drv.cleanup_host)
        drv.init_host(name)
        return drv

    def spawn_guest(self, dirty=False, halted=False):
        """Spawn the guest on src: with ``dirty`` the dirtying kernel,
        with ``halted`` a kernel that writes its first MiB and halts
        (interrupts off), else no kernel (SeaBIOS, which finds nothing
        to boot and tries again)."""
        kernel = self.kernel if dirty else self._halting_kernel() \
            if halted else None
        base_xml = None
        if kernel:
            base_xml = (
                "<domain type='qemu'><os><type arch='x86_64'>hvm</type>"
                f"<kernel>{kernel}</kernel></os><devices>"
                "<memballoon model='none'/></devices></domain>")
        self.drivers['src'].spawn(
            guests.instance(1, MEMORY_MB, 'guest-1', GUEST),
            placement(0), base_xml=base_xml)
        if dirty:
            self._wait_dirtying()
        elif halted:
            self._wait_halted()

    def _halting_kernel(self):
        path = os.path.join(self.root, 'halt.bin')
        with open(path, 'wb') as f:
            f.write(libvirt_daemons.drain_kernel(3)[0])
        return path

    def _wait_dirtying(self):
        """Return once the dirtying kernel has run long enough to have
        written its whole set at least once.

        A guest that has not run yet has zero memory, which QEMU sends
        as flags: its migration ends in seconds whatever the cap, and
        its dirty rate samples 0 (both seen in CI while the nested tier's
        machine held the cores). The vCPU's own CPU time tells.
        """
        deadline = time.monotonic() + DIRTY_WARMUP_LIMIT_S
        while True:
            ran = self._vcpu_time()
            if ran >= DIRTY_WARMUP_CPU_NS:
                return
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"the dirtying guest's vCPU ran {ran / 1e9:.2f} s "
                    f"in {DIRTY_WARMUP_LIMIT_S} s")
            time.sleep(PROGRESS_INTERVAL_S)

    def _wait_halted(self):
        """Return once the halting kernel's vCPU has stopped taking CPU
        time: firmware and kernel are done writing guest memory.

        SeaBIOS writes memory while it starts (a guest sampled then
        measured 2 MiB/s in CI, the machine loaded), and under load it
        may start seconds late.
        """
        deadline = time.monotonic() + DIRTY_WARMUP_LIMIT_S
        last = self._vcpu_time()
        while True:
            time.sleep(HALT_SETTLE_S)
            ran = self._vcpu_time()
            if ran and ran == last:
                return
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"the halting guest's vCPU still ran after "
                    f"{DIRTY_WARMUP_LIMIT_S} s ({ran / 1e9:.2f} s of CPU)")
            last = ran

    def _vcpu_time(self):
        dom = self.drivers['src']._conn.lookupByUUIDString(GUEST)
        (vcpu, *_), _maps = dom.vcpus()
        return vcpu[2]

    def migrate_data(self, bandwidth_mib=None):
        connect_uri, migration_uri = self.drivers['dst'].migration_target()
        data = objects.LiveMigrateData(
            instance_uuid=GUEST, source_host='src', dest_host='dst',
            migration_uuid='5a1e0000-aaaa-4bbb-8ccc-00000000c001',
            dest_connect_uri=connect_uri, migration_uri=migration_uri)
        if bandwidth_mib:
            data.bandwidth_mib = bandwidth_mib
        return data

    def dest_xml(self, topology=None):
        """The source's XML rewritten for the claim of pCPU 1 on dst."""
        dst = self.drivers['dst']
        info = dst.build_migrate_info(topology or placement(1),
                                      dst.get_host_topology())
        return self.drivers['src'].get_destination_xml(GUEST, info)

    def start_migration(self, source=None, bandwidth_mib=None):
        return MigrationRun(source or self.drivers['src'], self.dest_xml(),
                            self.migrate_data(bandwidth_mib)).start()

    @staticmethod
    def pins(xml):
        """([vcpupin cpusets], emulatorpin cpuset) of a domain XML."""
        doc = etree.fromstring(xml)
        return ([el.get('cpuset') for el in doc.iterfind(
            'cputune/vcpupin')], doc.find('cputune/emulatorpin').get(
                'cpuset'))

    def domain_state(self, name):
        conn = self.drivers[name]._conn
        return conn.lookupByUUIDString(GUEST).state()[0]

    def assert_moved_to_dst(self):
        """Gone from src; running on dst with pCPU 1, live, persistent
        and in the real affinity of its vCPU thread."""
        src, dst = self.drivers['src'], self.drivers['dst']
        self.assertNotIn(GUEST, src.list_guests())
        self.assertEqual((['1'], '1'), self.pins(dst.get_domain_xml(GUEST)))
        self.assertEqual((['1'], '1'), self.pins(
            dst.get_domain_xml(GUEST, persistent=True)))
        self.assertEqual(libvirt.VIR_DOMAIN_RUNNING, self.domain_state('dst'))
        pid = self.hosts['dst'].qemu_pid('guest-1')
        self.assertEqual({0: '1'}, libvirt_daemons.vcpu_thread_affinity(pid))

    def assert_still_on_src(self):
        """Running on src with its old pins; dst holds only the blocker."""
        src = self.drivers['src']
        self.assertIn(GUEST, src.list_guests())
        self.assertEqual(libvirt.VIR_DOMAIN_RUNNING, self.domain_state('src'))
        self.assertEqual((['0'], '0'), self.pins(src.get_domain_xml(GUEST)))
        self.assertEqual((['0'], '0'), self.pins(
            src.get_domain_xml(GUEST, persistent=True)))
        self.assertEqual({BLOCKER: 'blocker'},
                         self.drivers['dst'].list_guests())

    def assert_coherent_progress(self, run, require_moved=True):
        """The samples describe one job of this guest, moving forward.

        ``require_moved=False`` where the test acts on a timer, which a
        loaded machine may reach while the job is still being set up.
        """
        samples = run.samples
        self.assertTrue(samples, "no progress was reported")
        if require_moved:
            self.assertTrue(run.moved_memory(), "no memory was sent")
            self.assertTrue(samples[-1].memory_total)
        totals = {s.memory_total for s in samples if s.memory_total}
        if run.result is not None:
            totals.add(run.result.memory_total)
        self.assertLessEqual(len(totals), 1, totals)
        for total in totals:
            # Guest RAM plus the little firmware and device memory QEMU
            # adds.
            self.assertTrue(MEMORY_MB * MIB <= total < 2 * MEMORY_MB * MIB,
                            total)
            for sample in samples:
                self.assertLessEqual(sample.memory_remaining, total)
        for before, after in itertools.pairwise(samples):
            self.assertLessEqual(before.memory_processed,
                                 after.memory_processed)
            self.assertLessEqual(before.elapsed_ms, after.elapsed_ms)
        if run.result is not None:
            self.assertGreaterEqual(run.result.memory_processed,
                                    samples[-1].memory_processed)

    def record(self, figures):
        """Print measured figures and attach them to the test result."""
        print(figures)
        self.addDetailUniqueName('figures', content.text_content(figures))
