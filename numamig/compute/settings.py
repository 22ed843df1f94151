"""The settings of one compute agent: read from configuration once.

As for the conductor (numamig.conductor.settings), the options in
numamig/conf are the one place a default lives: a ComputeSettings has
none of its own, ``from_conf`` fills every field from a parsed CONF, and
the service and its manager read this one frozen object. The driver's
own settings are numamig.virt.libvirt.settings.
"""

import dataclasses


@dataclasses.dataclass(frozen=True)
class ComputeSettings:
    """What one compute agent runs with; every field from an option.

    :param strategy: host-cell order of its NUMA fits, 'pack' or
        'spread' (``[compute] packing_host_numa_cells_allocation_strategy``).
    :param max_concurrent_live_migrations: outgoing migrations run at
        once; more wait in order.
    :param unrecorded_claim_timeout: seconds a move claim the conductor
        never recorded is kept (twice ``[DEFAULT]
        rpc_response_timeout_migration``: well past the conductor's wait
        for a destination).
    :param min_change_report_interval: seconds at least between two
        reports sent after guests changed.
    :param report_interval: seconds between periodic reports.
    :param reconcile_interval: seconds between looks for outgoing
        migrations left interrupted (unset: ``report_interval``).
    :param update_resources_interval: seconds between usage recomputes
        from the records (unset: ``report_interval``).
    :param status_timeout: seconds one request recording a migration's
        status waits (numamig.compute.patience); None: ``[DEFAULT]
        rpc_response_timeout`` as read at each request.
    :param compute_version_cap: ``[upgrade_levels] compute``; None: none.
    :param device_detach_timeout: seconds a source waits for the guest
        to release its passed-through devices before a migration
        (``[compute] device_detach_timeout``).
    """

    strategy: str
    max_concurrent_live_migrations: int
    unrecorded_claim_timeout: float
    min_change_report_interval: float
    report_interval: float
    reconcile_interval: float
    update_resources_interval: float
    status_timeout: float | None
    compute_version_cap: str | None
    device_detach_timeout: float


def from_conf(conf, status_timeout):
    """The agent's settings from a parsed CONF.

    :param status_timeout: seconds a status request waits, derived from
        ``[DEFAULT] rpc_response_timeout`` by the caller (oslo.messaging
        registers that option late; numamig.rpc reads it either way).
    """
    compute = conf.compute
    packing = compute.packing_host_numa_cells_allocation_strategy
    return ComputeSettings(
        strategy='pack' if packing else 'spread',
        max_concurrent_live_migrations=(
            compute.max_concurrent_live_migrations),
        unrecorded_claim_timeout=2 * conf.rpc_response_timeout_migration,
        min_change_report_interval=compute.min_change_report_interval,
        report_interval=conf.report_interval,
        reconcile_interval=compute.reconcile_interval or
        conf.report_interval,
        update_resources_interval=compute.update_resources_interval or
        conf.report_interval,
        status_timeout=status_timeout,
        compute_version_cap=conf.upgrade_levels.compute,
        device_detach_timeout=compute.device_detach_timeout)
