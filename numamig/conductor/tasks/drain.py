"""A drain: the task that starts one, its abort and its view (API 1.10).

``host drain HOST`` plans first (numamig.conductor.drain.plan): a host
the plan cannot empty is refused with nothing changed, its maintenance
state included. A plan that empties it disables the host, records the
drain and its moves (numamig.db.drains) and hands them to the
conductor's DrainDriver (drain_driver.py beside this), which reserves
the plan in the scheduler's cache and runs the moves through the
admission queue. The planning itself is a read and stays beside the
host maintenance it uses (numamig.conductor.drain); what moves guests
is here.
"""

import hashlib
import types

from oslo_log import log as logging
import oslo_messaging as messaging
from oslo_utils import timeutils

from numamig import context as nm_context
from numamig import exception
from numamig.conductor import drain as drain_plan
from numamig.conductor import records
from numamig.conductor.tasks import base
from numamig.db import drains
from numamig.db import instances
from numamig.db import migrations
from numamig.db import primitives
from numamig.objects import fields
from numamig.objects import migration as migration_obj

LOG = logging.getLogger(__name__)
STATUS = fields.MigrationStatus

# Most moves running at once an operator may ask for.
MAX_PARALLEL = 64
# The admission queue's priority of a drain's migrations.
PRIORITY = migration_obj.PRIORITIES['drain']
# Seconds a drain's source samples its guests' dirty rates for (all at
# once), and the most guests one request samples.
ESTIMATE_S = 1
ESTIMATE_BATCH = 256


class DrainTask(base.TaskBase):
    """Plan the drain of ``host`` and, if it empties the host, start it.

    No rollback: once the drain is recorded it is the state every
    conductor worker's DrainDriver carries forward, so undoing it here
    would race them; a failure before that changed nothing. An operator
    stops a started drain with ``abort`` (``host drain abort``).

    :param driver: the conductor's DrainDriver, woken once the drain is
        recorded.
    """

    def __init__(self, ctxt, worker, driver, host, drain_uuid, parallel,
                 to=None, keep_free_nodes=0):
        super().__init__(ctxt, worker)
        self.driver = driver
        self.host = host
        self.drain_uuid = drain_uuid
        self.parallel = parallel
        self.to = to
        self.keep_free_nodes = keep_free_nodes

    def _execute(self):
        """Idempotent: a request naming a drain recorded already answers
        with it and starts nothing.

        :returns: the drain (see ``view``).
        :raises DrainRefused: the plan cannot empty the host; nothing
            changed (the host stays enabled or disabled as it was).
        :raises DrainInProgress: another drain of the host is active.
        :raises Invalid: ``drain_uuid`` names a drain of another host.
        """
        worker, host, drain_uuid = self.worker, self.host, self.drain_uuid
        recorded = _recorded(worker, drain_uuid, host)
        if recorded is not None:
            return recorded
        active = _active_for(worker, host)
        if active is not None:
            raise exception.DrainInProgress(host=host,
                                            drain_uuid=active['uuid'],
                                            status=active['status'])
        answer = drain_plan.plan(worker, host, to=self.to,
                                 keep_free_nodes=self.keep_free_nodes)
        if not answer['emptiable']:
            raise exception.DrainRefused(host=host, reason=_why_not(answer))
        drains.create(worker.db, {
            'uuid': drain_uuid, 'host': host, 'parallel': self.parallel,
            'priority': PRIORITY, 'was_disabled': answer['disabled'],
            'options': {'to': self.to,
                        'keep_free_nodes': self.keep_free_nodes,
                        'link_rate_mib': answer['link']['rate_mib']}},
            [_move_values(move) for move in answer['moves']])
        if not answer['disabled']:
            drain_plan.set_disabled(worker, host, True, f"drain {drain_uuid}")
        LOG.info("Drain %s of %s started: %d move(s), %d at once",
                 drain_uuid, host, len(answer['moves']), self.parallel)
        self.driver.wake()
        return view(worker, drains.get(worker.db, drain_uuid))


def estimate(worker, ctxt, host, instance_uuids):
    """The dirty rates of a drain's guests, sampled on its source before
    the moves start (compute API sample_dirty_rates, at most
    ESTIMATE_BATCH guests a call, each call one window of ESTIMATE_S),
    in the form numamig.db.drains.set_estimate records. The source
    answers a guest from its background sample when that is at most
    ``[conductor] drain_estimate_max_age`` seconds old (no window to
    wait for: numamig.compute.dirty_rates).

    Never raises: a source that cannot be asked (older than the API,
    no answer within ``[DEFAULT] rpc_response_timeout_migration``, a
    hypervisor error) leaves every rate unknown, with why; the drain
    then keeps its plan's order and nothing is held back for an
    unknown rate.
    """
    guests, figures, reason = {}, None, None
    uuids = list(instance_uuids)
    for start in range(0, len(uuids), ESTIMATE_BATCH):
        try:
            answer = worker.compute_api.sample_dirty_rates(
                ctxt, host, uuids[start:start + ESTIMATE_BATCH],
                seconds=ESTIMATE_S, timeout=worker.settings.check_timeout,
                max_age=worker.settings.drain_estimate_max_age)
        except messaging.UnsupportedVersion:
            reason = f"{host} is older than compute API sample_dirty_rates"
        except messaging.MessagingTimeout:
            reason = (f"{host} did not answer within "
                      f"{worker.settings.check_timeout} s")
        except (messaging.MessagingException,
                exception.NumamigException) as exc:
            reason = f"{host} could not sample: {exception.brief(exc)}"
        else:
            if not isinstance(answer, dict) or \
                    not isinstance(answer.get('guests'), dict):
                reason = f"{host} answered no dirty rates"
                break
            for uuid, guest in answer['guests'].items():
                guests[uuid] = {'dirty_rate': guest.get('dirty_rate'),
                                'memory': guest.get('memory'),
                                'method': guest.get('method'),
                                'reason': guest.get('reason'),
                                # Seconds old the sample was (0: taken
                                # for this drain; None: an agent that
                                # keeps none).
                                'age': guest.get('age')}
            figures = answer.get('figures') or figures
            continue
        break
    return {'guests': guests, 'figures': figures, 'reason': reason}


def abort(worker, driver, host, abort_running=False):
    """Cancel the pending moves of the host's active drain; with
    ``abort_running`` also abort its migrations in flight (running ones
    are otherwise left to finish).

    Idempotent: a repeat finds nothing pending and asks the sources
    again, which changes nothing more.

    :raises DrainNotFound: the host has no active drain.
    """
    active = _active_for(worker, host)
    if active is None:
        raise exception.DrainNotFound(
            message=f"Host {host} has no active drain to abort; 'host "
                    f"drain show {host}' shows its last one.")
    uuid = active['uuid']
    drains.set_status(worker.db, uuid, drains.ABORTING, [drains.RUNNING],
                      error="aborted by request")
    cancelled = drains.cancel_pending(worker.db, uuid, "drain aborted")
    for move in active['moves']:
        if move['status'] == drains.MIGRATING and move['migration_uuid']:
            stop_migration(worker, move['migration_uuid'], abort_running)
    LOG.info("Drain %s of %s aborting: %d pending move(s) cancelled%s",
             uuid, host, cancelled,
             ", running migrations aborted" if abort_running else "")
    driver.wake()
    return view(worker, drains.get(worker.db, uuid))


def show(worker, host=None, drain_uuid=None):
    """The drain ``drain_uuid``, or the host's active (else last) one."""
    if drain_uuid is not None:
        return view(worker, drains.get(worker.db, drain_uuid))
    return view(worker, drains.latest_for_host(worker.db, host))


def view(worker, data):
    """A drain as plain data: its moves with their migrations' progress,
    a ``signature`` that changes with any of it, and, once ended, its
    report."""
    moves = []
    for move in data['moves']:
        entry = dict(move, planned_topology=None)
        entry['migration'] = _migration_progress(worker, move)
        moves.append(entry)
    data = dict(data, moves=moves)
    data['report'] = report(data)
    # Short whatever the number of moves: a waiter sends it back.
    progress = ','.join(
        f"{m['migration']['status']}/{m['migration']['memory_processed']}"
        for m in moves if m['migration'] is not None)
    data['signature'] = f"{data['revision']}:" + hashlib.sha1(
        progress.encode(), usedforsecurity=False).hexdigest()[:16]
    for key in ('created_at', 'updated_at', 'ended_at'):
        if data[key] is not None:
            data[key] = data[key].isoformat()
    for move in moves:
        for key in ('started_at', 'ended_at'):
            if move[key] is not None:
                move[key] = move[key].isoformat()
    return data


def report(data):
    """What the drain did: moved, failed and why, cancelled, time."""
    end = data['ended_at'] or timeutils.utcnow(with_timezone=True)
    count = {}
    for move in data['moves']:
        count[move['status']] = count.get(move['status'], 0) + 1
    return {
        'moved': count.get(drains.COMPLETED, 0),
        'failed': [{'instance_uuid': m['instance_uuid'], 'name': m['name'],
                    'reason': m['error']} for m in data['moves']
                   if m['status'] == drains.FAILED],
        'cancelled': count.get(drains.CANCELLED, 0),
        'pending': count.get(drains.PENDING, 0),
        'migrating': count.get(drains.MIGRATING, 0),
        'replanned': sum(max(0, m['attempts'] - 1) for m in data['moves']),
        'elapsed_s': round((end - data['created_at']).total_seconds(), 1),
        # A defragmentation's finding once its moves ended: whether the
        # room for its guest is on its host (None: not known), and why
        # not.
        'room': (data.get('outcome') or {}).get('room'),
        'room_reason': (data.get('outcome') or {}).get('reason'),
    }


def end_key(drain_uuid):
    """What the driver hands the drain watch when a drain changes."""
    return types.SimpleNamespace(uuid=drain_uuid)


def _recorded(worker, drain_uuid, host):
    try:
        data = drains.get(worker.db, drain_uuid)
    except exception.DrainNotFound:
        return None
    if data['host'] != host or data['kind'] != drains.DRAIN:
        raise exception.Invalid(
            reason=f"drain {drain_uuid} is a drain of {data['host']}, not "
                   f"of {host}; nothing was started")
    LOG.info("Drain %s of %s was started already (a repeated request)",
             drain_uuid, host)
    return view(worker, data)


def _active_for(worker, host):
    try:
        data = drains.latest_for_host(worker.db, host)
    except exception.DrainNotFound:
        return None
    return data if data['status'] in drains.ACTIVE else None


def _why_not(answer):
    return (f"{drain_plan.why_not(answer)}; nothing was moved and the "
            f"host was left as it was")


def _move_values(move):
    topology = move['numa_topology']
    return {'instance_uuid': move['instance_uuid'], 'name': move['name'],
            'planned_host': move['dest_host'],
            'planned_topology': None if topology is None
            else primitives.dump(topology)}


def _migration_progress(worker, move):
    if move['status'] != drains.MIGRATING or not move['migration_uuid']:
        return None
    try:
        migration = migrations.get(worker.db, move['migration_uuid'],
                                   with_history=False)
    except exception.MigrationNotFound:
        return {'uuid': move['migration_uuid'], 'status': 'recording',
                'memory_processed': 0, 'memory_total': 0}
    return {'uuid': migration.uuid, 'status': migration.status,
            'memory_processed': migration.memory_processed,
            'memory_total': migration.memory_total}


def stop_migration(worker, migration_uuid, abort_running):
    """Cancel a drain's migration not yet started; abort a running one
    when asked (best effort: the drain ends when it does)."""
    try:
        migration = migrations.get(worker.db, migration_uuid,
                                   with_history=False)
    except exception.MigrationNotFound:
        return
    if migration.status in STATUS.NOT_STARTED:
        try:
            records.set_status(worker, migration_uuid, STATUS.CANCELLED,
                               expected=list(STATUS.NOT_STARTED),
                               detail="its drain was aborted")
            return
        except exception.InvalidStatusTransition:
            migration = migrations.get(worker.db, migration_uuid,
                                       with_history=False)
    if not abort_running or migration.status not in STATUS.ABORTABLE:
        return
    instance = instances.get(worker.db, migration.instance_uuid).instance
    try:
        worker.compute_api.live_migration_abort(
            nm_context.get_admin_context(), instance, migration)
    except exception.NumamigException as exc:
        LOG.warning("Drain: could not abort migration %s (%s); it runs to "
                    "its end", migration_uuid, exception.brief(exc))
