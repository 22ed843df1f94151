"""Each guest's standing live-migratable answer (issue 40).

Public API::

    save(db, answers) -> None          answers: [(uuid, Status)]
    forget(db, uuid) -> None
    get_many(db, uuids) -> {uuid: row dict}
    counts(db) -> {(status, reason kind or ''): guests}

A row dict has 'status', 'reasons' ([{'kind', 'detail'}]), 'witness',
'changed_at' and 'checked_at'. A guest without a row has not been
looked at yet (a conductor that just started, or a guest just created).

Conductor workers each keep the answer from the reports they see and
write what changed; two writing one guest write the same answer, so the
last write is as good as the first.
"""

from oslo_db import exception as db_exc
import sqlalchemy as sa

from numamig.db import _rows
from numamig.db import models

_M = models.InstanceLiveMigratable


def _reasons(status):
    return [{'kind': r.kind, 'detail': r.detail} for r in status.reasons]


def save(db, answers):
    """Record ``answers`` ([(instance uuid, migratable.Status)]); each
    whose status differs from the recorded one (or is not 'yes' for a
    guest without one) is told of once the transaction commits (the
    ``instance.live-migratable.changed`` notification): a worker that
    writes what another wrote already tells nothing."""
    if not answers:
        return
    now = _rows.utcnow()
    with db.writer() as session:
        before = {}
        uuids = [uuid for uuid, _ in answers]
        for start in range(0, len(uuids), 500):
            before.update(session.execute(sa.select(
                _M.instance_uuid, _M.status).where(_M.instance_uuid.in_(
                    uuids[start:start + 500]))).all())
        for uuid, status in answers:
            # changed_at first: MySQL and MariaDB assign left to right,
            # so the CASE must read the status before it is replaced.
            changed = session.execute(sa.update(_M).where(
                _M.instance_uuid == uuid).ordered_values(
                (_M.changed_at, sa.case((_M.status == status.status,
                                         _M.changed_at), else_=now)),
                (_M.status, status.status),
                (_M.reasons, _reasons(status)),
                (_M.witness, status.witness),
                (_M.checked_at, now)))
            if not changed.rowcount:
                _insert(session, uuid, status, now)
            previous = before.get(uuid)
            if previous != status.status and (previous is not None or
                                              status.status != 'yes'):
                _rows.note_change(session, _rows.LIVE_MIGRATABLE, {
                    'instance_uuid': uuid, 'status': status.status,
                    'previous_status': previous,
                    'reasons': _reasons(status),
                    'witness': status.witness})


def _insert(session, uuid, status, now):
    try:
        with session.begin_nested():
            session.add(_M(instance_uuid=uuid, status=status.status,
                           reasons=_reasons(status), witness=status.witness,
                           changed_at=now, checked_at=now))
    except db_exc.DBDuplicateEntry:
        # Another worker wrote it first: the answers agree.
        pass


def forget(db, uuid):
    """The guest was deleted: drop its answer."""
    with db.writer() as session:
        session.execute(sa.delete(_M).where(_M.instance_uuid == uuid))


def get_many(db, uuids):
    """{uuid: row dict} of the guests of ``uuids`` that have an answer."""
    uuids = list(uuids)
    found = {}
    with db.reader() as session:
        # Chunks keep the IN list within every database's limits.
        for start in range(0, len(uuids), 500):
            rows = session.execute(sa.select(_M).where(
                _M.instance_uuid.in_(uuids[start:start + 500]))).scalars()
            for row in rows:
                found[row.instance_uuid] = _as_dict(row)
    return found


def counts(db):
    """{(status, reason kind or ''): how many guests} of the recorded
    answers: the guests that can move are counted in the database, the
    few that cannot are read with their reasons."""
    found = {}
    with db.reader() as session:
        movable = session.execute(sa.select(sa.func.count()).where(
            _M.status == 'yes')).scalar_one()
        if movable:
            found[('yes', '')] = movable
        rows = session.execute(sa.select(_M.status, _M.reasons).where(
            _M.status != 'yes'))
        for status, reasons in rows:
            for kind in {r.get('kind') for r in reasons or ()} or {''}:
                found[(status, kind)] = found.get((status, kind), 0) + 1
    return found


def _as_dict(row):
    return {'status': row.status, 'reasons': list(row.reasons or ()),
            'witness': row.witness, 'changed_at': row.changed_at,
            'checked_at': row.checked_at}
