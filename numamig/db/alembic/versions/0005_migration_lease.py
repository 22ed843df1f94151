"""Leases of the conductor workers driving admitted migrations.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-25

``migrations.lease_expires_at``: a worker that admits a migration holds
it until then and renews the lease while its task runs, so that a worker
that died is noticed within a lease instead of after the longest
destination choice. Rows written before this revision have no lease and
are judged by their age, as before.
"""

from alembic import op
import sqlalchemy as sa

from numamig.db import models

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade():
    op.add_column('migrations', sa.Column(
        'lease_expires_at', models.UTCDateTime, nullable=True))
