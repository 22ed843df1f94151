"""Schema migrations: alembic run programmatically on numamig's revisions.

The revisions ship inside the package (``numamig/db/alembic``), so an
operator only runs ``numamig-manage db sync``; there is no alembic.ini.
"""

import os

from alembic import command
from alembic import config as alembic_config
from alembic import script as alembic_script
from alembic.util import exc as alembic_exc

from numamig import exception
from numamig.db import revisions

SCRIPT_LOCATION = os.path.join(os.path.dirname(__file__), 'alembic')


def _config(connection=None):
    config = alembic_config.Config()
    config.set_main_option('script_location', SCRIPT_LOCATION)
    config.attributes['connection'] = connection
    return config


def _scripts():
    return alembic_script.ScriptDirectory.from_config(_config())


def head():
    """The newest schema revision this release knows."""
    return _scripts().get_current_head()


def known_revisions():
    """Every revision this release knows, oldest first."""
    return [rev.revision for rev in reversed(list(
        _scripts().walk_revisions()))]


def current(database):
    """The revision ``database`` is at, or None if never synced."""
    return revisions.current(database)


def upgrade(database, revision=None):
    """Upgrade ``database`` to ``revision`` (newest if None).

    ``revision`` may be a release alias (``release-1``, ``release-2``).
    Each revision runs in its own transaction, so an interrupted sync
    leaves the database at the last revision that completed.

    :returns: the revision reached.
    :raises UnknownSchemaRevision: if ``revision`` is not one of ours.
    :raises DatabaseError: if the database is at a revision this release
        does not know (a newer release synced it, or it is one of release
        2's development steps) or is past ``revision``.
    """
    known = known_revisions()
    revision = revisions.RELEASE_ALIASES.get(revision, revision)
    if revision is not None and revision not in known:
        raise exception.UnknownSchemaRevision(
            revision=revision, known=', '.join(
                known + sorted(revisions.RELEASE_ALIASES)))
    # Alembic would answer "Can't locate revision": say what to do.
    development = revisions.development_step(current(database))
    if development:
        raise exception.DatabaseError(url=database.safe_url,
                                      reason=development)
    with database._guard(), database.engine.connect() as connection:
        try:
            command.upgrade(_config(connection), revision or 'head')
        except alembic_exc.CommandError as exc:
            raise exception.DatabaseError(
                url=database.safe_url,
                reason=f"cannot upgrade to {revision or head()}: {exc}"
            ) from exc
        connection.commit()
    return current(database)
