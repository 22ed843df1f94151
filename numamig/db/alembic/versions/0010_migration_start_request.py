"""The start request of a queued migration, kept until its source takes it.

Revision ID: 0010
Revises: 0006
Create Date: 2026-11-25

``migrations.start_request``: the live-migrate data the conductor casts
to the source with ``live_migration`` (the destination's answer, with
its NUMA pins), recorded in the transaction that records the claim and
``queued``, cleared when the migration leaves ``queued``. A start request
lost with a conductor worker or a source agent that died is sent again
from it (numamig.conductor.restarts). Rows written before this revision
have none: such a migration is ended by the stalled-migration sweep, as
before.
"""

from alembic import op
import sqlalchemy as sa

from numamig.db import models

revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None


def upgrade():
    op.add_column('migrations', sa.Column(
        'start_request', models.JSONText, nullable=True))
