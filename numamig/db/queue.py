"""The admission queue of live migrations, kept in the database.

A migration request is recorded ``accepted`` with no ``admitted_at``: it
waits. A conductor worker with a free migration thread admits the next
waiting migrations, highest priority first and oldest first within a
priority, skipping those whose source host (or requested destination)
already has as many migrations in flight as the limits allow, and never
letting more migrations be in flight in the whole cloud than the
cloud-wide limit. A migration is in flight from its admission until it
ends or halts (``postcopy-paused``: no copy runs until an operator
resumes it, and a resume is not admitted again); one recorded before
the queue existed counts as admitted.

Counting and then admitting must not interleave between conductor
workers: under READ COMMITTED two of them would both see room for the
last slot. Every transaction that counts first locks the admission row
of the ``locks`` table (SQLite's ``BEGIN IMMEDIATE`` serializes writers
anyway), so the limits hold across workers and processes.
"""

import collections
import dataclasses
import datetime
import functools

import sqlalchemy as sa

from numamig.db import _rows
from numamig.db import models
from numamig.objects import fields as nm_fields

STATUS = nm_fields.MigrationStatus
ADMISSION_LOCK = 'migration-admission'

_M = models.Migration
# On the Core table: the same clauses serve ORM statements and the Core
# statements built once (_rows.prebuilt).
_T = _M.__table__
WAITING = sa.and_(_T.c.status == STATUS.ACCEPTED, _T.c.admitted_at.is_(None))
IN_FLIGHT = sa.and_(_T.c.status.in_(STATUS.ACTIVE), sa.not_(WAITING))


@dataclasses.dataclass(frozen=True)
class Limits:
    """How many migrations may be in flight, and wait, at once."""

    total: int          # in the whole cloud
    per_source: int     # out of one host
    per_dest: int       # into one host
    queued: int         # waiting for admission


def lock(session):
    """Take the admission lock for the rest of the transaction."""
    _rows.run(session, _lock_statement())


@_rows.prebuilt
def _lock_statement():
    locks = models.Lock.__table__
    return sa.select(locks.c.name).where(
        locks.c.name == ADMISSION_LOCK).with_for_update()


def admission_stamp():
    """A timestamp to admit with (``admit``'s ``now``): kept by the
    caller, it finds what an admission whose answer was lost admitted
    (``admitted_by``)."""
    return _rows.utcnow()


def admit(db, limits, max_count, lease_s=None, now=None, holder=None):
    """Admit up to ``max_count`` waiting migrations within ``limits``.

    :param lease_s: seconds the admitting worker holds each one before it
        must renew (``renew``); None: no lease (judged by age).
    :param now: the ``admitted_at`` to record (``admission_stamp``);
        None: now.
    :param holder: who holds the leases (the admitting worker's
        ``'<host>:<pid>'``), recorded as ``lease_holder``.
    :returns: the uuids admitted, in the order they should run.
    """
    if max_count <= 0 or not _anything_waits(db):
        return []
    now = now or _rows.utcnow()
    lease = None if lease_s is None else now + _seconds(lease_s)
    with db.writer() as session:
        lock(session)
        flights = _rows.run(session, _flights()).all()
        total = len(flights)
        outgoing = collections.Counter(f.source_host for f in flights)
        incoming = collections.Counter(f.dest_host or f.requested_host
                                       for f in flights)
        admitted = []
        for row in _rows.run(session, _next_waiting()):
            if len(admitted) >= max_count or total >= limits.total:
                break
            if outgoing[row.source_host] >= limits.per_source or \
                    (row.requested_host and
                     incoming[row.requested_host] >= limits.per_dest):
                continue
            _rows.run(session, _admit_one(), {
                'row_id': row.id, 'admitted_at': now, 'updated_at': now,
                'lease_expires_at': lease, 'lease_holder': holder})
            admitted.append(row.uuid)
            total += 1
            outgoing[row.source_host] += 1
            if row.requested_host:
                incoming[row.requested_host] += 1
    return admitted


def _anything_waits(db):
    """Whether a migration waits, read without the admission lock: most
    looks (after a migration ends) find the queue empty, and a read takes
    no write lock away from the workers recording migrations."""
    with db.reader() as session:
        return _rows.run(session, _first_waiting()).first() is not None


@_rows.prebuilt
def _first_waiting():
    return sa.select(_T.c.id).where(WAITING).limit(1)


@_rows.prebuilt
def _next_waiting():
    return sa.select(_T.c.id, _T.c.uuid, _T.c.source_host,
                     _T.c.requested_host).where(WAITING).order_by(
                         _T.c.priority.desc(), _T.c.id)


@_rows.prebuilt
def _flights():
    return sa.select(_T.c.source_host, _T.c.dest_host,
                     _T.c.requested_host).where(IN_FLIGHT)


@_rows.prebuilt
def _admit_one():
    # The update's SET takes its values from the parameters of the same
    # names; WHERE binds the row by its own name.
    return sa.update(_T).where(_T.c.id == sa.bindparam('row_id'), WAITING)


def admitted_by(db, stamps):
    """uuids of the migrations still ``accepted`` that admissions stamped
    ``stamps`` admitted (their transaction committed although its caller
    got no answer), in admission order.

    A stamp is the admitting worker's clock to the microsecond, taken
    just before it locks the queue; admissions are serialized by that
    lock, so two workers' stamps would have to fall on the same
    microsecond to be confused.
    """
    if not stamps:
        return []
    with db.reader() as session:
        return list(session.scalars(sa.select(_M.uuid).where(
            _M.status == STATUS.ACCEPTED,
            _M.admitted_at.in_(list(stamps))).order_by(_M.id)))


def waiting_count(session):
    """How many migrations wait for admission (inside a transaction)."""
    return _rows.run(session, _waiting_count()).scalar()


@_rows.prebuilt
def _waiting_count():
    return sa.select(sa.func.count()).select_from(_T).where(WAITING)


def in_flight_into(session, host, excluding=None):
    """How many migrations in flight have ``host`` as destination."""
    return _rows.run(session, _in_flight_into(excluding is not None), {
        'host': host, 'excluding': excluding}).scalar()


@functools.cache
def _in_flight_into(excluding):
    query = sa.select(sa.func.count()).select_from(_T).where(
        IN_FLIGHT, _T.c.dest_host == sa.bindparam('host'))
    if excluding:
        query = query.where(_T.c.uuid != sa.bindparam('excluding'))
    return query


def positions(db):
    """{uuid: position} of every waiting migration, 1 being next."""
    with db.reader() as session:
        uuids = session.scalars(sa.select(_M.uuid).where(WAITING).order_by(
            _M.priority.desc(), _M.id))
        return {uuid: index for index, uuid in enumerate(uuids, start=1)}


def position_in(session, uuid):
    """The place in line of a waiting migration (1: next), or None when
    it is not waiting; a count, so that it costs the same with 10 or
    10,000 migrations waiting."""
    row = session.execute(sa.select(_M.id, _M.priority).where(
        _M.uuid == uuid, WAITING)).first()
    if row is None:
        return None
    # Under READ COMMITTED the count sees what committed after the read
    # above: a worker may have admitted the migration in between. A
    # waiting migration counts itself, so 0 means just that: it waits
    # no more (found when another conductor's admissions resumed at
    # once while a request was answered; a place of 0 made the client
    # refuse the whole answer).
    return position_of(session, row.id, row.priority) or None


def position_of(session, row_id, priority):
    """The place in line of the waiting migration of row ``row_id``
    with ``priority`` (what its writer knows without reading it)."""
    return _rows.run(session, _ahead_of(), {
        'row_id': row_id, 'priority': priority}).scalar()


@_rows.prebuilt
def _ahead_of():
    priority = sa.bindparam('priority')
    return sa.select(sa.func.count()).select_from(_T).where(
        WAITING, sa.or_(_T.c.priority > priority, sa.and_(
            _T.c.priority == priority, _T.c.id <= sa.bindparam('row_id'))))


def position(db, uuid):
    """``position_in`` in a transaction of its own."""
    with db.reader() as session:
        return position_in(session, uuid)


def busy_destinations(db, per_dest):
    """Hosts with ``per_dest`` or more migrations in flight into them."""
    with db.reader() as session:
        return busy_destinations_in(session, per_dest)


def busy_destinations_in(session, per_dest):
    """``busy_destinations`` inside the caller's transaction."""
    return set(_rows.run(session, _busy_destinations(), {
        'per_dest': per_dest}).scalars())


@_rows.prebuilt
def _busy_destinations():
    return sa.select(_T.c.dest_host).where(
        IN_FLIGHT, _T.c.dest_host.is_not(None)).group_by(
            _T.c.dest_host).having(
                sa.func.count() >= sa.bindparam('per_dest'))


def requeue(db, uuid):
    """Put an admitted migration back in line after its destinations
    turned out busy: it keeps its place (priority, age) and forgets the
    destination last tried, which holds no claim for it.

    :returns: True if it went back; False if it has moved on meanwhile
        (cancelled), in which case nothing changed.
    """
    with db.writer() as session:
        result = session.execute(sa.update(_M).where(
            _M.uuid == uuid, _M.status == STATUS.ACCEPTED).values(
                admitted_at=None, dest_host=None, lease_expires_at=None,
                lease_holder=None, updated_at=_rows.utcnow())
            .execution_options(synchronize_session=False))
        return result.rowcount == 1


def release(db, uuids):
    """Put admitted migrations whose task never started back in line.

    Only those still ``accepted`` with no destination tried are
    released: any other has moved on and keeps its slot.

    :returns: how many went back.
    """
    if not uuids:
        return 0
    with db.writer() as session:
        result = session.execute(sa.update(_M).where(
            _M.uuid.in_(sorted(uuids)), _M.status == STATUS.ACCEPTED,
            _M.dest_host.is_(None)).values(
                admitted_at=None, lease_expires_at=None, lease_holder=None,
                updated_at=_rows.utcnow()).execution_options(
                    synchronize_session=False))
        return result.rowcount


def renew(db, uuids, lease_s, holder=None):
    """Extend the leases of the admitted migrations a worker still drives.

    Only those still ``accepted`` are renewed: one that moved on is no
    longer the worker's to hold. ``updated_at`` stays: it tells operators
    when the migration last changed.

    :param holder: renew only the leases this worker holds (its
        ``lease_holder``): a worker back after a partition longer than
        its leases may still count as its own a migration that another
        worker ended, or that went back to the queue and was admitted by
        another worker; it must not extend that worker's lease (None:
        whoever holds it, for rows admitted without a holder).
    :returns: how many were renewed.
    """
    if not uuids:
        return 0
    with db.writer() as session:
        query = sa.update(_M).where(
            _M.uuid.in_(sorted(uuids)), _M.status == STATUS.ACCEPTED,
            _M.admitted_at.is_not(None))
        if holder is not None:
            query = query.where(_M.lease_holder == holder)
        result = session.execute(query.values(
            lease_expires_at=_rows.utcnow() + _seconds(lease_s))
            .execution_options(synchronize_session=False))
        return result.rowcount


def stalled(db, now, unleased_patience_s):
    """uuids of admitted ``accepted`` migrations no worker drives: the
    lease ran out or, for rows admitted before leases existed, nothing
    changed for ``unleased_patience_s``."""
    with db.reader() as session:
        return list(session.scalars(sa.select(_M.uuid).where(
            _M.status == STATUS.ACCEPTED, _M.admitted_at.is_not(None),
            sa.or_(_M.lease_expires_at < now, sa.and_(
                _M.lease_expires_at.is_(None),
                _M.updated_at < now - _seconds(unleased_patience_s))))
            .order_by(_M.id)))


def holders(db, uuids):
    """{uuid: lease_holder} of ``uuids`` (None where no holder was
    recorded): the conductor worker that drove each one's destination
    choice."""
    if not uuids:
        return {}
    with db.reader() as session:
        return dict(session.execute(sa.select(_M.uuid, _M.lease_holder)
                                    .where(_M.uuid.in_(sorted(uuids)))).all())


def _seconds(value):
    return datetime.timedelta(seconds=value)
