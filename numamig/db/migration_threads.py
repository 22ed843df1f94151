"""Where a migration's threads ran, recorded per host (release 2).

Each host of a migration reports its side (numamig.objects.
migration_threads) once its part ends: the source when its job ends,
the destination when its watch does. The two reports may arrive
together, so each merges its side into the row under a row lock.
"""

import sqlalchemy as sa

from numamig import exception
from numamig.db import _rows
from numamig.db import models
from numamig.objects import migration_threads as record_shape

_T = models.Migration.__table__


def record_threads(db, uuid, side, record):
    """Record ``side``'s part of where a migration's threads ran.

    Idempotent: a repeat (the same record) changes nothing. Any status
    is accepted: the destination's report may come after the source
    recorded the migration completed.

    :returns: True if the row changed.
    :raises InvalidMigrationResult: ``side`` or ``record`` is unusable
        (nothing is recorded).
    :raises MigrationNotFound:
    """
    problem = record_shape.problem({side: record})
    if problem:
        raise exception.InvalidMigrationResult(
            migration_uuid=uuid,
            reason=f"migration_threads {problem}; got {record!r:.200}")
    record = record_shape.side(record['host'], record['basis'],
                               record['cpus'], record['threads'],
                               record['connections'])
    with db.writer() as session:
        row = _rows.fresh_by_uuid(session, models.Migration, uuid,
                                  lock=True)
        if row is None:
            raise exception.MigrationNotFound(migration_uuid=uuid)
        recorded = dict(row.migration_threads or {})
        if recorded.get(side) == record:
            return False
        recorded[side] = record
        _rows.run(session, sa.update(_T).where(_T.c.uuid == uuid).values(
            migration_threads=recorded, updated_at=_rows.utcnow()))
        return True
