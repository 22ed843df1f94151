"""Release 1: compute nodes, instances, migrations, status history.

Revision ID: 0001 (release 1; ``numamig.db.revisions.RELEASE_1``)
Revises:
Create Date: 2026-11-21

The schema of the release before NUMA-aware live migration, exactly as
it shipped: a release-1 database records ``0001`` and is upgraded from
here by release 2's revision. Never edit it; a later release changes
the schema in a revision of its own.

Tables are written out here, not created from numamig.db.models: a
revision must keep creating the schema of its day after the models move
on. Only the two column types are shared.
"""

from alembic import op
import sqlalchemy as sa

from numamig.db.models import JSONText
from numamig.db.models import UTCDateTime

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def _timestamps():
    return [sa.Column('created_at', UTCDateTime, nullable=False),
            sa.Column('updated_at', UTCDateTime, nullable=False)]


def upgrade():
    op.create_table(
        'compute_nodes',
        sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
        sa.Column('host', sa.String(255), nullable=False),
        sa.Column('hypervisor_uri', sa.String(255), nullable=False),
        sa.Column('hypervisor_type', sa.String(32), nullable=False),
        sa.Column('service_version', sa.Integer, nullable=False),
        sa.Column('fingerprint', sa.String(64), nullable=False),
        sa.Column('reported_at', UTCDateTime, nullable=False),
        sa.Column('report', JSONText, nullable=False),
        *_timestamps(),
        sa.UniqueConstraint('host', name='compute_nodes_host_uc'))
    _create_instances()
    _create_migrations()
    op.create_table(
        'migration_status_history',
        sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
        sa.Column('migration_id', sa.Integer,
                  sa.ForeignKey(
                      'migrations.id', ondelete='CASCADE',
                      name='migration_status_history_migration_id_fkey'),
                  nullable=False),
        sa.Column('status', sa.String(32), nullable=False),
        sa.Column('changed_at', UTCDateTime, nullable=False),
        sa.Column('detail', sa.Text, nullable=True))
    op.create_index('migration_status_history_migration_id_idx',
                    'migration_status_history', ['migration_id'])


def _create_instances():
    op.create_table(
        'instances',
        sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
        sa.Column('uuid', sa.String(36), nullable=False),
        sa.Column('revision', sa.Integer, nullable=False),
        sa.Column('name', sa.String(255), nullable=False),
        sa.Column('project_id', sa.String(255), nullable=False),
        sa.Column('host', sa.String(255), nullable=True),
        sa.Column('vcpus', sa.Integer, nullable=False),
        sa.Column('memory_mb', sa.Integer, nullable=False),
        sa.Column('extra_specs', JSONText, nullable=False),
        sa.Column('image_properties', JSONText, nullable=False),
        sa.Column('numa_topology', JSONText, nullable=True),
        sa.Column('migration_context', JSONText, nullable=True),
        sa.Column('migration_uuid', sa.String(36), nullable=True),
        sa.Column('claim_host', sa.String(255), nullable=True),
        sa.Column('power_state', sa.String(16), nullable=False),
        sa.Column('task_state', sa.String(255), nullable=True),
        *_timestamps(),
        sa.UniqueConstraint('uuid', name='instances_uuid_uc'))
    op.create_index('instances_host_idx', 'instances', ['host'])
    op.create_index('instances_migration_uuid_idx', 'instances',
                    ['migration_uuid'])
    op.create_index('instances_claim_host_idx', 'instances', ['claim_host'])


def _create_migrations():
    op.create_table(
        'migrations',
        sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
        sa.Column('uuid', sa.String(36), nullable=False),
        sa.Column('instance_uuid', sa.String(36),
                  sa.ForeignKey('instances.uuid', ondelete='CASCADE',
                                name='migrations_instance_uuid_fkey'),
                  nullable=False),
        sa.Column('source_host', sa.String(255), nullable=False),
        sa.Column('dest_host', sa.String(255), nullable=True),
        sa.Column('requested_host', sa.String(255), nullable=True),
        sa.Column('status', sa.String(32), nullable=False),
        *[sa.Column(f'{kind}_{part}', sa.BigInteger, nullable=False)
          for kind in ('memory', 'disk')
          for part in ('total', 'processed', 'remaining')],
        sa.Column('error', sa.Text, nullable=True),
        sa.Column('refused_hosts', JSONText, nullable=False),
        *_timestamps(),
        sa.UniqueConstraint('uuid', name='migrations_uuid_uc'))
    for column in ('instance_uuid', 'status', 'source_host', 'dest_host'):
        op.create_index(f'migrations_{column}_idx', 'migrations', [column])
