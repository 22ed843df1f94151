"""The post-copy recovery history of a migration.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-27

``migrations.postcopy_recovery``: a JSON list of the events of a
post-copy migration whose stream broke (the loss of the link, each
resume attempt and its outcome, giving up), as the source reports them
while it recovers and with the run's result. Rows written before this
revision, and migrations whose stream never broke in post-copy, have
none (NULL). A nullable column copies no table on any of the three
databases.
"""

from alembic import op
import sqlalchemy as sa

from numamig.db import models

revision = '0013'
down_revision = '0012'
branch_labels = None
depends_on = None


def upgrade():
    op.add_column('migrations', sa.Column(
        'postcopy_recovery', models.JSONText, nullable=True))
