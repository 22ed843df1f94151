"""virtio-mem memory reclaimed to place a migration's guest.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-26

``migrations.memory_reclaim``: a JSON list, one entry per virtio-mem
device of another guest whose memory was reclaimed so that the migrating
guest fits its destination ([virtio_mem] placement_reclaim): host, host
node, guest and guest cell, sizes before, asked and reached, what was
released, and whether it was kept or given back. NULL for every
migration without such a reclaim, and for rows written before this
revision. A nullable column: no table is copied.
"""

from alembic import op
import sqlalchemy as sa

from numamig.db import models

revision = '0012'
down_revision = '0011'
branch_labels = None
depends_on = None


def upgrade():
    op.add_column('migrations', sa.Column(
        'memory_reclaim', models.JSONText, nullable=True))
