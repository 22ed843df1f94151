"""A conductor host cut off while it drives migrations and a drain.

Three conductors, each on a host of its own (a network namespace,
harness.FaultDeployment(conductors=3)), compute agents on test-driver
hosts in the root namespace, RabbitMQ and PostgreSQL reached by each
conductor through proxies on its own link. A round:

1. drains one host (the operations API's ``host_drain_start``) and asks
   for migrations of guests of the other hosts, the scheduler choosing;
2. the first conductor seen holding a lease on one of them (the
   migrations' ``lease_holder``: it is choosing that migration's
   destination) is cut off: its namespace's link goes down, as a host
   whose network fails. Nothing is reset: its connections to the broker
   and the database hang, and so does whatever it was doing;
3. the link stays down until every migration the cut conductor held is
   ended by another conductor (its lease ran out: the stalled-migration
   sweep of a conductor that still has the database ends it ``error``,
   "nothing ran", and drops its claim; a drain's move whose migration
   ended so is planned again and driven by the conductors left), or
   CUT_DEADLINE_S;
4. the link comes back and the round waits for the world check (world.py)
   to be clean, timed from the link's return.

The round holds the records to fencing by lease:

* every migration the cut conductor held was ended by another
  conductor (the error names both: ``its conductor worker <holder>
  stopped or was cut off ... (ended by <holder>)``), after its lease
  ran out and not before;
* after the link came back the cut conductor changed none of them: no
  status history entry after the end, the lease not extended (its
  ``lease_expires_at`` as it was), no claim recorded for them;
* no guest completed more migrations than were asked for it (one per
  request, one per drain move), the drain ended with every guest off
  the drained host;

and measures: takeover (lease expiry to another conductor's end of the
migration, and link down to it), the time to settle after the link's
return.
"""

import dataclasses
import threading
import time

import oslo_messaging as messaging
from oslo_utils import uuidutils
import sqlalchemy as sa

from numamig.db import drains
from numamig.db import instances
from numamig.db import migrations
from numamig.db import models
from tests.functional.faults import rounds
from tests.functional.faults import world

FINAL = world.FINAL
POLL_S = 0.01
# How long the round waits for a conductor to hold a lease.
HOLD_DEADLINE_S = 30
# The link stays down at least this long: longer than a lease (6 s) and
# a sweep (2 s), so that what the cut conductor blocks shows; cut inside
# a transaction, longer than a chain of its sessions each holding the
# lock for [database] idle_in_transaction_timeout (5 s) in turn.
MIN_CUT_S = {'lease': 10, 'transaction': 20}
# The others must carry on (a migration recorded or changing status)
# within a bound of the cut: the cut conductor's sessions inside a
# transaction, each of which may hold the admission lock for the
# idle-in-transaction timeout in turn (statements sent before the cut
# queue on the lock and get it one after the other), and a margin.
IDLE_IN_TRANSACTION_S = 5
HELD_UP_MARGIN_S = 3
# The round's lease and sweep interval (test_partition's options).
LEASE_S = 6
SWEEP_S = 2
PROGRESS_POLL_S = 0.1
# Bytes that crossed the link before it went down land within this.
LANDED_S = 1.0
# A request unanswered within this is asked again, up to the deadline.
REQUEST_TIMEOUT_S = 5
REQUEST_DEADLINE_S = 90
PREFER_DRAIN_S = 3.0
# The link comes back once every migration the cut conductor held was
# taken over, or after this.
CUT_DEADLINE_S = 60
# Once taken over, the link stays down a little longer: the other
# conductors drive the drain's re-planned moves meanwhile.
AFTER_TAKEOVER_S = 2.0

DRAIN_DEADLINE_S = 120
DRAIN_ENDED = ('completed', 'failed', 'aborted')


@dataclasses.dataclass
class PartitionResult:
    victim: str = None
    held: tuple = ()
    drain_moves_held: int = 0
    # Requests asked again after REQUEST_TIMEOUT_S without an answer.
    resent: int = 0
    # Seconds from the cut to the first change of the round's migrations
    # seen while the link was down (None: none).
    progress_s: float = None
    # The cut conductor's sessions left inside a transaction.
    stuck_sessions: int = 0
    # moment='transaction': whether the cut left its session inside a
    # transaction, and the locks it held then.
    open_at_cut: bool = None
    locks_at_cut: list = dataclasses.field(default_factory=list)
    # uuid of a drain move's migration taken over -> (seconds from its
    # lease's expiry to the admission of the move planned again, by).
    replanned: dict = dataclasses.field(default_factory=dict)
    # uuid -> seconds from the lease's expiry to its end by another
    # conductor; and from the cut to that end.
    after_expiry: dict = dataclasses.field(default_factory=dict)
    after_cut: dict = dataclasses.field(default_factory=dict)
    cut_s: float = None
    settle_s: float = None
    drain: str = None
    outcomes: dict = dataclasses.field(default_factory=dict)
    problems: list = dataclasses.field(default_factory=list)

    @property
    def clean(self):
        return not self.problems


def leases(db):
    """{uuid: Lease} of every migration, read straight from the table."""
    table = models.Migration.__table__
    with db.reader() as session:
        return {row.uuid: Lease(row.lease_holder, row.lease_expires_at,
                                row.status, row.instance_uuid,
                                row.admitted_at, row.created_at)
                for row in session.execute(sa.select(
                    table.c.uuid, table.c.lease_holder,
                    table.c.lease_expires_at, table.c.status,
                    table.c.instance_uuid, table.c.admitted_at,
                    table.c.created_at))}


@dataclasses.dataclass(frozen=True)
class Lease:
    holder: str
    expires: object
    status: str
    instance_uuid: str
    admitted_at: object
    created_at: object


def _holder_to_cut(db, drained_guests, prefer_drain):
    """The holder of a lease on an admitted 'accepted' migration now
    (one of a guest of the drain if ``prefer_drain``), or None."""
    held = [v for v in leases(db).values()
            if v.status == 'accepted' and v.holder and v.expires]
    if prefer_drain:
        held = [v for v in held if v.instance_uuid in drained_guests]
    return held[0].holder if held else None


def _in_transaction(dep):
    """{conductor host: [backend pids]} of the conductors' database
    sessions now inside a transaction that holds a row of the ``locks``
    table (the admission lock every conductor takes to record or admit a
    migration, or the drains' lock), read from pg_locks by the test's
    own connection and matched by the ports of each conductor's
    proxy."""
    ports = {host: link.database.upstream_ports()
             for host, link in dep.links.items()}
    with dep.db.reader() as session:
        rows = session.execute(sa.text(
            "SELECT DISTINCT a.pid, a.client_port FROM pg_stat_activity a "
            "JOIN pg_locks l ON l.pid = a.pid JOIN pg_class c ON c.oid = "
            "l.relation WHERE c.relname = 'locks' AND l.mode = "
            "'RowShareLock' AND l.granted AND "
            "a.pid <> pg_backend_pid()")).all()
    found = {}
    for pid, port in rows:
        for host, mine in ports.items():
            if port in mine:
                found.setdefault(host, []).append(pid)
    return found


def _sessions_in_transaction(dep, host):
    """How many of conductor ``host``'s database sessions are inside a
    transaction now (holding locks or waiting for them)."""
    ports = dep.links[host].database.upstream_ports()
    with dep.db.reader() as session:
        rows = session.execute(sa.text(
            "SELECT client_port FROM pg_stat_activity WHERE xact_start IS "
            "NOT NULL AND pid <> pg_backend_pid()")).all()
    return sum(1 for (port,) in rows if port in ports)


def _locks_of(dep, pids):
    """The locks the backends ``pids`` hold, as (type, relation, mode)."""
    if not pids:
        return []
    with dep.db.reader() as session:
        return [tuple(row) for row in session.execute(sa.text(
            "SELECT l.locktype, c.relname, l.mode FROM pg_locks l "
            "LEFT JOIN pg_class c ON c.oid = l.relation WHERE l.granted "
            "AND l.pid = ANY(:pids) AND l.locktype IN "
            "('relation', 'tuple', 'transactionid') AND (c.relname IS NULL "
            "OR c.relname NOT LIKE 'pg_%')"), {'pids': list(pids)})]


def run_round(dep, rng, drained, movers, moment='lease'):
    """One round on ``dep`` (harness.FaultDeployment with conductors in
    namespaces): drain ``drained``, migrate ``movers`` guests of the
    other hosts, cut off a conductor.

    :param moment: 'lease': the conductor seen holding a lease (on a
        drain's move if one is seen within PREFER_DRAIN_S);
        'transaction': the first conductor seen inside a database
        transaction holding the admission (or drains') lock, so that its
        session stays open on the server with that lock while its link
        is down.
    """
    rounds._wait_for_quiet(dep)
    dep.api.wait_until_ready(dep.context, attempt_timeout=5, max_attempts=24)
    result = PartitionResult()
    records = [r.instance for r in instances.get_all(dep.db)]
    others = sorted(i.uuid for i in records if i.host != drained)
    on_drained = sorted(i.uuid for i in records if i.host == drained)
    chosen = rng.sample(others, movers)
    before = {m.uuid for m in migrations.get_all(dep.db)}
    # The drain and the migrations at once, each request from a thread
    # of its own: the conductors admit them while the cut comes.
    answers = {}

    drain_uuid = uuidutils.generate_uuid()

    def ask_drain():
        answers['drain'] = _asked_again(
            lambda timeout: dep.api.host_drain_start(
                dep.context, drained, 2, drain_uuid=drain_uuid,
                timeout=timeout), result)

    def ask(guest):
        uuid = uuidutils.generate_uuid()
        answers[guest] = _asked_again(
            lambda timeout: dep.api.live_migrate_instance(
                dep.context, guest, migration_uuid=uuid, timeout=timeout),
            result)

    # The drain first (a host that guests are migrating to cannot be
    # drained), then the migrations at once while its moves run.
    ask_drain()
    senders = [threading.Thread(target=ask, args=(g,)) for g in chosen]
    for sender in senders:
        sender.start()
    # The conductor to cut holds a lease on a drain's move if one is
    # seen within PREFER_DRAIN_S (the moves are admitted with the first
    # requests, highest priority first), else on any migration.
    started = time.monotonic()
    holder = None
    while holder is None and time.monotonic() < started + HOLD_DEADLINE_S:
        if moment == 'transaction':
            busy = _in_transaction(dep)
            if busy:
                host = sorted(busy)[0]
                pids = busy[host]
                victim = next(d for d in dep.conductors if d.host == host)
                dep.cut_conductor(victim)
                holder = host
                break
        else:
            holder = _holder_to_cut(
                dep.db, on_drained,
                prefer_drain=time.monotonic() < started + PREFER_DRAIN_S)
        if holder is None:
            time.sleep(POLL_S)
    if holder is None:
        result.problems.append(f"no conductor was seen holding a lease "
                               f"within {HOLD_DEADLINE_S} s")
        for sender in senders:
            sender.join(rounds.SETTLE_DEADLINE_S)
        return result
    if moment == 'transaction':
        # Its pid, to name the lease holder.
        result.locks_at_cut = _locks_of(dep, pids)
        result.open_at_cut = bool(set(pids) & set(
            _in_transaction(dep).get(holder, ())))
        holder = next((v.holder for v in leases(dep.db).values()
                       if v.holder and v.holder.startswith(f'{holder}:')),
                      f'{holder}:?')
    else:
        victim = next(d for d in dep.conductors
                      if holder.startswith(f'{d.host}:'))
        dep.cut_conductor(victim)
    cut_at = time.monotonic()
    cut_wall = time.time()
    # Work the others should carry on during the cut: requests not yet
    # answered, migrations of the round not final.
    pending = sum(sender.is_alive() for sender in senders) + len(
        [u for u, v in leases(dep.db).items()
         if u not in before and v.status not in FINAL])
    # What it held at the cut, read once what it sent before the cut
    # has landed (a COMMIT already past its link); nothing it does
    # reaches the database after that.
    time.sleep(LANDED_S)
    watch = ProgressWatch(dep, before)
    stuck = _sessions_in_transaction(dep, victim.host)
    # Or, when only the cut conductor's migrations were under way, the
    # takeover: a lease and a sweep.
    held_up_limit = max(stuck * IDLE_IN_TRANSACTION_S,
                        LEASE_S + SWEEP_S) + HELD_UP_MARGIN_S
    result.stuck_sessions = stuck
    at_cut = {u: v for u, v in leases(dep.db).items()
              if v.holder == holder and v.status == 'accepted'}
    result.victim = holder
    result.held = tuple(sorted(at_cut))
    result.drain_moves_held = len([v for v in at_cut.values()
                                   if v.instance_uuid in on_drained])
    ended = _wait_taken_over(dep, at_cut, cut_at, cut_wall, result)
    time.sleep(max(AFTER_TAKEOVER_S if ended else 0,
                   cut_at + max(MIN_CUT_S[moment], held_up_limit + 2) -
                   time.monotonic()))
    first_progress = watch.stop()
    dep.restore_conductor(victim)
    restored = time.monotonic()
    result.cut_s = restored - cut_at
    result.progress_s = None if first_progress is None else \
        first_progress - cut_at
    if pending and (result.progress_s is None or
                    result.progress_s > held_up_limit):
        result.problems.append(
            f"the others were held up by the cut conductor: with "
            f"{pending} request(s) or migration(s) under way, the first "
            f"change came "
            f"{rounds._seconds(result.progress_s)} after the cut (link "
            f"down {result.cut_s:.0f} s, limit {held_up_limit} s for "
            f"{stuck} of its sessions inside a transaction)")
    # Requests delivered to the cut conductor are lost with it (until
    # its connection is given up on); asked again under the same uuid,
    # another conductor answers.
    for sender in senders:
        sender.join(REQUEST_DEADLINE_S)
    if answers.get('drain'):
        result.drain = answers['drain']['uuid']
    else:
        result.problems.append("the drain's request got no answer")
    result.settle_s, found_problems = rounds.settle(dep, restored)
    result.problems += found_problems
    if result.drain:
        result.problems += _drain_end(dep, result.drain, drained, on_drained)
    result.problems += _fenced(dep, at_cut, holder)
    mine = [m for m in migrations.get_all(dep.db) if m.uuid not in before]
    for migration in mine:
        result.outcomes[migration.status] = \
            result.outcomes.get(migration.status, 0) + 1
    result.problems += _once_each(mine, chosen, on_drained)
    _replanned(dep, at_cut, on_drained, result)
    result.problems += world.unexplained_ends(
        dep, [m.uuid for m in mine])
    return result


class ProgressWatch:
    """Watch, from the test's own connection, for the first change of
    the round's migrations (one recorded, or a status changed) while
    the link is down: the others carrying on. The records' own
    timestamps cannot tell: a conductor stamps a change before it waits
    for the lock the cut one holds."""

    def __init__(self, dep, before):
        self.dep = dep
        self.before = before
        self.first = None
        self._baseline = self._signature()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _signature(self):
        return frozenset((u, v.status) for u, v in leases(self.dep.db).items()
                         if u not in self.before)

    def _loop(self):
        while not self._stopping.wait(PROGRESS_POLL_S):
            if self._signature() != self._baseline:
                self.first = time.monotonic()
                return

    def stop(self):
        """The monotonic time of the first change, or None."""
        self._stopping.set()
        self._thread.join()
        return self.first


def _asked_again(request, result):
    """``request(timeout)`` as an operator's script asks: an attempt
    unanswered within REQUEST_TIMEOUT_S is asked again, under the same
    uuid (the requests are idempotent), until REQUEST_DEADLINE_S."""
    deadline = time.monotonic() + REQUEST_DEADLINE_S
    while True:
        try:
            return request(REQUEST_TIMEOUT_S)
        except messaging.MessagingTimeout:
            result.resent += 1
            if time.monotonic() > deadline:
                result.problems.append(
                    f"a request got no answer within "
                    f"{REQUEST_DEADLINE_S} s")
                return None
        except Exception as exc:  # noqa: BLE001 - a problem of the round
            result.problems.append(f"a request failed: "
                                   f"{type(exc).__name__}: {exc}")
            return None


def _replanned(dep, at_cut, on_drained, result):
    """For each drain move the cut conductor held: seconds from its
    lease's expiry to another conductor admitting the move planned
    again (the same guest's next migration)."""
    now = leases(dep.db)
    for uuid, lease in at_cut.items():
        if lease.instance_uuid not in on_drained:
            continue
        after = sorted((v for u, v in now.items()
                        if v.instance_uuid == lease.instance_uuid and
                        v.created_at > lease.created_at and v.admitted_at),
                       key=lambda v: v.created_at)
        if not after:
            result.problems.append(f"the drain's move of "
                                   f"{lease.instance_uuid} was not planned "
                                   f"again after {uuid} was taken over")
            continue
        result.replanned[uuid] = (
            after[0].admitted_at.timestamp() - lease.expires.timestamp(),
            after[0].holder)


def _wait_taken_over(dep, at_cut, cut_at, cut_wall, result):
    """Wait (the link down) until another conductor ended every
    migration held at the cut; record the takeover times. True if all
    were."""
    deadline = cut_at + CUT_DEADLINE_S
    left = set(at_cut)
    while left and time.monotonic() < deadline:
        now = leases(dep.db)
        for uuid in sorted(left):
            if now[uuid].status != 'accepted':
                left.discard(uuid)
                migration = migrations.get(dep.db, uuid)
                ended_at = migration.history[-1].changed_at.timestamp()
                expires = at_cut[uuid].expires.timestamp()
                result.after_expiry[uuid] = ended_at - expires
                result.after_cut[uuid] = ended_at - cut_wall
        time.sleep(0.1)
    if left:
        result.problems.append(
            f"{len(left)} migration(s) the cut conductor held were not "
            f"taken over within {CUT_DEADLINE_S} s: {sorted(left)}")
    return not left


def _fenced(dep, at_cut, holder):
    """What the cut conductor held was ended by another one, after its
    lease ran out, and left alone by it after its return."""
    found = []
    now = leases(dep.db)
    for uuid, lease in at_cut.items():
        expires = lease.expires
        migration = migrations.get(dep.db, uuid)
        end = next((c for c in migration.history if c.status in FINAL),
                   None)
        if end is None:
            found.append(f"migration {uuid} the cut conductor held never "
                         f"ended")
            continue
        error = migration.get('error') or ''
        if migration.status != 'error' or holder not in error or \
                '(ended by ' not in error or \
                f'(ended by {holder})' in error:
            found.append(f"migration {uuid} held by {holder} ended "
                         f"{migration.status} with {error[:300]!r}: not "
                         f"by another conductor taking over its lease")
        if end.changed_at.timestamp() < expires.timestamp():
            found.append(f"migration {uuid} was ended before its lease "
                         f"ran out ({end.changed_at} < {expires})")
        later = [c for c in migration.history
                 if c.changed_at > end.changed_at]
        if later:
            found.append(f"migration {uuid} changed after it ended: "
                         f"{[(c.status, c.detail) for c in later]}")
        if now[uuid].expires != expires:
            found.append(f"the lease on migration {uuid} was extended "
                         f"after it ran out: {expires} -> "
                         f"{now[uuid].expires} (holder now "
                         f"{now[uuid].holder})")
        record = instances.get(dep.db, migration.instance_uuid).instance
        context = record.get('migration_context')
        if context is not None and context.migration_uuid == uuid:
            found.append(f"migration {uuid} still holds a claim on "
                         f"{context.dest_host} after it ended")
    return found


def _drain_end(dep, drain_uuid, drained, guests):
    deadline = time.monotonic() + DRAIN_DEADLINE_S
    while True:
        data = drains.get(dep.db, drain_uuid)
        if data['status'] in DRAIN_ENDED:
            break
        if time.monotonic() > deadline:
            return [f"drain of {drained} still {data['status']} "
                    f"{DRAIN_DEADLINE_S} s after the link came back"]
        time.sleep(0.25)
    found = []
    if data['status'] != 'completed':
        moves = [(m['name'], m['status'], m['error'])
                 for m in data['moves']]
        found.append(f"drain of {drained} ended {data['status']}: {moves}")
    hosts = {r.instance.uuid: r.instance.host
             for r in instances.get_all(dep.db)}
    stayed = [g for g in guests if hosts.get(g) == drained]
    if stayed:
        found.append(f"{len(stayed)} guest(s) still on drained {drained}")
    return found


def _once_each(mine, chosen, on_drained):
    """No guest completed more migrations than were asked for it."""
    asked = dict.fromkeys(chosen, 1)
    for guest in on_drained:
        asked[guest] = asked.get(guest, 0) + 1
    done = {}
    for migration in mine:
        if migration.status == 'completed':
            done[migration.instance_uuid] = \
                done.get(migration.instance_uuid, 0) + 1
    return [f"guest {g} completed {n} migrations, {asked.get(g, 0)} asked"
            for g, n in sorted(done.items()) if n > asked.get(g, 0)]


def summary(results):
    """Lines with the figures of every round."""
    takeovers = [s for r in results for s in r.after_expiry.values()]
    from_cut = [s for r in results for s in r.after_cut.values()]
    replans = [s for r in results for s, _h in r.replanned.values()]
    settles = [r.settle_s for r in results if r.settle_s is not None]
    lines = [f"{len(results)} round(s), {sum(r.clean for r in results)} "
             f"clean"]
    for index, r in enumerate(results, 1):
        lines.append(
            f"round {index}: cut {r.victim} holding {len(r.held)} "
            f"lease(s) ({r.drain_moves_held} on drain moves), link down "
            f"{rounds._seconds(r.cut_s)} ({r.stuck_sessions} of its "
            f"sessions left inside a transaction; the others' first change "
            f"{rounds._seconds(r.progress_s)} after the cut); taken over "
            f"{_list(r.after_expiry.values())} after the lease ran out "
            f"({_list(r.after_cut.values())} after the cut); drain moves "
            f"planned again and admitted "
            f"{_list(s for s, _h in r.replanned.values())} after it, by "
            f"{sorted({h for _s, h in r.replanned.values()}) or '-'}; "
            f"settled {rounds._seconds(r.settle_s)} after the link came "
            f"back; outcomes {dict(sorted(r.outcomes.items()))}, "
            f"requests asked again {r.resent}")
        if r.open_at_cut is not None:
            lines.append(f"    cut inside a transaction: still open "
                         f"{r.open_at_cut}, holding {r.locks_at_cut}")
        lines += [f"    {p}" for p in r.problems[:12]]
    if takeovers:
        lines.append(
            f"takeover after lease expiry: max {max(takeovers):.1f}s, "
            f"after the cut: max {max(from_cut):.1f}s; drain move "
            f"admitted again: max "
            f"{rounds._seconds(max(replans) if replans else None)}; "
            f"settle max "
            f"{rounds._seconds(max(settles) if settles else None)}")
    return lines


def _list(seconds):
    return ', '.join(f'{s:.1f}s' for s in seconds) or '-'
