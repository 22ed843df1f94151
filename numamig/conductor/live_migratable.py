"""The conductor's standing live-migratable answer for every guest.

A thread per conductor worker looks, every ``[conductor]
live_migratable_interval`` seconds, at what changed since its last look
(guests created, changed, moved or deleted; hosts whose report, state
or maintenance changed) and tells numamig.scheduler.migratable's
Tracker, which re-checks only the guests those changes concern; then it
examines at most ``live_migratable_budget`` guests whole and records
the answers that changed (numamig.db.live_migratable). The look reads
the worker's own scheduler cache, the one its migrations choose from,
so the answer is the one a request to this worker would get.

Every worker of every conductor keeps the answer: they agree (same
reports, same rules), and a worker that stops leaves the others'. What
they write is the same, so two writing one guest is harmless.
"""

import json
import threading
import time

from oslo_log import log as logging

from numamig import exception
from numamig.conductor import drain
from numamig.db import instances
from numamig.db import live_migratable as answers_db
from numamig.numa import instance_request
from numamig.numa import pci
from numamig.objects import service as service_obj
from numamig.scheduler import migratable

LOG = logging.getLogger(__name__)

# Guests re-examined whole per look by the round-robin sweep, besides
# those a change concerns: catches what no change announces.
SWEEP_PER_LOOK = 20


class LiveMigratableWatch:
    """Keeps every guest's answer from this worker's cache (module
    docstring). ``look`` is one pass (tests call it directly)."""

    def __init__(self, worker, interval=None, budget=None,
                 sweep=SWEEP_PER_LOOK):
        settings = worker.settings
        self.sweep = sweep
        self.worker = worker
        self.interval = settings.live_migratable_interval \
            if interval is None else interval
        self.tracker = migratable.Tracker(
            worker.scheduler, disabled=lambda: self._disabled,
            limits=settings.limits,
            budget=settings.live_migratable_budget if budget is None
            else budget)
        self._disabled = {}
        self._hosts = {}            # host -> what its state was
        # The hosts older than NUMA-aware live migration, as the guests'
        # answers were made with (they depend on it: _guest).
        self._old_hosts = ()
        # The guests with a NUMA topology: those the releases concern.
        self._numa_guests = set()
        # host -> {guest uuid: cpumodel.GuestCPU} from its last report.
        self._cpus = {}
        self._revisions = {}        # guest uuid -> revision looked at
        self._stopping = threading.Event()
        self._thread = None
        self.looks = 0

    def start(self):
        if not self.interval:
            return
        self._thread = threading.Thread(
            target=self._loop, name='numamig-live-migratable', daemon=True)
        self._thread.start()

    def stop(self):
        self._stopping.set()
        if self._thread is not None and self._thread.is_alive() and \
                self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def _loop(self):
        while not self._stopping.wait(self.interval):
            try:
                self.look()
            except Exception as exc:  # noqa: BLE001 - next look retries
                LOG.warning("Keeping the live-migratable answers failed "
                            "(%s); trying again in %s s", exc,
                            self.interval)

    def look(self):
        """One pass: what changed, the re-checks, the writes. Returns
        the changes recorded: [(uuid, old Status or None, new)]."""
        started = time.monotonic()
        db = self.worker.db
        self._disabled = drain.disabled_hosts(self.worker)
        self._look_at_releases()
        hosts = self._read_hosts()
        self._look_at_guests(db)
        for host in hosts:
            self.tracker.host_changed(host)
        self.tracker.sweep(self.sweep)
        changes = self.tracker.catch_up()
        answers_db.save(db, [(uuid, new) for uuid, _old, new in changes])
        self.looks += 1
        if changes or self.tracker.pending:
            LOG.debug("Live-migratable look: %d answers changed, %d "
                      "guests wait, %.0f ms", len(changes),
                      self.tracker.pending,
                      (time.monotonic() - started) * 1000)
        return changes

    def _look_at_guests(self, db):
        revisions = instances.revisions(db)
        for uuid in set(self._revisions) - set(revisions):
            self.tracker.guest_removed(uuid)
            self._revisions.pop(uuid)
            self._numa_guests.discard(uuid)
            answers_db.forget(db, uuid)
        changed = [uuid for uuid, revision in revisions.items()
                   if self._revisions.get(uuid) != revision]
        if not changed:
            return
        if len(changed) > len(revisions) // 2:
            records = [r.instance for r in instances.get_all(db)]
        else:
            records = [instances.get(db, uuid).instance for uuid in changed
                       if uuid in revisions]
        for instance in records:
            self._revisions[instance.uuid] = revisions.get(instance.uuid)
            self.tracker.guest_changed(self._guest(instance))

    def _guest(self, instance):
        try:
            request = instance_request.numa_request(instance)
        except exception.NumamigException as exc:
            return migratable.Guest(instance.uuid, instance.host,
                                    blockers=(migratable.Reason(
                                        migratable.POLICY,
                                        f"its recorded specs make no "
                                        f"request: {exc}"),))
        pagesize_kb = instance_request.source_page_size(instance)
        blockers = []
        if instance.get('host') is None:
            blockers.append(migratable.Reason(
                migratable.POLICY, "it is on no host"))
        blockers.extend(_device_blockers(instance))
        guard = None
        self._numa_guests.discard(instance.uuid)
        if instance.get('numa_topology') is not None:
            self._numa_guests.add(instance.uuid)
            blockers.extend(self._upgrade_blockers())
            guard = self._source_cannot_take_part(instance.get('host'))
        guest_cpu = self._cpus.get(instance.get('host'), {}).get(
            instance.uuid)
        return migratable.Guest(
            instance.uuid, instance.get('host'), request,
            pagesize_kb=pagesize_kb, guest_cpu=guest_cpu,
            blockers=tuple(blockers),
            kind=_kind(instance, request, pagesize_kb, guest_cpu),
            guard=guard)

    def _upgrade_blockers(self):
        """The policy reason of a NUMA guest while hosts are older than
        NUMA-aware live migration and the workaround is off: the
        conductor refuses its migration then (LiveMigrationTask's
        _check_numa_live_migration_supported), whatever the hosts."""
        if not self._old_hosts or \
                not self.worker.release.numa_live_migration or \
                self.worker.settings.enable_numa_live_migration_workaround:
            return []
        return [migratable.Reason(
            migratable.POLICY,
            f"the conductor refuses NUMA guests' live migrations while "
            f"hosts {', '.join(self._old_hosts)} are older than service "
            f"version {service_obj.NUMA_LIVE_MIGRATION_VERSION}: upgrade "
            f"them, or set [workarounds] enable_numa_live_migration on "
            f"the conductors (guests then move NUMA-correctly from an "
            f"old host only to hosts whose migration guard is on)")]

    def _source_cannot_take_part(self, host):
        """One line naming the release of a source that cannot take
        part in NUMA-aware live migration, or None: its guests are placed
        NUMA-correctly only by a destination whose migration guard is on
        (numamig.compute.migration_dest._source_cannot_take_part)."""
        if host is None:
            return None
        version = self.worker.cache.service_version(host)
        if version is None or \
                version >= service_obj.NUMA_LIVE_MIGRATION_VERSION:
            return None
        return (f"its source {host} runs release {version} (service "
                f"version {version}), which cannot take part in "
                f"NUMA-aware live migration")

    def _look_at_releases(self):
        """Look again at the guests whose answer depends on releases
        that changed: every NUMA guest when the hosts older than NUMA-aware
        live migration changed (an upgrade step, rare)."""
        old = tuple(self.worker.cache.hosts_older_than(
            service_obj.NUMA_LIVE_MIGRATION_VERSION))
        if old == self._old_hosts:
            return
        self._old_hosts = old
        for uuid in self._numa_guests:
            # Read again (kept in the map: a deletion is still noticed).
            self._revisions[uuid] = None

    def _read_hosts(self):
        """The hosts whose state changed since the last look; the guests
        whose CPU their reports tell anew are read again."""
        seen = {}
        changed = []
        for state in self.worker.cache.host_states():
            # What a host's answer reads besides its usage: up, enabled,
            # its release (an old source) and its guard (for one).
            seen[state.host] = (id(state.topology), state.is_up,
                                self._disabled.get(state.host),
                                state.report.service_version,
                                state.report.get('migration_guard'))
            if self._hosts.get(state.host) != seen[state.host]:
                self._read_guest_cpus(state)
        for host in set(self._hosts) | set(seen):
            if self._hosts.get(host) != seen.get(host):
                changed.append(host)
                if host not in seen:
                    self._cpus.pop(host, None)
        self._hosts = seen
        return changed

    def _read_guest_cpus(self, state):
        """Keep the guests' CPUs a changed report tells; mark the known
        guests whose CPU it tells anew to be read again. Costs the
        host's guests, never the cloud's."""
        old = self._cpus.get(state.host, {})
        new = {entry.instance_uuid: entry.guest_cpu()
               for entry in state.report.get('guest_cpus') or ()}
        if new == old:
            return
        self._cpus[state.host] = new
        for uuid in set(old) | set(new):
            if old.get(uuid) != new.get(uuid) and uuid in self._revisions:
                self._revisions[uuid] = None


def _device_blockers(instance):
    """The devices reason of a guest holding passed-through functions
    whose flavor or image refuses their unplugging for a move."""
    topology = instance.get('numa_topology')
    held = topology.get('pci_devices') if topology is not None else None
    if not held:
        return []
    try:
        mode, where = pci.device_migration_mode(instance)
    except exception.MigrationPreCheckError as exc:
        return [migratable.Reason(migratable.DEVICES, str(exc))]
    if mode != pci.REFUSE:
        return []
    return [migratable.Reason(
        migratable.DEVICES,
        f"it holds passed-through PCI device(s) "
        f"{', '.join(d.address for d in held)} and its {where} is "
        f"'{pci.REFUSE}' (set it to '{pci.UNPLUG}' to hot-unplug them for "
        f"a move)")]


def _kind(instance, request, pagesize_kb, guest_cpu=None):
    """What a host's answer for the guest depends on but its host: the
    request it makes (its own uuid left out), its page size and its CPU
    as its host reported it."""
    if request is None:
        return ('no-numa', pagesize_kb, guest_cpu)
    text = json.dumps(request.obj_to_primitive(), sort_keys=True,
                      default=str).replace(instance.uuid, '')
    return (text, pagesize_kb, guest_cpu)
