"""Where a live migration's own QEMU threads run, on either host.

Each agent chooses the CPUs for the migration's threads on its own host
from what it alone knows, its usage (numamig.numa.migration_cpus): the
source from the nodes holding the guest's memory now, the destination
from the nodes of its claim. The source hands its choice to the driver's
job, which pins the threads as its monitor samples the job; the
destination runs a watch from its pre_live_migration until the source
tells it how the migration ended. Each side reports what it saw to the
conductor (migration_record_threads, records API), which keeps it as the
migration's MigrationThreads (a satellite record) for ``numamig-manage
migration show``.
"""

import threading

from oslo_log import log as logging

from numamig.numa import migration_cpus

LOG = logging.getLogger(__name__)

SOURCE, DEST = 'source', 'dest'


def choose(agent, topology):
    """ThreadCpus for a guest whose memory ``topology`` (a placed
    InstanceNUMATopology, or None) places on this host."""
    return migration_cpus.place(agent.tracker.usage_topology(),
                                migration_cpus.guest_nodes(topology),
                                agent.driver.migration_housekeeping_cpus())


class SourceThreads:
    """The ``threads`` of a driver's live_migrate for one migration from
    this host: the CPUs chosen, and where the job's record goes."""

    def __init__(self, agent, ctxt, migration_uuid, chosen):
        self._agent, self._ctxt = agent, ctxt
        self._migration = migration_uuid
        self.cpus, self.basis = chosen.cpus, chosen.basis

    def report(self, record):
        _record(self._agent, self._ctxt, self._migration, SOURCE, record)


def for_source(agent, ctxt, instance, migration_uuid):
    """The ``threads`` argument of live_migrate for ``instance``."""
    chosen = choose(agent, instance.get('numa_topology'))
    LOG.info("%s: migration %s of %s: its threads here get %s", agent.host,
             migration_uuid, instance.uuid, chosen.describe())
    return SourceThreads(agent, ctxt, migration_uuid, chosen)


def _record(agent, ctxt, migration_uuid, side, record):
    """Tell the conductor (a cast; a conductor before 1.16 is not told)."""
    if record is None:
        return
    if not agent.conductor_api.migration_record_threads(
            ctxt, migration_uuid, side, record):
        LOG.info("%s: migration %s: the conductor cannot record where its "
                 "threads ran (release 1's API)", agent.host, migration_uuid)


class Watches:
    """The incoming migrations whose threads this host watches, by
    migration uuid (one watch each, however often asked)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._watches = {}

    def start(self, migration_uuid, begin):
        """Run ``begin()`` (which returns a started watch or None) unless
        ``migration_uuid`` is watched already."""
        with self._lock:
            if migration_uuid in self._watches:
                return self._watches[migration_uuid]
            watch = begin()
            if watch is not None:
                self._watches[migration_uuid] = watch
            return watch

    def forget(self, migration_uuid):
        with self._lock:
            return self._watches.pop(migration_uuid, None)

    def __len__(self):
        with self._lock:
            return len(self._watches)


def watch_incoming(agent, ctxt, instance, migrate_data):
    """Start watching an incoming migration's threads (destination's
    pre_live_migration; a repeated request starts nothing new)."""
    if not agent.release.is_current or \
            not agent.driver.supports_native_migration:
        return None
    migration_uuid = migrate_data.migration_uuid
    claim = agent.tracker.get_claim(migration_uuid)
    chosen = choose(agent, claim.topology if claim is not None else None)

    def ended(record):
        agent.thread_watches.forget(migration_uuid)
        _record(agent, ctxt, migration_uuid, DEST, record)

    def begin():
        LOG.info("%s: incoming migration %s of %s: its threads here get %s",
                 agent.host, migration_uuid, instance.uuid,
                 chosen.describe())
        return agent.driver.watch_incoming_migration(
            instance.uuid, (chosen.cpus, chosen.basis),
            instance.get('memory_mb') or 0, ended)

    return agent.thread_watches.start(migration_uuid, begin)


def stop_watching(agent, migration_uuid):
    """The incoming migration ended (arrived or rolled back): stop its
    watch, which then reports (idempotent)."""
    watch = agent.thread_watches.forget(migration_uuid)
    if watch is not None:
        watch.stop()
