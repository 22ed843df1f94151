"""SQLAlchemy models of the conductor's database (the schema at head).

Scalar fields a query filters on are columns; nested versioned objects
(NUMA topologies, migration contexts, host reports) are stored as the JSON
of their versioned primitive, so a row written by an older release still
loads after an object version bump. The alembic revisions in
``numamig/db/alembic/versions`` create exactly this schema; a unit test
compares the two.
"""

import datetime
import json

import sqlalchemy as sa
from sqlalchemy import orm
from sqlalchemy.dialects import mysql


class JSONText(sa.types.TypeDecorator):
    """A JSON document in a text column (MEDIUMTEXT on MySQL/MariaDB).

    Plain text rather than a native JSON type: the three databases agree
    on text, and MySQL's 64 KiB TEXT is too small for a large host report.
    """

    impl = sa.Text
    cache_ok = True

    def load_dialect_impl(self, dialect):
        if dialect.name in ('mysql', 'mariadb'):
            return dialect.type_descriptor(mysql.MEDIUMTEXT())
        return dialect.type_descriptor(sa.Text())

    def process_bind_param(self, value, dialect):
        if value is None:
            return None
        # Key order is kept: refused_hosts lists hosts in the order tried.
        return json.dumps(value)

    def process_result_value(self, value, dialect):
        if value is None:
            return None
        return json.loads(value)


class UTCDateTime(sa.types.TypeDecorator):
    """A timestamp stored as naive UTC, read back as aware UTC.

    Microseconds are kept on MySQL/MariaDB too (DATETIME(6)), so that the
    order of status changes recorded within one second survives.
    """

    impl = sa.DateTime
    cache_ok = True

    def load_dialect_impl(self, dialect):
        if dialect.name in ('mysql', 'mariadb'):
            return dialect.type_descriptor(mysql.DATETIME(fsp=6))
        return dialect.type_descriptor(sa.DateTime())

    def process_bind_param(self, value, dialect):
        if value is None:
            return None
        if value.tzinfo is not None:
            value = value.astimezone(datetime.UTC)
        return value.replace(tzinfo=None)

    def process_result_value(self, value, dialect):
        if value is None:
            return None
        return value.replace(tzinfo=datetime.UTC)


UUID_LENGTH = 36
HOST_LENGTH = 255
# An operator's reason for disabling a host.
REASON_LENGTH = 255


class Base(orm.DeclarativeBase):
    """Declarative base of every numamig table."""


class TimestampMixin:
    created_at = sa.Column(UTCDateTime, nullable=False)
    updated_at = sa.Column(UTCDateTime, nullable=False)


class ComputeNode(TimestampMixin, Base):
    """A compute host and its last report (topology with usage)."""

    __tablename__ = 'compute_nodes'
    __table_args__ = (
        sa.UniqueConstraint('host', name='compute_nodes_host_uc'),
        sa.Index('compute_nodes_change_seq_idx', 'change_seq'),
    )

    id = sa.Column(sa.Integer, primary_key=True, autoincrement=True)
    host = sa.Column(sa.String(HOST_LENGTH), nullable=False)
    hypervisor_uri = sa.Column(sa.String(255), nullable=False)
    hypervisor_type = sa.Column(sa.String(32), nullable=False)
    service_version = sa.Column(sa.Integer, nullable=False)
    fingerprint = sa.Column(sa.String(64), nullable=False)
    reported_at = sa.Column(UTCDateTime, nullable=False)
    # The whole ComputeNodeReport primitive; the columns above duplicate
    # its scalars so that liveness and version queries need no JSON.
    report = sa.Column(JSONText, nullable=False)
    # Taken from the 'compute-node-reports' sequence at each write
    # (release 2): a conductor worker reads only the reports written
    # since the highest number it has seen.
    change_seq = sa.Column(sa.BigInteger, nullable=False, server_default='0')
    # Maintenance (release 2): set while an operator has the host
    # disabled (NULL: enabled), with the reason given. Reports never
    # write these columns.
    disabled_at = sa.Column(UTCDateTime, nullable=True)
    disabled_reason = sa.Column(sa.String(REASON_LENGTH), nullable=True)


class Instance(TimestampMixin, Base):
    """A guest, its NUMA placement and the claim a migration holds on it.

    ``revision`` grows by one on every write: an update names the revision
    it read, so two conductor workers can never both overwrite a record.
    ``migration_uuid`` and ``claim_host`` mirror the migration context's
    migration and destination, so that claims are set conditionally and
    found by host without reading JSON.
    """

    __tablename__ = 'instances'
    __table_args__ = (
        sa.UniqueConstraint('uuid', name='instances_uuid_uc'),
        sa.Index('instances_host_idx', 'host'),
        sa.Index('instances_migration_uuid_idx', 'migration_uuid'),
        sa.Index('instances_claim_host_idx', 'claim_host'),
    )

    id = sa.Column(sa.Integer, primary_key=True, autoincrement=True)
    uuid = sa.Column(sa.String(UUID_LENGTH), nullable=False)
    revision = sa.Column(sa.Integer, nullable=False)
    name = sa.Column(sa.String(255), nullable=False)
    project_id = sa.Column(sa.String(255), nullable=False)
    host = sa.Column(sa.String(HOST_LENGTH), nullable=True)
    vcpus = sa.Column(sa.Integer, nullable=False)
    memory_mb = sa.Column(sa.Integer, nullable=False)
    extra_specs = sa.Column(JSONText, nullable=False)
    image_properties = sa.Column(JSONText, nullable=False)
    numa_topology = sa.Column(JSONText, nullable=True)
    migration_context = sa.Column(JSONText, nullable=True)
    migration_uuid = sa.Column(sa.String(UUID_LENGTH), nullable=True)
    claim_host = sa.Column(sa.String(HOST_LENGTH), nullable=True)
    power_state = sa.Column(sa.String(16), nullable=False)
    task_state = sa.Column(sa.String(255), nullable=True)


class Migration(TimestampMixin, Base):
    """One live migration: hosts, status, progress, error, refusals and
    the result of its run."""

    __tablename__ = 'migrations'
    __table_args__ = (
        sa.UniqueConstraint('uuid', name='migrations_uuid_uc'),
        sa.Index('migrations_instance_uuid_idx', 'instance_uuid'),
        sa.Index('migrations_status_idx', 'status'),
        sa.Index('migrations_source_host_idx', 'source_host'),
        sa.Index('migrations_dest_host_idx', 'dest_host'),
        sa.Index('migrations_queue_idx', 'status', 'admitted_at'),
    )

    id = sa.Column(sa.Integer, primary_key=True, autoincrement=True)
    uuid = sa.Column(sa.String(UUID_LENGTH), nullable=False)
    instance_uuid = sa.Column(
        sa.String(UUID_LENGTH),
        sa.ForeignKey('instances.uuid', ondelete='CASCADE',
                      name='migrations_instance_uuid_fkey'),
        nullable=False)
    source_host = sa.Column(sa.String(HOST_LENGTH), nullable=False)
    dest_host = sa.Column(sa.String(HOST_LENGTH), nullable=True)
    requested_host = sa.Column(sa.String(HOST_LENGTH), nullable=True)
    status = sa.Column(sa.String(32), nullable=False)
    memory_total = sa.Column(sa.BigInteger, nullable=False)
    memory_processed = sa.Column(sa.BigInteger, nullable=False)
    memory_remaining = sa.Column(sa.BigInteger, nullable=False)
    disk_total = sa.Column(sa.BigInteger, nullable=False)
    disk_processed = sa.Column(sa.BigInteger, nullable=False)
    disk_remaining = sa.Column(sa.BigInteger, nullable=False)
    error = sa.Column(sa.Text, nullable=True)
    # {host: reason} of every destination that refused, in order tried.
    refused_hosts = sa.Column(JSONText, nullable=False)
    # The result of the run as the source reported it (release 2);
    # NULL until reported, and for rows of runs that never reported one.
    elapsed_ms = sa.Column(sa.BigInteger, nullable=True)
    downtime_ms = sa.Column(sa.BigInteger, nullable=True)
    emulated = sa.Column(sa.Boolean, nullable=True)
    post_copy = sa.Column(sa.Boolean, nullable=True)
    paused = sa.Column(sa.Boolean, nullable=True)
    # The admission queue (release 2): waiting migrations are
    # 'accepted' with no admitted_at, taken highest priority first, then
    # oldest first.
    priority = sa.Column(sa.Integer, nullable=False, server_default='0')
    admitted_at = sa.Column(UTCDateTime, nullable=True)
    # The lease of the conductor worker driving an admitted 'accepted'
    # migration (release 2): renewed while its task runs; once past,
    # the worker is gone (numamig.conductor.records.end_stalled_migrations).
    lease_expires_at = sa.Column(UTCDateTime, nullable=True)
    # Which conductor worker holds that lease ('<host>:<pid>'): only it
    # renews the lease, so a worker cut off from the database for longer
    # than a lease, whose migrations another worker ended meanwhile,
    # never extends a lease it lost. Kept after the migration moves on:
    # the record of which conductor drove its destination choice.
    lease_holder = sa.Column(sa.String(255), nullable=True)
    # A queued migration's start request (release 2): the
    # live-migrate data cast to its source, as a primitive; NULL once it
    # left 'queued' (numamig.conductor.restarts sends it again).
    start_request = sa.Column(JSONText, nullable=True)
    # Convergence (release 2): the policy chosen, then run; what it
    # did (a JSON list); the pre-flight prediction, read next to the
    # outcome above.
    convergence_policy = sa.Column(sa.String(64), nullable=True)
    convergence_actions = sa.Column(JSONText, nullable=True)
    prediction = sa.Column(sa.String(32), nullable=True)
    predicted_elapsed_ms = sa.Column(sa.BigInteger, nullable=True)
    predicted_downtime_ms = sa.Column(sa.BigInteger, nullable=True)
    sampled_dirty_rate = sa.Column(sa.BigInteger, nullable=True)
    # virtio-mem memory reclaimed from other guests to place it (release
    # 2): a JSON list of MigrationReclaim entries (MEMORY_RECLAIM_KEYS).
    memory_reclaim = sa.Column(JSONText, nullable=True)
    # The post-copy recovery history (release 2): a JSON list of
    # {event, at, attempt, detail}; NULL where post-copy never broke.
    postcopy_recovery = sa.Column(JSONText, nullable=True)
    # Where the migration's threads ran (release 2): a JSON dict per
    # host side (numamig.objects.migration_threads); NULL: not recorded.
    migration_threads = sa.Column(JSONText, nullable=True)
    # The destination's verification of the guest's passed-through
    # devices after the arrival (release 2): {'host': ..., 'devices':
    # [DEVICE_KEYS entries]} (numamig.objects.migration_satellites.
    # MigrationDevices); NULL: nothing verified.
    migration_devices = sa.Column(JSONText, nullable=True)


class MigrationStatusChange(Base):
    """One entry of a migration's status history."""

    __tablename__ = 'migration_status_history'
    __table_args__ = (
        sa.Index('migration_status_history_migration_id_idx',
                 'migration_id'),
    )

    id = sa.Column(sa.Integer, primary_key=True, autoincrement=True)
    migration_id = sa.Column(
        sa.Integer,
        sa.ForeignKey('migrations.id', ondelete='CASCADE',
                      name='migration_status_history_migration_id_fkey'),
        nullable=False)
    status = sa.Column(sa.String(32), nullable=False)
    changed_at = sa.Column(UTCDateTime, nullable=False)
    detail = sa.Column(sa.Text, nullable=True)


class Drain(TimestampMixin, Base):
    """A drain of a host (release 2): its moves are DrainMoves.

    ``revision`` grows by one on every change of the drain or of one of
    its moves, so that a waiter knows when to look again.
    """

    __tablename__ = 'drains'
    __table_args__ = (
        sa.UniqueConstraint('uuid', name='drains_uuid_uc'),
        sa.Index('drains_host_idx', 'host'),
        sa.Index('drains_status_idx', 'status'),
    )

    id = sa.Column(sa.Integer, primary_key=True, autoincrement=True)
    uuid = sa.Column(sa.String(UUID_LENGTH), nullable=False)
    host = sa.Column(sa.String(HOST_LENGTH), nullable=False)
    status = sa.Column(sa.String(32), nullable=False)
    revision = sa.Column(sa.Integer, nullable=False)
    parallel = sa.Column(sa.Integer, nullable=False)
    priority = sa.Column(sa.Integer, nullable=False)
    # Whether the host was disabled before the drain disabled it.
    was_disabled = sa.Column(sa.Boolean, nullable=False)
    # {'to': [hosts] or None, 'keep_free_nodes': N}: what re-plans honour
    # (a defragmentation's: the guest's size and specs, its placement).
    options = sa.Column(JSONText, nullable=False)
    error = sa.Column(sa.Text, nullable=True)
    ended_at = sa.Column(UTCDateTime, nullable=True)
    # 'drain' or 'defragment' (release 2).
    kind = sa.Column(sa.String(16), nullable=False, server_default='drain')
    # A defragmentation's finding once its moves ended (release 2).
    outcome = sa.Column(JSONText, nullable=True)


class DrainMove(TimestampMixin, Base):
    """One guest of a drain: where the plan sends it, and how it went."""

    __tablename__ = 'drain_moves'
    __table_args__ = (
        sa.UniqueConstraint('drain_uuid', 'instance_uuid',
                            name='drain_moves_instance_uc'),
        sa.Index('drain_moves_migration_uuid_idx', 'migration_uuid'),
    )

    id = sa.Column(sa.Integer, primary_key=True, autoincrement=True)
    drain_uuid = sa.Column(
        sa.String(UUID_LENGTH),
        sa.ForeignKey('drains.uuid', ondelete='CASCADE',
                      name='drain_moves_drain_uuid_fkey'),
        nullable=False)
    # The plan's order: moves to one destination start in this order.
    position = sa.Column(sa.Integer, nullable=False)
    instance_uuid = sa.Column(sa.String(UUID_LENGTH), nullable=False)
    name = sa.Column(sa.String(255), nullable=False)
    status = sa.Column(sa.String(32), nullable=False)
    planned_host = sa.Column(sa.String(HOST_LENGTH), nullable=True)
    # The planned InstanceNUMATopology's primitive (NULL: no NUMA).
    planned_topology = sa.Column(JSONText, nullable=True)
    migration_uuid = sa.Column(sa.String(UUID_LENGTH), nullable=True)
    # Migrations started for it (one, plus one per re-plan).
    attempts = sa.Column(sa.Integer, nullable=False)
    # {host: reason} of the destinations that refused it.
    refused = sa.Column(JSONText, nullable=False)
    dest_host = sa.Column(sa.String(HOST_LENGTH), nullable=True)
    error = sa.Column(sa.Text, nullable=True)
    started_at = sa.Column(UTCDateTime, nullable=True)
    ended_at = sa.Column(UTCDateTime, nullable=True)
    # The host its guest leaves (release 2); NULL: the drain's host.
    source_host = sa.Column(sa.String(HOST_LENGTH), nullable=True)


class Lock(Base):
    """A named row that transactions lock to run one at a time.

    Admission counts the migrations in flight and then admits more; two
    conductor workers doing that at once under READ COMMITTED would both
    see room for the last slot. Each such transaction first locks its
    row (``SELECT ... FOR UPDATE``; SQLite's ``BEGIN IMMEDIATE`` already
    serializes writers).
    """

    __tablename__ = 'locks'

    name = sa.Column(sa.String(64), primary_key=True)


class Sequence(Base):
    """A named counter a transaction increments and reads back.

    The increment locks the row until the transaction ends, so numbers
    are handed out in commit order: once a reader has seen number N,
    every row numbered below N is committed and visible to it.
    """

    __tablename__ = 'sequences'

    name = sa.Column(sa.String(64), primary_key=True)
    value = sa.Column(sa.BigInteger, nullable=False)


class MemoryChange(TimestampMixin, Base):
    """One virtio-mem memory change an operator asked for (release 2).

    ``uuid`` is the client's: a request delivered again finds its row
    and gets the recorded answer instead of changing memory twice.
    ``request`` is what was asked (instance or host, node, size, exact),
    ``plan`` the numa.reclaim plan made for it, ``result`` what the
    guests really did (None while it runs); ``status`` is 'running',
    'done', 'partial' (some guests refused) or 'failed'.
    """

    __tablename__ = 'memory_changes'
    __table_args__ = (
        sa.Index('memory_changes_host_idx', 'host'),
    )

    uuid = sa.Column(sa.String(36), primary_key=True)
    host = sa.Column(sa.String(HOST_LENGTH), nullable=False)
    status = sa.Column(sa.String(16), nullable=False)
    request = sa.Column(JSONText, nullable=False)
    plan = sa.Column(JSONText, nullable=True)
    result = sa.Column(JSONText, nullable=True)


class InstanceLiveMigratable(Base):
    """Whether a guest could be live-migrated now, as the conductor's
    standing answer last found it (numamig.scheduler.migratable).

    Kept apart from ``instances``: the answer changes with other hosts'
    reports, and writing it must never bump an instance's ``revision``
    under a migration that holds it. ``status`` is 'yes', 'degraded' or
    'no'; ``reasons`` a list of {'kind', 'detail'}; ``witness`` the host
    the answer rests on; ``changed_at`` when the status last changed,
    ``checked_at`` when it was last looked at whole.
    """

    __tablename__ = 'instance_live_migratable'
    __table_args__ = (
        sa.Index('instance_live_migratable_status_idx', 'status'),
    )

    instance_uuid = sa.Column(sa.String(UUID_LENGTH), primary_key=True)
    status = sa.Column(sa.String(16), nullable=False)
    reasons = sa.Column(JSONText, nullable=False)
    witness = sa.Column(sa.String(HOST_LENGTH), nullable=True)
    changed_at = sa.Column(UTCDateTime, nullable=False)
    checked_at = sa.Column(UTCDateTime, nullable=False)
