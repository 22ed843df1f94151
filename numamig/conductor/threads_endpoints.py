"""The conductor's endpoint for where a migration's threads ran.

Each host of a live migration pins QEMU's migration threads to CPUs it
chose (numamig.compute.migration_threads) and reports, once its part
ends, which CPUs and where each thread was allowed to run (API 1.16, a
cast). The report is checked for shape and size where it arrives, so a
host cannot make the record grow without bound.
"""

from oslo_log import log as logging

from numamig import exception
from numamig import wire
from numamig.db import migration_threads as db_threads
from numamig.objects import migration_threads as record_shape

LOG = logging.getLogger(__name__)

SIDE = wire.one_of(record_shape.SIDES)
RECORD = wire.Kind(
    f"one host's record of at most {record_shape.MAX_THREADS} threads "
    f"and {record_shape.MAX_CPUS} CPUs per list "
    f"({', '.join(record_shape.KEYS)})",
    lambda v: record_shape.side_problem(v) is None)


class ThreadsEndpoints:
    """The manager sets ``db``."""

    @wire.args(migration_uuid=wire.UUID, side=SIDE, record=RECORD)
    def migration_record_threads(self, ctxt, migration_uuid, side, record):
        """Record one host's side of where a migration's threads ran (a
        cast). Idempotent: a repeat changes nothing."""
        try:
            if db_threads.record_threads(self.db, migration_uuid, side,
                                         record):
                LOG.info("Migration %s: %s threads: %s", migration_uuid,
                         side, record_shape.describe(record))
        except (exception.InvalidMigrationResult,
                exception.MigrationNotFound) as exc:
            LOG.warning("Where the threads of %s ran was not recorded: %s",
                        migration_uuid, exc)
