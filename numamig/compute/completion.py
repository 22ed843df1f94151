"""Completing a migration whose guest has left the source.

The steps the source's run, its reconciliation after a restart and an
operator's resume of a postcopy-paused migration share: the destination
counts the guest, the conductor records ``completed`` (with the run's
result and the claim applied), and the source stops counting the guest.
Every step is idempotent and is asked again while unanswered
(numamig.compute.patience), because after the guest left nothing can be
undone: the service that lost an answer is replaced, never given up on.
A post-copy's recovery history, reported while the guest waits split
between the hosts, goes the same way (``record_recovery``).
"""

from oslo_log import log as logging
import oslo_messaging as messaging

from numamig import exception
from numamig.compute import patience
from numamig.objects import fields

LOG = logging.getLogger(__name__)
STATUS = fields.MigrationStatus


def complete(agent, ctxt, instance, migration, result=None,
             drop_usage=True, detail=None):
    """Make the destination count the guest and record ``completed``.

    With the conductor's records API (release 2): the destination only
    counts the guest, and ``completed``, ``result`` and the applied
    claim are one conductor call. Otherwise (or when the conductor
    turns out older): the walk of before, post-migrating with the
    result, the claim applied, completed.
    Every step is idempotent, so the source's run and a reconciliation
    (or a step sent again after a lost answer) may repeat it.

    :param drop_usage: stop counting the guest here (False: left to the
        next usage recompute, as the release before did).
    :param detail: why, for the status history (default: the result).
    :returns: the Migration as recorded.
    :raises InvalidStatusTransition: it ended otherwise meanwhile.
    """
    conductor = agent.conductor_api
    short = conductor.supports_short_path()
    if not short:
        migration = _advance(agent, ctxt, migration,
                             STATUS.POST_MIGRATING, result)
        result = None
    _at_destination(agent, ctxt, instance, migration, short)
    if short:
        try:
            migration = retried(
                agent, migration, 'completing it',
                lambda timeout: conductor.migration_complete(
                    ctxt, migration.uuid, result=result, detail=detail,
                    timeout=timeout))
            _stop_counting(agent, instance, drop_usage)
            return migration
        except messaging.UnsupportedVersion:
            LOG.info("%s: the conductor serves release 1's API only; "
                     "migration %s completed in three steps", agent.host,
                     migration.uuid)
        migration = _advance(agent, ctxt, migration,
                             STATUS.POST_MIGRATING, result)
        _apply_claim(conductor, ctxt, instance, migration)
    # Before 1.3 the destination applied the claim in its step above.
    _stop_counting(agent, instance, drop_usage)
    return _advance(agent, ctxt, migration, STATUS.COMPLETED,
                    detail=detail)


def _stop_counting(agent, instance, drop_usage):
    """Free the guest's share of this host, once the records have moved
    it: freed earlier, an incoming migration could be given those pCPUs
    while the records still place the guest here."""
    if drop_usage:
        agent.tracker.drop_instance(instance.uuid)


def _advance(agent, ctxt, migration, status, result=None, detail=None):
    """Record ``status``; a migration already there counts as done."""
    conductor = agent.conductor_api
    if migration.status == status:
        return migration
    try:
        return retried(
            agent, migration, f"recording {status}",
            lambda timeout: conductor.migration_set_status(
                ctxt, migration.uuid, status, result=result, detail=detail,
                timeout=timeout))
    except exception.InvalidStatusTransition:
        current = conductor.migration_get(ctxt, migration.uuid)
        if current.status != status:
            raise
        return current


def _at_destination(agent, ctxt, instance, migration, records_by_source):
    """post_live_migration_at_destination (idempotent: a restarted
    destination answers the repeated request)."""
    return retried(
        agent, migration, f"from destination {migration.dest_host}",
        lambda _timeout: agent.compute_api.post_live_migration_at_destination(
            ctxt, instance, migration, records_by_source=records_by_source))


def retried(agent, migration, what, send):
    """``send(timeout)``, sent again while unanswered or while the
    conductor's database is out (numamig.compute.patience): every request
    of the completion is idempotent, and the service that lost the answer
    (a dead conductor worker or agent, a restarted broker) is replaced.
    Each attempt waits ``timeout`` seconds, a growing share.
    """
    waiting = asking(agent, migration, what)
    while True:
        try:
            return send(waiting.timeout())
        except patience.RETRIED as exc:
            waiting.again(exc)


def asking(agent, migration, what):
    return patience.Asking(agent.host, migration.uuid, what,
                           timeout=patience.status_timeout(agent))


def _apply_claim(conductor, ctxt, instance, migration):
    """Apply the claim in the records, as a destination of before 1.3
    did; none held (the old path, or applied already) is fine."""
    try:
        conductor.migration_context_apply(ctxt, instance.uuid,
                                          migration.uuid)
    except exception.MigrationContextConflict:
        pass


def record_recovery(agent, ctxt, migration, history):
    """Tell the conductor how a post-copy recovery goes, each time its
    history grows (the guest's CPUs have left the source and it waits
    paused meanwhile). Advisory: the run's result carries the history
    again, so a failure here is only logged."""
    try:
        agent.conductor_api.migration_record_recovery(
            ctxt, migration.uuid, history)
    except Exception as exc:  # noqa: BLE001 - the result repeats it
        LOG.warning("%s: migration %s: recovery history not recorded: "
                    "%s", agent.host, migration.uuid, exc)
