"""QEMU's migration threads, found in /proc and pinned away from the guest.

QEMU starts its migration threads (``live_migration``, ``multifdsend_N``,
``return path``) from its main thread, so they inherit the emulator
threads' affinity: measured on the real tier, with the guest's vCPU and
emulator pinned to pCPU 0 they all ran on pCPU 0 while pCPU 1 idled
(tests/functional/libvirt/test_real_migration_threads.py). The monitor
pins every such thread it finds, on each poll, to the CPUs the operator
gives for migration work ([libvirt] migration_thread_cpus: shared CPUs
on the nodes of the guests' memory, never another guest's dedicated
ones). The threads end with the job, so nothing is restored.
"""

import os

from oslo_log import log as logging

LOG = logging.getLogger(__name__)

PREFIXES = ('live_migration', 'multifdsend', 'multifdrecv', 'return path',
            'mig/')


def qemu_pid(instance_uuid, proc='/proc'):
    """The pid of the QEMU running guest ``instance_uuid`` on this host
    (its command line carries ``-uuid``), or None.

    While it migrates, two hosts that share a machine (the real tier's
    libvirtd side by side) show two such QEMUs: the destination's was
    started for this migration, so the source's is the older one.
    """
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


class ThreadPinner:
    """Pins a job's migration threads to ``cpus`` as they appear."""

    def __init__(self, instance_uuid, cpus, setaffinity=os.sched_setaffinity,
                 proc='/proc'):
        self.instance = instance_uuid
        self.cpus = frozenset(cpus)
        self._setaffinity = setaffinity
        self._proc = proc
        self._pid = None
        # tid -> name of every thread pinned: where they ran.
        self.pinned = {}

    def poll(self):
        """Pin the migration threads not pinned yet; never raises (a
        thread may end between the look and the pin)."""
        if self._pid is None:
            self._pid = qemu_pid(self.instance, self._proc)
            if self._pid is None:
                return
        for tid, name in migration_threads(self._pid, self._proc).items():
            if tid in self.pinned:
                continue
            try:
                self._setaffinity(tid, self.cpus)
            except OSError as exc:
                LOG.debug("Migration thread %s (%s) of %s not pinned: %s",
                          tid, name, self.instance, exc)
                continue
            self.pinned[tid] = name
            LOG.info("Migration of %s: thread %s (%s) pinned to CPUs %s",
                     self.instance, name, tid, sorted(self.cpus))
