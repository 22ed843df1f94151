"""Claims: fit a guest to this host's free resources and hold them.

A move claim is what makes NUMA-aware live migration safe: the
destination rebuilds the guest's NUMA request from its flavor specs and
image properties (never copying the source's pins), fits it to its own
free resources with the scheduler's limits, holds the result in the
resource tracker, and has it recorded as the instance's migration
context before the source may start: it returns the claim to the
conductor, which records it (compute API 1.3), or records it through the
conductor itself before it answers (API 1.1), so that a crash cannot
lose it.

An instance claim does the same for a guest being built here.
"""

from oslo_log import log as logging

from numamig import exception
from numamig import objects
from numamig.compute import resource_tracker
from numamig.numa import fit
from numamig.numa import instance_request
from numamig.numa import pci

LOG = logging.getLogger(__name__)
# A refusal's reason beside the NUMA engine's (cellfit.REASONS): the
# claim fitted, but the conductor refused to record it.
NOT_RECORDED = 'not-recorded'


def _fit_here(tracker, request, limits, pagesize_kb, what, moving=False):
    result = fit.fit(tracker.usage_topology(), request, limits=limits,
                     strategy=tracker.strategy, pagesize_kb=pagesize_kb)
    if not result.fits:
        if moving:
            _count_refusal(tracker, fit.refusal_reasons(result))
        refusal = exception.MigrationPreCheckError if moving else \
            exception.BuildRefused
        raise refusal(
            reason=f"{what} does not fit on host {tracker.host}: "
                   f"{result.reason}")
    return result.topology


def move_claim(tracker, conductor, ctxt, instance, migration, limits,
               persist=True, guarded=False):
    """Claim the destination's resources for a migrating instance.

    Idempotent per migration: a repeated request (an RPC redelivered
    after a reconnect) returns the claim already held.

    :param persist: record the claim through the conductor before
        returning (compute API 1.1). False (API 1.3): the caller returns
        it (see ``context_of``) and the conductor records it; until the
        records show it the tracker keeps it for a bounded time only.
    :param guarded: the source cannot rewrite the XML; this host's
        migration guard will (MoveClaim.guarded).

    :returns: the MoveClaim, or None for a guest without NUMA
        characteristics (nothing specific to claim).
    :raises MigrationPreCheckError: the guest does not fit here, its
        pCPUs could not be powered up ([compute] cpu_power_management),
        or the conductor refused to record the claim; nothing stays
        claimed.
    """
    existing = tracker.get_claim(migration.uuid)
    if existing is not None:
        return existing
    request = instance_request.numa_request(instance, tracker.pci_aliases)
    if request is None:
        return None
    with tracker.lock:
        # A repeat handled beside the first (a request sent again after
        # silence) may have claimed since the look above: one claim per
        # migration, never two fits whose usage both count.
        existing = tracker.get_claim(migration.uuid)
        if existing is not None:
            return existing
        placed = _fit_here(tracker, request, limits,
                           instance_request.source_page_size(instance),
                           f"instance {instance.uuid}", moving=True)
        placed.instance_uuid = instance.uuid
        claim = resource_tracker.MoveClaim(
            instance.uuid, instance.project_id, migration.uuid, placed,
            guarded=guarded)
        try:
            tracker.add_claim(claim)
        except exception.CPUPowerError as exc:
            raise exception.MigrationPreCheckError(
                reason=f"instance {instance.uuid} fits on host "
                       f"{tracker.host}, but its pCPUs could not be "
                       f"powered up: {exc}") from exc
    if persist:
        _persist(tracker, conductor, ctxt, instance, migration, claim)
    LOG.info("%s: claimed %s for instance %s (migration %s)", tracker.host,
             _describe(placed), instance.uuid, migration.uuid)
    return claim


def _count_refusal(tracker, reasons):
    """Count a refused move claim (the caller holds the tracker's lock)."""
    tracker.claims_refused += 1
    tracker.claim_refusal_reasons.update(reasons)


def context_of(tracker, instance, claim):
    """The MigrationContext that records ``claim`` (old and new topology)."""
    return objects.MigrationContext(
        instance_uuid=instance.uuid, migration_uuid=claim.migration_uuid,
        source_host=instance.host, dest_host=tracker.host,
        old_numa_topology=instance.get('numa_topology'),
        new_numa_topology=claim.topology)


def _persist(tracker, conductor, ctxt, instance, migration, claim):
    context = context_of(tracker, instance, claim)
    try:
        conductor.migration_context_set(ctxt, context)
    except Exception as exc:
        tracker.drop_move_claim(migration.uuid)
        with tracker.lock:
            _count_refusal(tracker, (NOT_RECORDED,))
        if isinstance(exc, exception.MigrationError):
            raise
        raise exception.MigrationPreCheckError(
            reason=f"host {tracker.host} could not record its claim for "
                   f"instance {instance.uuid}: {exc}") from exc
    tracker.mark_persisted(migration.uuid)


def _new_guest_request(tracker, instance):
    """A new guest's request, its aliases resolved by this agent's own
    ``[pci] alias``: an alias the conductor knows and this agent does not
    is an operator's configuration gap, named as one."""
    try:
        return instance_request.numa_request(instance, tracker.pci_aliases)
    except exception.InvalidNUMASpec as exc:
        if exc.kwargs.get('key') != pci.ALIAS_SPEC_KEY:
            raise
        raise exception.InvalidNUMASpec(
            key=exc.kwargs['key'], value=exc.kwargs['value'],
            reason=f"compute agent {tracker.host}: {exc.kwargs['reason']}; "
                   f"give every compute agent the conductor's [pci] alias")


def instance_claim(tracker, instance, limits):
    """Fit and hold a new guest's resources on this host.

    The caller records the returned placement with the conductor and
    creates the guest; on failure it calls ``tracker.drop_instance``.

    :returns: the Instance with host and numa_topology set (a copy).
    :raises BuildRefused: the guest does not fit here, or its pCPUs could
        not be powered up.
    """
    request = _new_guest_request(tracker, instance)
    placed_instance = instance.obj_clone()
    placed_instance.host = tracker.host
    with tracker.lock:
        if request is not None:
            placed = _fit_here(tracker, request, limits, None,
                               f"new instance {instance.uuid}")
            placed.instance_uuid = instance.uuid
            placed_instance.numa_topology = placed
        try:
            tracker.track_instance(placed_instance)
        except exception.CPUPowerError as exc:
            tracker.drop_instance(instance.uuid)
            raise exception.BuildRefused(
                reason=f"new instance {instance.uuid} fits on host "
                       f"{tracker.host}, but its pCPUs could not be "
                       f"powered up: {exc}") from exc
    return placed_instance


def _describe(topology):
    cells = ', '.join(
        f"guest cell {c.id} -> host cell {c.host_cell}"
        + (f" pins {dict(sorted(c.cpu_pinning.items()))}"
           if c.cpu_pinning else '')
        + (f" {c.pagesize} KiB pages" if c.get('pagesize') else '')
        for c in topology.cells)
    return cells or 'no cells'
