"""The outgoing migrations a compute agent is running, by migration uuid.

The RPC endpoints register a migration before it can move past
``queued`` and unregister it once it ended; the periodic reconciliation
treats a started migration nobody registered as abandoned, and an abort
or a force-complete finds the running job here. One lock keeps the three
in step.
"""

import threading


class OutgoingMigrations:
    """A thread-safe registry of this host's outgoing SourceMigrations."""

    def __init__(self):
        self._jobs = {}
        self._lock = threading.Lock()

    def register(self, job):
        """Register ``job``; False if its migration is already here."""
        with self._lock:
            if job.migration.uuid in self._jobs:
                return False
            self._jobs[job.migration.uuid] = job
            return True

    def unregister(self, migration_uuid):
        with self._lock:
            self._jobs.pop(migration_uuid, None)

    def get(self, migration_uuid):
        """The job running ``migration_uuid`` here, or None."""
        with self._lock:
            return self._jobs.get(migration_uuid)

    def uuids(self):
        """uuids of the migrations this host is running as source."""
        with self._lock:
            return set(self._jobs)

    def jobs(self):
        """The SourceMigrations this host is running."""
        with self._lock:
            return list(self._jobs.values())
