"""Drains of hosts and their moves, kept in the database (release 2).

A drain is ``running`` from its start until no move is pending or
migrating, then ``completed`` (every guest moved) or ``failed`` (some
could not be); an abort makes it ``aborting`` until its migrations in
flight end, then ``aborted``. A move is ``pending`` (waits for its turn),
``migrating`` (its migration is recorded), then ``completed``,
``failed`` or ``cancelled``; a refused one goes back to ``pending`` with
a new destination (a re-plan).

A defragmentation (release 2) is a drain of kind ``defragment``:
its host is the one it makes room on (left enabled), its moves may come
from other hosts too (``source_host``), and its ``outcome`` says, once
its moves ended, whether the room exists.

Every change is conditional on the state its caller read, so two
conductor workers driving the same drain never start one move twice;
and every change bumps the drain's ``revision``, which waiters compare.
Rows are returned as plain dicts (RPC answers and the CLI's JSON).
"""

import dataclasses

import sqlalchemy as sa

from numamig import exception
from numamig.convergence import drain_link
from numamig.db import _rows
from numamig.db import models

DRAIN_LOCK = 'host-drains'
MIB = 1024 * 1024

RUNNING = 'running'
ABORTING = 'aborting'
COMPLETED = 'completed'
FAILED = 'failed'
ABORTED = 'aborted'
ACTIVE = (RUNNING, ABORTING)

DRAIN = 'drain'
DEFRAGMENT = 'defragment'

PENDING = 'pending'
MIGRATING = 'migrating'
CANCELLED = 'cancelled'
MOVE_ENDED = (COMPLETED, FAILED, CANCELLED)

_D = models.Drain
_M = models.DrainMove
_DRAIN_FIELDS = ('uuid', 'host', 'kind', 'status', 'revision', 'parallel',
                 'priority', 'was_disabled', 'options', 'outcome', 'error',
                 'created_at', 'updated_at', 'ended_at')
_MOVE_FIELDS = ('position', 'instance_uuid', 'name', 'status',
                'source_host', 'planned_host', 'planned_topology',
                'migration_uuid', 'attempts', 'refused', 'dest_host',
                'error', 'started_at', 'ended_at')


def create(db, drain, moves):
    """Record a drain and its moves, unless the host has one active.

    :param drain: {'uuid', 'host', 'parallel', 'priority',
        'was_disabled', 'options'} and optionally 'kind' (default
        DRAIN).
    :param moves: [{'instance_uuid', 'name', 'planned_host',
        'planned_topology'}] (and optionally 'source_host') in the
        plan's order.
    :raises DrainInProgress: another drain of the host is active;
        nothing recorded.
    """
    now = _rows.utcnow()
    with db.writer() as session:
        session.execute(sa.select(models.Lock.name).where(
            models.Lock.name == DRAIN_LOCK).with_for_update())
        active = session.execute(sa.select(_D.uuid, _D.status).where(
            _D.host == drain['host'], _D.status.in_(ACTIVE))).first()
        if active is not None:
            raise exception.DrainInProgress(
                host=drain['host'], drain_uuid=active.uuid,
                status=active.status)
        session.add(_D(status=RUNNING, revision=1, created_at=now,
                       updated_at=now, **dict({'kind': DRAIN}, **drain)))
        session.flush()
        for position, move in enumerate(moves):
            session.add(_M(drain_uuid=drain['uuid'], position=position,
                           status=PENDING, attempts=0, refused={},
                           created_at=now, updated_at=now, **move))
        session.flush()
        _note_drain(session, drain['uuid'])


def get(db, drain_uuid):
    """The drain with its moves.

    :raises DrainNotFound:
    """
    with db.reader() as session:
        row = session.scalars(sa.select(_D).where(
            _D.uuid == drain_uuid)).one_or_none()
        if row is None:
            raise exception.DrainNotFound(what=f"uuid {drain_uuid}")
        return _with_moves(session, row)


def latest_for_host(db, host):
    """The host's active drain, or its last one.

    :raises DrainNotFound: the host was never drained.
    """
    with db.reader() as session:
        row = session.scalars(sa.select(_D).where(_D.host == host).order_by(
            _D.status.in_(ACTIVE).desc(), _D.id.desc()).limit(1)).first()
        if row is None:
            raise exception.DrainNotFound(what=f"host {host}")
        return _with_moves(session, row)


def active(db):
    """uuids of the drains running or aborting, oldest first."""
    with db.reader() as session:
        return list(session.scalars(sa.select(_D.uuid).where(
            _D.status.in_(ACTIVE)).order_by(_D.id)))


def move_of_migration(db, migration_uuid):
    """(drain uuid, instance uuid) of the move a migration carries, or
    None when it carries none."""
    with db.reader() as session:
        row = session.execute(sa.select(_M.drain_uuid, _M.instance_uuid)
                              .where(_M.migration_uuid == migration_uuid)
                              ).first()
    return None if row is None else (row.drain_uuid, row.instance_uuid)


def start_moves(db, drain_uuid, uuid_factory, choose_policy=None,
                most=None):
    """Mark ``migrating`` the pending moves whose turn has come, each
    with a new migration uuid.

    A move's turn comes when fewer than ``parallel`` moves migrate, no
    move to its destination migrates without its claim yet (its
    migration not recorded, or still accepted or queued), no move
    before it in the plan goes to its destination and is pending, and
    no move before it leaves its destination and is pending or
    migrating: moves into one host take their claims in the plan's
    order, after the guests planned to leave it left (a
    defragmentation's chains), so each destination claim finds what the
    plan fitted it on. Once a move's claim is taken (its migration is
    preparing or further: the destination's check ran), the next move
    into that host may start while the first one's memory is still
    copied, so that a drain onto few destinations still runs ``parallel``
    copies at once. Only a running drain starts moves.

    A drain whose guests' dirty rates were estimated before it started
    (``options['estimate']``, set_estimate) takes its moves by cost:
    of the first move still to start into each destination, the
    dirtiest, then the largest (numamig.convergence.drain_link.order;
    moves into one destination keep the plan's order). A drain that
    knows its source's link rate (``options`` ``link_rate_mib``, from
    ``[conductor] migration_link_rate(s)``) starts a move only while
    every migrating move keeps its share of the link
    (numamig.convergence.drain_link): its rate is the one its
    migration's pre-flight prediction sampled (``[conductor]
    convergence_prediction``), else the drain's estimate; a move whose
    rate is known neither way holds nothing back. ``parallel`` is then
    the most.

    :param choose_policy: (move, its drain_link.Cost, the link's share
        it would start with in bytes/s) -> the convergence policy its
        migration runs under ({'name', 'post_copy'}), or None (its own),
        asked (with a link rate only) before its share is checked: a
        move that ends by post-copy needs none. Recorded in
        ``options['policies']``, the name returned with the move.
    :param most: start at most this many moves (None: as ``parallel``
        allows).
    :returns: the moves started (dicts, with their migration uuid and
        ``policy``).
    """
    now = _rows.utcnow()
    with db.writer() as session:
        drain = _locked(session, drain_uuid)
        if drain is None or drain.status != RUNNING:
            return []
        options = dict(drain.options or {})
        moves = _moves(session, drain_uuid)
        claimed, rates = _claimed(session, [m.migration_uuid for m in moves
                                            if m.status == MIGRATING])
        link_mib = options.get('link_rate_mib')
        estimate = (options.get('estimate') or {}).get('guests') or {}
        chosen_policies = dict(options.get('policies') or {})

        def cost_of(move):
            known = estimate.get(move.instance_uuid) or {}
            rate = known.get('dirty_rate')
            if move.status == MIGRATING:
                rate = rates.get(move.migration_uuid, rate)
                policy = chosen_policies.get(move.instance_uuid) or {}
            else:
                policy = {}
            return drain_link.Cost(memory=known.get('memory') or 0,
                                   dirty_rate=rate,
                                   post_copy=bool(policy.get('post_copy')))

        if estimate and not any(m.source_host for m in moves):
            moves = drain_link.order(moves, lambda m: m.planned_host,
                                     cost_of)
        policies = {}
        parallel = drain.parallel if most is None else \
            min(drain.parallel, sum(m.status == MIGRATING for m in moves)
                + most)
        chosen = turns(moves, parallel, claimed,
                       link_mib and link_mib * MIB,
                       cost_of if link_mib else None,
                       choose=choose_policy, policies=policies)
        started = []
        for move in chosen:
            policy = policies.get(move)
            move.status = MIGRATING
            move.migration_uuid = uuid_factory()
            move.attempts += 1
            move.started_at = move.started_at or now
            move.updated_at = now
            started.append(dict(_move_dict(move), policy=policy and
                                policy['name']))
            if policy is None:
                chosen_policies.pop(move.instance_uuid, None)
            else:
                chosen_policies[move.instance_uuid] = policy
        if started:
            options['policies'] = chosen_policies
            drain.options = options
            _touch(drain, now)
            for move in started:
                _note_move(session, drain, move)
        return started


def set_estimate(db, drain_uuid, estimate):
    """Record the dirty rates estimated for a drain's guests before its
    moves start, once: {'guests': {instance uuid: {'dirty_rate': B/s or
    None, 'memory': bytes or None}}, 'figures': the source's prediction
    figures (numamig.virt.libvirt.dirty_rate.figures) or None,
    'reason': why there are none, or None}.

    :returns: True if this call recorded it (False: it was already, or
        the drain is no longer running).
    """
    now = _rows.utcnow()
    with db.writer() as session:
        drain = _locked(session, drain_uuid)
        if drain is None or drain.status != RUNNING or \
                'estimate' in (drain.options or {}):
            return False
        drain.options = dict(drain.options or {}, estimate=estimate)
        _touch(drain, now)
        return True


def turns(moves, parallel, claimed, link_rate=None, cost_of=None,
          margin=drain_link.SHARE_MARGIN, choose=None, policies=None):
    """The pending moves whose turn has come (start_moves' rule), in
    the plan's order; pure, so a benchmark runs the same rule.

    With ``link_rate`` (bytes/s of the source's link) and ``cost_of``
    (move -> numamig.convergence.drain_link.Cost), ``parallel`` is the
    most: a move starts only while every pre-copy running keeps its
    share of the link (drain_link.may_start), and one that may not
    holds back the moves after it, so that it gets its share once
    running moves end instead of being passed for ever.

    :param moves: the drain's moves in the plan's order, each with
        ``status``, ``planned_host``, ``source_host`` and
        ``migration_uuid``.
    :param claimed: uuids of the migrations past their destination's
        claim.
    :param choose: (move, its Cost, the link's share it would start
        with, bytes/s) -> the policy it runs under ({'name',
        'post_copy'}) or None (its own), asked before the share is
        checked: a move that ends by post-copy needs no share. With
        ``policies`` (a dict), the choices of the moves chosen are put
        there, by move.
    """
    migrating = [m for m in moves if m.status == MIGRATING]
    sharing = [cost_of(m) for m in migrating] if cost_of else None
    busy = {m.planned_host for m in migrating
            if m.migration_uuid not in claimed}
    room = parallel - len(migrating)
    chosen = []
    leaving = set()           # hosts with a guest still to leave
    for move in moves:
        waits = move.planned_host in leaving
        if move.source_host and move.status in (PENDING, MIGRATING):
            leaving.add(move.source_host)
        if room <= 0:
            break
        if move.status != PENDING:
            continue
        host = move.planned_host
        if host in busy or waits:
            busy.add(host)
            continue
        if sharing is not None:
            cost = cost_of(move)
            if choose is not None:
                share = link_rate / (len(sharing) + 1) if link_rate \
                    else None
                policy = choose(move, cost, share)
                if policy is not None:
                    cost = dataclasses.replace(
                        cost, post_copy=bool(policy.get('post_copy')))
                if policies is not None:
                    policies[move] = policy
            if not drain_link.may_start(link_rate, sharing, cost, margin):
                if policies is not None:
                    policies.pop(move, None)
                break
            sharing.append(cost)
        busy.add(host)
        chosen.append(move)
        room -= 1
    return chosen


def end_move(db, drain_uuid, instance_uuid, migration_uuid, status,
             dest_host=None, error=None):
    """End the move its migration ``migration_uuid`` carries.

    :returns: True if this call ended it (False: it moved on already,
        a repeat).
    """
    return _update_move(db, drain_uuid, instance_uuid, migration_uuid,
                        status=status, dest_host=dest_host, error=error,
                        ended=True)


def replan_move(db, drain_uuid, instance_uuid, migration_uuid, host,
                topology, refused):
    """Send a refused move back to ``pending`` towards ``host``.

    :param refused: {host: reason} of every destination refused so far.
    :returns: True if this call changed it.
    """
    return _update_move(db, drain_uuid, instance_uuid, migration_uuid,
                        status=PENDING, planned_host=host,
                        planned_topology=topology, refused=refused,
                        migration_uuid=None)


def cancel_pending(db, drain_uuid, reason):
    """Cancel every pending move of the drain; returns how many."""
    now = _rows.utcnow()
    with db.writer() as session:
        drain = _locked(session, drain_uuid)
        count = 0
        for move in _moves(session, drain_uuid):
            if move.status == PENDING:
                move.status, move.error = CANCELLED, reason
                move.ended_at = move.updated_at = now
                count += 1
                if drain is not None:
                    _note_move(session, drain, _move_dict(move))
        if count and drain is not None:
            _touch(drain, now)
        return count


def set_status(db, drain_uuid, status, expected, error=None,
               outcome=None):
    """Move the drain to ``status`` if it is one of ``expected``; with
    ``outcome``, record a defragmentation's finding at once.

    :returns: True if it changed.
    """
    now = _rows.utcnow()
    with db.writer() as session:
        drain = _locked(session, drain_uuid)
        if drain is None or drain.status not in expected:
            return False
        drain.status = status
        if error is not None:
            drain.error = error
        if outcome is not None:
            drain.outcome = outcome
        if status not in ACTIVE:
            drain.ended_at = now
        _touch(drain, now)
        session.flush()
        _note_drain(session, drain_uuid, error)
        return True


def _update_move(db, drain_uuid, instance_uuid, current_migration,
                 ended=False, **values):
    now = _rows.utcnow()
    with db.writer() as session:
        drain = _locked(session, drain_uuid)
        move = session.scalars(sa.select(_M).where(
            _M.drain_uuid == drain_uuid,
            _M.instance_uuid == instance_uuid).execution_options(
                populate_existing=True)).one_or_none()
        if drain is None or move is None or move.status != MIGRATING or \
                move.migration_uuid != current_migration:
            return False
        for key, value in values.items():
            setattr(move, key, value)
        move.updated_at = now
        if ended:
            move.ended_at = now
        _touch(drain, now)
        _note_move(session, drain, _move_dict(move),
                   None if ended else 'replanned')
        return True


def _locked(session, drain_uuid):
    # An ORM instance, locked and fresh: the callers change it and the
    # session writes it back (_rows.fresh_by_uuid reads plain rows).
    return session.scalars(sa.select(_D).where(
        _D.uuid == drain_uuid).with_for_update().execution_options(
            populate_existing=True)).one_or_none()


# A migration in these has not yet had its destination's claim.
_BEFORE_CLAIM = ('accepted', 'queued')


def _claimed(session, migration_uuids):
    """(the uuids among ``migration_uuids`` of migrations recorded and
    past their destination's claim (or ended), {uuid: the dirty rate
    their prediction sampled, B/s} of those with one)."""
    wanted = [uuid for uuid in migration_uuids if uuid]
    if not wanted:
        return set(), {}
    mig = models.Migration
    rows = session.execute(sa.select(
        mig.uuid, mig.status, mig.sampled_dirty_rate).where(
            mig.uuid.in_(wanted))).all()
    return ({row.uuid for row in rows if row.status not in _BEFORE_CLAIM},
            {row.uuid: row.sampled_dirty_rate for row in rows
             if row.sampled_dirty_rate is not None})


def _moves(session, drain_uuid):
    return list(session.scalars(sa.select(_M).where(
        _M.drain_uuid == drain_uuid).order_by(_M.position).execution_options(
            populate_existing=True)))


def _touch(drain, now):
    drain.revision += 1
    drain.updated_at = now


def _with_moves(session, row):
    data = {name: getattr(row, name) for name in _DRAIN_FIELDS}
    data['moves'] = [_move_dict(m) for m in _moves(session, row.uuid)]
    return data


def _note_drain(session, drain_uuid, detail=None):
    """Tell of the drain as it stands in this transaction, with its
    moves (numamig.db.api.Database.change_listeners)."""
    row = session.scalars(sa.select(_D).where(
        _D.uuid == drain_uuid)).one()
    _rows.note_change(session, _rows.DRAIN, _with_moves(session, row),
                      detail)


def _note_move(session, drain, move, detail=None):
    """Tell of one move (a dict) of ``drain`` as it stands now."""
    _rows.note_change(session, _rows.DRAIN_MOVE, dict(
        move, drain_uuid=drain.uuid, drain_host=drain.host,
        drain_kind=drain.kind), detail)


def _move_dict(move):
    return {name: getattr(move, name) for name in _MOVE_FIELDS}
