"""The admission queue: migration priority, admission time, a lock row.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23

Two columns on ``migrations`` and a ``locks`` table with the row that
admission transactions lock. Every migration recorded before this
revision was started at once by the release that recorded it, so its
rows read as admitted (admitted_at = created_at) with the routine
priority: none of them is taken as waiting in the queue.
"""

from alembic import op
import sqlalchemy as sa

from numamig.db import models

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None

ADMISSION_LOCK = 'migration-admission'


def upgrade():
    op.add_column('migrations', sa.Column(
        'priority', sa.Integer, nullable=False, server_default='0'))
    op.add_column('migrations', sa.Column(
        'admitted_at', models.UTCDateTime, nullable=True))
    op.execute("UPDATE migrations SET admitted_at = created_at")
    op.create_index('migrations_queue_idx', 'migrations',
                    ['status', 'admitted_at'])
    locks = op.create_table(
        'locks', sa.Column('name', sa.String(64), primary_key=True))
    op.bulk_insert(locks, [{'name': ADMISSION_LOCK}])
