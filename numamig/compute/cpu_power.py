"""CPU power management: unused dedicated pCPUs powered down, used ones up.

A host's dedicated pCPUs (``[compute] cpu_dedicated_set``) serve pinned
guests only; one that no guest and no move claim holds draws power for
nothing. With ``[compute] cpu_power_management`` the agent takes such
pCPUs offline (strategy ``cpu_state``: sysfs ``cpuN/online``) or to a
low-power cpufreq governor (strategy ``governor``), and powers a pCPU up
before anything pins to it.

The state wanted is a function of the tracker's usage alone (a pCPU is
up when some guest or claim pins it, down otherwise), so ``apply``
converges to it from any state: a move claim, a completed migration, a
rollback, an abort, a redelivered RPC, the agent's start and the
periodic recompute all call the same ``apply`` after the usage changed,
and calling it twice changes nothing the second time. Only what differs
is written.

What is never touched: CPU 0 (the kernel's boot CPU; many kernels cannot
offline it), CPUs outside the dedicated set (the host's own and the
floating guests' CPUs), and a pCPU the kernel gives no ``online`` file
(it cannot be hot-unplugged).

Order matters in one direction only: a pCPU must be up before a guest
pins to it. ``apply`` therefore powers up first and down second, and a
claim whose pCPUs cannot be powered up is refused (the caller drops it);
a pCPU that cannot be powered down only costs power, and is reported.
"""

import dataclasses
import os
import threading

from oslo_log import log as logging

from numamig import cpuspec
from numamig import exception
from numamig import objects

LOG = logging.getLogger(__name__)

OFF = 'off'
CPU_STATE = 'cpu_state'
GOVERNOR = 'governor'
STRATEGIES = (OFF, CPU_STATE, GOVERNOR)

# CPU ids above this are not a host's: a bound on what is read and written
# (a dedicated set comes from configuration, checked against the host).
MAX_CPU_ID = 8191
# Bytes read from one sysfs attribute (they hold a word or a short list).
_MAX_ATTR_BYTES = 4096


class SysfsCPUs:
    """The kernel's per-CPU power controls under one directory.

    ``root`` is ``/sys/devices/system/cpu`` on a host; tests give a copy
    (the same ``cpuN/online`` and ``cpuN/cpufreq/...`` files).
    """

    def __init__(self, root):
        self.root = root

    def _path(self, cpu, *parts):
        if not 0 <= cpu <= MAX_CPU_ID:
            raise exception.CPUPowerError(
                reason=f"CPU {cpu} is out of range")
        return os.path.join(self.root, f'cpu{cpu}', *parts)

    def _read(self, path):
        with open(path) as f:
            return f.read(_MAX_ATTR_BYTES).strip()

    def _write(self, path, value):
        with open(path, 'w') as f:
            f.write(value)

    def can_offline(self, cpu):
        return os.path.exists(self._path(cpu, 'online'))

    def online(self, cpu):
        """Whether ``cpu`` is online (a CPU without the file always is)."""
        path = self._path(cpu, 'online')
        if not os.path.exists(path):
            return True
        return self._read(path) == '1'

    def set_online(self, cpu, online):
        self._write(self._path(cpu, 'online'), '1' if online else '0')

    def governor(self, cpu):
        """The pCPU's cpufreq governor, or None without cpufreq."""
        path = self._path(cpu, 'cpufreq', 'scaling_governor')
        return self._read(path) if os.path.exists(path) else None

    def governors(self, cpu):
        path = self._path(cpu, 'cpufreq', 'scaling_available_governors')
        return self._read(path).split() if os.path.exists(path) else []

    def set_governor(self, cpu, name):
        self._write(self._path(cpu, 'cpufreq', 'scaling_governor'), name)


@dataclasses.dataclass(frozen=True)
class Plan:
    """What one ``apply`` wants: per cell, the managed pCPUs to power up
    and those to power down (disjoint)."""

    up: dict        # {cell id: set of pCPUs}
    down: dict      # {cell id: set of pCPUs}


def managed(cell, dedicated):
    """The pCPUs of ``cell`` power management may touch: the cell's
    dedicated pCPUs that the configuration names, CPU 0 never."""
    return (set(cell.pcpuset) & set(dedicated)) - {0}


def plan(topology, dedicated):
    """Pure: which managed pCPUs of ``topology`` (a HostNUMATopology with
    usage applied) must be up (pinned by a guest or claim) and which may
    go down (pinned by none)."""
    up, down = {}, {}
    for cell in topology.cells:
        mine = managed(cell, dedicated)
        used = set(cell.pinned_cpus) & mine
        up[cell.id] = used
        down[cell.id] = mine - used
    return Plan(up=up, down=down)


def pinned_pcpus(topology):
    """The pCPUs a guest topology (InstanceNUMATopology) pins: its vCPUs'
    and its isolated emulator threads'."""
    if topology is None:
        return set()
    cpus = set()
    for cell in topology.cells:
        cpus |= set(cell.cpu_pinning.values())
        cpus |= set(cell.get('cpuset_reserved') or ())
    return cpus


class CPUPower:
    """One host's CPU power management.

    :param settings: the agent's CPUPowerSettings.
    :param sysfs: the CPU controls (SysfsCPUs over the settings' root).
    """

    def __init__(self, host, settings, sysfs=None):
        self.host = host
        self.settings = settings
        self.sysfs = sysfs or SysfsCPUs(settings.sysfs_root)
        # Checked at start (numamig.conf.checks) when power management is
        # on; a parse error here would be a bug.
        self.dedicated = frozenset(
            cpuspec.parse_cpu_spec(settings.cpu_dedicated_set))
        self._lock = threading.Lock()
        # {cell id: set} as of the last apply; pCPUs a write failed for.
        self._managed = {}
        self._down = {}
        self._failed = set()
        # {pCPU: the failure last logged for it}.
        self._complaints = {}
        # Since the agent started: pCPUs powered down and up (writes that
        # changed something), and writes that failed.
        self.powered_down_total = 0
        self.powered_up_total = 0
        self.failures_total = 0

    @property
    def enabled(self):
        return self.settings.strategy != OFF

    def apply(self, topology, require=()):
        """Power the managed pCPUs as ``topology``'s usage wants them.

        :param require: pCPUs that must be up when this returns (a claim
            or guest being placed: it could not run otherwise); a failure
            to power up any other used pCPU is logged, counted and
            reported, and refuses nothing.
        :raises CPUPowerError: a required pCPU stays down.
        """
        if not self.enabled:
            return
        wanted = plan(topology, self.dedicated)
        with self._lock:
            failed_up = set()
            failed = set()
            # Up first: nothing may pin to a pCPU still going down.
            for cpus in wanted.up.values():
                for cpu in sorted(cpus):
                    if not self._power(cpu, up=True):
                        failed_up.add(cpu)
            for cpus in wanted.down.values():
                for cpu in sorted(cpus):
                    if not self._power(cpu, up=False):
                        failed.add(cpu)
            self._failed = failed | failed_up
            self._managed = {cell.id: managed(cell, self.dedicated)
                             for cell in topology.cells}
            self._down = {cell_id: set(cpus) - failed
                          for cell_id, cpus in wanted.down.items()}
        missing = failed_up & set(require)
        if missing:
            raise exception.CPUPowerError(
                reason=f"host {self.host} could not power up pCPUs "
                       f"{cpuspec.format_cpu_spec(missing)} "
                       f"({self.settings.strategy}; the agent's log says "
                       f"why)")

    def _power(self, cpu, up):
        """Bring one pCPU to the state wanted; True when it is there."""
        try:
            if self.settings.strategy == CPU_STATE:
                done = self._online(cpu, up)
            else:
                done = self._governor(cpu, up)
            if done:
                self._complaints.pop(cpu, None)
            return done
        except (OSError, exception.CPUPowerError) as exc:
            self.failures_total += 1
            why = f"could not power {'up' if up else 'down'}: {exc}"
            # Once per pCPU and reason: every recompute tries again, and a
            # host without cpufreq would otherwise log each pCPU each time.
            if self._complaints.get(cpu) != why:
                LOG.error("%s: pCPU %s %s", self.host, cpu, why)
            self._complaints[cpu] = why
            return False

    def _online(self, cpu, up):
        if not self.sysfs.can_offline(cpu):
            # The kernel cannot take it offline: it is up, which is what
            # a guest needs, and not down, which is what is reported.
            if up:
                return True
            raise exception.CPUPowerError(
                reason="the kernel offers no online control for it")
        if self.sysfs.online(cpu) == up:
            return True
        self.sysfs.set_online(cpu, up)
        self._count(cpu, up)
        return self.sysfs.online(cpu) == up

    def _governor(self, cpu, up):
        name = (self.settings.governor_high if up
                else self.settings.governor_low)
        current = self.sysfs.governor(cpu)
        if current is None:
            if up:
                # No cpufreq: the pCPU runs as the firmware sets it,
                # which a guest can use.
                return True
            raise exception.CPUPowerError(
                reason="it has no cpufreq governor")
        if current == name:
            return True
        if name not in self.sysfs.governors(cpu):
            raise exception.CPUPowerError(
                reason=f"governor {name!r} is not among its available "
                       f"ones ({' '.join(self.sysfs.governors(cpu))})")
        self.sysfs.set_governor(cpu, name)
        self._count(cpu, up)
        return self.sysfs.governor(cpu) == name

    def _count(self, cpu, up):
        if up:
            self.powered_up_total += 1
        else:
            self.powered_down_total += 1
        LOG.info("%s: powered %s pCPU %s (%s)", self.host,
                 'up' if up else 'down', cpu, self.settings.strategy)

    def state(self):
        """This host's CPUPowerState for its report."""
        with self._lock:
            cells = [objects.CPUPowerCell(
                id=cell_id, managed=set(self._managed[cell_id]),
                powered_down=set(self._down.get(cell_id, ())))
                for cell_id in sorted(self._managed)]
            failed = set(self._failed)
        governor = (self.settings.governor_low
                    if self.settings.strategy == GOVERNOR else None)
        return objects.CPUPowerState(
            strategy=self.settings.strategy, governor_low=governor,
            cells=cells if self.enabled else [], failed=failed)

    def powered_down(self):
        """{cell id: number of pCPUs powered down} as of the last apply."""
        with self._lock:
            return {cell_id: len(cpus)
                    for cell_id, cpus in sorted(self._down.items())}
