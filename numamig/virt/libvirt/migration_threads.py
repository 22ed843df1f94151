"""QEMU's migration threads, found in /proc, pinned and recorded.

QEMU starts its migration threads from its main thread, so they inherit
the emulator threads' affinity. Measured on the real tier
(tests/functional/libvirt/test_real_migration_threads.py, libvirt 9.0,
QEMU 7.2): with the guest's vCPU and emulator pinned to pCPU 0 the
source's ``live_migration``, ``multifdsend_N`` and ``return path`` all
ran on pCPU 0 while pCPU 1 idled; with a floating guest (shared emulator
threads) they, and the destination's ``multifdrecv_N``, were allowed on
every pCPU, the destination's blocker's dedicated pCPU included.

A ThreadPinner pins every such thread it finds, on each poll, to the
CPUs chosen for the migration (numamig.numa.migration_cpus), and records
where each was then allowed to run. With no CPUs chosen it only
records. The threads end with the job, so nothing is restored.
"""

import os

from oslo_log import log as logging

from numamig import cpuspec
from numamig.objects import migration_threads as record

LOG = logging.getLogger(__name__)

# The threads only a sending QEMU has.
SENDING = ('live_migration', 'multifdsend', 'mig/src/')
# Source: live_migration, multifdsend_N, return path (QEMU 7.2), mig/src/*
# (QEMU 8.x). Destination: multifdrecv_N, postcopy/listen, fault-default
# (QEMU 7.2), mig/dst/* (8.x); the incoming precopy itself runs in
# QEMU's main thread, which is the emulator's and is left alone.
PREFIXES = ('live_migration', 'multifdsend', 'multifdrecv', 'return path',
            'mig/', 'postcopy/', 'fault-')


def qemu_pids(instance_uuid, proc='/proc'):
    """The pids of the QEMUs running guest ``instance_uuid`` on this
    host (their command line carries ``-uuid``), oldest first."""
    wanted = instance_uuid.encode()
    found = []
    for entry in os.listdir(proc):
        if not entry.isdigit():
            continue
        try:
            with open(f'{proc}/{entry}/cmdline', 'rb') as f:
                args = f.read().split(b'\0')
        except OSError:
            continue
        if args and b'qemu' in os.path.basename(args[0]) and \
                wanted in args:
            found.append(int(entry))
    if len(found) > 1:
        found.sort(key=lambda pid: _started(pid, proc))
    return found


def qemu_pid(instance_uuid, proc='/proc'):
    """The pid of the QEMU running guest ``instance_uuid``, or None.

    While it migrates, two hosts that share a machine (the real tier's
    libvirtd side by side) show two such QEMUs: the destination's was
    started for this migration, so the source's is the older one.
    """
    found = qemu_pids(instance_uuid, proc)
    return found[0] if found else None


def _started(pid, proc):
    """When ``pid`` started (clock ticks since boot, /proc/PID/stat's
    22nd field; after the command name, which may hold spaces)."""
    try:
        with open(f'{proc}/{pid}/stat') as f:
            fields = f.read().rsplit(')', 1)[1].split()
        return int(fields[19])
    except (OSError, IndexError, ValueError):
        return float('inf')


def migration_threads(pid, proc='/proc'):
    """{tid: name} of ``pid``'s migration threads."""
    found = {}
    try:
        tids = os.listdir(f'{proc}/{pid}/task')
    except OSError:
        return found
    for tid in tids:
        try:
            with open(f'{proc}/{pid}/task/{tid}/comm') as f:
                name = f.read().strip()
        except OSError:
            continue
        if name.startswith(PREFIXES):
            found[int(tid)] = name
    return found


def allowed_cpus(pid, tid, proc='/proc'):
    """The CPUs thread ``tid`` of ``pid`` may run on (its status's
    Cpus_allowed_list), or None once it has ended."""
    try:
        with open(f'{proc}/{pid}/task/{tid}/status') as f:
            for line in f:
                if line.startswith('Cpus_allowed_list:'):
                    return cpuspec.parse_cpu_spec(line.split(':', 1)[1]
                                                  .strip())
    except (OSError, cpuspec.CPUSpecError):
        pass
    return None


class ThreadPinner:
    """Pins one guest's migration threads to ``cpus`` as they appear,
    and records where each was allowed to run.

    :param cpus: the CPUs chosen (empty: record only, pin nothing).
    :param ignore_pids: QEMUs of the guest to leave alone (on a
        destination, those running before the migration: on a shared
        machine, the source's).
    :param sending: the QEMU to watch is the one sending the guest (the
        source's): of the guest's QEMUs, the one with a sending thread.
        Else the first not ignored.
    """

    def __init__(self, instance_uuid, cpus, setaffinity=os.sched_setaffinity,
                 proc='/proc', ignore_pids=frozenset(), sending=False):
        self.instance = instance_uuid
        self.cpus = frozenset(cpus or ())
        self._setaffinity = setaffinity
        self._proc = proc
        self._ignore = frozenset(ignore_pids)
        self._sending = sending
        self.pid = None
        # tid -> name of every thread pinned.
        self.pinned = {}
        # name -> CPUs it was allowed on once handled (bounded).
        self.threads = {}
        self._seen = set()

    def poll(self):
        """Pin and record the migration threads not handled yet; never
        raises (a thread may end between the look and the pin)."""
        if self.pid is None:
            self.pid = self._find()
            if self.pid is None:
                return
        for tid, name in migration_threads(self.pid, self._proc).items():
            name = name[:record.MAX_NAME]
            if tid in self._seen or (name not in self.threads and len(
                    self.threads) >= record.MAX_THREADS):
                continue
            # A thread that could not be pinned is tried again next time
            # (it may have been starting up); meanwhile it is recorded
            # where it runs.
            done = self._pin(tid, name) if self.cpus else True
            if done:
                self._seen.add(tid)
            allowed = allowed_cpus(self.pid, tid, self._proc)
            if allowed is None and tid not in self.pinned:
                continue  # it ended before it was looked at
            if allowed is None:
                allowed = self.cpus
            self.threads[name] = sorted(allowed)[:record.MAX_CPUS]

    def _find(self):
        """The QEMU to watch, or None while it cannot be told yet.

        Several QEMUs may run the guest on one machine: the destination's
        on a machine shared with the source (the real tier), or one a
        failed test left behind; the one sending holds a sending thread.
        """
        for pid in qemu_pids(self.instance, self._proc):
            if pid in self._ignore:
                continue
            if not self._sending or any(
                    name.startswith(SENDING) for name in
                    migration_threads(pid, self._proc).values()):
                return pid
        return None

    def _pin(self, tid, name):
        try:
            self._setaffinity(tid, self.cpus)
        except OSError as exc:
            LOG.debug("Migration thread %s (%s) of %s not pinned: %s",
                      tid, name, self.instance, exc)
            return False
        self.pinned[tid] = name
        LOG.info("Migration of %s: thread %s (%s) pinned to CPUs %s",
                 self.instance, name, tid,
                 cpuspec.format_cpu_spec(self.cpus))
        return True

    def alive(self):
        """False once the QEMU it found has exited."""
        return self.pid is None or os.path.exists(f'{self._proc}/{self.pid}')
