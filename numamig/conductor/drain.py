"""Host maintenance: hosts disabled by operators, and drain plans.

A disabled host stays in the records and keeps reporting; the scheduler
chooses it no more (its HostEnabled filter gives the operator's reason),
a migration or a new guest naming it is refused. The state is in the
database, so every conductor worker sees it at its next choice.

A drain plan says, before anything moves, where every guest of a host
would go and how it would be placed, from the records and the hosts'
last reports with the reservations in flight; the search is the
scheduler's (numamig.scheduler.drain). Nothing is recorded, reserved or
claimed: the plan is a read, and asking twice is harmless.
"""

import math
import time
import typing

from oslo_log import log as logging

from numamig import exception
from numamig.conductor import records
from numamig.convergence import policy as convergence
from numamig.db import compute_nodes
from numamig.db import instances
from numamig.db import live_migratable
from numamig.db import migrations
from numamig.db import models
from numamig.db import queue
from numamig.numa import instance_request

LOG = logging.getLogger(__name__)

# The reason recorded when an operator gives none.
NO_REASON = 'no reason given'
# The longest reason recorded (the column's size).
REASON_LENGTH = models.REASON_LENGTH
# Most hosts ``--to`` may name, and most cells kept free per host.
MAX_DESTINATIONS = 10000
MAX_KEEP_FREE = 64


class DrainGuest(typing.NamedTuple):
    """A guest as the scheduler's drain plan takes it."""

    uuid: str
    name: str
    request: object = None        # unplaced InstanceNUMATopology or None
    pagesize_kb: int = None
    problem: str = None


def set_disabled(worker, host, disabled, reason=None):
    """Disable ``host`` (with ``reason``) or enable it; idempotent.

    :returns: {'host', 'disabled', 'disabled_at', 'reason'}.
    :raises HostNotFound: the host never reported; nothing changed.
    """
    if disabled:
        state = compute_nodes.set_disabled(worker.db, host,
                                           reason or NO_REASON)
        LOG.info("Host %s disabled for maintenance: %s", host, state.reason)
    else:
        state = compute_nodes.set_enabled(worker.db, host)
        LOG.info("Host %s enabled", host)
    return maintenance_entry(state)


def maintenance_entry(state):
    """A Maintenance as plain data (RPC answers, the CLI's JSON)."""
    return {'host': state.host, 'disabled': state.disabled,
            'disabled_at': (None if state.disabled_at is None
                            else state.disabled_at.isoformat()),
            'reason': state.reason}


def disabled_hosts(worker):
    """{host: reason} of the hosts disabled now (a query of its own:
    another worker may have disabled one since this one looked)."""
    return disabled_reasons(compute_nodes.maintenance(worker.db))


def disabled_reasons(maintenance):
    """{host: reason} of compute_nodes.maintenance's answer."""
    return {host: state.reason or NO_REASON
            for host, state in maintenance.items()}


def check_enabled(worker, host, instance_uuid, maintenance=None):
    """Refuse a requested destination an operator disabled.

    :param maintenance: compute_nodes.maintenance's answer, read by the
        caller in its own transaction; None: asked now.
    :raises InvalidDestination: naming the operator's reason.
    """
    if maintenance is None:
        maintenance = compute_nodes.maintenance(worker.db)
    state = maintenance.get(host)
    if state is not None:
        raise exception.InvalidDestination(
            host=host, instance_uuid=instance_uuid,
            reason=f"it is disabled for maintenance: "
                   f"{state.reason or NO_REASON}")


def plan(worker, host, to=None, keep_free_nodes=0):
    """Plan the drain of ``host``: a destination and placement for every
    guest at once, or why not; nothing moves.

    :param to: host names to choose destinations among, or None.
    :param keep_free_nodes: whole NUMA cells to leave free per
        destination.
    :returns: the plan as plain data (see doc/source/drain.rst).
    :raises HostNotFound: ``host`` or one of ``to`` never reported.
    :raises Invalid: ``to`` names ``host`` itself; nothing else to do.
    """
    start = time.monotonic()
    records.sync_reports(worker)
    worker.cache.get(host)
    if to is not None:
        _check_destinations(worker, host, to)
    guests, memory_mb = _guests(worker, host)
    disabled = disabled_hosts(worker)
    found, left_out = worker.scheduler.plan_drain(
        host, guests, limits=worker.settings.limits, disabled=disabled,
        to=None if to is None else set(to),
        keep_free_nodes=keep_free_nodes)
    answer = _answer(host, found, left_out, disabled)
    answer['not_migratable'] = _not_migratable(worker, guests)
    answer['admission'] = _admission(worker, found)
    answer['link'] = link_bound(
        worker, host, sum(memory_mb.get(move.guest.uuid, 0)
                          for move in found.moves))
    if answer['admission']['refused']:
        answer['emptiable'] = False
    answer['search']['elapsed_ms'] = round(
        (time.monotonic() - start) * 1000, 1)
    return answer


def _check_destinations(worker, host, to):
    if host in to:
        raise exception.Invalid(
            reason=f"--to names {host}, the host to drain itself")
    for name in to:
        worker.cache.get(name)


def _not_migratable(worker, guests):
    """The guests whose standing live-migratable answer is not 'yes'
    (numamig.conductor.live_migratable), with its reasons: what an
    operator reads first when a host cannot be emptied."""
    found = live_migratable.get_many(worker.db, [g.uuid for g in guests])
    return [{'instance_uuid': g.uuid, 'name': g.name,
             'status': found[g.uuid]['status'],
             'reasons': found[g.uuid]['reasons']}
            for g in guests
            if g.uuid in found and found[g.uuid]['status'] != 'yes']


def _guests(worker, host):
    """The DrainGuests of the host: the guests recorded there, and the
    guests arriving by a migration in progress (which keep it busy); and
    {uuid: memory MiB} of the guests recorded there."""
    moving = {m.instance_uuid: m for m in
              migrations.get_in_progress_by_host(worker.db, host)}
    records = instances.get_all(worker.db, host=host)
    guests = [_guest(record.instance, moving.get(record.instance.uuid),
                     worker) for record in records]
    memory_mb = {r.instance.uuid: r.instance.memory_mb or 0
                 for r in records}
    for migration in moving.values():
        if migration.get('dest_host') == host:
            guests.append(DrainGuest(
                migration.instance_uuid, migration.instance_uuid,
                problem=f"it is arriving by migration {migration.uuid} "
                        f"({migration.status}); abort it or wait for it "
                        f"to end"))
    return guests, memory_mb


def guest_of(instance, worker=None):
    """The DrainGuest of an instance no migration moves now (a guest
    planned again during a drain)."""
    return _guest(instance, None, worker)


def _guest(instance, migration, worker=None):
    if migration is not None and migration.source_host == instance.host:
        return DrainGuest(instance.uuid, instance.name, problem=(
            f"it is leaving already, by migration {migration.uuid} "
            f"({migration.status})"))
    refused = None if worker is None else policy_problem(worker, instance)
    if refused is not None:
        return DrainGuest(instance.uuid, instance.name, problem=refused)
    try:
        request = instance_request.numa_request(instance)
    except exception.Invalid as exc:
        return DrainGuest(instance.uuid, instance.name,
                          problem=f"its specs make no NUMA request: "
                                  f"{exception.brief(exc)}")
    return DrainGuest(instance.uuid, instance.name, request,
                      instance_request.source_page_size(instance))


def policy_problem(worker, instance):
    """Why no migration of ``instance`` can be requested whatever its
    destination (the convergence policy its flavor or image names is
    unknown here), or None.

    A drain plan leaves such a guest unplaced with this reason, so the
    drain is refused before anything moves, instead of planning a move
    every destination would be refused (a guest recorded by an earlier
    release, or under a conductor configured with other policies).
    """
    try:
        convergence.select(
            worker.settings.migration_policies, None,
            (instance.get('extra_specs') or {}).get(convergence.FLAVOR_KEY),
            (instance.get('image_properties') or {}).get(
                convergence.IMAGE_KEY),
            worker.settings.default_migration_policy)
    except exception.UnknownMigrationPolicy as exc:
        return f"it cannot be migrated: {exception.brief(exc)}"
    return None


def _answer(host, found, left_out, disabled):
    return {
        'host': host,
        'disabled': host in disabled,
        'reason': disabled.get(host),
        'emptiable': found.complete,
        'moves': [{'instance_uuid': move.guest.uuid,
                   'name': move.guest.name, 'dest_host': move.host,
                   'numa_topology': (None if move.placement is None else
                                     move.placement.topology())}
                  for move in found.moves],
        'unplaced': [{'instance_uuid': u.guest.uuid, 'name': u.guest.name,
                      'reason': u.reason} for u in found.unplaced],
        'left_out': dict(sorted(left_out.items())),
        'kept_free': {h: list(cells) for h, cells in
                      sorted(found.kept_free.items())},
        'search': {'steps': found.steps, 'stopped': found.stopped,
                   'outcome': found.outcome, 'max_steps': found.max_steps},
    }



def why_not(answer):
    """Why a plan's data does not empty its host, in one sentence that
    keeps "no plan exists" apart from "none found within the limit".

    The words of numamig.scheduler.drain.why_not, which the CLI uses on
    the same data (the conductor reads the scheduler only through its
    worker).
    """
    unplaced = answer['unplaced']
    if not unplaced:
        return answer['admission']['refused']
    first = (f"{len(unplaced)} guest(s) have no destination, e.g. "
             f"{unplaced[0]['name']}: {unplaced[0]['reason']}")
    search = answer['search']
    if search['outcome'] == 'stopped':
        return (f"no plan found within {search['max_steps']} placements, "
                f"though one may exist (raise [scheduler] "
                f"drain_plan_max_steps to search further): {first}")
    return f"no plan exists: {first}"


def _admission(worker, found):
    """What the control plane's admission makes of the plan's moves:
    whether the queue has room for them all, and in how many waves at
    least they run (``max_outgoing_migrations_per_host`` out of the host,
    ``max_incoming_migrations_per_host`` into each destination)."""
    return admission_of(worker, [move.host for move in found.moves])


def link_bound(worker, host, memory_mb):
    """The least time moves of ``memory_mb`` MiB of guest memory take
    out of ``host``: every byte crosses its migration link once, at the
    link's rate (``[conductor] migration_link_rate(s)``), whatever the
    parallelism. More when guests dirty memory during their copy.

    :returns: {'rate_mib': MiB/s or None (unknown), 'memory_mb',
        'least_seconds': seconds or None}.
    """
    rate = worker.settings.migration_links.rate(host)
    return {'rate_mib': rate, 'memory_mb': memory_mb,
            'least_seconds': None if rate is None
            else round(memory_mb / rate, 1)}


def admission_of(worker, dest_hosts):
    """_admission of moves into ``dest_hosts`` (one per move)."""
    limits = worker.settings.admission
    with worker.db.reader() as session:
        waiting = queue.waiting_count(session)
    moves = len(dest_hosts)
    per_dest = {}
    for host in dest_hosts:
        per_dest[host] = per_dest.get(host, 0) + 1
    waves = max([math.ceil(moves / limits.per_source)] +
                [math.ceil(n / limits.per_dest) for n in per_dest.values()])
    room = max(0, limits.queued - waiting)
    refused = None
    if moves > room:
        refused = (f"the admission queue has room for {room} more "
                   f"migration(s) ([conductor] max_queued_migrations is "
                   f"{limits.queued}, {waiting} wait), the plan needs "
                   f"{moves}")
    return {'waves': waves, 'queue_room': room, 'refused': refused}
