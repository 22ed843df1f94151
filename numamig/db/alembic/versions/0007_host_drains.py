"""Drains of hosts: the drain, and each guest's move.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02

``drains``: one row per ``numamig-manage host drain HOST`` (status,
parallelism, priority, the options its re-plans honour, whether the host
was disabled before, the end and why). ``drain_moves``: one row per
guest of the drain, in the plan's order, with its planned destination
and placement, the migration that moves it, the destinations that
refused it and how it ended. The ``host-drains`` row of ``locks`` makes
"no other drain of this host runs" and the new drain one step across
conductor workers.
"""

from alembic import op
import sqlalchemy as sa

from numamig.db import models

revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None

DRAIN_LOCK = 'host-drains'


def upgrade():
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
        sa.Column('created_at', models.UTCDateTime, nullable=False),
        sa.Column('updated_at', models.UTCDateTime, nullable=False),
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
        sa.Column('created_at', models.UTCDateTime, nullable=False),
        sa.Column('updated_at', models.UTCDateTime, nullable=False),
        sa.UniqueConstraint('drain_uuid', 'instance_uuid',
                            name='drain_moves_instance_uc'))
    op.create_index('drain_moves_migration_uuid_idx', 'drain_moves',
                    ['migration_uuid'])
    locks = sa.table('locks', sa.column('name', sa.String(64)))
    op.bulk_insert(locks, [{'name': DRAIN_LOCK}])
