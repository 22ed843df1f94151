"""What the conductor's flows use, and nothing more.

The record-keeping rules (records, maintenance) and the tasks (live
migration, dry run, build) used to receive the whole ConductorManager.
They receive a ``Worker`` instead: the parts of one conductor worker
they read, fixed when it starts, with its few settings by name. A flow
cannot call an RPC endpoint, and a unit test builds exactly these parts.
"""

import dataclasses
import threading
import typing

from numamig import releases
from numamig.convergence import policy as convergence
from numamig.db import queue

# Admission when the service gives none (tests driving a manager).
DEFAULT_ADMISSION = queue.Limits(total=64, per_source=4, per_dest=4,
                                 queued=10000)


class ReportCursor:
    """How far this worker's host cache has read the stored reports.

    ``seen`` is the highest report change number taken (-1: none yet);
    hold ``lock`` while reading reports and moving it (see
    records.sync_reports), so that two threads never take the same ones.
    ``held`` is, per host, the change number of the report the cache
    holds (as stored by this worker or read back): reports carry whole
    seconds, so a stored report of the same second as the cached one is
    newer only if its change number is higher.
    """

    def __init__(self):
        self.seen = -1
        self.held = {}
        self.lock = threading.Lock()


@dataclasses.dataclass(frozen=True)
class Worker:
    """One conductor worker as its flows see it.

    :param db: the numamig.db.api.Database.
    :param cache: the scheduler's HostStateCache.
    :param scheduler: the Scheduler choosing destinations.
    :param compute_api: the compute RPC client (capped by upgrade levels).
    :param release: the release the conductor runs as (numamig.releases;
        the current one but in upgrade tests).
    :param migration_ended: called with a Migration that reached a final
        status here (frees its admission slot, wakes listeners).
    :param migrate_max_retries: destinations tried after the first.
    :param check_timeout: seconds a destination's check may take.
    :param limits: NUMALimits for every host, or None.
    :param enable_numa_live_migration_workaround: migrate NUMA guests
        even when a host of the release before takes part.
    :param admission: queue.Limits on migrations at once.
    :param foreign_numa_specs: keys of numamig's spec namespaces it
        accepts on a new guest without reading them.
    :param migration_policies: {name: Policy} the migrations may run
        under (numamig.convergence.policy.catalog).
    :param default_migration_policy: the name of the one a migration
        runs under when neither its request, flavor nor image names one.
    :param convergence_prediction: 'off', 'record', 'refuse' or
        'choose' (see [conductor] convergence_prediction).
    :param convergence_fallback_policies: the names 'choose' tries.
    :param virtio_mem: conductor.memory.Settings ([virtio_mem]: resize
        deadline, bounds, reclaim for placements); None: the defaults.
    """

    db: object
    cache: object
    scheduler: object
    compute_api: object
    release: releases.Release
    migration_ended: typing.Callable
    migrate_max_retries: int
    check_timeout: float
    limits: object = None
    enable_numa_live_migration_workaround: bool = False
    admission: queue.Limits = DEFAULT_ADMISSION
    foreign_numa_specs: tuple = ()
    migration_policies: dict = dataclasses.field(
        default_factory=lambda: convergence.catalog(()))
    default_migration_policy: str = convergence.TIMER
    convergence_prediction: str = 'off'
    convergence_fallback_policies: tuple = (convergence.NEVER_PAUSE,
                                            convergence.FINISH)
    reports: ReportCursor = dataclasses.field(default_factory=ReportCursor)
    virtio_mem: typing.Any = None
