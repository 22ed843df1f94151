"""What the conductor's flows use, and nothing more.

The record-keeping rules (records, maintenance) and the tasks (live
migration, dry run, build) used to receive the whole ConductorManager.
They receive a ``Worker`` instead: the parts of one conductor worker
they read, fixed when it starts, with its settings (one frozen
ConductorSettings built from configuration). A flow
cannot call an RPC endpoint, and a unit test builds exactly these parts.
"""

import dataclasses
import threading
import typing

from numamig import releases
from numamig.conductor import settings as settings_mod
from numamig.scheduler import stored


class ReportCursor:
    """How far this worker's host cache has read the stored reports, and
    the reports waiting to be written.

    ``seen`` is the highest report change number taken (-1: none yet);
    hold ``lock`` while reading reports and moving it (see
    records.sync_reports), so that two threads never take the same ones.
    ``held`` is, per host, the change number of the report the cache
    holds (as stored by this worker or read back): reports carry whole
    seconds, so a stored report of the same second as the cached one is
    newer only if its change number is higher.

    ``pending`` holds, per host, the newest report not written yet and
    the futures of the RPC requests waiting for it; ``writers`` reports
    threads are writing them, at most ``max_writers`` ([conductor]
    report_writers; None: one, for a Worker a test builds by hand). Both
    under ``intake``.
    """

    def __init__(self, max_writers=None):
        self.seen = -1
        self.held = {}
        self.lock = threading.Lock()
        self.intake = threading.Lock()
        self.pending = {}
        self.writers = 0
        self.max_writers = max_writers or 1
        # Builds the stored reports read back for the cache (under
        # ``lock``): straight into the cache's form, not through OVO.
        self.builder = stored.ReportBuilder()


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
    :param settings: the worker's ConductorSettings (from its
        configuration; conductor.settings).
    :param reports: how far the host cache has read the stored reports.
    """

    db: object
    cache: object
    scheduler: object
    compute_api: object
    release: releases.Release
    migration_ended: typing.Callable
    settings: settings_mod.ConductorSettings
    reports: ReportCursor = dataclasses.field(default_factory=ReportCursor)
