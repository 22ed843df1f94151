"""The modelled pre-copy of a test-driver host's emulated migrations.

The libvirt test driver cannot migrate; with ``[libvirt]
emulated_migration_bandwidth`` set, the source models the copy
(numamig.convergence.emulated) under the migration's policy before the
agents carry the guest over, and reports each modelled pass as a real
job's statistics would be reported: the embedded and functional tiers
then see passes, stalls and escalations end to end.
"""

from oslo_log import log as logging

from numamig import exception
from numamig.convergence import emulated
from numamig.convergence import policy as pol
from numamig.virt import driver
from numamig.virt.libvirt import migration

LOG = logging.getLogger(__name__)
MIB = 1024 * 1024


def timer_of(settings, memory_gib):
    """The timer policy's behaviour (MigrationSettings) for the model."""
    return emulated.Timer(
        steps=tuple(migration.downtime_steps(settings, memory_gib)),
        timeout_s=settings.completion_timeout_s * max(memory_gib, 1),
        timeout_action=settings.timeout_action,
        post_copy=settings.permit_post_copy)


def run(settings, host, instance_uuid, memory_kib, policy,
        progress_callback=None, action_callback=None):
    """Model the copy; return a MigrationResult, or None if not modelled.

    :param action_callback: called as ComputeDriver.live_migrate's, for
        each modelled action once the model ran.

    :raises MigrationAborted: the policy (or the timer's timeout) aborted.
    """
    if not settings.emulated_bandwidth_mib:
        return None
    memory, gib = memory_kib * 1024, memory_kib / (1024 * 1024)
    acting = migration.acts(settings, policy)
    out = emulated.run(
        policy if acting else _timer_policy(),
        memory, settings.emulated_dirty_rate_mib * MIB,
        settings.emulated_bandwidth_mib * MIB,
        timer=timer_of(settings, gib),
        timeout_s=settings.completion_timeout_s * max(gib, 1),
        working_set=settings.emulated_working_set_mib * MIB or None)
    _report(out, progress_callback)
    actions = list(out.actions)
    if not acting and not policy.timer:
        observed = emulated.run(
            policy, memory, settings.emulated_dirty_rate_mib * MIB,
            settings.emulated_bandwidth_mib * MIB,
            timeout_s=settings.completion_timeout_s * max(gib, 1),
            working_set=settings.emulated_working_set_mib * MIB or None)
        actions += ['would ' + a for a in observed.actions]
    _tell(action_callback, out.taken,
          observed.taken if not acting and not policy.timer else ())
    LOG.info("Emulated migration of %s from %s: modelled pre-copy under "
             "policy %s%s: %s after %d passes, %.1f s, downtime %s ms%s",
             instance_uuid, host, policy.name,
             '' if acting or policy.timer else ' (observe-only)',
             out.outcome, out.passes, out.elapsed_s, out.downtime_ms,
             f" ({'; '.join(actions)})" if actions else '')
    if out.outcome == emulated.ABORTED:
        raise exception.MigrationAborted(
            instance=instance_uuid, host=host, dest='its destination',
            code=None, action='live-migrate',
            reason=f"policy {policy.name}: {out.reason}")
    return driver.MigrationResult(
        emulated=True, elapsed_ms=int(out.elapsed_s * 1000),
        downtime_ms=out.downtime_ms, memory_total=memory,
        memory_processed=out.bytes_sent,
        post_copy=out.outcome == emulated.POST_COPY,
        paused=out.outcome == emulated.PAUSED,
        convergence_policy=policy.name, convergence_actions=actions)


def _tell(action_callback, applied, observed):
    if action_callback is None:
        return
    for action in applied:
        action_callback(action, pol.APPLIED, action.describe())
    for action in observed:
        action_callback(action, pol.OBSERVED, 'would ' + action.describe())


def _timer_policy():
    return pol.SHIPPED[pol.TIMER]


def _report(out, progress_callback):
    if progress_callback is None:
        return
    sent = 0
    for sample in out.samples:
        progress_callback(driver.MigrationProgress(
            memory_total=out.samples[0].remaining, memory_processed=sent,
            memory_remaining=sample.remaining,
            dirty_rate=sample.dirty_rate, iteration=sample.iteration))
        sent += sample.remaining
