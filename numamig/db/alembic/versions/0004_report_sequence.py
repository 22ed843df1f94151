"""Report change numbers: a worker reads only the reports written since.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-24

``compute_nodes.change_seq`` and a ``sequences`` table whose
'compute-node-reports' row hands the numbers out. Rows written before
this revision get 0, which every conductor worker reads at its start.
"""

from alembic import op
import sqlalchemy as sa

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None

REPORTS = 'compute-node-reports'


def upgrade():
    op.add_column('compute_nodes', sa.Column(
        'change_seq', sa.BigInteger, nullable=False, server_default='0'))
    op.create_index('compute_nodes_change_seq_idx', 'compute_nodes',
                    ['change_seq'])
    sequences = op.create_table(
        'sequences', sa.Column('name', sa.String(64), primary_key=True),
        sa.Column('value', sa.BigInteger, nullable=False))
    op.bulk_insert(sequences, [{'name': REPORTS, 'value': 0}])
