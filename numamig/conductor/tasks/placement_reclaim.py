"""The task of reclaiming virtio-mem memory on one host node to place a
guest there (PlacementReclaimTask).

With ``[virtio_mem] placement_reclaim``, a host that refuses a guest
(a migration's destination, a new guest's host) is looked at once more:
numa.placement_reclaim decides, from the records (the host's guests,
their devices and floors) and the host's last report, whether freeing
memory on one of its nodes places the guest, and how much to take from
whom. Then, here:

1. the change is recorded under a uuid derived from the placement (the
   migration's uuid, or the new guest's) and the host, so that a task
   run again finds it done instead of shrinking the guests twice;
2. it is carried out as ``instance memory set`` changes are
   (conductor.tasks.memory.carry_out): each guest's record gets its
   smaller requested size, its agent resizes the device and answers on the
   size-change events within ``[virtio_mem] resize_timeout``, the record
   gets what the guest really has, the host recomputes its usage;
3. a guest short of its size (no driver, hung, refused) makes the
   reclaim short: every guest of it is given back what it had (the same
   way, under its own uuid) and the host counts as refusing, with why.

The host is then asked once more; if it still refuses, what the guests
gave is given back (``give_back``). What was taken from whom, and
whether it was kept or given back, is returned as
MigrationReclaim entries. A reclaim kept for a claim that is
dropped later is given back by the task that made the claim (the live
migration's or the build's rollback).
"""

import dataclasses
import uuid as uuid_mod

from oslo_log import log as logging

from numamig import exception
from numamig.conductor import records
from numamig.conductor.tasks import memory
from numamig.db import instances
from numamig.db import memory_changes
from numamig.numa import placement_reclaim
from numamig.numa import reclaim
from numamig.numa import vmem

LOG = logging.getLogger(__name__)

# Change uuids are derived from the placement's key and the host.
_NAMESPACE = uuid_mod.UUID('6f1d5a3e-2b8c-4e61-9a0f-8d7c3b5e4a21')
KEPT, GIVEN_BACK, NOT_GIVEN_BACK, REFUSED = (
    'kept', 'given back', 'not given back', 'refused')


@dataclasses.dataclass
class Room:
    """A reclaim carried out: the host, the chooser's Choice, and what
    the guests answered (conductor.tasks.memory.carry_out's result)."""

    host: str
    choice: placement_reclaim.Choice
    result: dict


def enabled(worker):
    """Whether ``[virtio_mem] placement_reclaim`` is on."""
    return worker.settings.virtio_mem.placement_reclaim


def change_uuid(key, host, what):
    """The memory change's uuid for ``key`` (a migration or instance
    uuid) on ``host``: the same on every run of the same placement."""
    return str(uuid_mod.uuid5(_NAMESPACE, f"{key}/{host}/{what}"))


class PlacementReclaimTask:
    """``ask()`` (a claim on ``host``) with placement reclaim: reclaim
    first when a Choice is given (a host the scheduler refused for
    memory on one node, ``scheduled_options``), else only once the host
    refused the guest (MigrationPreCheckError) and placement reclaim is
    on and can place it; then ``ask()`` once more.

    Not a TaskBase: what a failed reclaim undoes (giving back what the
    guests gave) is part of its answer, not a rollback after it. The
    refusal the caller gets says whether the give-back completed, and
    ``record`` is told what was taken and given back, so the give-back
    runs before the refusal is raised; a TaskBase rollback runs after
    its error is final.

    :param placing_uuid: the guest being placed (its reservation on
        ``host`` is released before a reclaim and after a refusal).
    :param key: the placement's key (the migration's uuid, or the new
        guest's): what the memory changes' uuids are derived from.
    :param record: called with the MigrationReclaim entries of
        this host's reclaim once it is known how it ended.
    """

    def __init__(self, ctxt, worker, host, ask, placing_uuid, key, record):
        self.ctxt = ctxt
        self.worker = worker
        self.host = host
        self.ask = ask
        self.placing_uuid = placing_uuid
        self.key = key
        self.record = record

    def execute(self, choice=None, request=None, pagesize_kb=None):
        """:param choice: the reclaim to carry out first; None: only once
            the host refused ``request`` (None: never).
        :returns: (``ask()``'s answer, the Room kept or None).
        :raises MigrationPreCheckError: refused, with why no reclaim was
            made or how it fell short (everything given back; ``record``
            was told). With a ``choice``, any other error of ``ask()``
            (a ReservationConflict, DestinationBusy) is raised as it is,
            once what the guests gave was given back.
        """
        if choice is not None:
            return self._reclaim_first(choice)
        return self._attempt(request, pagesize_kb)

    def _attempt(self, request, pagesize_kb):
        worker, host, key = self.worker, self.host, self.key
        try:
            return self.ask(), None
        except exception.MigrationPreCheckError as exc:
            if request is None or not enabled(worker):
                raise
            refusal = exc
        worker.cache.release(host, self.placing_uuid)
        decision = decide(worker, host, request, self.placing_uuid,
                          pagesize_kb)
        if decision.choice is None:
            LOG.info("Placement %s on %s: no reclaim (%s)", key, host,
                     decision.why)
            raise exception.MigrationPreCheckError(
                reason=f"{_reason(refusal)}; no placement reclaim: "
                       f"{decision.why}") from refusal
        try:
            room = make_room(worker, self.ctxt, host, decision.choice, key)
        except ReclaimShort as short:
            self.record(entries(short.room, short.back))
            raise short.refusal from refusal
        return self._ask_after(room)

    def _reclaim_first(self, choice):
        try:
            room = make_room(self.worker, self.ctxt, self.host, choice,
                             self.key)
        except ReclaimShort as short:
            self.record(entries(short.room, short.back))
            raise short.refusal from None
        return self._ask_after(room)

    def _ask_after(self, room):
        """``ask()`` once ``room`` was made; give it back if that fails."""
        try:
            answer = self.ask()
        except Exception as exc:
            self.worker.cache.release(self.host, self.placing_uuid)
            back = give_back(self.worker, self.ctxt, room, self.key)
            self.record(entries(room, back))
            if isinstance(exc, exception.MigrationPreCheckError):
                raise exception.MigrationPreCheckError(
                    reason=f"still refused once {room.choice.freed_mb} MiB "
                           f"were reclaimed on host node "
                           f"{room.choice.node} "
                           f"({_given_back_words(back)}): {_reason(exc)}"
                ) from exc
            raise
        self.record(entries(room))
        LOG.info("Placement %s on %s: %s MiB reclaimed on host node %s, "
                 "claimed", self.key, self.host, room.choice.freed_mb,
                 room.choice.node)
        return answer, room


@dataclasses.dataclass(frozen=True)
class Options:
    """The hosts a scheduled placement may reclaim on, in the order to
    try them: ``ranked`` (scheduler.reclaim_hosts.Prospect, Choice)
    pairs; ``note`` one line saying what was considered, for
    NoValidHost."""

    ranked: tuple
    note: str


def scheduled_options(worker, request, source_host, placing_uuid,
                      exclude=(), disabled=None, pagesize_kb=None):
    """Where a reclaim would place a guest no scheduled candidate took:
    the scheduler's prospects (at most ``placement_reclaim_max_hosts``,
    scheduler.reclaim_hosts), each asked of the chooser with its guests'
    slack (``decide``), ranked least reclaimed first. Reads only:
    nothing is reserved or changed (a dry run calls it too).

    :param exclude: hosts not to consider (busy, tried already).
    :returns: Options.
    """
    conf = worker.settings.virtio_mem
    found = worker.scheduler.reclaim_prospects(
        request, source_host, conf.placement_reclaim_max_mb,
        conf.placement_reclaim_max_hosts, limits=worker.settings.limits,
        exclude=exclude, pagesize_kb=pagesize_kb, disabled=disabled)
    chosen, misses = [], []
    for prospect in found.prospects:
        try:
            decision = decide(worker, prospect.host, request, placing_uuid,
                              pagesize_kb)
        except exception.HostNotFound:
            continue
        if decision.choice is None:
            misses.append(f"{prospect.host}: {decision.why}")
        else:
            chosen.append((prospect, decision.choice))
    note = ("placement reclaim ([virtio_mem] placement_reclaim) "
            "considered: " + found.describe(conf.placement_reclaim_max_mb,
                                            conf.placement_reclaim_max_hosts))
    if misses:
        note += "; none can be freed enough: " + "; ".join(misses)
    return Options(tuple(placement_reclaim.rank(chosen)), note)


def dry_run_view(host, choice):
    """What a reclaim on ``host`` would do, for a dry run's answer."""
    return {'host': host, 'host_node': choice.node,
            'freed_mb': choice.freed_mb,
            'steps': [{'instance_uuid': step.instance_uuid,
                       'cell': step.cell, 'before_mb': step.before_mb,
                       'after_mb': step.after_mb}
                      for step in choice.plan.steps]}


def _reason(exc):
    """A refusal's text without the exception's own prefix."""
    text = exception.brief(exc)
    prefix = 'Migration pre-check error: '
    return text[len(prefix):] if text.startswith(prefix) else text


def decide(worker, host, request, placing_uuid, pagesize_kb=None):
    """numa.placement_reclaim's Decision for ``request`` on ``host``,
    from the records and the host's last report (with reservations)."""
    conf = worker.settings.virtio_mem
    slack = []
    for record in instances.get_all(worker.db, host=host):
        guest = record.instance
        topology = guest.get('numa_topology')
        # A migrating guest is left alone (its claim elsewhere counts
        # its devices as they are), and so is the one being placed.
        if guest.uuid == placing_uuid or topology is None or \
                not topology.has_virtio_mem or \
                guest.get('migration_context') is not None:
            continue
        extra = guest.get('extra_specs') or {}
        floors = {cell.id: vmem.placement_floor_mb(extra, cell)
                  for cell in topology.cells if cell.has_virtio_mem}
        slack.extend(placement_reclaim.slack_of(guest.uuid, topology,
                                                floors))
    return placement_reclaim.choose(
        worker.cache.get(host).topology, request, slack,
        conf.placement_reclaim_max_mb, max_loss_mb=conf.max_loss_mb,
        limits=worker.settings.limits, strategy=worker.scheduler.cell_strategy,
        pagesize_kb=pagesize_kb)


def make_room(worker, ctxt, host, choice, key):
    """Carry out ``choice`` on ``host``; return the Room.

    :raises ReclaimShort: the guests fell short, or the change failed;
        each guest was given back what it had (its ``refusal`` says so).
    :raises MigrationPreCheckError: an earlier run of this placement
        left the change unfinished or short; nothing is asked.
    """
    conf = worker.settings.virtio_mem
    uuid = change_uuid(key, host, 'reclaim')
    plan = choice.plan
    row, created = memory_changes.start(
        worker.db, uuid, host, {'placement': key, 'host': host,
                                'node': choice.node,
                                'size_mb': choice.freed_mb})
    if not created:
        if row['status'] != memory_changes.DONE or \
                not row['result']['all_reached']:
            raise _refusal(host, choice, f"an earlier attempt of this "
                                         f"placement left reclaim {uuid} "
                                         f"{row['status']}")
        LOG.info("Placement %s on %s: reclaim %s done before; not asked "
                 "again", key, host, uuid)
        return Room(host, choice, row['result'])
    try:
        result = memory.carry_out(worker, ctxt, host, plan, conf)
    except Exception as exc:  # noqa: BLE001 - given back, then refused
        memory_changes.finish(worker.db, uuid, memory_changes.FAILED,
                              plan.as_dict(), {'error': str(exc)})
        room = Room(host, choice, {'guests': [], 'all_reached': False})
        back = give_back(worker, ctxt, room, key)
        raise ReclaimShort(room, back, _refusal(
            host, choice, f"{exception.brief(exc)}; "
                          f"{_given_back_words(back)}")) from exc
    memory_changes.finish(worker.db, uuid, memory_changes.DONE,
                          plan.as_dict(), result)
    room = Room(host, choice, result)
    if not result['all_reached']:
        back = give_back(worker, ctxt, room, key)
        raise ReclaimShort(room, back, _refusal(
            host, choice, f"{_short_words(result, conf)}; "
                          f"{_given_back_words(back)}"))
    records.sync_reports(worker)
    return room


class ReclaimShort(Exception):
    """The guests fell short: ``room`` what was asked and answered,
    ``back`` the give-back's outcome (for ``entries``), ``refusal`` the
    MigrationPreCheckError the caller raises."""

    def __init__(self, room, back, refusal):
        super().__init__(str(refusal))
        self.room = room
        self.back = back
        self.refusal = refusal


def give_back(worker, ctxt, room, key):
    """Set every guest of ``room`` back to the size it had; return the
    outcome (tasks.memory.carry_out's result), recorded under its own
    uuid (a run again returns the recorded one)."""
    conf = worker.settings.virtio_mem
    # A guest whose resize the hypervisor refused kept its record as it
    # was (conductor.tasks.memory): nothing to give back.
    refused = _refused(room.result)
    steps = tuple(reclaim.Step(s.instance_uuid, s.cell, s.nodes,
                               s.after_mb, s.before_mb, s.on_target)
                  for s in room.choice.plan.steps
                  if s.instance_uuid not in refused)
    if not steps:
        return {'guests': [], 'all_reached': True}
    plan = reclaim.Plan(room.choice.node, True,
                        sum(s.change_mb for s in steps), steps, ())
    uuid = change_uuid(key, room.host, 'give-back')
    row, created = memory_changes.start(
        worker.db, uuid, room.host, {'placement': key, 'host': room.host,
                                     'node': plan.node,
                                     'size_mb': plan.wanted_mb})
    if not created:
        return row['result'] or {'guests': [], 'all_reached': False}
    try:
        result = memory.carry_out(worker, ctxt, room.host, plan, conf)
    except Exception as exc:  # noqa: BLE001 - reported, never hidden
        LOG.error("Placement %s on %s: giving the reclaimed memory back "
                  "failed: %s", key, room.host, exception.brief(exc))
        result = {'guests': [], 'all_reached': False,
                  'error': exception.brief(exc)}
        memory_changes.finish(worker.db, uuid, memory_changes.FAILED,
                              plan.as_dict(), result)
        return result
    memory_changes.finish(worker.db, uuid, memory_changes.DONE,
                          plan.as_dict(), result)
    records.sync_reports(worker)
    return result


def entries(room, back=None):
    """MigrationReclaim entries: one per device of the reclaim,
    ``kept`` without ``back`` (the give-back's result), else whether
    each guest got its size back."""
    current = _current_by_device(room.result)
    returned = _current_by_device(back) if back is not None else {}
    reached = {g['instance']: g.get('reached', False)
               for g in (back or {}).get('guests', ())}
    refused = _refused(room.result)
    result = []
    for step in room.choice.plan.steps:
        now = current.get((step.instance_uuid, step.cell))
        if step.instance_uuid in refused:
            outcome = REFUSED
        elif back is None:
            outcome = KEPT
        elif reached.get(step.instance_uuid):
            outcome = GIVEN_BACK
        else:
            outcome = NOT_GIVEN_BACK
        result.append({
            'host': room.host, 'host_node': room.choice.node,
            'instance_uuid': step.instance_uuid, 'cell': step.cell,
            'before_mb': step.before_mb, 'after_mb': step.after_mb,
            'current_mb': returned.get((step.instance_uuid, step.cell),
                                       now),
            'released_mb': 0 if now is None else max(0, step.before_mb -
                                                     now),
            'outcome': outcome})
    return result


def _refused(result):
    """The guests whose resize the hypervisor refused."""
    return {g['instance'] for g in (result or {}).get('guests', ())
            if g.get('error')}


def _current_by_device(result):
    found = {}
    for guest in (result or {}).get('guests', ()):
        for cell, mib in (guest.get('current') or {}).items():
            found[(guest['instance'], int(cell))] = mib
    return found


def _short_words(result, conf):
    refused = _refused(result)
    words = []
    if refused:
        words.append(f"the hypervisor refused to resize guest(s) "
                     f"{', '.join(sorted(refused))}")
    late = sorted(g['instance'] for g in result['guests']
                  if not g['reached'] and g['instance'] not in refused)
    if late:
        words.append(f"guest(s) {', '.join(late)} did not give their part "
                     f"back within [virtio_mem] resize_timeout "
                     f"({conf.resize_timeout} s)")
    return '; '.join(words)


def _given_back_words(back):
    if back.get('all_reached'):
        return "what the guests gave was given back"
    return ("giving it back did not complete (see the migration's "
            "memory_reclaim)")


def _refusal(host, choice, why):
    return exception.MigrationPreCheckError(
        reason=f"{host} lacks {choice.freed_mb} MiB on host node "
               f"{choice.node}; reclaiming it from guests there fell "
               f"short: {why}")
