"""Where a migration's own QEMU threads ran.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-28

``migrations.migration_threads``: a JSON dict with one entry per host
side (``source``, ``dest``) saying which CPUs that host's agent chose for
the migration's threads, why, how many parallel connections the source
used, and which CPUs each thread was allowed on (numamig.objects.
migration_threads). Rows written before this revision, and migrations no
host recorded it for, have none (NULL). A nullable column copies no
table on any of the three databases.
"""

from alembic import op
import sqlalchemy as sa

from numamig.db import models

revision = '0014'
down_revision = '0013'
branch_labels = None
depends_on = None


def upgrade():
    op.add_column('migrations', sa.Column(
        'migration_threads', models.JSONText, nullable=True))
