"""Schema migrations of the conductor database (alembic environment)."""
