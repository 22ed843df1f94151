"""Alembic revisions, one module per schema change."""
