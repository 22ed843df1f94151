"""The settings of one conductor worker: read from configuration once.

The options in numamig/conf are the one place a default lives. A
ConductorSettings has no defaults of its own: ``from_conf`` fills every
field from a parsed CONF, and the service, its manager and the flows
(through the Worker) read this one frozen object. A test that wants
other values overrides the options and builds the object the same way
(tests/unit/test_settings_defaults.py fails on a default restated
outside numamig/conf).
"""

import dataclasses
import types
import typing

from numamig import exception
from numamig import objects
from numamig.convergence import policy as convergence
from numamig.db import queue
from numamig.numa import pci


class VirtioMemSettings(typing.NamedTuple):
    """[virtio_mem] resize_timeout (s), max_loss_mb, and the reclaim
    for placements: placement_reclaim, placement_reclaim_max_mb and
    placement_reclaim_max_hosts (the memory changes' and placement
    reclaim's, conductor.tasks.memory and .placement_reclaim)."""

    resize_timeout: float
    max_loss_mb: int
    placement_reclaim: bool
    placement_reclaim_max_mb: int
    placement_reclaim_max_hosts: int


class LinkRates(typing.NamedTuple):
    """Hosts' migration link rates in MiB/s (``[conductor]
    migration_link_rate`` for every host, ``migration_link_rates`` per
    host); 0 or absent: unknown."""

    default: int
    per_host: typing.Mapping

    def rate(self, host):
        """MiB/s of ``host``'s migration link, or None if unknown."""
        return self.per_host.get(host, self.default) or None


@dataclasses.dataclass(frozen=True)
class ConductorSettings:
    """What one conductor worker runs with; every field from an option.

    :param migrate_max_retries: destinations tried after the first
        (``[DEFAULT] migrate_max_retries``).
    :param check_timeout: seconds a destination's check may take
        (``[DEFAULT] rpc_response_timeout_migration``).
    :param limits: the NUMALimits of every host (``[compute]``
        allocation ratios).
    :param enable_numa_live_migration_workaround: migrate NUMA guests
        even when a host of the release before takes part
        (``[workarounds] enable_numa_live_migration``).
    :param admission: queue.Limits on migrations at once (``[conductor]
        max_*_migrations*``).
    :param foreign_numa_specs: keys of numamig's spec namespaces it
        accepts on a new guest without reading them.
    :param migration_policies: {name: Policy} the migrations may run
        under (``[libvirt] live_migration_policies`` and the shipped
        ones), read-only.
    :param default_migration_policy: the one a migration runs under when
        neither its request, flavor nor image names one.
    :param convergence_prediction: 'off', 'record', 'refuse' or 'choose'.
    :param convergence_fallback_policies: the names 'choose' tries.
    :param virtio_mem: VirtioMemSettings (``[virtio_mem]``).
    :param migration_workers: migration task threads.
    :param database_outage_wait: seconds a migration task waits for the
        database.
    :param migration_watchers: operators' waits held at once.
    :param report_writers: agents' reports written at once.
    :param report_sync_interval: seconds between reads of the reports
        other workers stored; 0: only when a request needs them.
    :param drain_replan_attempts: times a drain plans a refused guest
        again.
    :param defragment_verify_timeout: seconds a defragmentation waits
        for its target's report.
    :param scheduler_strategy: ``[scheduler] strategy``.
    :param cell_strategy: the destinations' host-cell order ('pack' or
        'spread', ``[compute] packing_host_numa_cells_allocation_strategy``).
    :param max_candidates: ``[scheduler] max_candidates``.
    :param sweep_interval: seconds between looks for stalled migrations
        (``[conductor] stalled_migration_interval``).
    :param compute_version_cap: ``[upgrade_levels] compute``; None: none.
    :param migration_links: LinkRates, the rate a drain plan's time is
        bounded by.
    :param live_migratable_interval: seconds between two looks of the
        standing live-migratable answer; 0: none kept.
    :param live_migratable_budget: guests a look examines whole at most.
    :param drain_estimate_max_age: seconds old a source's dirty-rate
        sample may be for a drain's estimate; 0: always fresh.
    """

    migrate_max_retries: int
    check_timeout: float
    limits: objects.NUMALimits
    enable_numa_live_migration_workaround: bool
    admission: queue.Limits
    foreign_numa_specs: tuple
    migration_policies: typing.Mapping
    default_migration_policy: str
    convergence_prediction: str
    convergence_fallback_policies: tuple
    virtio_mem: VirtioMemSettings
    migration_workers: int
    database_outage_wait: float
    migration_watchers: int
    report_writers: int
    report_sync_interval: float
    drain_replan_attempts: int
    defragment_verify_timeout: float
    scheduler_strategy: str
    cell_strategy: str
    max_candidates: int
    sweep_interval: float
    compute_version_cap: str | None
    migration_links: LinkRates
    live_migratable_interval: float
    live_migratable_budget: int
    # [pci] alias, parsed (numa.pci.parse_aliases): {name: Alias}.
    pci_aliases: typing.Mapping
    drain_estimate_max_age: int


def from_conf(conf):
    """The conductor's settings from a parsed CONF.

    :raises InvalidConfiguration: a convergence policy line does not
        parse, or the default names no policy.
    """
    cond, vmem = conf.conductor, conf.virtio_mem
    packing = conf.compute.packing_host_numa_cells_allocation_strategy
    return ConductorSettings(
        migrate_max_retries=conf.migrate_max_retries,
        check_timeout=conf.rpc_response_timeout_migration,
        limits=objects.NUMALimits(
            cpu_allocation_ratio=conf.compute.cpu_allocation_ratio,
            ram_allocation_ratio=conf.compute.ram_allocation_ratio),
        enable_numa_live_migration_workaround=(
            conf.workarounds.enable_numa_live_migration),
        admission=queue.Limits(
            total=cond.max_concurrent_migrations,
            per_source=cond.max_outgoing_migrations_per_host,
            per_dest=cond.max_incoming_migrations_per_host,
            queued=cond.max_queued_migrations),
        foreign_numa_specs=tuple(conf.foreign_numa_specs),
        migration_policies=_migration_policies(conf),
        default_migration_policy=conf.libvirt.live_migration_policy,
        convergence_prediction=cond.convergence_prediction,
        convergence_fallback_policies=tuple(
            cond.convergence_fallback_policies),
        virtio_mem=VirtioMemSettings(
            resize_timeout=vmem.resize_timeout,
            max_loss_mb=vmem.max_loss_mb,
            placement_reclaim=vmem.placement_reclaim,
            placement_reclaim_max_mb=vmem.placement_reclaim_max_mb,
            placement_reclaim_max_hosts=vmem.placement_reclaim_max_hosts),
        migration_workers=cond.migration_workers,
        database_outage_wait=cond.database_outage_wait,
        migration_watchers=cond.migration_watchers,
        report_writers=cond.report_writers,
        report_sync_interval=cond.report_sync_interval,
        drain_replan_attempts=cond.drain_replan_attempts,
        defragment_verify_timeout=cond.defragment_verify_timeout,
        scheduler_strategy=conf.scheduler.strategy,
        cell_strategy='pack' if packing else 'spread',
        max_candidates=conf.scheduler.max_candidates,
        sweep_interval=cond.stalled_migration_interval,
        compute_version_cap=conf.upgrade_levels.compute,
        migration_links=LinkRates(
            cond.migration_link_rate,
            types.MappingProxyType(dict(cond.migration_link_rates))),
        live_migratable_interval=cond.live_migratable_interval,
        live_migratable_budget=cond.live_migratable_budget,
        pci_aliases=types.MappingProxyType(pci.parse_aliases(
            conf.pci.alias)),
        drain_estimate_max_age=cond.drain_estimate_max_age)


def _migration_policies(conf):
    """The convergence policies of [libvirt] (the conductor checks
    requests against them), read-only.

    :raises InvalidConfiguration: a line does not parse, or the default
        names no policy.
    """
    lv = conf.libvirt
    try:
        known = convergence.catalog(lv.live_migration_policies)
    except exception.InvalidMigrationPolicy as exc:
        raise exception.InvalidConfiguration(
            option='[libvirt] live_migration_policies', reason=str(exc))
    if lv.live_migration_policy not in known:
        raise exception.InvalidConfiguration(
            option='[libvirt] live_migration_policy',
            reason=f"{lv.live_migration_policy!r} is not a known policy "
                   f"({', '.join(sorted(known))})")
    return types.MappingProxyType(known)
