"""Lifecycle scenarios: persistence across a restart, rollback,
refusal and concurrent migrations into one host (aborts: abort.py)."""

from numamig import exception
from numamig.objects import fields
from numamig_ci.results import brief
from numamig_ci.scenarios.registry import scenario
from numamig_ci.session import DEDICATED


@scenario('persistence',
          "After the move, a restart of the guest on the destination keeps "
          "the new pins (the persistent XML was rewritten too).")
def persistence(s):
    src, dst = s.pair()
    guest = s.create(src, 1, label='restart')
    migration = s.migrate(guest, dst)
    if not s.expect_status(migration, guest, 'completed'):
        return
    s.check_placed(guest, dst)
    s.backend.power_cycle(dst, guest.uuid)
    s.say(f"restarted {guest.name} on {dst}")
    s.check_placed(guest, dst)


@scenario('rollback',
          "The destination fails the migration: the guest keeps running on "
          "the source with its old pins, the destination holds nothing, "
          "claims are exactly as before.", requires=('inject_failure',))
def rollback(s):
    src, dst = s.pair()
    s.create(dst, 1, label='resident')
    guest = s.create(src, 1, label='rollback')
    before = s.snapshots.take(guest)
    with s.backend.inject_failure(dst):
        migration = s.migrate(guest, dst)
    s.expect_status(migration, guest, 'failed')
    s.snapshots.compare(guest, before)
    s.check_placed(guest, src)
    s.check_host(dst)


def _biggest(s):
    """The host with the most NUMA nodes, then dedicated pCPUs."""
    return max(s.backend.hosts, key=lambda h: (
        len(s.host(h).cells), len(s.host(h).dedicated)))


@scenario('refusal',
          "A guest that fits on no other host is refused, every host's "
          "reason recorded, the source untouched.")
def refusal(s):
    src = _biggest(s)
    host = s.host(src)
    nodes = len(host.cells)
    per_node = min(len(c & host.dedicated) for c in host.cells.values())
    s.require(per_node >= 1, f"host {src} has a node without dedicated "
                             f"pCPUs")
    vcpus = per_node * nodes
    for name, other in s.backend.hosts.items():
        if name != src:
            room = min(len(c & other.dedicated) for c in other.cells.values())
            s.require(len(other.cells) < nodes or room < per_node,
                      f"host {name} is as large as {src}; no guest fits "
                      f"on {src} only")
    specs = dict(DEDICATED, **{'hw:numa_nodes': str(nodes)})
    guest = s.create(src, vcpus, memory_mb=128 * nodes, specs=specs,
                     label='too-big')
    before = s.snapshots.take(guest)
    migration = s.migrate(guest)
    s.expect_status(migration, guest, fields.MigrationStatus.ERROR)
    for name in s.backend.hosts:
        if name != src and name not in (migration.error or ''):
            s.fail(guest, name, 'migration error', f"a reason for {name}",
                   migration.error)
    s.snapshots.compare(guest, before)
    s.check_placed(guest, src)


@scenario('concurrency',
          "Several migrations into one host at once: every one completes "
          "and no two guests share a pCPU there, in XML or records.")
def concurrency(s):
    dst = max(s.backend.hosts, key=lambda h: len(s.host(h).dedicated))
    sources = [h for h in s.backend.hosts if h != dst]
    s.require(sources, "needs at least two compute hosts")
    count = min(4, len(s.host(dst).dedicated))
    s.require(count >= 2, f"host {dst} has fewer than 2 dedicated pCPUs")
    movers = []
    specs = dict(DEDICATED, **{'hw:numa_nodes': '1'})
    for index in range(count):
        src = sources[index % len(sources)]
        try:
            movers.append(s.create(src, 1, specs=specs, label='rush'))
        except exception.InstanceBuildError as exc:
            s.require(False, f"cannot create {count} guests to move "
                             f"into {dst}: {brief(exc)}")
    results = s.migrate_all(movers, dst)
    for mover in movers:
        result = results[mover.uuid]
        if isinstance(result, Exception):
            s.fail(mover, dst, 'migration', 'completed', repr(result))
        elif s.expect_status(result, mover, 'completed'):
            s.check_placed(mover, dst)
    s.check_host(dst)
