"""CPU power management across a live migration, read from the kernel.

``[compute] cpu_power_management`` takes the dedicated pCPUs no guest or
claim pins offline (sysfs ``cpuN/online``). In a nested machine that is
CPU hotplug of the virtual machine, which its kernel does as on
hardware, so the compute agents run on their hosts' own kernel for it
(the backend's ``agents_on_hosts``), one machine per host (two kernels:
in one machine two agents would power the same CPUs). The kernel's
``/sys/devices/system/cpu/online`` of the destination is read:

- before: the dedicated pCPUs but CPU 0 are offline;
- during a migration, once the destination holds its claim: the
  claimed pCPUs are online (read while the migration runs);
- after that migration is aborted: as before (the rollback took them
  offline again);
- after a migration that completes: the guest's pCPUs online there, and
  on the source the guest's pCPUs offline again.

The agent's report (``cpu_power``) must agree with the kernel each time.
"""

import time

from numamig.objects import fields
from numamig_ci import domain
from numamig_ci.scenarios.registry import scenario
from numamig_ci.session import DEDICATED

AGENT_CONFIG = '[compute]\ncpu_power_management = true\n'
# How long the kernel's state may take to follow a change (an agent's
# apply follows the claim or drop it belongs to; reports follow it).
SETTLE_S = 60
POLL_S = 0.5
# How long the claim's pCPUs may take to come online once the first is.
CLAIM_S = 15


def managed(host):
    """The pCPUs power management may touch on a HostConfig."""
    return frozenset(host.dedicated) - {0}


def expected_online(host, pinned):
    """Every CPU of ``host`` but its managed ones no guest pins."""
    every = frozenset().union(*host.cells.values())
    return every - (managed(host) - frozenset(pinned))


def _settled(s, host, wanted, timeout=SETTLE_S):
    deadline = time.monotonic() + timeout
    while True:
        seen = s.backend.online_cpus(host)
        if seen == wanted or time.monotonic() > deadline:
            return seen
        time.sleep(POLL_S)


def _pins(record):
    return frozenset(pin for cell in record.numa_topology.cells
                     for pin in cell.cpu_pinning.values())


def _check(s, guest, host, what, wanted, seen):
    s.say(f"{host} online CPUs {what}: {domain.fmt(seen)} "
          f"({len(seen)})")
    if seen != wanted:
        s.fail(guest, host, f"online CPUs {what}", domain.fmt(wanted),
               domain.fmt(seen))


def _reported_down(s, host):
    report = {r.host: r for r in
              s.api.compute_node_get_all(s.ctxt)}[host]
    power = report.get('cpu_power')
    if power is None:
        return None
    return frozenset().union(*(c.powered_down for c in power.cells))


@scenario('cpu-power-hotplug',
          "With cpu_power_management on (compute agents on their hosts' "
          "own kernel, a machine each), the destination kernel's online "
          "CPUs: unused dedicated pCPUs offline before, the claimed ones "
          "online during the migration, offline again after an abort, "
          "online after a completed move, which takes the source's "
          "offline.", requires=('agents_on_hosts', 'separate_kernels'))
def cpu_power_hotplug(s):
    src, dst = sorted(s.backend.hosts)[:2]
    vcpus = len(s.host(dst).dedicated)
    s.require(len(s.host(src).dedicated) >= vcpus,
              f"{src} has fewer dedicated pCPUs than {dst}")
    s.require(len(managed(s.host(dst))) >= 1,
              f"{dst} has no dedicated pCPU but CPU 0")
    with s.backend.agents_on_hosts(AGENT_CONFIG) as took:
        s.say(f"compute agents started on their hosts' kernel in "
              f"{took:.1f} s")
        guest = s.create(src, vcpus, specs=dict(DEDICATED), label='power')
        before = expected_online(s.host(dst), ())
        _check(s, guest, dst, 'before', before,
               _settled(s, dst, before))
        # A migration aborted once the destination holds its claim.
        # The guest pins as many pCPUs as the destination has dedicated
        # ones: its claim holds every one of them.
        claimed = expected_online(s.host(dst), s.host(dst).dedicated)
        migration = s.api.live_migrate_instance(s.ctxt, guest.uuid, dst)
        during = None
        deadline = time.monotonic() + SETTLE_S * 2
        while time.monotonic() < deadline:
            seen = s.backend.online_cpus(dst)
            state = s.api.migration_get(s.ctxt, migration.uuid).status
            if seen != before:
                # The claim's pCPUs come online one by one (about half a
                # second each under TCG): read once all are.
                during = _settled(s, dst, claimed, timeout=CLAIM_S)
                break
            if state in fields.MigrationStatus.FINAL:
                break
            time.sleep(POLL_S)
        s.api.migration_abort(s.ctxt, migration.uuid)
        ended = s.wait(migration.uuid)
        s.say(f"migration {src} -> {dst} aborted once {dst} held its "
              f"claim: {ended.status}")
        if during is not None:
            _check(s, guest, dst, 'during (claim held)', claimed, during)
        else:
            s.fail(guest, dst, 'online CPUs during', 'claimed pCPUs online',
                   'no change seen before the migration ended')
        if ended.status == 'completed':
            s.fail(guest, dst, 'migration status', 'cancelled (aborted)',
                   ended.status)
            return
        _check(s, guest, dst, 'after the abort', before,
               _settled(s, dst, before))
        # A migration that completes.
        migration = s.migrate(guest, dst)
        if not s.expect_status(migration, guest, 'completed'):
            return
        record = s.record(guest)
        after = expected_online(s.host(dst), _pins(record))
        _check(s, guest, dst, 'after the move', after,
               _settled(s, dst, after))
        left = expected_online(s.host(src), ())
        _check(s, guest, src, 'after the guest left', left,
               _settled(s, src, left))
        s.backend.refresh()
        reported = _reported_down(s, dst)
        wanted = managed(s.host(dst)) - _pins(record)
        s.say(f"{dst} reports powered down {domain.fmt(reported or ())}")
        if reported is not None and reported != wanted:
            s.fail(guest, dst, 'reported cpu_power', domain.fmt(wanted),
                   domain.fmt(reported))
        s.check_placed(guest, dst)

