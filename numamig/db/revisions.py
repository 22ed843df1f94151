"""The schema revisions this release knows, without loading alembic.

Every command and service checks at start that its database is at the
newest revision (``Database.check_schema``). Asking alembic means
importing it (with mako and its dialect modules) and reading every
revision script: about a third of a reading ``numamig-manage`` call, for
two facts that change only with a release. They are kept here instead;
a unit test keeps ``REVISIONS`` equal to alembic's history of
``numamig/db/alembic/versions``, so a new revision without its entry
here fails the tests. Alembic itself is loaded only by what changes
the schema (``numamig-manage db sync``).
"""

import sqlalchemy as sa

from numamig import exception

# Oldest first; each revision's down_revision is the one before it.
REVISIONS = ('0001', '0002', '0003', '0004', '0005', '0006', '0007',
             '0008', '0009', '0010', '0011', '0012', '0013', '0014')
HEAD = REVISIONS[-1]

# The table alembic records the current revision in (its default name).
VERSION_TABLE = 'alembic_version'


def current(database):
    """The revision ``database`` is at, or None if never synced.

    What alembic's ``MigrationContext.get_current_revision`` answers for
    numamig's single line of history, read with one SELECT.

    :raises DatabaseError: unreachable (``Database._guard``); or the
        table holds several revisions, which numamig never writes.
    """
    with database._guard(), database.engine.connect() as connection:
        if not sa.inspect(connection).has_table(VERSION_TABLE):
            return None
        rows = connection.execute(sa.text(
            f'SELECT version_num FROM {VERSION_TABLE}')).scalars().all()
    if len(rows) > 1:
        raise exception.DatabaseError(
            url=database.safe_url,
            reason=f"{VERSION_TABLE} holds several revisions "
                   f"({', '.join(sorted(rows))}); numamig's history has "
                   f"one line")
    return rows[0] if rows else None
