"""Record changes agents ask the conductor for, with the claim rules.

The database enforces each write atomically; this module adds the rules
that span records and the scheduler's cache:

* a move claim (migration context) is recorded only while its migration
  is in progress and still tries that destination, so a destination
  that answers after the conductor moved on cannot leave a claim behind;
* a claim left by a migration that has ended is healed away before a
  new one is recorded;
* a migration that ends without completing drops its claim from the
  records and its reservation from the scheduler's cache, so nothing
  stays claimed anywhere.

Every function takes the conductor's Worker first
(numamig.conductor.worker).
"""

from concurrent import futures
import typing

from oslo_log import log as logging

from numamig import context as nm_context
from numamig import exception
from numamig.conductor import results
from numamig.db import compute_nodes
from numamig.db import instances
from numamig.db import migration_claims
from numamig.db import migration_satellites
from numamig.db import migrations
from numamig.db import queue
from numamig.objects import fields
from numamig.objects import migration_satellites as satellites_obj

LOG = logging.getLogger(__name__)
STATUS = fields.MigrationStatus


# Reports one transaction writes at most.
REPORT_BATCH = 100
# How long a request waits for its report to be written (a write takes
# milliseconds; this bounds a database that stopped answering).
REPORT_WAIT_S = 120


def save_report(worker, report):
    """Store a host's report and feed it to the scheduler's cache.

    Reports are written in batches by at most ``[conductor]
    report_writers`` threads per worker at once (group commit): the
    request's thread hands its report over and either writes what is
    waiting, its own among them, or waits until a writer did. A batch is
    one transaction (one commit, one change-number bump), and only a
    host's newest waiting report is written. Measured before: one
    transaction per report, and every RPC thread holding a database
    connection, so 1,000 hosts reporting at once into three workers
    exhausted PostgreSQL's 100 connections and the reports beyond were
    lost.

    :raises: what storing this report raised (an invalid report, the
        database unreachable), or DatabaseError when no writer stored it
        within REPORT_WAIT_S.
    """
    cursor = worker.reports
    future = futures.Future()
    with cursor.intake:
        waiting = cursor.pending.get(report.host)
        if waiting is not None and _older(report, waiting[0]):
            # A newer report of this host waits already: this one is
            # answered with it.
            waiting[1].append(future)
        else:
            cursor.pending[report.host] = (
                report, (waiting[1] if waiting else []) + [future])
        write = cursor.writers < cursor.max_writers
        if write:
            cursor.writers += 1
    if write:
        _write_pending(worker, cursor)
    try:
        future.result(timeout=REPORT_WAIT_S)
    except futures.TimeoutError:
        raise exception.DatabaseError(
            url=worker.db.safe_url,
            reason=f"the report of {report.host} was not stored within "
                   f"{REPORT_WAIT_S} s") from None


def _older(report, other):
    return report.reported_at is not None and \
        other.reported_at is not None and \
        report.reported_at < other.reported_at


def _write_pending(worker, cursor):
    """Write batches of the waiting reports until none waits; the
    writer leaves under the intake lock, so a report handed over while
    it leaves is never left without one."""
    while True:
        with cursor.intake:
            if not cursor.pending:
                cursor.writers -= 1
                return
            hosts = list(cursor.pending)[:REPORT_BATCH]
            batch = [cursor.pending.pop(host) for host in hosts]
        _write_batch(worker, batch)


def _write_batch(worker, batch):
    """Store one batch; settle each waiting request (never raises)."""
    valid = []
    for report, waiters in batch:
        try:
            report.validate()
        except Exception as error:  # noqa: BLE001 - that request's answer
            _settle(waiters, error=error)
            continue
        valid.append((report, waiters))
    try:
        saved = compute_nodes.save_reports_reading_guests(
            worker.db, [report for report, _ in valid])
    except Exception as error:  # noqa: BLE001 - every request's answer
        for _report, waiters in valid:
            _settle(waiters, error=error)
        return
    for (report, waiters), one in zip(valid, saved, strict=True):
        try:
            worker.cache.update(report, guests=one.guests,
                                digest=one.digest)
            if one.change_seq is not None:
                worker.reports.held[report.host] = one.change_seq
        except Exception as error:  # noqa: BLE001 - that request's answer
            _settle(waiters, error=error)
            continue
        _settle(waiters)


def _settle(waiters, error=None):
    for future in waiters:
        if error is None:
            future.set_result(None)
        else:
            future.set_exception(error)


def sync_reports(worker):
    """Feed the cache the reports stored since this worker last looked.

    An agent's report reaches one worker only; before scheduling, each
    worker takes the newer ones from the shared database, so that no host
    looks stale (or down) to it. Only reports written after the highest
    change number this worker has seen are looked at, and only those
    newer than its cache's are read whole: the cost follows what changed,
    never the number of hosts. A report that says what the cache holds
    (most do) only moves its host's time; the others are built whole.
    Each counts as received when it was made, so that a host that died
    does not look up.
    """
    with worker.reports.lock:
        with worker.db.reader() as session:
            reads = _read_reports_in(worker, session)
        _feed_reports(worker, reads)


class _ReportReads(typing.NamedTuple):
    """What a transaction read of the reports stored since a worker last
    looked, for _feed_reports to build once it ended."""

    changes: list
    seen: object
    guests: dict
    taken: dict


def _read_reports_in(worker, session):
    """The reports stored since this worker last looked and their hosts'
    guests, read in the caller's transaction; the caller holds the
    worker's report cursor lock (taken before the transaction, as
    sync_reports does, so that no two orders of the two exist) until it
    has fed them (_feed_reports).

    The cache is fed after the transaction, not in it: building the
    reports of thousands of hosts a worker never saw takes seconds of
    CPU during which the session would sit idle inside its transaction,
    and PostgreSQL ends such a session after ``[database]
    idle_in_transaction_timeout`` (5 s): the request reading them failed
    with "server closed the connection unexpectedly" (measured with
    benchmarks/bench_intake.py at 10,000 hosts).
    """
    taken = {}

    def newer_than(host, reported_at, change_seq):
        if _newer_than_cached(worker, host, reported_at, change_seq):
            taken[host] = change_seq
            return True
        return False
    changes, seen = compute_nodes.changes_since_in(
        session, worker.reports.seen, newer_than=newer_than)
    guests = instances.guest_pairs_in(session, [c.host for c in changes])
    return _ReportReads(changes, seen, guests, taken)


def _feed_reports(worker, reads):
    """Feed the cache what _read_reports_in read; the caller still holds
    the report cursor lock. The cursor moves only here, so a transaction
    that failed after reading loses no report."""
    cursor = worker.reports
    changes, guests, taken = reads.changes, reads.guests, reads.taken
    cursor.seen = reads.seen
    for change in changes:
        # Most say what the cache holds, newer: only the time moves.
        if worker.cache.refresh(change.host, change.reported_at,
                                change.digest, guests=guests[change.host],
                                received_at=change.reported_at) is None:
            worker.cache.update(cursor.builder.build(change),
                                guests=guests[change.host],
                                received_at=change.reported_at,
                                digest=change.digest)
        cursor.held[change.host] = taken[change.host]


def read_instance(worker, instance_uuid, with_maintenance=False):
    """An instance, with the reports stored since this worker last
    looked fed to its cache in the same transaction (what a request's
    checks read first).

    :param with_maintenance: also read the hosts disabled for
        maintenance (a request naming its destination checks it).
    :returns: (Instance, {host: Maintenance} or None when not asked).
    :raises InstanceNotFound:
    """
    with worker.reports.lock:
        with worker.db.reader() as session:
            instance = instances.get_in(session, instance_uuid).instance
            reads = _read_reports_in(worker, session)
            maintenance = (compute_nodes.maintenance_in(session)
                           if with_maintenance else None)
        _feed_reports(worker, reads)
        return instance, maintenance


class Admitted(typing.NamedTuple):
    """What a migration thread reads before it runs an admitted
    migration's task (see read_admitted)."""

    migration: object
    instance: object = None
    busy: frozenset = frozenset()
    maintenance: dict = None
    # Its MigrationConvergence (the policy chosen when it was recorded).
    convergence: object = None


def read_admitted(worker, migration_uuid):
    """An admitted migration and what its task reads first, in one
    transaction: its instance, the reports stored since this worker last
    looked (fed to its cache, as sync_reports does), the destinations at
    their incoming limit and the hosts disabled for maintenance.

    A migration thread used to open five transactions for these, one per
    read; the task takes them as given instead of reading each again.

    :returns: Admitted; only its migration is set when the migration is
        no longer ``accepted`` (cancelled while it waited).
    :raises MigrationNotFound:
    """
    with worker.reports.lock:
        with worker.db.reader() as session:
            migration = migrations.get_in(session, migration_uuid,
                                          with_history=False)
            if migration.status != STATUS.ACCEPTED:
                return Admitted(migration)
            instance = instances.get_in(session,
                                        migration.instance_uuid).instance
            reads = _read_reports_in(worker, session)
            admitted = Admitted(
                migration, instance,
                frozenset(queue.busy_destinations_in(
                    session, worker.settings.admission.per_dest)),
                compute_nodes.maintenance_in(session),
                migration_satellites.get_in(
                    session, migration_uuid, ('convergence',))['convergence'])
        _feed_reports(worker, reads)
        return admitted


def _newer_than_cached(worker, host, reported_at, change_seq):
    """Whether a stored report is newer than the one the cache holds: a
    later second, or the same second stored after it (two reports of a
    host within one second, the later one stored by another worker)."""
    try:
        cached = worker.cache.get(host).report
    except exception.HostNotFound:
        return True
    if reported_at != cached.reported_at:
        return reported_at > cached.reported_at
    return change_seq > worker.reports.held.get(host, change_seq)


def set_migration_context(worker, context):
    """Record a destination's move claim; answer only once committed.

    Idempotent: a repeat of a claim recorded already writes nothing;
    one that comes after its migration ended (or moved on to another
    destination) is refused as above.

    :raises MigrationPreCheckError: the migration has ended or now tries
        another destination, or another in-progress migration holds a
        claim on the instance; nothing is recorded.
    """
    held = _held_for(worker.db, context)
    if held == context:
        LOG.info("The claim of migration %s on %s is recorded already (a "
                 "repeated request)", context.migration_uuid,
                 context.dest_host)
        return
    expected = None if held is None else _replaceable(worker.db, held,
                                                      context)
    try:
        instances.set_migration_context(worker.db, context.instance_uuid,
                                        context,
                                        expected_migration_uuid=expected)
    except exception.MigrationContextConflict as exc:
        raise exception.MigrationPreCheckError(reason=str(exc)) from exc


def queue_with_claim(worker, context, detail, held=None, start=None):
    """Record the claim a destination returned and ``queued``, together.

    The rules are set_migration_context's; the claim and the status are
    one transaction, so the source is never told to start a migration
    whose claim is not recorded, and a claim is never recorded for a
    migration that was cancelled meanwhile.

    :param held: the migration uuid of the claim the instance held when
        the caller read it (None: none). The write is first tried
        expecting that claim, with no read before it: the common case is
        one transaction. Only when the records differ are the rules
        applied to what they hold.
    :param start: the LiveMigrateData the source will be cast, kept with
        ``queued`` in the same write (numamig.conductor.restarts).
    :raises MigrationPreCheckError: as set_migration_context; nothing is
        recorded.
    :raises InvalidStatusTransition: the migration is no longer
        ``accepted`` (cancelled); nothing is recorded.
    """
    kept = None if start is None else start.obj_to_primitive()
    if held is None or held == context.migration_uuid:
        try:
            return migration_claims.queue_with_claim(
                worker.db, context, held, detail, start_request=kept)
        except exception.MigrationContextConflict:
            pass        # changed since the caller read it: the rules decide
    expected = _claim_replaces(worker.db, context)
    try:
        return migration_claims.queue_with_claim(
            worker.db, context, expected, detail, start_request=kept)
    except exception.MigrationContextConflict as exc:
        raise exception.MigrationPreCheckError(reason=str(exc)) from exc


def complete(worker, migration_uuid, result=None, detail=None):
    """Record ``completed`` with the run's result and apply the claim.

    One transaction (see numamig.db.migration_claims.complete).
    Idempotent: a migration already ``completed`` is returned unchanged,
    so a redelivered request (or one whose answer was lost) succeeds.

    :returns: the Migration.
    :raises InvalidStatusTransition: it ended otherwise, or has not run.
    :raises InvalidMigrationResult: nothing changed then.
    """
    values = None
    if result is not None:
        values = results.record_values(migration_uuid, result,
                                       STATUS.COMPLETED)
        detail = detail or results.describe(result)
    migration, instance = migration_claims.complete(
        worker.db, migration_uuid, detail=detail, result=values)
    if instance is None:
        return migration        # completed already: a repeat
    # A placement reserved when the guest came to the source, not yet
    # counted by a report there, would make the source look fuller than
    # it is and keep the guest from coming back until it expired.
    worker.cache.release(migration.source_host, migration.instance_uuid)
    LOG.info("Migration %s of %s completed on %s: %s", migration.uuid,
             migration.instance_uuid, instance.host, detail)
    worker.migration_ended(migration)
    return migration


def _claim_replaces(db, context):
    """Which held claim ``context`` may replace (None: none held).

    :raises MigrationPreCheckError: the migration has ended or tries
        another destination, or another one holds a claim.
    """
    held = _held_for(db, context)
    if held is None:
        return None
    return _replaceable(db, held, context)


def _held_for(db, context):
    """The claim the instance holds now (None: none), once its migration
    is found still to want ``context``.

    :raises MigrationPreCheckError: the migration has ended or tries
        another destination.
    """
    migration = migrations.get(db, context.migration_uuid,
                               with_history=False)
    if not migration.in_progress or migration.dest_host != context.dest_host:
        raise exception.MigrationPreCheckError(
            reason=f"migration {migration.uuid} is {migration.status} with "
                   f"destination {migration.dest_host}; the claim of "
                   f"{context.dest_host} was not recorded")
    current = instances.get(db, context.instance_uuid).instance
    return current.get('migration_context')


def _replaceable(db, held, context):
    """Which held claim the new one may replace, or raise."""
    if held.migration_uuid == context.migration_uuid:
        # An earlier candidate of this same migration that answered late.
        return held.migration_uuid
    try:
        holder = migrations.get(db, held.migration_uuid,
                                with_history=False)
        ended = not holder.in_progress
    except exception.MigrationNotFound:
        ended = True
    if not ended:
        raise exception.MigrationPreCheckError(
            reason=f"instance {context.instance_uuid} is already being "
                   f"migrated by {held.migration_uuid}")
    LOG.warning("Healing the leaked claim of migration %s on instance %s "
                "(host %s)", held.migration_uuid, context.instance_uuid,
                held.dest_host)
    return held.migration_uuid


def set_status(worker, migration_uuid, status, detail=None, error=None,
               expected=None, result=None):
    """Move a migration to ``status``; converge claims if it ended badly.

    :param result: the run's result the source reports with the change
        (see results.py); recorded in the same write, and worded as the
        history's detail unless ``detail`` is given.
    :raises InvalidStatusTransition: nothing changed then.
    :raises InvalidMigrationResult: nothing changed then.
    """
    values = None
    if result is not None:
        values = results.record_values(migration_uuid, result, status)
        detail = detail or results.describe(result, status)
    migration = migrations.set_status(worker.db, migration_uuid, status,
                                      detail=detail, expected=expected,
                                      error=error, result=values)
    if result is not None:
        LOG.info("Migration %s of %s %s: %s", migration.uuid,
                 migration.instance_uuid, status, detail)
    if status in STATUS.UNSUCCESSFUL:
        release_claims(worker, migration)
    # A halted migration (postcopy-paused) keeps both claims, but frees
    # its admission slot and settles waits as an end does.
    if status in STATUS.SETTLED:
        worker.migration_ended(migration)
    return migration


# How many events a post-copy recovery history holds at most.
MAX_RECOVERY_EVENTS = satellites_obj.MAX_RECOVERY_EVENTS


def record_recovery(db, migration_uuid, history):
    """Record a post-copy recovery's history (MigrationRecovery); see
    numamig.db.migration_satellites.record_recovery."""
    return migration_satellites.record_recovery(db, migration_uuid,
                                                history)


def release_claims(worker, migration):
    """Drop what a migration that did not complete still holds.

    The destination agent drops its in-memory claim itself (or its next
    recompute does, since the records no longer show it).
    """
    dropped = instances.drop_migration_context(
        worker.db, migration.instance_uuid, migration.uuid)
    if migration.dest_host:
        worker.cache.release(migration.dest_host, migration.instance_uuid)
    if dropped:
        LOG.info("Dropped the claim of migration %s (%s) on %s",
                 migration.uuid, migration.status, migration.dest_host)


def end_stalled_migrations(worker, ctxt, now, held=(), trust_leases=True,
                           lease_s=15, by=None):
    """End migrations whose conductor worker died before the source took
    over; at start and periodically.

    An admitted ``accepted`` migration is driven by the conductor worker
    that admitted it, which renews its lease while its task runs; one
    whose lease ran out lost its worker and ends ``error`` (a row from
    before leases: once not updated for longer than the destination
    choice can take). A ``queued`` one waits for the cast to its source;
    one still queued after ``check_timeout`` lost the cast with its
    worker (or its source lost it in a crash), and ends ``failed``.
    Either way its claim is dropped in the records and at the
    destination. A status change is conditional, so a migration that
    moved on meanwhile is left alone.

    :param held: uuids this worker drives itself (never stalled).
    :param trust_leases: False while this worker has not had the
        database for a whole lease: no worker could renew meanwhile, so
        a lease past its time proves nothing yet.
    :param lease_s: how long a lease lasts (for the reason).
    :param by: this worker's name as a lease holder (``'<host>:<pid>'``):
        the reason names it and the holder whose lease ran out, so that
        the records say which conductor drove the migration and which
        one ended it.
    :returns: the migrations ended.
    """
    retries = max(worker.settings.migrate_max_retries, 0)
    # Judged from this worker, which has had the database for a whole
    # lease (trust_leases) and drives none of them (held): their worker
    # renewed nothing for a lease while the database answered.
    lapsed = queue.stalled(
        worker.db, now, worker.settings.check_timeout * (retries + 2)) \
        if trust_leases else []
    holders = queue.holders(worker.db, [u for u in lapsed
                                        if u not in held])
    candidates = [(uuid, STATUS.ACCEPTED, STATUS.ERROR,
                   _stopped_reason(holders.get(uuid), lease_s, by))
                  for uuid in lapsed]
    for migration in migrations.get_all(worker.db, status=STATUS.QUEUED):
        updated = migration.updated_at or migration.created_at
        if updated is not None and (now - updated).total_seconds() >= \
                worker.settings.check_timeout * 2:
            candidates.append((
                migration.uuid, STATUS.QUEUED, STATUS.FAILED,
                f"its source {migration.source_host} did not start it "
                f"within {worker.settings.check_timeout * 2} s (twice "
                f"[DEFAULT] rpc_response_timeout_migration): the start "
                f"request was lost with a conductor worker or the source's "
                f"agent that stopped, or that agent is down or stuck; "
                f"nothing ran, the guest stays on the source"))
    return [ended for ended in (
        _end_stalled(worker, ctxt, *candidate) for candidate in candidates
        if candidate[0] not in held) if ended is not None]


def _stopped_reason(holder, lease_s, by):
    """Why a migration whose lease ran out ends, naming its holder and
    the worker that ends it (either may be unknown)."""
    worker = f"its conductor worker {holder}" if holder else \
        "its conductor worker"
    ended = f" (ended by {by})" if by else ""
    return (f"{worker} stopped or was cut off while choosing the "
            f"destination (it renewed its lease on the migration for none "
            f"of the last {lease_s:.0f} s while the database answered)"
            f"{ended}; nothing ran, the guest stays on the source")


def _end_stalled(worker, ctxt, uuid, status, final, reason):
    try:
        migration = set_status(worker, uuid, final, expected=[status],
                               error=reason)
    except (exception.InvalidStatusTransition,
            exception.MigrationNotFound):
        return None
    LOG.warning("Ended stalled migration %s of %s (was %s): %s",
                migration.uuid, migration.instance_uuid, status, reason)
    if migration.dest_host:
        drop_claim_at(worker, ctxt, migration, migration.dest_host)
    return migration


def drop_claim_at(worker, ctxt, migration, host, timeout=None):
    """Drop a migration's claim on ``host``: in the records, then on the
    agent; idempotent.

    Used when the conductor gives up on a destination (it refused, timed
    out, or the migration stalled): a destination that answers late may
    still hold a claim in memory. The records are changed first and only
    where the claim is held on ``host``, so the claim the same migration
    took on its next destination stays. The agent is asked best effort:
    one that is down or stuck drops the claim at its next start or usage
    recompute, since the records no longer hold it.

    :param migration: the Migration (its ``dest_host`` is irrelevant).
    :param timeout: seconds to wait for the agent; None: check_timeout.
    """
    try:
        record = instances.get(worker.db, migration.instance_uuid)
    except exception.InstanceNotFound:
        return
    instances.drop_migration_context(worker.db, record.instance.uuid,
                                     migration.uuid, claim_host=host)
    worker.cache.release(host, migration.instance_uuid)
    target = migration.obj_clone()
    target.dest_host = host
    try:
        worker.compute_api.drop_move_claim_at_destination(
            ctxt, record.instance, target,
            timeout=timeout or worker.settings.check_timeout)
    except Exception as exc:  # noqa: BLE001 - best effort, logged
        LOG.warning("Migration %s: could not ask %s to drop its claim "
                    "(%s); it drops it at its next usage recompute",
                    migration.uuid, host, exc)


def set_placement(worker, instance_uuid, host, numa_topology):
    """Record where an instance runs and its placement there."""
    record = instances.update(worker.db, instance_uuid,
                              {'host': host, 'numa_topology': numa_topology})
    return record.instance


def update_instance(worker, instance_uuid, values):
    """Change fields an agent may change (power and task state)."""
    allowed = {'power_state', 'task_state'}
    if set(values) - allowed:
        raise exception.Invalid(
            reason=f"agents may only update {sorted(allowed)} of instance "
                   f"{instance_uuid}, not {sorted(set(values) - allowed)}")
    return instances.update(worker.db, instance_uuid, values).instance


def requeue_after_outage(worker, migration_uuid):
    """Put back in the queue an admitted migration whose task failed
    because the database was unreachable: whatever destination it had
    claimed drops the claim, and it runs again from the start.

    :returns: True if it went back (False: it has moved on meanwhile).
    """
    migration = migrations.get(worker.db, migration_uuid,
                               with_history=False)
    if migration.status == STATUS.QUEUED:
        # Its claim and ``queued`` were committed, but the answer was
        # lost with the connection, so its task never sent the start
        # request: send it now rather than at a sweep.
        from numamig.conductor import restarts  # it imports this module
        restarts.send_now(worker, nm_context.get_admin_context(),
                          migration)
        return False
    if migration.status != STATUS.ACCEPTED:
        return False
    if migration.dest_host:
        drop_claim_at(worker, nm_context.get_admin_context(), migration,
                      migration.dest_host)
    if not queue.requeue(worker.db, migration_uuid):
        return False
    LOG.warning("Migration %s is back in the queue: the database failed "
                "while its destination was chosen", migration_uuid)
    return True


def end_after_outage(worker, migration_uuid, waited_s, option):
    """End ``error`` an admitted migration whose task waited longer than
    ``option`` allows for the database (now back); drop its claim.

    :returns: the Migration, or None when it had moved on.
    """
    reason = (f"the database was unreachable for more than {waited_s:.0f} "
              f"s while its destination was chosen, longer than {option} "
              f"allows; nothing ran, the guest stays on the source: start "
              f"the migration again")
    try:
        migration = set_status(worker, migration_uuid, STATUS.ERROR,
                               expected=[STATUS.ACCEPTED], error=reason)
    except (exception.InvalidStatusTransition,
            exception.MigrationNotFound):
        return None
    LOG.warning("Migration %s of %s ended: %s", migration.uuid,
                migration.instance_uuid, reason)
    if migration.dest_host:
        drop_claim_at(worker, nm_context.get_admin_context(), migration,
                      migration.dest_host)
    return migration
