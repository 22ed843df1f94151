"""Alembic environment: runs numamig's schema revisions on a connection.

numamig runs alembic programmatically (numamig/db/schema.py), handing it
an open connection in ``config.attributes['connection']``; operators need
no alembic.ini.
"""

from alembic import context

from numamig.db import models


def run_migrations_online():
    connection = context.config.attributes['connection']
    context.configure(
        connection=connection,
        target_metadata=models.Base.metadata,
        # SQLite cannot ALTER most things; batch mode copies the table.
        render_as_batch=connection.dialect.name == 'sqlite',
        transaction_per_migration=True)
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    raise RuntimeError("numamig schema revisions run online only: use "
                       "'numamig-manage db sync'")
run_migrations_online()
