"""numamig-manage db: create or upgrade the conductor's database schema."""

import sys

from numamig import exception
from numamig.cmd import common
from numamig.conf import CONF


class DbCommands:
    """Schema of the conductor's database ([database] connection)."""

    @common.args('--version', dest='revision', metavar='REVISION',
                 default=None,
                 help="Revision to upgrade to, or a release: release-1, "
                      "release-2 (default: the newest).")
    @common.format_option
    @common.guarded
    def sync(self, revision=None, output_format='human'):
        """Create or upgrade the schema; safe to run again.

        Exit codes: 0 synced; 127 unknown revision (nothing changed);
        255 the database cannot be reached, is from a newer release, or
        is at a development step of release 2 (recreate it).
        """
        return _run(lambda db: _sync(db, revision), output_format,
                    existing=False)

    @common.format_option
    @common.guarded
    def version(self, output_format='human'):
        """Show the schema revision of the database.

        Exit codes: 0 at the newest revision; 1 not synced or behind
        (run 'numamig-manage db sync'); 255 the database cannot be
        reached or is at a development step of release 2 (recreate it).
        """
        return _run(_version, output_format)


def _run(step, output_format, existing=True):
    """``existing``: open only a database that is there (reading steps)."""
    from numamig.db import api
    try:
        db = api.Database.from_config(CONF, existing=existing)
        try:
            data, code = step(db)
        finally:
            db.dispose()
    except exception.DatabaseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return common.EXIT_UNEXPECTED
    common.print_output(data, output_format, _print_human)
    return code


def _sync(db, revision):
    previous = db.version()
    current = db.sync(revision)
    return _state(db, current, previous=previous,
                  action='synced'), common.EXIT_OK


def _version(db):
    from numamig.db import revisions
    from numamig.db import schema
    current = db.version()
    development = revisions.development_step(current)
    if development:
        raise exception.DatabaseError(url=db.safe_url, reason=development)
    code = common.EXIT_OK if current == schema.head() else common.EXIT_NO
    return _state(db, current), code


def _state(db, current, **extra):
    from numamig.db import schema
    return dict(url=db.safe_url, current=current, head=schema.head(),
                up_to_date=current == schema.head(), **extra)


def _print_human(data):
    current = data['current'] or 'none (empty database)'
    if 'previous' in data:
        print(f"Database {data['url']} synced: revision "
              f"{data['previous'] or 'none'} -> {current}.")
        return
    print(f"Database {data['url']}: revision {current}, newest known "
          f"{data['head']}.")
    if not data['up_to_date']:
        print("Run 'numamig-manage db sync' to upgrade it.")
