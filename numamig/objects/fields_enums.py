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


class MigrationStatus(fields.Enum):
    """Live-migration states, in the order a successful migration walks."""

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
    # A migration in one of these still holds (or may still take) claims.
    IN_PROGRESS = (ACCEPTED, QUEUED, PREPARING, RUNNING, POST_MIGRATING)
    FINAL = (COMPLETED, FAILED, ERROR, CANCELLED)

    def __init__(self):
        super().__init__(valid_values=self.ALL)


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
