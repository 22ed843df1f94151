"""Where a live migration's own QEMU threads run, read from the kernel.

QEMU's migration threads (the source's ``live_migration``,
``multifdsend_N``, ``return path``; the destination's ``multifdrecv_N``)
start with the emulator's affinity: the migrating guest's own dedicated
pCPU when it is pinned. numamig's compute agents pin them, each on its
own host, to the shared CPUs of the NUMA node holding the guest's memory
there (numamig.numa.migration_cpus), reading the host's /proc to find
them, and record where each ended up (MigrationThreads).

This needs the agents on the kernel their QEMUs run on, so the scenario
runs them there (the backend's ``agents_on_hosts``: on --nested, inside
the machine) with two parallel connections (without them the
destination receives in QEMU's main thread, which has no thread of its
own to place). It fills the destination's other nodes with pinned
guests, so that the claim lands on the one node with shared CPUs there,
keeps a pinned guest's copy running (numamig_ci.slow_copy), and reads,
while the copy runs, every thread of both QEMUs from
``/proc/<pid>/task/*/status`` inside the machine. Each QEMU's migration
threads must be allowed exactly on its host's shared CPUs of the
guest's node there, never on a dedicated pCPU; and the record each
agent made must say so and agree with the kernel, thread by thread.

The guest isolates its emulator thread on a dedicated pCPU of its own
(``hw:emulator_threads_policy=isolate``): the migration threads, created
by QEMU's main thread, then start there, on both hosts. With numamig's
default the emulator runs on the host's whole shared set, which on a
host whose shared CPUs are all on the guest's node is already where the
threads belong, and the kernel's view could not tell numamig's placement
from QEMU's own (seen on the nested destination: its agent had not
looked yet when the harness read the threads already on CPU 5). The
main thread's affinity is read beside them and must be off the shared
CPUs, or the check would prove nothing.
"""

import time

from numamig import cpuspec
from numamig.objects import fields
from numamig.objects import migration_threads as record
from numamig.virt.libvirt import migration_threads
from numamig_ci import domain
from numamig_ci import slow_copy
from numamig_ci.results import Failure
from numamig_ci.results import ScenarioSkipped
from numamig_ci.scenarios import abort
from numamig_ci.scenarios import kernel_view
from numamig_ci.scenarios.registry import scenario
from numamig_ci.session import DEDICATED
from numamig_ci.session import describe

STATUS = fields.MigrationStatus
# The emulator on a dedicated pCPU of its own: the migration threads
# start there, where numamig must move them from.
SPECS = dict(DEDICATED, **{'hw:emulator_threads_policy': 'isolate'})
# Dedicated pCPUs the guest takes on a node: its vCPU and its emulator.
GUEST_PCPUS = 2
# Multifd: the destination then has receiving threads of its own.
AGENT_CONFIG = '[libvirt]\nlive_migration_parallel_connections = 2\n'
CONNECTIONS = 2
# How long, once QEMU copies, the harness reads the threads until both
# agents have placed every one (each polls at the progress interval).
PLACED_WITHIN_S = 60
READ_PAUSE_S = 1.0
# How long after the migration ended both sides' records may take to
# reach the conductor (the destination's watch reports when it stops).
RECORDED_WITHIN_S = 60
SIDES = (('source', 'src'), ('dest', 'dst'))


@scenario('migration-threads',
          "While QEMU copies a pinned guest whose emulator has a pCPU of "
          "its own (a guest dirtying its memory, the copy capped; compute "
          "agents on the hosts' own kernel, two parallel connections), "
          "both QEMUs' migration threads, read "
          "from /proc, are allowed exactly on their host's shared CPUs "
          "of the guest's node there, never on a dedicated pCPU; the "
          "record each agent made (Migration migration_threads) says so "
          "and agrees with the kernel thread by thread.",
          requires=('multi_node', 'slow_copy', 'kernel_view',
                    'agents_on_hosts'))
def migration_threads_placed(s):
    src, dst, node = choose_hosts(s.hosts)
    _fill_other_nodes(s, dst, node)
    guest = s.create(src, 1, specs=dict(SPECS), label='threads')
    src_node = _node_of(s, guest, src)
    expected = {'src': shared_of(s.host(src), src_node),
                'dst': shared_of(s.host(dst), node)}
    s.say(f"migration threads expected on {src} CPUs "
          f"{domain.fmt(expected['src'])} (node {src_node}), on {dst} CPUs "
          f"{domain.fmt(expected['dst'])} (node {node})")
    with s.backend.agents_on_hosts(AGENT_CONFIG) as took:
        s.say(f"compute agents started on their hosts' kernel in "
              f"{took:.1f} s")
        with s.backend.hold_migration(src, guest) as hold:
            migration = s.api.live_migrate_instance(s.ctxt, guest.uuid, dst)
            held, seen = hold.wait(s, migration, slow_copy.COPYING)
            if not held:
                abort._not_reached(s, guest, dst, seen, slow_copy.COPYING)
                return
            views = _read_while_copying(s, guest, {'src': src, 'dst': dst},
                                        expected, migration)
            s.api.migration_abort(s.ctxt, migration.uuid)
            migration = s.wait(migration.uuid)
            s.say(f"migration of {guest.name} then aborted: "
                  f"{migration.status}")
        threads = _wait_recorded(s, migration)
    s.say("recorded: " + '; '.join(
        f"{side} {_brief(threads[side])}" if side in threads
        else f"{side} absent" for side, _role in SIDES))
    hosts = {'src': src, 'dst': dst}
    for role, view in views.items():
        s.check(check_kernel_view(guest.name, s.host(hosts[role]), view,
                                  expected[role], role))
    for side, role in SIDES:
        s.check(check_record(guest.name, hosts[role], threads.get(side),
                             expected[role], views[role], side))
    if not s.failures:
        s.say("kernel and record agree: " + '; '.join(
            f"{hosts[role]} {', '.join(sorted(views[role]))} on "
            f"{domain.fmt(expected[role])}" for role in ('src', 'dst')))


def choose_hosts(hosts):
    """(source, destination, destination node) for the scenario.

    The source has shared CPUs on every node (wherever numamig places
    the guest, its node has some); the destination node has shared CPUs
    and fewer dedicated ones than each other node of the destination, so
    that pinned guests filling the others fit nowhere else, and room
    there for the guest's GUEST_PCPUS.

    :param hosts: checks.HostConfig of every host, in the backend's order.
    :raises ScenarioSkipped: no such pair.
    """
    for source in hosts:
        if not all(cpus & source.shared for cpus in source.cells.values()):
            continue
        for dest in hosts:
            if dest.name == source.name:
                continue
            for node, cpus in sorted(dest.cells.items()):
                room = len(cpus & dest.dedicated)
                others = [len(c & dest.dedicated)
                          for n, c in dest.cells.items() if n != node]
                if cpus & dest.shared and room >= GUEST_PCPUS and \
                        all(count > room for count in others):
                    return source.name, dest.name, node
    raise ScenarioSkipped(
        "needs a source with shared CPUs on every node and a destination "
        "node with shared CPUs and fewer dedicated ones than every other "
        "node of its host")


def shared_of(host, node):
    """Host ``host``'s shared CPUs on ``node``: where the migration's
    threads belong when the guest's memory is there."""
    return frozenset(host.cells[node] & host.shared)


def _fill_other_nodes(s, dst, node):
    """One pinned guest per other node of ``dst``, taking every dedicated
    pCPU there: the migrating guest's claim can only be on ``node``."""
    host = s.host(dst)
    for other, cpus in sorted(host.cells.items()):
        count = len(cpus & host.dedicated)
        if other == node or not count:
            continue
        blocker = s.create(dst, count, specs=dict(DEDICATED),
                           label='blocker')
        placed = _node_of(s, blocker, dst)
        if placed != other:
            raise ScenarioSkipped(f"a {count}-vCPU pinned guest meant to "
                                  f"fill {dst}'s node {other} was placed "
                                  f"on node {placed}")


def _node_of(s, guest, host):
    cells = s.record(guest).numa_topology.cells
    nodes = {cell.host_cell for cell in cells}
    if len(nodes) != 1:
        raise ScenarioSkipped(f"{guest.name} on {host} spans nodes "
                              f"{sorted(nodes)}: {describe(guest)}")
    return nodes.pop()


def migration_thread_view(affinity):
    """{name: frozenset of CPUs} of the migration threads in an agent's
    ``thread_affinity`` answer ({name: [Cpus_allowed_list, ...]}); a
    name several threads share maps to the union of theirs."""
    view = {}
    for name, lists in affinity.items():
        if name.startswith(migration_threads.PREFIXES):
            view[name] = frozenset().union(
                *(frozenset(cpuspec.parse_cpu_spec(text))
                  for text in lists))
    return view


def placed(view, expected):
    """Whether ``view`` (``migration_thread_view``) has threads, every
    one allowed on ``expected`` exactly."""
    return bool(view) and all(cpus == expected for cpus in view.values())


def _read_while_copying(s, guest, hosts, expected, migration):
    """{'src': view, 'dst': view} read from /proc inside the machine
    while the copy runs: read again until both agents placed every
    thread, or PLACED_WITHIN_S, or the migration ends (then the last
    views are judged, and the migration must still have been running
    after them)."""
    name = s.backend.guests(hosts['src'])[guest.uuid]
    pids = {role: s.backend.deployment.qemu_pid(host, name)
            for role, host in hosts.items()}
    deadline = time.monotonic() + PLACED_WITHIN_S
    while True:
        answers = {role: s.backend.agent_of(host).thread_affinity(
            pids[role]) for role, host in hosts.items()}
        views = {role: migration_thread_view(answer)
                 for role, answer in answers.items()}
        seen = s.api.migration_get(s.ctxt, migration.uuid)
        done = all(placed(views[role], expected[role]) for role in hosts)
        if done or seen.status != STATUS.RUNNING or \
                time.monotonic() > deadline:
            break
        time.sleep(READ_PAUSE_S)
    if seen.status != STATUS.RUNNING:
        s.fail(guest, hosts['dst'], 'migration while the threads were read',
               'running (the copy in progress)', seen.status,
               seen.error or '')
    mains = {role: main_thread_cpus(answer)
             for role, answer in answers.items()}
    s.say(f"read from /proc while copying ({seen.memory_processed or 0} "
          f"bytes sent): " + '; '.join(
              f"{hosts[role]} QEMU {pids[role]}: " + ', '.join(
                  f"{n} {domain.fmt(c)}" for n, c in sorted(view.items()))
              + f" (main thread {domain.fmt(mains[role])})"
              for role, view in views.items()))
    for role, host in hosts.items():
        s.check(check_main_thread(guest.name, s.host(host), mains[role],
                                  expected[role]))
    return views


def main_thread_cpus(affinity):
    """The CPUs QEMU's main thread (the emulator's, which creates the
    migration threads) may run on, from a ``thread_affinity`` answer;
    None when it is not there."""
    lists = affinity.get(kernel_view.MAIN_THREAD)
    if not lists:
        return None
    return frozenset().union(*(frozenset(cpuspec.parse_cpu_spec(text))
                               for text in lists))


def check_main_thread(guest, host, cpus, expected):
    """Failures unless QEMU's main thread, where the migration threads
    start, is off ``expected``: else their placement would show nothing
    numamig did."""
    if cpus is not None and cpus & host.dedicated and \
            not cpus & expected:
        return []
    return [Failure(guest, host.name,
                    f"QEMU thread '{kernel_view.MAIN_THREAD}' "
                    f"Cpus_allowed_list (where migration threads start)",
                    "the guest's isolated emulator pCPU (dedicated)",
                    domain.fmt(cpus),
                    "the migration threads' placement would not show "
                    "what numamig did")]


def _wait_recorded(s, migration):
    """The migration's MigrationThreads sides once both are there, or
    what it holds after RECORDED_WITHIN_S."""
    deadline = time.monotonic() + RECORDED_WITHIN_S
    while True:
        threads = s.api.migration_get_satellites(
            s.ctxt, migration.uuid, ['threads'])['threads'].sides
        if all(side in threads for side, _role in SIDES) or \
                time.monotonic() > deadline:
            return threads
        time.sleep(READ_PAUSE_S)


def check_kernel_view(guest, host, view, expected, role):
    """Failures of one QEMU's migration threads as the kernel shows them.

    :param host: checks.HostConfig of the QEMU's host.
    :param view: ``migration_thread_view`` of that QEMU.
    :param expected: the host's shared CPUs of the guest's node there.
    """
    what = 'source' if role == 'src' else 'destination'
    if not view:
        return [Failure(guest, host.name, f"{what} QEMU migration threads "
                        f"(/proc/PID/task/*/comm)",
                        f"at least one of {', '.join(_prefixes())}",
                        'none while the copy ran')]
    failures = []
    for name, cpus in sorted(view.items()):
        element = f"{what} QEMU thread '{name}' Cpus_allowed_list"
        if cpus & host.dedicated:
            failures.append(Failure(
                guest, host.name, element,
                'no dedicated pCPU', domain.fmt(cpus),
                f"dedicated pCPUs {domain.fmt(cpus & host.dedicated)} of "
                f"{host.name}"))
        elif cpus != expected:
            failures.append(Failure(
                guest, host.name, element,
                f"{domain.fmt(expected)} (shared CPUs of the guest's node)",
                domain.fmt(cpus)))
    return failures


def check_record(guest, host, side, expected, view, which):
    """Failures of one side of the Migration's migration_threads against
    what the harness expected and the kernel showed (``view``)."""
    field = f"record migration_threads.{which}"
    if side is None:
        return [Failure(guest, host, field, 'recorded', 'absent')]
    failures = []
    if side['host'] != host:
        failures.append(Failure(guest, host, f"{field}.host", host,
                                side['host']))
    if side['basis'] != record.GUEST_NODES:
        failures.append(Failure(guest, host, f"{field}.basis",
                                record.GUEST_NODES, side['basis']))
    if frozenset(side['cpus']) != expected:
        failures.append(Failure(guest, host, f"{field}.cpus",
                                domain.fmt(expected),
                                domain.fmt(frozenset(side['cpus']))))
    connections = CONNECTIONS if which == 'source' else None
    if side['connections'] != connections:
        failures.append(Failure(guest, host, f"{field}.connections",
                                str(connections), str(side['connections'])))
    recorded = {name: frozenset(cpus)
                for name, cpus in side['threads'].items()}
    for name, cpus in sorted(view.items()):
        if recorded.get(name) != cpus:
            failures.append(Failure(
                guest, host, f"{field}.threads['{name}']",
                f"{domain.fmt(cpus)} (as /proc showed it)",
                domain.fmt(recorded[name]) if name in recorded
                else 'absent'))
    for name, cpus in sorted(recorded.items()):
        if cpus != expected:
            failures.append(Failure(
                guest, host, f"{field}.threads['{name}']",
                domain.fmt(expected), domain.fmt(cpus)))
    return failures


def _brief(side):
    """One side of the record in one line."""
    return (f"{side['host']} {side['basis']} CPUs "
            f"{domain.fmt(frozenset(side['cpus']))}: " + (', '.join(
                f"{name} {domain.fmt(frozenset(cpus))}"
                for name, cpus in sorted(side['threads'].items()))
                or 'no thread'))


def _prefixes():
    return [p.strip() for p in migration_threads.PREFIXES]
