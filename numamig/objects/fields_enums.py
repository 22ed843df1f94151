"""Enumerated field types: CPU policies and migration states.

An older peer's enum knows fewer values, and OVO's enum coercion refuses
the rest, so a value an older peer cannot parse must never reach it:
each enum says what such a peer gets instead (BackportableEnum), and
each object says in which of its versions a value arrived
(``obj_enum_values``, see numamig.objects.base).
"""

from oslo_versionedobjects import fields


class BackportableEnum(fields.Enum):
    """An enum whose newer values an older peer may not parse.

    Sent to a peer reading an object version that predates a value, the
    value becomes ``OLDER[value]``, else ``FALLBACK``; with neither it
    is refused (the object is not sent), because a guess would be
    acted on as if true. Each subclass says which it chose and why.
    """

    # A value added later -> the older value a peer without it is sent.
    OLDER = {}
    # Sent for a later value OLDER does not name; None: refuse it.
    FALLBACK = None

    def __init__(self):
        super().__init__(valid_values=self.ALL)

    def older_value(self, value):
        """What a peer lacking ``value`` is sent; None: refuse to send."""
        return self.OLDER.get(value, self.FALLBACK)


class CPUAllocationPolicy(BackportableEnum):
    """Refused, never mapped: a policy decides which pCPUs a guest may
    use, and an older peer given a stand-in (``mixed`` sent as
    ``dedicated``) would claim or pin differently from what was asked."""

    SHARED = 'shared'
    DEDICATED = 'dedicated'
    MIXED = 'mixed'
    ALL = (SHARED, DEDICATED, MIXED)


class CPUThreadAllocationPolicy(BackportableEnum):
    """Refused, never mapped: SMT sibling use is part of the placement
    an older peer would otherwise compute wrongly."""

    PREFER = 'prefer'
    ISOLATE = 'isolate'
    REQUIRE = 'require'
    ALL = (PREFER, ISOLATE, REQUIRE)


class CPUEmulatorThreadsPolicy(BackportableEnum):
    """Refused, never mapped: it decides whether a pCPU is reserved for
    emulator threads, i.e. what an older peer claims."""

    SHARE = 'share'
    ISOLATE = 'isolate'
    ALL = (SHARE, ISOLATE)


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
        # running -> postcopy-paused: the post-copy lost its stream and
        # its recovery gave up (or a reconciliation found it so).
        status.RUNNING: {status.POST_MIGRATING, status.COMPLETED,
                         status.POSTCOPY_PAUSED, status.FAILED, status.ERROR,
                         status.CANCELLED},
        # The guest is split between the hosts: an operator's resume
        # runs it again (-> running); a reconciliation that finds the
        # guest arrived completes it, one that finds it on neither host
        # ends it ``error``. Never failed or cancelled: nothing can be
        # rolled back.
        status.POSTCOPY_PAUSED: {status.RUNNING, status.COMPLETED,
                                 status.ERROR},
        status.POST_MIGRATING: {status.COMPLETED, status.ERROR,
                                status.FAILED},
        status.COMPLETED: set(),
        status.FAILED: set(),
        status.ERROR: set(),
        status.CANCELLED: set(),
    }


class MigrationStatus(BackportableEnum):
    """Live-migration states, in the order a successful migration walks.

    The groups every module uses are named here, once; those that follow
    from the transition table are computed from it, so adding a status
    means placing it in TRANSITIONS and, if the table cannot tell, in
    NOT_STARTED or HALTED (a unit test fails until every status is
    placed).

    Mapped, never refused: every listing, wait and status record of a
    migration carries its status, so refusing would make an older peer
    lose the whole migration. A new status must refine one an older peer
    knows (as queued refined accepted) and name it in OLDER; the older
    peer then sees the state it would have recorded, whose transitions
    and groups still hold (a unit test fails until it is named).
    """

    ACCEPTED = 'accepted'
    QUEUED = 'queued'
    PREPARING = 'preparing'
    RUNNING = 'running'
    POSTCOPY_PAUSED = 'postcopy-paused'
    POST_MIGRATING = 'post-migrating'
    COMPLETED = 'completed'
    FAILED = 'failed'
    ERROR = 'error'
    CANCELLED = 'cancelled'
    ALL = (ACCEPTED, QUEUED, PREPARING, RUNNING, POSTCOPY_PAUSED,
           POST_MIGRATING, COMPLETED, FAILED, ERROR, CANCELLED)
    # postcopy-paused (Migration 1.1, release 2) refines running: a
    # release-1 peer sees a migration in progress whose source drives
    # it, holding both claims, which is what it is (the older peer's own
    # rules for a running migration whose guest is paused in a broken
    # post-copy leave it alone or try to end it, which the table then
    # refuses).
    OLDER = {POSTCOPY_PAUSED: RUNNING}
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
    # Started, but nothing moves it on until an operator asks: it holds
    # both hosts' claims and counts toward no admission limit (no copy
    # runs). The table cannot tell a wait for an operator from a step.
    HALTED = (POSTCOPY_PAUSED,)
    # The source has started: only the source (or a reconciliation of a
    # dead one) moves it on.
    STARTED = ()
    # Started and not yet copied over: what an abort can still stop.
    ABORTABLE = ()
    # The guest runs on the destination: nothing is left to copy.
    COPIED = ()
    # In progress and not halted: what admission limits count.
    ACTIVE = ()
    # Where a wait for a migration's outcome stops: it ended, or only an
    # operator can move it on.
    SETTLED = ()


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
    status.COPIED = ordered(set(status.STARTED) - set(status.ABORTABLE) -
                            set(status.HALTED) | {status.COMPLETED})
    status.ACTIVE = ordered(set(status.IN_PROGRESS) - set(status.HALTED))
    status.SETTLED = ordered(set(status.FINAL) | set(status.HALTED))


_name_groups(MigrationStatus)


class PowerState(BackportableEnum):
    """Mapped to ``unknown``: the power state is what the hypervisor last
    reported, only shown and compared with the next report; ``unknown``
    is already what a peer gets when it cannot tell, and refusing would
    hide the whole instance from it."""

    RUNNING = 'running'
    PAUSED = 'paused'
    SHUTDOWN = 'shutdown'
    CRASHED = 'crashed'
    UNKNOWN = 'unknown'
    ALL = (RUNNING, PAUSED, SHUTDOWN, CRASHED, UNKNOWN)
    FALLBACK = UNKNOWN


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
    'BackportableEnum', 'CPUAllocationPolicy', 'CPUThreadAllocationPolicy',
    'CPUEmulatorThreadsPolicy', 'MigrationStatus', 'PowerState',
    'CPUAllocationPolicyField', 'CPUThreadAllocationPolicyField',
    'CPUEmulatorThreadsPolicyField', 'MigrationStatusField',
    'PowerStateField',
]
