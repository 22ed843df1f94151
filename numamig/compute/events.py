"""What a compute agent tells as it happens, for its notifier.

The conductor notifies what its database committed; some things happen
only on a host and are never recorded as they happen: a convergence
policy's action while the copy runs (the record gets the list with the
result), and the migration guard's decision on an incoming migration
(made in libvirt's hook, kept in the guard's log). The agent hands these
to its listeners with the same shape as the database's changes (kind,
record, detail), and numamig.notifications turns each into a
notification. Emitting never blocks and never raises: a listener queues.
"""

import collections
import dataclasses

from oslo_log import log as logging

LOG = logging.getLogger(__name__)

# The kinds of event, named as numamig.notifications reads them.
POLICY_ACTION = 'policy-action'
GUARD_DECISION = 'guard-decision'
LOCALITY_MOVE = 'locality-move'
DEVICE_LATE_RELEASE = 'device-late-release'

Event = collections.namedtuple('Event', ('kind', 'record', 'detail'))


@dataclasses.dataclass(frozen=True)
class PolicyAction:
    """One convergence policy action on an outgoing migration.

    :ivar kind: the action (numamig.convergence.policy: downtime,
        post_copy, pause, abort, auto_converge).
    :ivar outcome: applied, failed or observed (an observe-only policy).
    :ivar line: the action as the migration's record will list it.
    """

    migration_uuid: str
    instance_uuid: str
    source_host: str
    dest_host: str
    policy: str
    kind: str
    outcome: str
    line: str


@dataclasses.dataclass(frozen=True)
class GuardDecision:
    """The migration guard's decision on a migration into ``host``.

    :ivar action: unchanged, rewritten or refused.
    :ivar at: when, as the guard's log wrote it (the host's local time).
    """

    host: str
    guest: str
    instance_uuid: str
    action: str
    reason: str
    at: str


@dataclasses.dataclass(frozen=True)
class DeviceLateRelease:
    """A passed-through device the guest released after its migration's
    unplug had timed out (the migration failed, the guest stayed here),
    and what became of it.

    :ivar outcome: replugged (plugged back into the guest) or lost (it
        could not be: the guest runs without it).
    """

    host: str
    instance_uuid: str
    migration_uuid: str
    address: str
    alias: str
    outcome: str
    reason: str


class Events:
    """An agent's event listeners; each is called with a list of Events
    (as numamig.db.api.Database calls its change listeners)."""

    def __init__(self):
        self.listeners = []

    def emit(self, kind, record, detail=None):
        for listener in list(self.listeners):
            try:
                listener([Event(kind, record, detail)])
            except Exception:  # noqa: BLE001 - never fail what happened
                LOG.exception("A %s event was not passed on", kind)
