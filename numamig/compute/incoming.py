"""The incoming migrations a destination rolled back, by migration uuid.

A rollback ends a migration at its destination: the source then records
it failed or cancelled, and the guest stays on the source. A request to
define the guest here that arrives after it (an emulated migration's
``accept_emulated_migration`` delivered again, or delayed past the
source's timeout) would start a second copy of a guest that still runs
on its source. The destination remembers the migrations it rolled back
and refuses such a request; one lock orders each define against each
rollback, so a define either comes first (and the rollback removes its
copy) or is refused.
"""

import collections
import threading

# Rollbacks remembered: a redelivered message arrives within seconds or
# minutes, and each entry is one uuid.
MAX_REMEMBERED = 4096


class IncomingMigrations:
    """A bounded, thread-safe record of this host's rolled back arrivals.

    ``lock`` is held around a define of an arriving guest and around a
    rollback (re-entrant: a rollback's steps may define nothing but call
    back into code that takes it).
    """

    def __init__(self, max_remembered=MAX_REMEMBERED):
        self.lock = threading.RLock()
        self._rolled_back = collections.OrderedDict()
        self._max = max_remembered

    def mark_rolled_back(self, migration_uuid):
        with self.lock:
            self._rolled_back[migration_uuid] = True
            self._rolled_back.move_to_end(migration_uuid)
            while len(self._rolled_back) > self._max:
                self._rolled_back.popitem(last=False)

    def rolled_back(self, migration_uuid):
        """Whether this host rolled ``migration_uuid`` back."""
        with self.lock:
            return migration_uuid in self._rolled_back
