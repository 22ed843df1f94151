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

from numamig import exception

# One revision per release (numamig/db/alembic/versions): the schema
# release 1 shipped (its databases record '0001'), and release 2's, which
# upgrades a release-1 database in one step.
RELEASE_1 = '0001'
RELEASE_2 = 'release2'
# Oldest first; each revision's down_revision is the one before it.
REVISIONS = (RELEASE_1, RELEASE_2)
HEAD = REVISIONS[-1]
# ``numamig-manage db sync --version`` may name a release instead of a
# revision, as [upgrade_levels] names API versions.
RELEASE_ALIASES = {'release-1': RELEASE_1, 'release-2': RELEASE_2}

# The development steps of release 2, which no release shipped: they were
# collapsed into RELEASE_2. A database synced to one of them holds some
# of release 2's tables and columns but not all; no revision upgrades it.
DEVELOPMENT = frozenset(f'{step:04d}' for step in range(2, 15))

# The table alembic records the current revision in (its default name).
VERSION_TABLE = 'alembic_version'


def development_step(revision):
    """Why a database at ``revision`` cannot be used, or None.

    One line for an operator, for a database synced to one of release
    2's development revisions: such a database has no upgrade path and
    must be created again.
    """
    if revision not in DEVELOPMENT:
        return None
    return (f"schema revision {revision} is a development step of "
            f"release 2 that no release shipped and that cannot be "
            f"upgraded: recreate the database (drop it, then run "
            f"'numamig-manage db sync')")


def current(database):
    """The revision ``database`` is at, or None if never synced.

    What alembic's ``MigrationContext.get_current_revision`` answers for
    numamig's single line of history, read with one SELECT.

    :raises DatabaseError: unreachable (``Database._guard``); or the
        table holds several revisions, which numamig never writes.
    """
    # Here, not at the top: numamig.db.direct's reads check the schema
    # with this module's other functions and never load SQLAlchemy.
    import sqlalchemy as sa
    with database._guard(), database.engine.connect() as connection:
        if not sa.inspect(connection).has_table(VERSION_TABLE):
            return None
        rows = connection.execute(sa.text(
            f'SELECT version_num FROM {VERSION_TABLE}')).scalars().all()
    return single(rows, database.safe_url)


def single(rows, safe_url):
    """The one revision of ``rows`` (alembic_version's), None if empty.

    :raises DatabaseError: several, which numamig never writes.
    """
    if len(rows) > 1:
        raise exception.DatabaseError(
            url=safe_url,
            reason=f"{VERSION_TABLE} holds several revisions "
                   f"({', '.join(sorted(rows))}); numamig's history has "
                   f"one line")
    return rows[0] if rows else None


def check(current, safe_url):
    """Raise unless a database at revision ``current`` (None: never
    synced) can be used by this release.

    :raises DatabaseError: a development step, or a revision newer than
        this release knows.
    :raises DatabaseNotSynced: any other revision than HEAD.
    """
    development = development_step(current)
    if development:
        raise exception.DatabaseError(url=safe_url, reason=development)
    if current is not None and current not in REVISIONS:
        raise exception.DatabaseError(
            url=safe_url,
            reason=f"schema revision {current} is newer than this "
                   f"release knows (up to {HEAD}); upgrade numamig")
    if current != HEAD:
        raise exception.DatabaseNotSynced(
            url=safe_url, current=current or 'none', head=HEAD)
