"""Release 2: NUMA-aware live migration's records, queue, drains, memory.

Revision ID: release2 (release 2; ``numamig.db.revisions.RELEASE_2``)
Revises: 0001 (release 1)
Create Date: 2026-11-28

Upgrades a release-1 database to release 2's schema in one step. The
id is a name, not the next number: release 2's development went through
revisions 0002 to 0014, which no release shipped, and a database synced
to one of them must not be taken for a release-2 database
(``numamig.db.revisions.DEVELOPMENT`` names them so that commands say
to recreate such a database).

What release 2 adds, and why:

* ``compute_nodes.change_seq`` (and its index) with the
  ``sequences`` table and its 'compute-node-reports' row that hands the
  numbers out: a conductor worker reads only the reports written since
  it last looked, so its work per migration no longer grows with the
  hosts. Hosts reported at release 1 get 0, which every worker reads at
  its start.
* ``compute_nodes.disabled_at``/``disabled_reason``: hosts disabled for
  maintenance (``numamig-manage host disable``), which the scheduler
  never chooses; agents' reports never write them. Release-1 hosts are
  enabled (NULL).
* On ``migrations``, all nullable unless said otherwise, so that rows
  recorded at release 1 keep every value and read back with none of
  the new facts:

  - the run's result (``elapsed_ms``, ``downtime_ms``, ``emulated``,
    ``post_copy``, ``paused``);
  - the admission queue: ``priority`` (NOT NULL, default 0, the routine
    priority) and ``admitted_at`` (with the ``migrations_queue_idx``
    index on status and admission). Every release-1 migration was
    started at once, so its row is made admitted at its creation
    (``admitted_at = created_at``): none is taken as waiting;
  - ``lease_expires_at``, the lease of the conductor worker driving an
    admitted migration (release-1 rows have none and are judged by
    their age), and ``lease_holder``, which worker holds it: only that
    worker renews it, and the records say which conductor drove the
    migration and which one ended it once the lease ran out;
  - the convergence policy and its actions, and the pre-flight
    prediction (``convergence_policy``, ``convergence_actions``,
    ``prediction``, ``predicted_elapsed_ms``,
    ``predicted_downtime_ms``, ``sampled_dirty_rate``);
  - ``start_request``, a queued migration's live-migrate data, kept
    until its source takes it so that a lost start is sent again
    (release-1 rows have none: the stalled-migration sweep ends them);
  - ``memory_reclaim`` (virtio-mem memory reclaimed to place the
    guest), ``postcopy_recovery`` (a broken post-copy stream's resume
    history), ``migration_threads`` (where the migration's QEMU
    threads ran, per host) and ``migration_devices`` (the destination's
    verification of the guest's passed-through devices).
* ``locks`` with its 'migration-admission' and 'host-drains' rows: the
  rows admission transactions and new drains lock, so that those
  decisions are one step across conductor workers.
* ``drains`` and ``drain_moves``: host drains and defragmentations
  (``kind``), each guest's move in the plan's order, kept so that they
  survive a conductor restart.
* ``memory_changes``: virtio-mem memory changes an operator asked for,
  keyed by the client's uuid so that a request delivered twice changes
  memory once.
* ``instance_live_migratable``: each guest's standing live-migratable
  answer, apart from ``instances`` so that writing it never bumps an
  instance's revision.

Adding nullable columns, or NOT NULL ones with a server default, copies
no table on any of the three databases, so release-1 rows are never
rewritten (but for the one UPDATE above). Columns are added in the
order the development revisions added them, and the new tables list
theirs in that order too, so the schema is the one those revisions
built (tests/functional/db/test_schema_upgrade.py compares it).
"""

from alembic import op
import sqlalchemy as sa

from numamig.db import models

revision = 'release2'
down_revision = '0001'
branch_labels = None
depends_on = None

REPORTS = 'compute-node-reports'
ADMISSION_LOCK = 'migration-admission'
DRAIN_LOCK = 'host-drains'

_MIGRATION_COLUMNS = (
    # The run's result.
    ('elapsed_ms', sa.BigInteger), ('downtime_ms', sa.BigInteger),
    ('emulated', sa.Boolean), ('post_copy', sa.Boolean),
    ('paused', sa.Boolean),
)
_MIGRATION_LATER_COLUMNS = (
    ('lease_expires_at', models.UTCDateTime),
    ('lease_holder', sa.String(255)),
    # Convergence and the pre-flight prediction.
    ('convergence_policy', sa.String(64)),
    ('convergence_actions', models.JSONText),
    ('prediction', sa.String(32)),
    ('predicted_elapsed_ms', sa.BigInteger),
    ('predicted_downtime_ms', sa.BigInteger),
    ('sampled_dirty_rate', sa.BigInteger),
    ('start_request', models.JSONText),
    ('memory_reclaim', models.JSONText),
    ('postcopy_recovery', models.JSONText),
    ('migration_threads', models.JSONText),
    ('migration_devices', models.JSONText),
)


def _timestamps():
    return [sa.Column('created_at', models.UTCDateTime, nullable=False),
            sa.Column('updated_at', models.UTCDateTime, nullable=False)]


def upgrade():
    _compute_nodes()
    _migrations()
    locks = op.create_table(
        'locks', sa.Column('name', sa.String(64), primary_key=True))
    op.bulk_insert(locks, [{'name': ADMISSION_LOCK}, {'name': DRAIN_LOCK}])
    _drains()
    _memory_changes()
    _live_migratable()


def _compute_nodes():
    op.add_column('compute_nodes', sa.Column(
        'change_seq', sa.BigInteger, nullable=False, server_default='0'))
    op.create_index('compute_nodes_change_seq_idx', 'compute_nodes',
                    ['change_seq'])
    sequences = op.create_table(
        'sequences', sa.Column('name', sa.String(64), primary_key=True),
        sa.Column('value', sa.BigInteger, nullable=False))
    op.bulk_insert(sequences, [{'name': REPORTS, 'value': 0}])
    op.add_column('compute_nodes', sa.Column(
        'disabled_at', models.UTCDateTime, nullable=True))
    op.add_column('compute_nodes', sa.Column(
        'disabled_reason', sa.String(models.REASON_LENGTH), nullable=True))


def _migrations():
    for name, type_ in _MIGRATION_COLUMNS:
        op.add_column('migrations', sa.Column(name, type_, nullable=True))
    op.add_column('migrations', sa.Column(
        'priority', sa.Integer, nullable=False, server_default='0'))
    op.add_column('migrations', sa.Column(
        'admitted_at', models.UTCDateTime, nullable=True))
    # Release 1 started every migration at once: admitted when created.
    op.execute("UPDATE migrations SET admitted_at = created_at")
    op.create_index('migrations_queue_idx', 'migrations',
                    ['status', 'admitted_at'])
    for name, type_ in _MIGRATION_LATER_COLUMNS:
        op.add_column('migrations', sa.Column(name, type_, nullable=True))


def _drains():
    op.create_table(
        'drains',
        sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
        sa.Column('uuid', sa.String(models.UUID_LENGTH), nullable=False),
        sa.Column('host', sa.String(models.HOST_LENGTH), nullable=False),
        sa.Column('status', sa.String(32), nullable=False),
        sa.Column('revision', sa.Integer, nullable=False),
        sa.Column('parallel', sa.Integer, nullable=False),
        sa.Column('priority', sa.Integer, nullable=False),
        sa.Column('was_disabled', sa.Boolean, nullable=False),
        sa.Column('options', models.JSONText, nullable=False),
        sa.Column('error', sa.Text, nullable=True),
        sa.Column('ended_at', models.UTCDateTime, nullable=True),
        *_timestamps(),
        # 'drain' (empty the host) or 'defragment' (make room on it).
        sa.Column('kind', sa.String(16), nullable=False,
                  server_default='drain'),
        # What a defragmentation found once its moves ended.
        sa.Column('outcome', models.JSONText, nullable=True),
        sa.UniqueConstraint('uuid', name='drains_uuid_uc'))
    op.create_index('drains_host_idx', 'drains', ['host'])
    op.create_index('drains_status_idx', 'drains', ['status'])
    op.create_table(
        'drain_moves',
        sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
        sa.Column('drain_uuid', sa.String(models.UUID_LENGTH),
                  sa.ForeignKey('drains.uuid', ondelete='CASCADE',
                                name='drain_moves_drain_uuid_fkey'),
                  nullable=False),
        sa.Column('position', sa.Integer, nullable=False),
        sa.Column('instance_uuid', sa.String(models.UUID_LENGTH),
                  nullable=False),
        sa.Column('name', sa.String(255), nullable=False),
        sa.Column('status', sa.String(32), nullable=False),
        sa.Column('planned_host', sa.String(models.HOST_LENGTH),
                  nullable=True),
        sa.Column('planned_topology', models.JSONText, nullable=True),
        sa.Column('migration_uuid', sa.String(models.UUID_LENGTH),
                  nullable=True),
        sa.Column('attempts', sa.Integer, nullable=False),
        sa.Column('refused', models.JSONText, nullable=False),
        sa.Column('dest_host', sa.String(models.HOST_LENGTH), nullable=True),
        sa.Column('error', sa.Text, nullable=True),
        sa.Column('started_at', models.UTCDateTime, nullable=True),
        sa.Column('ended_at', models.UTCDateTime, nullable=True),
        *_timestamps(),
        # The host the move's guest leaves; NULL: the drain's host.
        sa.Column('source_host', sa.String(models.HOST_LENGTH),
                  nullable=True),
        sa.UniqueConstraint('drain_uuid', 'instance_uuid',
                            name='drain_moves_instance_uc'))
    op.create_index('drain_moves_migration_uuid_idx', 'drain_moves',
                    ['migration_uuid'])


def _memory_changes():
    op.create_table(
        'memory_changes',
        *_timestamps(),
        sa.Column('uuid', sa.String(models.UUID_LENGTH), primary_key=True),
        sa.Column('host', sa.String(models.HOST_LENGTH), nullable=False),
        sa.Column('status', sa.String(16), nullable=False),
        sa.Column('request', models.JSONText, nullable=False),
        sa.Column('plan', models.JSONText, nullable=True),
        sa.Column('result', models.JSONText, nullable=True))
    op.create_index('memory_changes_host_idx', 'memory_changes', ['host'])


def _live_migratable():
    op.create_table(
        'instance_live_migratable',
        sa.Column('instance_uuid', sa.String(models.UUID_LENGTH),
                  primary_key=True),
        sa.Column('status', sa.String(16), nullable=False),
        sa.Column('reasons', models.JSONText, nullable=False),
        sa.Column('witness', sa.String(models.HOST_LENGTH), nullable=True),
        sa.Column('changed_at', models.UTCDateTime, nullable=False),
        sa.Column('checked_at', models.UTCDateTime, nullable=False))
    op.create_index('instance_live_migratable_status_idx',
                    'instance_live_migratable', ['status'])
