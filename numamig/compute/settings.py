"""The settings of one compute agent: read from configuration once.

As for the conductor (numamig.conductor.settings), the options in
numamig/conf are the one place a default lives: a ComputeSettings has
none of its own, ``from_conf`` fills every field from a parsed CONF, and
the service and its manager read this one frozen object. The driver's
own settings are numamig.virt.libvirt.settings.
"""

import dataclasses


@dataclasses.dataclass(frozen=True)
class CPUPowerSettings:
    """``[compute] cpu_power_management`` and its companions.

    :param strategy: 'off' (cpu_power_management unset), 'cpu_state' or
        'governor' (cpu_power_management_strategy).
    :param cpu_dedicated_set: the pCPUs it may touch, as configured (a
        CPU list; numamig.compute.cpu_power parses it).
    :param governor_low: governor of unused pCPUs (governor strategy).
    :param governor_high: governor of used pCPUs (governor strategy).
    :param sysfs_root: the kernel's CPU directory (cpu_power_sysfs_root).
    """

    strategy: str
    cpu_dedicated_set: str | None
    governor_low: str
    governor_high: str
    sysfs_root: str


def cpu_power_from_conf(conf):
    compute = conf.compute
    return CPUPowerSettings(
        strategy=(compute.cpu_power_management_strategy
                  if compute.cpu_power_management else 'off'),
        cpu_dedicated_set=compute.cpu_dedicated_set,
        governor_low=compute.cpu_power_governor_low,
        governor_high=compute.cpu_power_governor_high,
        sysfs_root=compute.cpu_power_sysfs_root)


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
    :param cpu_power: CPU power management (CPUPowerSettings).
    :param locality: the locality watch's ``[locality]`` policy and
        thresholds, as numamig.numa.locality.Policy's keyword arguments.
    :param locality_interval: seconds between the watch's looks.
    :param proc_root: where the watch finds QEMU processes.
    :param pci_alias: ``[pci] alias`` as configured (the resource
        tracker parses it, numa.pci.parse_aliases): what a new guest's
        ``pci_passthrough:alias`` names.
    :param device_detach_timeout: seconds a source waits for the guest
        to release its passed-through devices before a migration
        (``[compute] device_detach_timeout``).
    :param dirty_rate_sample_interval: seconds between background
        samples of the guests' dirty rates; 0: none
        (numamig.compute.dirty_rates).
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
    cpu_power: CPUPowerSettings
    locality: dict
    locality_interval: float
    proc_root: str
    pci_alias: tuple
    device_detach_timeout: float
    dirty_rate_sample_interval: int


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
        cpu_power=cpu_power_from_conf(conf),
        locality=locality_policy(conf.locality),
        locality_interval=conf.locality.interval,
        proc_root=conf.locality.proc_root,
        pci_alias=tuple(conf.pci.alias),
        device_detach_timeout=conf.compute.device_detach_timeout,
        dirty_rate_sample_interval=conf.compute.dirty_rate_sample_interval)


def locality_policy(group):
    """Policy keyword arguments from the ``[locality]`` options."""
    return {'mode': group.policy,
            'threshold': group.remote_share_threshold,
            'intervals': group.intervals_above,
            'pages_per_interval': group.pages_per_interval,
            'moves_per_guest': group.moves_per_guest,
            'flap_window': group.flap_window}
