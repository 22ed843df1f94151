"""The compute agent's resource tracker: what of this host is used, by whom.

A host's usage is exactly its instances' NUMA topologies plus the new
topologies of the incoming move claims that in-progress migrations hold
(``accepted`` ones included); nothing else. The tracker keeps both in
memory, recomputes them from the conductor's records at start and
periodically, and serialises every claim under one lock so that two
claims can never take the same pCPU or page.

A periodic recompute never drops a claim an in-progress migration holds:
claims the records still show are kept, claims not yet recorded are kept
for ``unrecorded_claim_timeout`` seconds after they were taken, and a
recompute whose records were read before a concurrent explicit change is
discarded instead of undoing that change.

Why a bound on unrecorded claims: with compute API 1.3 the destination
returns its claim and the conductor records it (with ``queued``). A
conductor that dies in between never records it and never tells this
host: the claim would hold pCPUs and pages forever. Each recompute asks
the conductor about the claims only this host holds (there are none but
in the instant between an answer and its record, or after such a crash)
and drops those whose migration has ended or is unknown: after a
conductor crash they go within one recompute of a conductor answering
again. A conductor that cannot answer keeps them, up to the bound, which
is set well above the conductor's wait for the destination's answer
(2 x rpc_response_timeout_migration), after which a conductor that is
still alive has recorded the claim or dropped it itself. Dropping is safe
even if the records show it later: the source's pre_live_migration finds
no claim here and the migration rolls back, and a recompute that then
reads the claim in the records recovers it.
"""

import collections
import threading
import time

from oslo_log import log as logging

from numamig import exception
from numamig.compute import cpu_power
from numamig.numa import pci
from numamig.numa import usage
from numamig.objects import fields

LOG = logging.getLogger(__name__)
FINAL = fields.MigrationStatus.FINAL


class MoveClaim:
    """An incoming migration's hold on part of this host.

    ``persisted`` turns True once the migration context is recorded by the
    conductor; until then the claim exists only here, and only the agent
    that took it may drop it. ``guarded``: taken for a source that cannot
    rewrite the XML (an older release), so that this host's migration
    guard places the guest (numamig.virt.libvirt.guard).
    """

    __slots__ = ('instance_uuid', 'project_id', 'migration_uuid',
                 'topology', 'persisted', 'taken_at', 'guarded')

    def __init__(self, instance_uuid, project_id, migration_uuid, topology,
                 persisted=False, guarded=False):
        self.instance_uuid = instance_uuid
        self.project_id = project_id
        self.migration_uuid = migration_uuid
        self.topology = topology
        self.persisted = persisted
        self.guarded = guarded
        # time.monotonic() when taken: bounds how long it may stay
        # unrecorded.
        self.taken_at = time.monotonic()

    def __repr__(self):
        return (f"MoveClaim(instance={self.instance_uuid}, "
                f"migration={self.migration_uuid}, "
                f"persisted={self.persisted})")


class ResourceTracker:
    """Usage of one host: its instances and the move claims it holds."""

    def __init__(self, host, driver, conductor_api, strategy,
                 unrecorded_claim_timeout, pci_alias, power=None):
        """:param strategy: 'spread' or 'pack', handed to every fit.

        :param pci_alias: ``[pci] alias`` entries: what a new guest's
            pci_passthrough:alias names (a placed guest's requests are
            recorded with it).
        :raises InvalidConfiguration: an entry does not parse.

        :param unrecorded_claim_timeout: seconds a claim the records do
            not show is kept by the recompute (see the module docstring).

        Every change of the claims is published to the driver
        (``publish_move_claims``: the migration guard reads them) before
        the change returns, so a claim is known to the guard before the
        answer that lets the source start.

        :param power: this host's CPU power management
            (numamig.compute.cpu_power.CPUPower) or None: after every
            change of usage it powers the dedicated pCPUs as the new
            usage wants them, before the change returns (a claim's pCPUs
            are up before the answer that lets the source start).
        """
        self.host = host
        self.unrecorded_claim_timeout = unrecorded_claim_timeout
        self.driver = driver
        self.conductor_api = conductor_api
        self.strategy = strategy
        self.power = power
        self.pci_aliases = pci.parse_aliases(pci_alias)
        # Re-entrant: claims.py holds it around a fit and add_claim().
        self.lock = threading.RLock()
        self._base = None
        self._usage = None
        self._instances = {}
        self._claims = {}
        # Bumped by every explicit change; a recompute built from records
        # read before a bump would undo that change, so it is discarded.
        self._generation = 0
        # Instances destroyed here whose record the conductor has not
        # removed yet: a recompute reading the record meanwhile must not
        # count them again (it would report pCPUs no guest holds).
        self._deleted = set()
        # Migrations whose claim was dropped here while the records may
        # still hold it: drop_claim drops here first, then in the records,
        # and a recompute reading the records in between must not recover
        # the claim (seen in CI: a guard-refused migration's pCPU and pages
        # reported as used after its rollback). Forgotten once the records
        # no longer hold it, so bounded by the records' claims.
        self._dropped = set()
        # Move claims refused here since the agent started: in all, and
        # per reason (numamig.numa.cellfit.REASONS, or NOT_RECORDED).
        # Counted under ``lock``.
        self.claims_refused = 0
        self.claim_refusal_reasons = collections.Counter()

    # -- reading -------------------------------------------------------------

    @property
    def base_topology(self):
        """The host's topology without usage (from the driver)."""
        if self._base is None:
            raise exception.NumamigException(
                message=f"resource tracker of {self.host} is not started")
        return self._base

    def usage_topology(self):
        """The host's topology with every instance and claim applied.

        :returns: a HostNUMATopology the caller must not modify.
        """
        with self.lock:
            if self._usage is None:
                self._usage = self._compute_usage()
            return self._usage

    def instance_uuids(self):
        with self.lock:
            return set(self._instances)

    def instances(self):
        """The Instances counted on this host."""
        with self.lock:
            return list(self._instances.values())

    def get_claim(self, migration_uuid):
        """Return the MoveClaim of a migration, or None."""
        with self.lock:
            return self._claims.get(migration_uuid)

    def claims(self):
        with self.lock:
            return list(self._claims.values())

    def guest_pairs(self):
        """(project id, instance uuid) of every guest here or claimed.

        Guests with incoming claims count as present, so that a host's
        fingerprint already includes placements the scheduler reserved.
        """
        with self.lock:
            pairs = {(i.project_id, i.uuid) for i in self._instances.values()}
            pairs |= {(c.project_id, c.instance_uuid)
                      for c in self._claims.values()}
        return sorted(pairs)

    # -- explicit changes -----------------------------------------------------

    def add_claim(self, claim):
        """Record a move claim; the caller has fitted it under ``lock``.

        :raises UsageConflict: if it clashes with current usage (a bug in
            the caller's fit, never silently accepted).
        """
        with self.lock:
            new_usage = usage.apply(self.usage_topology(), claim.topology)
            self._claims[claim.migration_uuid] = claim
            self._dropped.discard(claim.migration_uuid)
            self._changed(new_usage)
            try:
                self._power(require=cpu_power.pinned_pcpus(claim.topology))
            except exception.CPUPowerError:
                # Its guest could not run here: no claim, and its pCPUs
                # go down again.
                self._claims.pop(claim.migration_uuid, None)
                self._changed()
                self._power()
                raise
            self.publish_claims()

    def mark_persisted(self, migration_uuid):
        with self.lock:
            claim = self._claims.get(migration_uuid)
            if claim is not None:
                claim.persisted = True
                self._changed(self._usage)

    def drop_move_claim(self, migration_uuid):
        """Drop a migration's claim; dropping a missing one is a no-op.

        :returns: the dropped MoveClaim, or None.
        """
        with self.lock:
            claim = self._claims.pop(migration_uuid, None)
            self._dropped.add(migration_uuid)
            if claim is not None:
                self._changed()
                self.publish_claims()
                LOG.info("%s: dropped the move claim of migration %s "
                         "(instance %s)", self.host, migration_uuid,
                         claim.instance_uuid)
            # Also when it was gone already: a redelivered drop after a
            # power-down that failed tries again.
            self._power()
            return claim

    def apply_move_claim(self, migration_uuid, instance):
        """The migration arrived: its claim becomes the instance's usage."""
        with self.lock:
            self._claims.pop(migration_uuid, None)
            self._instances[instance.uuid] = instance
            self._deleted.discard(instance.uuid)
            self._changed()
            self.publish_claims()
            self._power()

    def track_instance(self, instance):
        """Count an instance that now runs here (build, adoption)."""
        with self.lock:
            new_usage = None
            if instance.uuid not in self._instances and \
                    instance.get('numa_topology') is not None:
                new_usage = usage.apply(self.usage_topology(),
                                        instance.numa_topology)
            self._instances[instance.uuid] = instance
            self._deleted.discard(instance.uuid)
            self._changed(new_usage)
            # A guest newly counted needs its pCPUs up (the caller undoes
            # the count on CPUPowerError); one counted again does not
            # fail for a pCPU that went down since.
            self._power(require=cpu_power.pinned_pcpus(
                instance.get('numa_topology')) if new_usage else ())

    def drop_instance(self, instance_uuid, deleted=False):
        """Stop counting an instance that left this host; idempotent.

        :param deleted: its guest was destroyed here and its record is
            about to go: until it has, recomputes do not count it.
        :returns: True if it was counted.
        """
        with self.lock:
            if deleted:
                self._deleted.add(instance_uuid)
            found = self._instances.pop(instance_uuid, None) is not None
            if found:
                self._changed()
            self._power()
            return found

    def _power(self, require=()):
        """Power the dedicated pCPUs as the usage now wants (the caller
        holds ``lock``). Raises CPUPowerError only for ``require``."""
        if self.power is not None:
            self.power.apply(self.usage_topology(), require=require)

    def _changed(self, new_usage=None):
        self._generation += 1
        self._usage = new_usage

    # -- recompute from records ----------------------------------------------

    def start(self, ctxt):
        """Read the host topology and recompute usage from the records."""
        self._base = self.driver.get_host_topology()
        for _attempt in range(3):
            if self.update_available_resource(ctxt):
                return
        LOG.warning("%s: usage changed during every start-up recompute; "
                    "the next periodic run will converge", self.host)

    def update_available_resource(self, ctxt):
        """Recompute instances and claims from the conductor's records.

        :returns: False if an explicit change raced with the records read,
            in which case nothing was changed.
        """
        self._refresh_distances()
        with self.lock:
            generation = self._generation
        # Claims first: a migration completing between the two reads moves
        # its guest from "claim here" to "instance here" in one
        # transaction, so this order sees it at least once (counted once,
        # see _compute_usage); the other order could see it nowhere and
        # free its pCPUs for the next claim.
        conductor_api = self.conductor_api
        claimed = conductor_api.instance_get_claims_on_host(ctxt, self.host)
        instances = conductor_api.instance_get_all_by_host(ctxt, self.host)
        ended = self._ended_unrecorded(ctxt, claimed)
        with self.lock:
            if generation != self._generation:
                LOG.debug("%s: usage changed during recompute; skipped",
                          self.host)
                return False
            self._deleted &= {i.uuid for i in instances}
            self._dropped &= {i.migration_context.migration_uuid
                              for i in claimed}
            self._instances = {i.uuid: i for i in instances
                               if i.uuid not in self._deleted}
            self._claims = self._merge_claims(claimed, ended)
            self._changed()
            self._usage = self._compute_usage()
            self.publish_claims()
            # At start this is the reconciliation: whatever a crash left,
            # every pCPU a recorded guest or claim pins goes up, every
            # other dedicated one down.
            self._power()
        return True

    def _refresh_distances(self):
        """Take a changed NUMA distance table from the driver: the next
        report carries it (its stored digest differs, so the conductor's
        scheduler takes it whole). A driver that cannot read it now is
        asked again at the next recompute."""
        try:
            changed = self.driver.refresh_distances()
        except exception.NumamigException as exc:
            LOG.warning("%s: reading the NUMA distance table again failed: "
                        "%s", self.host, exc)
            return
        if changed is None:
            return
        with self.lock:
            base = self._base.obj_clone()
            for cell in base.cells:
                cell.distances = dict(next(
                    c.distances for c in changed.cells if c.id == cell.id))
            self._base = base
            self._changed()

    def publish_claims(self):
        """Publish every claim's placement to the driver's migration guard
        (also periodically, so that the guard can tell a live agent's
        claims from a dead one's). A failure is the driver's to log: a
        claim never fails for it."""
        with self.lock:
            claims = {c.instance_uuid: (c.migration_uuid, c.topology)
                      for c in self._claims.values()
                      if c.topology is not None}
            try:
                self.driver.publish_move_claims(claims)
            except exception.NumamigException as exc:
                # The driver logs a file it cannot write; this is a claim
                # it cannot describe. Neither fails the claim.
                LOG.error("%s: publishing the move claims to the "
                          "migration guard failed: %s", self.host, exc)

    def _ended_unrecorded(self, ctxt, claimed):
        """{migration uuid: why} of the claims only this host holds whose
        migration is over or unknown to the conductor.

        Such a claim can never be recorded any more (a conductor worker
        died after the destination answered, and the migration was ended
        since): waiting out ``unrecorded_claim_timeout`` would hold its
        pCPUs for nothing. Unrecorded claims live for a fraction of a
        second normally, so this costs a call only in that window or
        after such a crash. A conductor that cannot answer keeps them.
        """
        recorded = {i.migration_context.migration_uuid for i in claimed}
        with self.lock:
            unrecorded = [uuid for uuid, claim in self._claims.items()
                          if not claim.persisted and uuid not in recorded]
        ended = {}
        for uuid in unrecorded:
            try:
                status = self.conductor_api.migration_get(ctxt, uuid).status
            except exception.MigrationNotFound:
                ended[uuid] = "no migration record holds it"
                continue
            except Exception as exc:  # noqa: BLE001 - kept, tried again
                LOG.debug("%s: could not look up migration %s: %s",
                          self.host, uuid, exc)
                continue
            if status in FINAL:
                ended[uuid] = f"its migration ended {status}"
        return ended

    def _merge_claims(self, claimed, ended=None):
        recorded = {}
        for instance in claimed:
            ctx = instance.migration_context
            if ctx.migration_uuid in self._dropped:
                continue
            held = self._claims.get(ctx.migration_uuid)
            recorded[ctx.migration_uuid] = MoveClaim(
                instance.uuid, instance.project_id, ctx.migration_uuid,
                ctx.new_numa_topology, persisted=True,
                guarded=held is not None and held.guarded)
        now = time.monotonic()
        for uuid, claim in self._claims.items():
            if uuid in recorded:
                continue
            if not claim.persisted and uuid in (ended or {}):
                LOG.warning("%s: released the claim of migration %s "
                            "(instance %s): %s", self.host, uuid,
                            claim.instance_uuid, ended[uuid])
            elif not claim.persisted:
                age = now - claim.taken_at
                if age < self.unrecorded_claim_timeout:
                    # Being recorded right now: the records cannot show
                    # it yet.
                    recorded[uuid] = claim
                    continue
                LOG.warning("%s: released the claim of migration %s "
                            "(instance %s): not recorded %.0f s after it "
                            "was taken (limit %s s)", self.host, uuid,
                            claim.instance_uuid, age,
                            self.unrecorded_claim_timeout)
            else:
                LOG.warning("%s: released the claim of migration %s "
                            "(instance %s): its records no longer hold it",
                            self.host, uuid, claim.instance_uuid)
        for uuid, claim in recorded.items():
            if uuid not in self._claims:
                LOG.info("%s: recovered the claim of migration %s "
                         "(instance %s) from the records", self.host, uuid,
                         claim.instance_uuid)
        return recorded

    def _compute_usage(self):
        placed = [(i.uuid, i.numa_topology)
                  for i in self._instances.values()
                  if i.get('numa_topology') is not None]
        # A guest whose migration here completed between the two reads of
        # a recompute shows as both: it is counted as the instance.
        placed += [(c.instance_uuid, c.topology)
                   for c in self._claims.values() if c.topology is not None
                   and c.instance_uuid not in self._instances]
        owners = {id(topology): uuid for uuid, topology in placed}

        def overlap(topology, exc):
            # Two guests hold the same resources (e.g. XML copied by an
            # old release). Keep counting the first; the audit reports
            # the overlap.
            LOG.error("%s: usage of instance %s overlaps another "
                      "guest's: %s", self.host, owners[id(topology)], exc)

        return usage.host_with_usage(
            self.base_topology, [topology for _, topology in placed],
            on_conflict=overlap)
