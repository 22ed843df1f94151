"""A defragmentation carried out: a drain of another kind.

``host defragment --for SPECS --execute`` plans first
(numamig.conductor.defragment.plan, a read that stays beside the drain
plan); bad specs, an unknown host, a guest that fits on no host even
empty, a plan that finds no room within ``max_moves`` or an admission
queue too full for its moves are refused with nothing recorded or moved.
A plan found is recorded as a drain of kind ``defragment``
(numamig.db.drains) of its target host, which stays enabled, with one
move per migration in the plan's order (a chain's moves with the host
they leave), plus the guest's size, specs and planned placement in its
options. The conductor's DrainDriver (drain_driver.py) then carries it
forward as it does a drain: the moves through the admission queue at the
drain priority, ``parallel`` at once, a move into a host after the moves
off it, a refused move planned again (never onto the target, nor back
onto the host it leaves), the plan held in the scheduler's cache, the
room on the target included (``hold``): counted from the report that
shows it free, so no request fitted meanwhile can take it. ``drain
show``, ``--wait`` and ``drain abort`` serve it as a drain.

Once no move is left, ``conclude`` looks for the room: the target's
report must be newer than the last move off it (up to
``verify_timeout`` seconds after that move, then the finding says the
host did not report); the guest is fitted on the target as the cache
sees it, the hold let go first. The defragmentation completes when every
move completed and the room is there, and fails otherwise, with why.
"""

from oslo_log import log as logging
from oslo_utils import timeutils

from numamig import exception
from numamig import objects
from numamig.conductor import defragment as defragment_plan
from numamig.conductor import drain as drain_plan
from numamig.conductor.tasks import base
from numamig.conductor.tasks import drain
from numamig.db import drains
from numamig.db import primitives
from numamig.numa import fit as numa_fit

LOG = logging.getLogger(__name__)

# What the moves of a defragmentation are recorded as.
KIND = drains.DEFRAGMENT


class DefragmentTask(base.TaskBase):
    """Plan room for a guest of these specs and, if found, start moving.

    No rollback, as for a drain (tasks.drain.DrainTask): once recorded,
    the defragmentation is what every worker's DrainDriver carries
    forward; before that nothing changed. ``host drain abort`` stops it.

    :param driver: the conductor's DrainDriver, woken once it is
        recorded.
    """

    def __init__(self, ctxt, worker, driver, drain_uuid, vcpus, memory_mb,
                 extra_specs, parallel, hosts=None, max_moves=3):
        super().__init__(ctxt, worker)
        self.driver = driver
        self.drain_uuid = drain_uuid
        self.vcpus = vcpus
        self.memory_mb = memory_mb
        self.extra_specs = extra_specs
        self.parallel = parallel
        self.hosts = hosts
        self.max_moves = max_moves

    def _execute(self):
        """Idempotent: a request naming a defragmentation recorded
        already answers with it and starts nothing.

        :returns: the defragmentation as tasks.drain.view shows a drain.
        :raises InvalidNUMARequest, Invalid, HostNotFound: bad input (see
            conductor.defragment.plan); nothing recorded.
        :raises DefragmentRefused: no plan within ``max_moves``, or the
            admission queue has no room for its moves; nothing recorded.
        :raises DrainInProgress: the target host is being drained or
            defragmented already.
        """
        worker, drain_uuid = self.worker, self.drain_uuid
        recorded = _recorded(worker, drain_uuid)
        if recorded is not None:
            return recorded
        answer = defragment_plan.plan(worker, self.vcpus, self.memory_mb,
                                      self.extra_specs, hosts=self.hosts,
                                      max_moves=self.max_moves)
        if not answer['found']:
            raise exception.DefragmentRefused(
                reason=f"{answer['reason']}; nothing was moved")
        admission = drain_plan.admission_of(
            worker, [m['dest_host'] for m in answer['moves']])
        if admission['refused']:
            raise exception.DefragmentRefused(
                reason=f"{admission['refused']}; nothing was moved")
        host = answer['host']
        drains.create(worker.db, {
            'uuid': drain_uuid, 'host': host, 'kind': KIND,
            'parallel': self.parallel, 'priority': drain.PRIORITY,
            'was_disabled': False, 'options': {
                'vcpus': self.vcpus, 'memory_mb': self.memory_mb,
                'extra_specs': dict(self.extra_specs), 'hosts': self.hosts,
                'max_moves': self.max_moves,
                'placement': primitives.dump(answer['placement'])}},
            [_move_values(move) for move in answer['moves']])
        LOG.info("Defragmentation %s started: room on %s for %s vCPU(s) "
                 "after %d move(s) (%d of guests of other hosts), %d at "
                 "once", drain_uuid, host, self.vcpus, len(answer['moves']),
                 answer['chained'], self.parallel)
        self.driver.wake()
        return drain.view(worker, drains.get(worker.db, drain_uuid))


def hold_room(worker, data):
    """Keep the room for the guest on the target in this worker's cache
    (renewed as drain moves' reservations are); return the Reservation,
    None when the host is gone."""
    placement = objects.InstanceNUMATopology.obj_from_primitive(
        data['options']['placement'])
    try:
        return worker.cache.hold(data['host'], data['uuid'], 'defragment',
                                 placement, arrives=False)
    except exception.NotFound:
        return None     # the host is gone: conclude says so


def let_go(worker, data):
    worker.cache.release(data['host'], data['uuid'])


def conclude(worker, data, verify_timeout):
    """The end of a defragmentation whose moves ended: (status, outcome),
    or None while the target's report that shows them is awaited, at
    most ``verify_timeout`` seconds after the last move ([conductor]
    defragment_verify_timeout)."""
    last = _last_departure(data)
    outcome = {'host': data['host'], 'room': None, 'reason': None,
               'placement': None}
    try:
        state = worker.cache.get(data['host'])
    except exception.HostNotFound:
        outcome['reason'] = f"host {data['host']} is no longer known"
        return drains.FAILED, outcome
    # When this conductor took the report (the clock the moves' ends
    # were recorded by; a report read from the database counts as made).
    reported = state.received_at
    if last is not None and reported <= last and \
            data['status'] == drains.RUNNING:
        waited = (timeutils.utcnow(with_timezone=True) - last)
        if waited.total_seconds() < verify_timeout:
            return None
        outcome['reason'] = (
            f"host {data['host']} has not reported since its last guest "
            f"left ({last.isoformat()}; waited {verify_timeout} s, "
            f"[conductor] defragment_verify_timeout): check it with "
            f"'numamig-manage host show {data['host']}'")
        return _status(data, False), outcome
    let_go(worker, data)
    options = data['options']
    request = defragment_plan.request_of(
        options['vcpus'], options['memory_mb'], options['extra_specs'],
        worker.settings.pci_aliases)
    result = numa_fit.fit(worker.cache.get(data['host']).numa_view,
                          request, limits=worker.settings.limits,
                          strategy=worker.scheduler.cell_strategy)
    outcome['room'] = result.fits
    outcome['checked_at'] = timeutils.utcnow(with_timezone=True).isoformat()
    outcome['reported_at'] = reported.isoformat()
    if result.fits:
        outcome['placement'] = primitives.dump(result.topology)
    else:
        outcome['reason'] = f"the guest does not fit there: {result.reason}"
    return _status(data, result.fits), outcome


def _status(data, room):
    if data['status'] == drains.ABORTING:
        return drains.ABORTED
    moved = all(m['status'] == drains.COMPLETED for m in data['moves'])
    return drains.COMPLETED if moved and room else drains.FAILED


def _last_departure(data):
    """When the last move off the target completed, or None."""
    ends = [m['ended_at'] for m in data['moves']
            if m['status'] == drains.COMPLETED and
            (m['source_host'] or data['host']) == data['host']]
    return max(ends) if ends else None


def _recorded(worker, drain_uuid):
    try:
        data = drains.get(worker.db, drain_uuid)
    except exception.DrainNotFound:
        return None
    if data['kind'] != KIND:
        raise exception.Invalid(
            reason=f"{drain_uuid} is a drain of {data['host']}, not a "
                   f"defragmentation; nothing was started")
    LOG.info("Defragmentation %s was started already (a repeated request)",
             drain_uuid)
    return drain.view(worker, data)


def _move_values(move):
    topology = move['numa_topology']
    return {'instance_uuid': move['instance_uuid'], 'name': move['name'],
            'source_host': move['source_host'],
            'planned_host': move['dest_host'],
            'planned_topology': None if topology is None
            else primitives.dump(topology)}
