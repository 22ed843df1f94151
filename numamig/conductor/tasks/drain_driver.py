"""The thread of a conductor worker that carries drains forward.

Every conductor worker runs one. It wakes when a drain starts or is
aborted here, when a migration ends here (the manager's end listeners),
and after ``recheck`` seconds at the latest (ends recorded by another
worker, a restart). Each pass, for every active drain in the database:

* follows its migrating moves: a migration that completed ends its move
  ``completed``; one that ended ``error`` before anything ran (its
  destination refused the claim, or could not be prepared) is re-planned
  onto another host, up to ``max_replans`` times, else its move fails
  with the reason; one that ``failed`` or was cancelled ends its move so;
* a move whose request is refused for a reason no other destination
  changes (the guest's migration policy is unknown, the guest is being
  deleted or is gone, its source is down, ...) fails at once with that
  reason: only a refusal naming its planned destination is re-planned;
* starts the moves whose turn has come (numamig.db.drains.start_moves):
  each is a migration recorded with the planned host as its destination,
  the drain priority and a uuid chosen before it is recorded, so a
  worker that dies in between is followed by one that records the same
  migration (requests.recorded_already);
* keeps the plan reserved in this worker's scheduler cache: every move
  not yet claimed holds a reservation of its planned placement on its
  planned host (rebuilt after a restart, renewed before it expires);
* ends the drain once nothing is pending or migrating.

Every worker reserves every active drain's plan in its own cache, so
every worker lets go of it, whichever worker ended the drain (or
re-planned a move): a drain this worker reserved for and that is no
longer active has its reservations released at the next pass, those of
the moves that did not complete included, instead of lingering until
``[scheduler] reservation_timeout`` and refusing the host to every other
request meanwhile. Only the reservations this driver made are released
(``HostStateCache.release(only=...)``).

A defragmentation (defragment.py beside this) is carried the same way,
with three differences: its moves and the room for its guest on the target
are held in the cache (``HostStateCache.hold``: counted from the report
that leaves room for them), a refused move is planned again away from
the target and from the host it leaves, and its end waits for the
target's report that shows the moves, then records whether the room is
there (defragment.conclude).

All of it is conditional database writes, so two workers passing over
one drain at once start nothing twice. A stopping worker (``stop`` or
``stop_starting``) starts nothing more: no move, no migration of a move
whose record a dead worker left unmade; a pass under way follows the
moves it looks at and ends, and the next conductor takes the rest.
Nothing here waits on an RPC pool: the driver records migrations and
wakes the executor, whose threads run them.
"""

import threading

from oslo_log import log as logging
from oslo_utils import uuidutils

from numamig import context as nm_context
from numamig import exception
from numamig import objects
from numamig.conductor import drain as drain_plan
from numamig.conductor import requests
from numamig.conductor.tasks import defragment
from numamig.conductor.tasks import drain
from numamig.convergence import drain_link
from numamig.db import drains
from numamig.db import instances
from numamig.db import migrations
from numamig.db import primitives
from numamig.objects import fields

LOG = logging.getLogger(__name__)
STATUS = fields.MigrationStatus

# A reservation is renewed once older than this share of the cache's
# reservation_timeout.
RENEW_SHARE = 0.5


class DrainDriver:
    """Carry this conductor's active drains forward.

    :param worker: the conductor's Worker; its settings give the
        re-plans of one guest after refusals (``max_replans``) and the
        longest wait of a defragmentation for its target's report after
        its last move off it (``verify_timeout``).
    :param wake_executor: called after migrations were recorded.
    :param changed: called with an object whose ``uuid`` is a drain's
        when it changed (the drain watch's ``heard``).
    :param recheck: longest seconds between two passes.
    """

    def __init__(self, worker, wake_executor, changed, recheck=5.0):
        self.worker = worker
        self.max_replans = worker.settings.drain_replan_attempts
        self.verify_timeout = worker.settings.defragment_verify_timeout
        self._wake_executor = wake_executor
        self._changed = changed
        self._recheck = recheck
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._pass_lock = threading.Lock()
        self._active = True         # unknown until the first pass
        # (drain, instance) of ended moves whose reservation was let go.
        self._let_go = set()
        # (drain, instance) -> the Reservation this driver made for the
        # move (or, under (drain, drain), a defragmentation's room).
        self._held = {}
        self._thread = None

    def start(self):
        self._thread = threading.Thread(
            target=self._loop, name='numamig-drain-driver', daemon=True)
        self._thread.start()
        self.wake()

    def stop_starting(self):
        """Start no move and record no migration from now on (the
        worker stops). Returns once a pass under way has ended (a few
        database writes): nothing starts here after it returns."""
        self._stopping.set()
        self._wake.set()
        with self._pass_lock:
            pass

    def stop(self):
        self.stop_starting()
        if self._thread is not None and self._thread.is_alive() and \
                self._thread is not threading.current_thread():
            self._thread.join()

    def wake(self):
        self._wake.set()

    def heard(self, migration):
        """A migration ended here: look at the drains if any is active
        (an end listener: quick, never raises)."""
        if self._active:
            self._wake.set()

    def _loop(self):
        while not self._stopping.is_set():
            self._wake.wait(self._recheck)
            self._wake.clear()
            if self._stopping.is_set():
                return
            try:
                self.run_once()
            except Exception as exc:  # noqa: BLE001 - retried next pass
                LOG.warning("Carrying drains forward failed (%s); trying "
                            "again within %s s", exc, self._recheck)

    def run_once(self):
        """One pass over every active drain (tests call it directly)."""
        with self._pass_lock:
            active = drains.active(self.worker.db)
            self._active = bool(active)
            self._let_go = {key for key in self._let_go if key[0] in active}
            for drain_uuid in active:
                self._advance(drain_uuid)
            for drain_uuid in {key[0] for key in self._held} - set(active):
                self._let_go_of(drain_uuid)

    def _let_go_of(self, drain_uuid):
        """Release what this worker reserved for a drain that ended (here
        or on another worker): its moves' placements and a
        defragmentation's room. A completed move's placement is the
        guest's now; the destination's report confirms it (or it
        expires), as for any migration."""
        try:
            moves = {m['instance_uuid']: m
                     for m in drains.get(self.worker.db, drain_uuid)['moves']}
        except exception.DrainNotFound:
            moves = {}
        released = 0
        for key in [k for k in self._held if k[0] == drain_uuid]:
            move = moves.get(key[1])
            if move is not None and move['status'] == drains.COMPLETED:
                self._held.pop(key)
                continue
            released += self._release_held(key)
        if released:
            LOG.info("Drain %s ended: %d reservation(s) of its plan "
                     "released in this worker's cache", drain_uuid,
                     released)

    def _release_held(self, key):
        """Release the reservation this driver made under ``key``, if it
        is still the cache's; True if one was released."""
        held = self._held.pop(key, None)
        if held is None:
            return False
        return self.worker.cache.release(held.host, held.instance_uuid,
                                         only=held)

    # -- one drain -------------------------------------------------------

    def _advance(self, drain_uuid):
        data = drains.get(self.worker.db, drain_uuid)
        changed = False
        for move in data['moves']:
            if move['status'] == drains.MIGRATING:
                changed |= self._follow(data, move)
        if not self._stopping.is_set() and self._needs_estimate(data):
            # Before any move starts: a move started unestimated runs
            # under its own policy whatever its guest dirties (measured:
            # a guest dirtying 40 MiB/s on a 30 MiB/s link, started so
            # before the estimate, copied for 548 s in pre-copy; the
            # overlap saved ~1 s of its drain's set-up).
            self._estimate(data)
            data = drains.get(self.worker.db, drain_uuid)
        started = [] if self._stopping.is_set() else drains.start_moves(
            self.worker.db, drain_uuid, uuidutils.generate_uuid,
            self._policy_chooser(data))
        recorded = [self._record(data, move) for move in started]
        if any(recorded):
            self._wake_executor()
        data = drains.get(self.worker.db, drain_uuid)
        self._reserve(data)
        if started or changed:
            self._changed(drain.end_key(drain_uuid))
        if self._end_if_done(data):
            self._changed(drain.end_key(drain_uuid))

    @staticmethod
    def _needs_estimate(data):
        """A running drain not estimated yet with moves still to start.
        A defragmentation's moves leave several hosts: not estimated."""
        return data['kind'] == drains.DRAIN and \
            data['status'] == drains.RUNNING and \
            'estimate' not in (data['options'] or {}) and \
            any(m['status'] == drains.PENDING for m in data['moves'])

    def _estimate(self, data, started=()):
        """Have the source sample the dirty rates of a drain's guests
        still to move (but ``started``), once (drain.estimate;
        numamig.db.drains.start_moves orders the moves and shares the
        link by them). True if this call recorded an estimate."""
        pending = [m['instance_uuid'] for m in data['moves']
                   if m['status'] == drains.PENDING and
                   m['instance_uuid'] not in started]
        found = drain.estimate(self.worker, nm_context.get_admin_context(),
                               data['host'], pending)
        if found['reason']:
            LOG.info("Drain %s: no dirty-rate estimate of %s's guests (%s);"
                     " the moves keep the plan's order", data['uuid'],
                     data['host'], found['reason'])
        else:
            LOG.info("Drain %s: dirty rates of %s's guests (B/s): %s",
                     data['uuid'], data['host'], ', '.join(
                         f"{u} {g['dirty_rate']}" for u, g in
                         sorted(found['guests'].items())))
        return drains.set_estimate(self.worker.db, data['uuid'], found)

    def _policy_chooser(self, data):
        """The policy chooser of start_moves for this drain: a move
        predicted (with its estimated dirty rate, at the link's share
        it starts with, under the source's settings) not to converge in
        pre-copy under its own policy runs under the first of
        ``[conductor] convergence_fallback_policies`` predicted to end
        it (drain_link.policy_for). None where nothing is known to
        predict with (no link rate, no estimate)."""
        figures = ((data['options'] or {}).get('estimate') or {}).get(
            'figures')
        if not figures or data['kind'] != drains.DRAIN:
            return None
        catalog = self.worker.settings.migration_policies
        fallbacks = [n for n in
                     self.worker.settings.convergence_fallback_policies
                     if n in catalog]

        def choose(move, cost, share):
            if cost.dirty_rate is None or not share or not cost.memory:
                return None
            try:
                instance = instances.get(self.worker.db,
                                         move.instance_uuid).instance
                own = requests.choose_policy(self.worker, instance).name
            except (exception.NotFound, exception.Invalid):
                # Its request is refused with the reason when recorded.
                return None
            name = drain_link.policy_for(
                cost, share, own, fallbacks,
                drain_link.predictor(catalog, figures, cost))
            if name == own:
                return None
            LOG.info("Drain %s: %s dirties %d B/s, more than pre-copy "
                     "under policy %s ends with %d B/s of the link: "
                     "policy %s chosen", data['uuid'], move.instance_uuid,
                     cost.dirty_rate, own, share, name)
            return {'name': name,
                    'post_copy': catalog[name].uses_post_copy}
        return choose

    def _follow(self, data, move):
        """Conclude a migrating move whose migration ended; record its
        migration if a worker died before it did. True if it changed."""
        try:
            migration = migrations.get(self.worker.db,
                                       move['migration_uuid'],
                                       with_history=False)
        except exception.MigrationNotFound:
            return self._record(data, move)
        if migration.status not in STATUS.FINAL:
            return False
        args = (self.worker.db, data['uuid'], move['instance_uuid'],
                migration.uuid)
        if migration.status == STATUS.COMPLETED:
            return drains.end_move(*args, drains.COMPLETED,
                                   dest_host=migration.dest_host)
        if migration.status == STATUS.CANCELLED:
            return drains.end_move(*args, drains.CANCELLED,
                                   error=migration.error or "cancelled")
        reason = migration.error or f"migration {migration.status}"
        if migration.status == STATUS.ERROR and \
                data['status'] == drains.RUNNING:
            return self._replan(data, move, reason, refused_by=dict(
                migration.get('refused_hosts') or {}))
        return drains.end_move(*args, drains.FAILED, error=reason)

    def _record(self, data, move):
        """Record the move's migration (idempotent by its uuid).

        :returns: True when recorded (or found recorded); a move whose
            migration is refused at once is re-planned or failed. False,
            recording nothing, once this worker stops: the move stays
            migrating with its migration's uuid, which the next
            conductor records (``_follow``).
        """
        ctxt = nm_context.get_admin_context()
        try:
            recorded = requests.recorded_already(
                self.worker.db, move['instance_uuid'],
                move['migration_uuid'])
            if recorded is None:
                if self._stopping.is_set():
                    LOG.info("Drain %s: stopping; the migration of %s to "
                             "%s is left to the next conductor",
                             data['uuid'], move['instance_uuid'],
                             move['planned_host'])
                    return False
                requests.record(self.worker, ctxt, move['instance_uuid'],
                                move['planned_host'], data['priority'],
                                move['migration_uuid'],
                                policy=_policy_of(data, move))
                self._cancel_if_aborted(data['uuid'],
                                        move['migration_uuid'])
            return True
        except (exception.Invalid, exception.NotFound,
                exception.MigrationError) as exc:
            if self._recorded_meanwhile(move):
                # Another conductor worker recorded it at the same time
                # (the move's uuid is the same): the request was not
                # refused.
                return True
            LOG.info("Drain %s: the migration of %s to %s was refused: %s",
                     data['uuid'], move['instance_uuid'],
                     move['planned_host'], exception.brief(exc))
            if not _about_destination(exc, move['planned_host']):
                self._fail_at_once(data, move, exception.brief(exc))
                return False
            self._replan(data, move, exception.brief(exc))
            return False

    def _fail_at_once(self, data, move, reason):
        """End a move whose request no destination would take: planning
        it onto another host would only be refused again (and strike
        that host), and leave the drain failing late."""
        self.worker.cache.release(move['planned_host'],
                                  move['instance_uuid'])
        self._release_held((data['uuid'], move['instance_uuid']))
        return drains.end_move(
            self.worker.db, data['uuid'], move['instance_uuid'],
            move['migration_uuid'], drains.FAILED,
            error=f"{reason} (refused whatever the destination: not "
                  f"re-planned)")

    def _cancel_if_aborted(self, drain_uuid, migration_uuid):
        """Cancel a migration just recorded for a drain aborted
        meanwhile: the abort records ``aborting`` before it looks at the
        migrations, this looks after recording one, so one of the two
        sees the other."""
        if drains.get(self.worker.db, drain_uuid)['status'] != \
                drains.RUNNING:
            drain.stop_migration(self.worker, migration_uuid, False)

    def _recorded_meanwhile(self, move):
        try:
            return requests.recorded_already(
                self.worker.db, move['instance_uuid'],
                move['migration_uuid']) is not None
        except exception.Invalid:
            return False

    def _replan(self, data, move, reason, refused_by=None):
        """Plan the refused guest again, away from every host that
        refused it; fail its move when it cannot be placed or has been
        re-planned ``max_replans`` times.

        :param refused_by: {host: reason} the migration recorded; None:
            the planned host refused the request itself. A migration that
            ended ``error`` with no refusal of the planned host (its
            conductor worker died, say) does not strike the host.
        """
        refused = dict(move['refused'] or {})
        if refused_by is None:
            refused[move['planned_host']] = reason
        else:
            refused.update(refused_by)
        self.worker.cache.release(move['planned_host'],
                                  move['instance_uuid'])
        args = (self.worker.db, data['uuid'], move['instance_uuid'],
                move['migration_uuid'])
        if move['attempts'] > self.max_replans:
            return drains.end_move(*args, drains.FAILED, error=(
                f"{reason}; re-planned {self.max_replans} time(s) "
                f"([conductor] drain_replan_attempts) already; refused by: "
                f"{_refusals(refused) or 'none'}"))
        found = self._place_again(data, move, refused)
        if isinstance(found, str):
            return drains.end_move(*args, drains.FAILED, error=(
                f"{found} (refused before: {_refusals(refused)})"))
        LOG.info("Drain %s: %s refused %s (%s); re-planned onto %s",
                 data['uuid'], move['planned_host'], move['instance_uuid'],
                 reason, found.host)
        return drains.replan_move(
            *args, found.host, None if found.placement is None else
            _dump(found.placement.topology()), refused)

    def _place_again(self, data, move, refused):
        """The guest's new scheduler drain Move, or why it has none."""
        try:
            instance = instances.get(self.worker.db,
                                     move['instance_uuid']).instance
        except exception.InstanceNotFound:
            return "the guest was deleted"
        guest = drain_plan.guest_of(instance, self.worker)
        options = data['options'] or {}
        hosts = set(options.get('to') or
                    (s.host for s in self.worker.cache.host_states()))
        # A drain's guests leave its host; a defragmentation's leave the
        # host their move names, and none goes onto its target.
        plan, _left_out = self.worker.scheduler.plan_drain(
            move['source_host'] or data['host'], [guest],
            limits=self.worker.settings.limits,
            disabled=drain_plan.disabled_hosts(self.worker),
            to=hosts - set(refused) - {data['host']},
            keep_free_nodes=options.get('keep_free_nodes', 0))
        if plan.moves:
            return plan.moves[0]
        return plan.unplaced[0].reason if plan.unplaced else \
            "no destination is left"

    def _reserve(self, data):
        """Hold every unclaimed move's placement in this cache; let go of
        those of moves cancelled or failed (once each)."""
        for move in data['moves']:
            key = (data['uuid'], move['instance_uuid'])
            held = self._held.get(key)
            if held is not None and held.host != move['planned_host']:
                # Re-planned (by whichever worker): the old host's
                # placement is no longer the plan's.
                self._release_held(key)
            if move['status'] in (drains.CANCELLED, drains.FAILED) and \
                    key not in self._let_go:
                self._let_go.add(key)
                self._release_held(key)
                self.worker.cache.release(move['planned_host'],
                                          move['instance_uuid'])
        defragmenting = data['kind'] == drains.DEFRAGMENT
        if data['status'] != drains.RUNNING:
            if defragmenting:
                self._release_held((data['uuid'], data['uuid']))
                defragment.let_go(self.worker, data)
            return
        if defragmenting:
            room = defragment.hold_room(self.worker, data)
            if room is not None:
                self._held[(data['uuid'], data['uuid'])] = room
        for move in data['moves']:
            if move['status'] not in (drains.PENDING, drains.MIGRATING) or \
                    move['planned_topology'] is None:
                continue
            if move['status'] == drains.MIGRATING and \
                    not self._unclaimed(move):
                continue
            self._hold(data, move)

    def _unclaimed(self, move):
        try:
            migration = migrations.get(self.worker.db,
                                       move['migration_uuid'],
                                       with_history=False)
        except exception.MigrationNotFound:
            return True
        return migration.status == STATUS.ACCEPTED

    def _hold(self, data, move):
        cache, host = self.worker.cache, move['planned_host']
        try:
            state = cache.get(host)
        except exception.HostNotFound:
            return
        held = {r.instance_uuid: r for r in state.reservations}.get(
            move['instance_uuid'])
        if held is not None and \
                (cache.now() - held.reserved_at).total_seconds() < \
                RENEW_SHARE * cache.reservation_timeout:
            return
        topology = objects.InstanceNUMATopology.obj_from_primitive(
            move['planned_topology'])
        try:
            project = instances.get(self.worker.db, move['instance_uuid']) \
                .instance.project_id
            if data['kind'] == drains.DEFRAGMENT:
                # Its room may come from a guest still to leave the host.
                self._held[(data['uuid'], move['instance_uuid'])] = \
                    cache.hold(host, move['instance_uuid'], project,
                               topology)
                return
            cache.release(host, move['instance_uuid'])
            self._held[(data['uuid'], move['instance_uuid'])] = \
                cache.reserve(host, move['instance_uuid'], project, topology)
        except (exception.ReservationConflict, exception.NotFound) as exc:
            LOG.info("Drain %s: the plan of %s on %s cannot be reserved "
                     "(%s); its destination's claim decides", data['uuid'],
                     move['instance_uuid'], host, exception.brief(exc))

    def _end_if_done(self, data):
        left = [m for m in data['moves']
                if m['status'] in (drains.PENDING, drains.MIGRATING)]
        if left:
            return False
        outcome = None
        if data['kind'] == drains.DEFRAGMENT:
            concluded = defragment.conclude(self.worker, data,
                                                self.verify_timeout)
            if concluded is None:
                return False        # the target's report is awaited
            final, outcome = concluded
        elif data['status'] == drains.ABORTING:
            final = drains.ABORTED
        elif any(m['status'] != drains.COMPLETED for m in data['moves']):
            final = drains.FAILED
        else:
            final = drains.COMPLETED
        ended = drains.set_status(self.worker.db, data['uuid'], final,
                                  list(drains.ACTIVE), outcome=outcome)
        if data['kind'] == drains.DEFRAGMENT:
            defragment.let_go(self.worker, data)
        if ended:
            summary = drain.report(drains.get(self.worker.db,
                                                  data['uuid']))
            LOG.info("%s %s of %s %s: %d moved, %d failed, %d cancelled "
                     "in %s s", data['kind'].capitalize(), data['uuid'],
                     data['host'], final,
                     summary['moved'], len(summary['failed']),
                     summary['cancelled'], summary['elapsed_s'])
        return ended


def _policy_of(data, move):
    """The policy start_moves chose for the move (None: its own)."""
    if move.get('policy'):
        return move['policy']
    chosen = ((data['options'] or {}).get('policies') or {}).get(
        move['instance_uuid'])
    return chosen and chosen['name']


def _about_destination(exc, host):
    """Whether a refused request names the move's planned destination
    (another host may take the guest), rather than the guest, its
    source or its specs, which no other destination changes. A full
    admission queue is re-planned as before: it passes."""
    if isinstance(exc, (exception.InvalidDestination,
                        exception.MigrationQueueFull)):
        return True
    if isinstance(exc, (exception.HostNotFound,
                        exception.ComputeHostDown)):
        return getattr(exc, 'kwargs', {}).get('host') == host
    return False


def _dump(topology):
    return primitives.dump(topology)


def _refusals(refused):
    return '; '.join(f"{host}: {why}" for host, why in refused.items())
