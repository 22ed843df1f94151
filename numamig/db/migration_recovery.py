"""A migration's post-copy recovery history (release 2).

The source reports the history while it recovers, each time it grows
(the conductor's records API, ``migration_record_recovery``); a run's
result may carry the final one too (numamig.db.migrations checks it
with ``fits``). Reports can be repeated or overtaken, so the recorded
history only grows.
"""

import sqlalchemy as sa

from numamig import exception
from numamig.db import _rows
from numamig.db import models
from numamig.objects import fields as nm_fields
from numamig.objects import migration as migration_obj

STATUS = nm_fields.MigrationStatus
_T = models.Migration.__table__


def fits(history):
    """A recovery history: a bounded list of dicts of short strings
    (the attempt number may be an integer)."""
    if not isinstance(history, list) or \
            len(history) > migration_obj.MAX_RECOVERY_EVENTS:
        return False
    for event in history:
        if not isinstance(event, dict) or len(event) > 4 or any(
                not isinstance(k, str) or not (
                    v is None or isinstance(v, int) and
                    not isinstance(v, bool) or
                    isinstance(v, str) and len(v) <= 300)
                for k, v in event.items()):
            return False
    return True


def record_recovery(db, uuid, history):
    """Record a migration's post-copy recovery history while it runs.

    Idempotent and order-proof: the history only grows (up to its bound,
    then its newest events change), so a report equal to the recorded
    one (a repeat) or shorter (overtaken by a later report) changes
    nothing; nor does one for a migration that has ended.

    :returns: True if recorded.
    :raises InvalidMigrationResult: the history is unusable.
    :raises MigrationNotFound:
    """
    if not fits(history):
        raise exception.InvalidMigrationResult(
            migration_uuid=uuid,
            reason=f"postcopy_recovery must be a list of at most "
                   f"{migration_obj.MAX_RECOVERY_EVENTS} events (dicts of "
                   f"event, at, attempt, detail); got {history!r:.200}")
    with db.writer() as session:
        row = _rows.fresh_by_uuid(session, models.Migration, uuid)
        if row is None:
            raise exception.MigrationNotFound(migration_uuid=uuid)
        recorded = row.postcopy_recovery or []
        if row.status not in STATUS.IN_PROGRESS or \
                len(recorded) > len(history) or recorded == history:
            return False
        result = _rows.run(session, sa.update(_T).where(
            _T.c.uuid == uuid).where(
            _T.c.status.in_(STATUS.IN_PROGRESS)).values(
                updated_at=_rows.utcnow(), postcopy_recovery=history))
        return result.rowcount == 1
