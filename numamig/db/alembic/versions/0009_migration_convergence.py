"""Migration convergence: the policy, its actions, the prediction.

Revision ID: 0009
Revises: 0006
Create Date: 2026-11-25

Six nullable columns on ``migrations``: ``convergence_policy`` (the
policy chosen for the migration, then the one its source ran under),
``convergence_actions`` (JSON list of what that policy did), and the
pre-flight prediction (``prediction``, ``predicted_elapsed_ms``,
``predicted_downtime_ms``, ``sampled_dirty_rate``). Rows recorded before
this revision read back with none of them (NULL), which is also what a
migration recorded by an older conductor looks like. Adding nullable
columns copies no table on any of the three databases.
"""

from alembic import op
import sqlalchemy as sa

from numamig.db import models

revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None

_COLUMNS = (
    ('convergence_policy', sa.String(64)),
    ('convergence_actions', models.JSONText),
    ('prediction', sa.String(32)),
    ('predicted_elapsed_ms', sa.BigInteger),
    ('predicted_downtime_ms', sa.BigInteger),
    ('sampled_dirty_rate', sa.BigInteger),
)


def upgrade():
    for name, type_ in _COLUMNS:
        op.add_column('migrations', sa.Column(name, type_, nullable=True))
