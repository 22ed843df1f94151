"""Enumerated field types: CPU policies and migration states."""

from oslo_versionedobjects import fields


class CPUAllocationPolicy(fields.Enum):
    SHARED = 'shared'
    DEDICATED = 'dedicated'
    MIXED = 'mixed'
    ALL = (SHARED, DEDICATED, MIXED)

    def __init__(self):
        super().__init__(valid_values=self.ALL)


class CPUThreadAllocationPolicy(fields.Enum):
    PREFER = 'prefer'
    ISOLATE = 'isolate'
    REQUIRE = 'require'
    ALL = (PREFER, ISOLATE, REQUIRE)

    def __init__(self):
        super().__init__(valid_values=self.ALL)


class CPUEmulatorThreadsPolicy(fields.Enum):
    SHARE = 'share'
    ISOLATE = 'isolate'
    ALL = (SHARE, ISOLATE)

    def __init__(self):
        super().__init__(valid_values=self.ALL)


def _transitions(status):
    """The status transition table, named once here (objects.migration
    re-exports it as ALLOWED_TRANSITIONS) so the groups below follow it."""
    return {
        status.ACCEPTED: {status.QUEUED, status.ERROR, status.CANCELLED},
        # queued -> running and running -> completed: a source of compute
        # API 1.3 records the steps that can travel together at once
        # (preparing and post-migrating stay for older sources and the
        # reconciliation).
        status.QUEUED: {status.PREPARING, status.RUNNING, status.ERROR,
                        status.FAILED, status.CANCELLED},
        status.PREPARING: {status.RUNNING, status.FAILED, status.ERROR,
                           status.CANCELLED},
        status.RUNNING: {status.POST_MIGRATING, status.COMPLETED,
                         status.FAILED, status.ERROR, status.CANCELLED},
        status.POST_MIGRATING: {status.COMPLETED, status.ERROR,
                                status.FAILED},
        status.COMPLETED: set(),
        status.FAILED: set(),
        status.ERROR: set(),
        status.CANCELLED: set(),
    }


class MigrationStatus(fields.Enum):
    """Live-migration states, in the order a successful migration walks.

    The groups every module uses are named here, once; those that follow
    from the transition table are computed from it, so adding a status
    means placing it in TRANSITIONS and, if the table cannot tell, in
    NOT_STARTED (a unit test fails until every status is placed).
    """

    ACCEPTED = 'accepted'
    QUEUED = 'queued'
    PREPARING = 'preparing'
    RUNNING = 'running'
    POST_MIGRATING = 'post-migrating'
    COMPLETED = 'completed'
    FAILED = 'failed'
    ERROR = 'error'
    CANCELLED = 'cancelled'
    ALL = (ACCEPTED, QUEUED, PREPARING, RUNNING, POST_MIGRATING, COMPLETED,
           FAILED, ERROR, CANCELLED)
    TRANSITIONS = {}  # filled below, once the names exist
    # Ends: no transition leaves them.
    FINAL = ()
    # A migration in one of these still holds (or may still take) claims.
    IN_PROGRESS = ()
    # Ends other than success: what it held is released.
    UNSUCCESSFUL = ()
    # Before the source starts: nothing has been copied, a cancel is
    # only a status change.
    NOT_STARTED = (ACCEPTED, QUEUED)
    # The source has started: only the source (or a reconciliation of a
    # dead one) moves it on.
    STARTED = ()
    # Started and not yet copied over: what an abort can still stop.
    ABORTABLE = ()
    # The guest runs on the destination: nothing is left to copy.
    COPIED = ()

    def __init__(self):
        super().__init__(valid_values=self.ALL)


def _name_groups(status):
    table = _transitions(status)

    def ordered(names):
        return tuple(name for name in status.ALL if name in names)

    status.TRANSITIONS = table
    status.FINAL = ordered({s for s, nxt in table.items() if not nxt})
    status.IN_PROGRESS = ordered(set(table) - set(status.FINAL))
    status.UNSUCCESSFUL = ordered(set(status.FINAL) - {status.COMPLETED})
    status.STARTED = ordered(set(status.IN_PROGRESS) -
                             set(status.NOT_STARTED))
    # Started, and a cancel can still reach it.
    status.ABORTABLE = ordered({s for s in status.STARTED
                                if status.CANCELLED in table[s]})
    status.COPIED = ordered(set(status.STARTED) - set(status.ABORTABLE) |
                            {status.COMPLETED})


_name_groups(MigrationStatus)


class PowerState(fields.Enum):
    RUNNING = 'running'
    PAUSED = 'paused'
    SHUTDOWN = 'shutdown'
    CRASHED = 'crashed'
    UNKNOWN = 'unknown'
    ALL = (RUNNING, PAUSED, SHUTDOWN, CRASHED, UNKNOWN)

    def __init__(self):
        super().__init__(valid_values=self.ALL)


class CPUAllocationPolicyField(fields.BaseEnumField):
    AUTO_TYPE = CPUAllocationPolicy()


class CPUThreadAllocationPolicyField(fields.BaseEnumField):
    AUTO_TYPE = CPUThreadAllocationPolicy()


class CPUEmulatorThreadsPolicyField(fields.BaseEnumField):
    AUTO_TYPE = CPUEmulatorThreadsPolicy()


class MigrationStatusField(fields.BaseEnumField):
    AUTO_TYPE = MigrationStatus()


class PowerStateField(fields.BaseEnumField):
    AUTO_TYPE = PowerState()


__all__ = [
    'CPUAllocationPolicy', 'CPUThreadAllocationPolicy',
    'CPUEmulatorThreadsPolicy', 'MigrationStatus', 'PowerState',
    'CPUAllocationPolicyField', 'CPUThreadAllocationPolicyField',
    'CPUEmulatorThreadsPolicyField', 'MigrationStatusField',
    'PowerStateField',
]
