"""One scenario's run: the guests it creates, what it observes, checks.

A Session creates guests through numamig (the conductor's API), migrates
them, reads back every observation the whitebox checks need (live and
persistent domain XML on the guest's host, the record, each host's
reported topology) and collects failures. Whatever happens, ``cleanup``
deletes the guests it created, so one scenario never leaks into the next.
"""

import dataclasses
import threading
import time

from oslo_log import log as logging
from oslo_utils import uuidutils

from numamig import exception
from numamig import objects
from numamig.objects import fields
from numamig_ci import checks
from numamig_ci import domain
from numamig_ci.results import Failure
from numamig_ci.results import ScenarioSkipped

LOG = logging.getLogger(__name__)
DEDICATED = {'hw:cpu_policy': 'dedicated'}
FLOATING = {'hw:cpu_policy': 'shared', 'hw:numa_nodes': '1'}
# How long a host may take to report exactly what its guests' records
# say: a few of its usage recomputes, even on a loaded CI machine.
USAGE_SETTLE_S = 60.0
# How long a usage that differs from a snapshot is watched, to say whether
# it settles back (it fails either way).
SNAPSHOT_SETTLE_S = 20.0


@dataclasses.dataclass(frozen=True)
class HostState:
    """A host as seen at one moment: its guests' XML and its report."""

    name: str
    live: dict
    persistent: dict
    topology: object


class Session:
    """The guests and findings of one scenario on one backend.

    :param backend: a started backends.base.Backend.
    :param say: callable taking one line of human progress.
    """

    def __init__(self, backend, say=None):
        self.backend = backend
        self.api = backend.api
        self.ctxt = backend.context
        self.failures = []
        self.created = []
        self.say = say or (lambda line: None)
        self.snapshots = Snapshots(self)

    # -- hosts -------------------------------------------------------------

    @property
    def hosts(self):
        """HostConfigs in the backend's order."""
        return list(self.backend.hosts.values())

    def host(self, name):
        return self.backend.hosts[name]

    def topology(self, name):
        """The topology (usage applied) ``name`` reported last."""
        return self.backend.reports()[name].topology

    def require(self, condition, reason):
        """Skip the scenario, naming why, unless ``condition`` holds."""
        if not condition:
            raise ScenarioSkipped(reason)

    def require_feature(self, feature, reason):
        self.require(feature in self.backend.features, reason)

    def pair(self, dest_shared=False, source_shared=False):
        """(source, destination) host names for a one-way migration.

        The first two hosts in the backend's order, unless a shared set is
        needed on either side; then the first hosts that have one.
        """
        names = list(self.backend.hosts)
        self.require(len(names) >= 2, "needs at least two compute hosts")
        for src in names:
            for dst in names:
                if src == dst:
                    continue
                if dest_shared and not self.host(dst).shared:
                    continue
                if source_shared and not self.host(src).shared:
                    continue
                return src, dst
        raise ScenarioSkipped(
            "needs two hosts with a shared pCPU set"
            if source_shared and dest_shared else
            "needs a destination host with a shared pCPU set")

    def dedicated_in_node(self, name):
        """The most dedicated pCPUs any one NUMA node of ``name`` has."""
        host = self.host(name)
        return max(len(cpus & host.dedicated) for cpus in host.cells.values())

    # -- guests --------------------------------------------------------------

    def create(self, host, vcpus=1, memory_mb=None, specs=None, label='g'):
        """Create a guest through numamig on ``host``; return its record.

        :raises InstanceBuildError: the host could not take it.
        """
        uuid = uuidutils.generate_uuid()
        instance = objects.Instance(
            uuid=uuid, name=f'ci-{label}-{uuid[:8]}', project_id='numamig-ci',
            vcpus=vcpus, memory_mb=memory_mb or self.backend.guest_memory_mb,
            extra_specs=dict(DEDICATED if specs is None else specs))
        self.created.append(uuid)
        record = self.api.instance_create(self.ctxt, instance, host)
        self.say(f"created {record.name} on {host}: "
                 f"{describe(record)}")
        return record

    def record(self, guest):
        return self.api.instance_get(self.ctxt, guest.uuid)

    def migrate(self, guest, dest=None, timeout=None):
        """Live-migrate ``guest`` and wait for the end; return the Migration.

        A refusal (NoValidHost) is returned as the error migration record.
        """
        try:
            migration = self.api.live_migrate_instance(self.ctxt, guest.uuid,
                                                       dest)
        except exception.NoValidHost:
            (migration,) = [m for m in self.api.migration_get_all(
                self.ctxt, instance_uuid=guest.uuid)
                if m.status == fields.MigrationStatus.ERROR][-1:]
        migration = self.wait(migration.uuid, timeout)
        error = (migration.error or '').strip().splitlines()
        self.say(f"migration of {guest.name} {migration.source_host} -> "
                 f"{migration.dest_host}: {migration.status}"
                 + (f" ({error[0][:400]})" if error else ''))
        return migration

    def migrate_all(self, guests, dest):
        """Start the migrations of ``guests`` into ``dest`` at once."""
        results, threads = {}, []

        def run(guest):
            try:
                results[guest.uuid] = self.migrate(guest, dest)
            except Exception as exc:  # reported as a failure below
                results[guest.uuid] = exc
        for guest in guests:
            threads.append(threading.Thread(target=run, args=(guest,)))
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return results

    def wait(self, migration_uuid, timeout=None, poll=0.1):
        deadline = time.monotonic() + (timeout or
                                       self.backend.migration_timeout_s)
        while True:
            migration = self.api.migration_get(self.ctxt, migration_uuid)
            if migration.status in fields.MigrationStatus.FINAL:
                return migration
            if time.monotonic() > deadline:
                raise exception.MigrationError(
                    reason=f"migration {migration_uuid} still "
                           f"{migration.status} after "
                           f"{self.backend.migration_timeout_s} s")
            time.sleep(poll)

    def cleanup(self):
        """Delete every guest this session created, wherever it is."""
        for uuid in reversed(self.created):
            try:
                self.backend.delete_guest(uuid)
            except Exception as exc:
                LOG.warning("numamig-ci: deleting guest %s failed: %s",
                            uuid, exc)
        self.created = []
        self.backend.refresh()

    # -- observations and checks -------------------------------------------

    def observe(self, name):
        """Read every guest's XML on host ``name`` and its fresh report."""
        live, persistent = {}, {}
        for uuid in self.backend.guests(name):
            live[uuid] = self.backend.domain_xml(name, uuid)
            persistent[uuid] = self.backend.domain_xml(name, uuid,
                                                       persistent=True)
        return HostState(name, live, persistent, self.topology(name))

    def check(self, failures):
        self.failures.extend(failures)
        return not failures

    def fail(self, guest, host, element, expected, actual, note=''):
        self.failures.append(Failure(getattr(guest, 'name', guest), host,
                                     element, str(expected), str(actual),
                                     note))

    def expect_status(self, migration, guest, status):
        if migration.status != status:
            self.fail(guest, migration.dest_host or '?', 'migration status',
                      status, migration.status, migration.error or '')
            return False
        return True

    def check_placed(self, guest, host):
        """The guest runs on ``host`` only, and its XML matches its record
        and the host's sets (live and persistent)."""
        self.backend.refresh()
        record = self.record(guest)
        if record.host != host:
            self.fail(guest, host, 'record host', host, record.host)
        for other in self.backend.hosts:
            present = guest.uuid in self.backend.guests(other)
            if present != (other == host):
                self.fail(guest, other, 'libvirt domain',
                          'defined' if other == host else 'absent',
                          'defined' if present else 'absent')
        if guest.uuid not in self.backend.guests(host):
            return record
        for which, persistent in (('live', False), ('persistent', True)):
            xml = self.backend.domain_xml(host, guest.uuid, persistent)
            self.check(checks.check_guest(record, self.host(host), xml,
                                          which))
        self.check_affinity(record, host)
        return record

    def check_affinity(self, record, host):
        """On real hosts: QEMU's vCPU threads run where the XML says."""
        if 'qemu_threads' not in self.backend.features:
            return
        xml = domain.parse(self.backend.domain_xml(host, record.uuid))
        actual = self.backend.vcpu_affinity(host, record.uuid)
        for vcpu, pins in sorted(xml.pins.items()):
            if actual.get(vcpu) != pins:
                self.fail(record, host,
                          f"QEMU vCPU {vcpu} thread Cpus_allowed_list",
                          f"<vcpupin> {domain.fmt(pins)}",
                          domain.fmt(actual.get(vcpu)))

    def wait_usage_recorded(self, name, why, timeout=USAGE_SETTLE_S):
        """Wait until host ``name`` reports exactly its guests' records;
        return the seconds it took, or None after recording what still
        differed at ``timeout``.

        A host on the release before NUMA-aware live migration drops a
        departed guest's pins and pages only at its next usage recompute
        (numamig.compute.completion): a snapshot taken before that would
        hold usage no guest owns. ``why`` says what is awaited, for the
        progress line and the failure.
        """
        started = time.monotonic()
        deadline = started + timeout
        pause = 0.1
        host = self.host(name)
        while True:
            self.backend.refresh()
            records = self.api.instance_get_all(self.ctxt, host=name)
            failures = checks.check_usage(host, self.topology(name), records)
            waited = time.monotonic() - started
            if not failures:
                self.say(f"{name}: {why} after {waited:.1f} s")
                return waited
            if time.monotonic() > deadline:
                self.check([dataclasses.replace(
                    f, note=f"not {why} within {timeout:.0f} s")
                    for f in failures])
                return None
            time.sleep(pause)
            pause = min(pause * 2, 2.0)

    def check_host(self, name):
        """No overlap among the host's guests; usage equals its records;
        the host reports the sets it was configured with."""
        self.backend.refresh()
        host = self.host(name)
        state = self.observe(name)
        records = self.api.instance_get_all(self.ctxt, host=name)
        names = {r.uuid: r.name for r in records}
        for which, xmls in (('live', state.live),
                            ('persistent', state.persistent)):
            placements = {names.get(u, u): domain.parse(x)
                          for u, x in xmls.items()}
            self.check([dataclasses.replace(f, element=f"{which} "
                                            f"{f.element}")
                        for f in checks.check_disjoint(host, placements)])
        self.check(checks.check_usage(host, state.topology, records))
        self.check(checks.check_topology(host, state.topology))
        for record in records:
            if record.get('migration_context') is not None:
                self.fail(record, name, 'record migration_context',
                          'none (no migration in progress)',
                          record.migration_context.migration_uuid)
        return state


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """A guest and every host's usage at one moment, to compare later."""

    host: str
    pinning: dict
    live: str
    persistent: str
    usage: dict


def usage_of(topology):
    """{node: (pinned pCPUs, {page size: used})} of a reported topology."""
    return {c.id: (frozenset(c.pinned_cpus),
                   {p.size_kb: p.used for p in c.mempages})
            for c in topology.cells}


class Snapshots:
    """Take and compare Snapshots: what rollback, abort and refusal must
    leave exactly as it was."""

    def __init__(self, session):
        self.s = session

    def take(self, guest):
        s = self.s
        s.backend.refresh()
        record = s.record(guest)
        reports = s.backend.reports()
        return Snapshot(
            record.host, dict(record.numa_topology.cpu_pinning),
            s.backend.domain_xml(record.host, guest.uuid),
            s.backend.domain_xml(record.host, guest.uuid, persistent=True),
            {h: usage_of(reports[h].topology) for h in s.backend.hosts})

    def compare(self, guest, before):
        """Fail for everything that differs from ``before``."""
        s = self.s
        after = self.take(guest)
        for field in ('host', 'pinning'):
            if getattr(before, field) != getattr(after, field):
                s.fail(guest, before.host, f"record {field}",
                       getattr(before, field), getattr(after, field),
                       "must be as before the migration")
        for which in ('live', 'persistent'):
            old = domain.parse(getattr(before, which))
            new = domain.parse(getattr(after, which))
            if old != new:
                s.fail(guest, before.host, f"{which} domain XML NUMA parts",
                       _brief(old), _brief(new),
                       "must be as before the migration")
        for host, usage in before.usage.items():
            if after.usage[host] != usage:
                s.fail('(all guests)', host, 'reported usage (pinned '
                       'pCPUs, huge pages used) per node', usage,
                       after.usage[host], "claims must be as before; "
                       + self._settling(host, usage))
        record = s.record(guest)
        if record.get('migration_context') is not None:
            s.fail(guest, before.host, 'record migration_context', 'none',
                   record.migration_context.migration_uuid)

    def _settling(self, host, usage):
        """What the records hold on ``host`` and whether its reports come
        back to ``usage`` within SNAPSHOT_SETTLE_S: a claim only the agent
        holds for a moment is told apart from one that stays, and from
        one the records hold (the failure stands either way)."""
        s = self.s
        claims = s.api.instance_get_claims_on_host(s.ctxt, host)
        held = ', '.join(f"{c.name} (migration "
                         f"{c.migration_context.migration_uuid})"
                         for c in claims) or 'none'
        started = time.monotonic()
        while time.monotonic() - started < SNAPSHOT_SETTLE_S:
            s.backend.refresh()
            if usage_of(s.backend.reports()[host].topology) == usage:
                return (f"claims in the records then: {held}; reported as "
                        f"before again {time.monotonic() - started:.1f} s "
                        f"later")
        return (f"claims in the records then: {held}; still so "
                f"{SNAPSHOT_SETTLE_S:.0f} s later")


def _brief(placement):
    return (f"pins {dict(sorted(placement.pins.items()))}, emulator "
            f"{domain.fmt(placement.emulator_pins)}, memnodes "
            f"{placement.memnodes}")


def describe(record):
    """A guest's placement in one line, for progress output."""
    topology = record.get('numa_topology')
    if topology is None or not topology.cells:
        return 'no NUMA topology'
    parts = []
    for cell in topology.cells:
        pins = ','.join(f'{v}->{p}' for v, p in
                        sorted(cell.cpu_pinning.items()))
        text = f"cell {cell.id}@node {cell.host_cell}"
        if pins:
            text += f" pins {pins}"
        if cell.cpuset:
            text += f" floating {domain.fmt(frozenset(cell.cpuset))}"
        if cell.get('pagesize'):
            text += f" pages {cell.pagesize} KiB"
        parts.append(text)
    return '; '.join(parts)
