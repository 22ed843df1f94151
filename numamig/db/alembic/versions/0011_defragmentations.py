"""Defragmentations carried out as drains of another kind.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-09

``drains.kind``: ``drain`` (empty a host, rows written before this
revision) or ``defragment`` (make room for a guest on the host by the
moves of a defragmentation plan; the host stays enabled).
``drains.outcome``: what a defragmentation found once its moves ended
(whether the room for the guest exists on the host, and why not); NULL
for drains and while it runs. ``drain_moves.source_host``: the host the
move's guest leaves, NULL for a drain's moves (their drain's host): a
defragmentation's chains move guests of other hosts too.
"""

from alembic import op
import sqlalchemy as sa

from numamig.db import models

revision = '0011'
down_revision = '0010'
branch_labels = None
depends_on = None


def upgrade():
    op.add_column('drains', sa.Column(
        'kind', sa.String(16), nullable=False, server_default='drain'))
    op.add_column('drains', sa.Column(
        'outcome', models.JSONText, nullable=True))
    op.add_column('drain_moves', sa.Column(
        'source_host', sa.String(models.HOST_LENGTH), nullable=True))
