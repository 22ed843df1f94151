"""Migration results: how long the run took, downtime, how it converged.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-28

Five nullable columns on ``migrations``: rows of migrations recorded
before this revision keep every value and read back with no result
(NULL), which is also what a run that never reported one looks like.
Adding nullable columns needs no table copy on any of the three
databases, so existing rows are never rewritten.
"""

from alembic import op
import sqlalchemy as sa

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None

_COLUMNS = (('elapsed_ms', sa.BigInteger), ('downtime_ms', sa.BigInteger),
            ('emulated', sa.Boolean), ('post_copy', sa.Boolean),
            ('paused', sa.Boolean))


def upgrade():
    for name, type_ in _COLUMNS:
        op.add_column('migrations', sa.Column(name, type_, nullable=True))
