"""What the metrics endpoint reads: aggregates, computed by the database.

Each function is one query whose answer does not grow with the history
kept: counts grouped by a few bounded columns, histogram buckets summed
in SQL, and the rows of the migrations in flight (bounded by the
admission limits). Public API::

    migration_counts(db) -> [(status, policy, count)]
    timing_buckets(db, column, bounds_ms) -> Buckets
    in_flight(db) -> [InFlight]
    queue(db, now) -> (queued, oldest wait in seconds or None)
    drain_moves(db) -> [(host, kind, move status, count)]
"""

import typing

import sqlalchemy as sa

from numamig.db import drains
from numamig.db import models
from numamig.objects import fields_enums

STATUS = fields_enums.MigrationStatus
_M = models.Migration


def migration_counts(db):
    """[(status, convergence policy or '', records)] of every migration
    kept."""
    query = sa.select(_M.status, _M.convergence_policy,
                      sa.func.count()).group_by(_M.status,
                                                _M.convergence_policy)
    with db.reader() as session:
        return [(status, policy or '', count)
                for status, policy, count in session.execute(query)]


class Buckets(typing.NamedTuple):
    """A histogram of completed migrations' ``column``."""

    cumulative: list   # migrations at or under each bound, bound order
    count: int         # every completed migration with a value
    total_ms: int      # the sum of their values


def timing_buckets(db, column, bounds_ms):
    """Completed migrations' ``column`` ('elapsed_ms' or 'downtime_ms')
    counted at or under each of ``bounds_ms``, with their count and sum,
    in one pass of the database."""
    value = getattr(_M, column)
    ended = sa.and_(_M.status == STATUS.COMPLETED, value.is_not(None))
    at_most = [sa.func.coalesce(sa.func.sum(sa.case(
        (value <= bound, 1), else_=0)), 0) for bound in bounds_ms]
    query = sa.select(*at_most, sa.func.count(),
                      sa.func.coalesce(sa.func.sum(value), 0)).where(ended)
    with db.reader() as session:
        row = session.execute(query).one()
    return Buckets([int(v) for v in row[:-2]], int(row[-2]), int(row[-1]))


class InFlight(typing.NamedTuple):
    uuid: str
    source_host: str
    dest_host: str
    status: str
    memory_total: int
    memory_processed: int
    memory_remaining: int
    dirty_rate: int        # bytes/s sampled before the copy; 0: unknown


def in_flight(db):
    """The migrations being copied (preparing to post-migrating)."""
    copying = [s for s in STATUS.IN_PROGRESS
               if s not in (STATUS.ACCEPTED, STATUS.QUEUED)]
    query = sa.select(_M.uuid, _M.source_host, _M.dest_host, _M.status,
                      _M.memory_total, _M.memory_processed,
                      _M.memory_remaining, _M.sampled_dirty_rate).where(
        _M.status.in_(copying)).order_by(_M.id)
    with db.reader() as session:
        return [InFlight(uuid, source, dest or '', status, total or 0,
                         processed or 0, remaining or 0, rate or 0)
                for uuid, source, dest, status, total, processed, remaining,
                rate in session.execute(query)]


def queue(db, now):
    """(migrations waiting for admission, seconds the oldest has waited
    or None)."""
    waiting = _M.status.in_((STATUS.ACCEPTED, STATUS.QUEUED))
    query = sa.select(sa.func.count(), sa.func.min(_M.created_at)).where(
        waiting)
    with db.reader() as session:
        count, oldest = session.execute(query).one()
    if not count or oldest is None:
        return count or 0, None
    return count, max(0.0, (now - oldest).total_seconds())


def drain_moves(db):
    """[(host, kind, move status, moves)] of the drains and
    defragmentations in progress ('drain' or 'defragment')."""
    drain, move = models.Drain, models.DrainMove
    query = sa.select(drain.host, drain.kind, move.status,
                      sa.func.count()).join(
        move, move.drain_uuid == drain.uuid).where(
        drain.status.in_(drains.ACTIVE)).group_by(
        drain.host, drain.kind, move.status)
    with db.reader() as session:
        return [tuple(row) for row in session.execute(query)]
