"""Hosts disabled for maintenance: when, and the operator's reason.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01

``compute_nodes.disabled_at`` (NULL: the host is enabled) and
``compute_nodes.disabled_reason``: set by ``numamig-manage host
disable``, cleared by ``host enable``; the scheduler chooses no disabled
host. The agents' reports rewrite the other columns of the row and never
these, so a report cannot enable a host again. Rows written before this
revision are enabled hosts.
"""

from alembic import op
import sqlalchemy as sa

from numamig.db import models

revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade():
    op.add_column('compute_nodes', sa.Column(
        'disabled_at', models.UTCDateTime, nullable=True))
    op.add_column('compute_nodes', sa.Column(
        'disabled_reason', sa.String(models.REASON_LENGTH), nullable=True))
