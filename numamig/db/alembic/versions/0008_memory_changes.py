"""virtio-mem memory changes an operator asked for, and what they did.

Revision ID: 0008
Revises: 0006 (the lead re-chains it at merge)
Create Date: 2026-11-25

``memory_changes``: one row per ``numamig-manage instance memory set``
or ``host reclaim`` request, keyed by the client's uuid, so that a
request delivered twice changes memory once and both deliveries get the
same answer. A new table: rows of earlier revisions are unaffected.
"""

from alembic import op
import sqlalchemy as sa

from numamig.db import models

revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        'memory_changes',
        sa.Column('created_at', models.UTCDateTime, nullable=False),
        sa.Column('updated_at', models.UTCDateTime, nullable=False),
        sa.Column('uuid', sa.String(36), primary_key=True),
        sa.Column('host', sa.String(models.HOST_LENGTH), nullable=False),
        sa.Column('status', sa.String(16), nullable=False),
        sa.Column('request', models.JSONText, nullable=False),
        sa.Column('plan', models.JSONText, nullable=True),
        sa.Column('result', models.JSONText, nullable=True),
    )
    op.create_index('memory_changes_host_idx', 'memory_changes', ['host'])
