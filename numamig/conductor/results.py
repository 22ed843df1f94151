"""A migration run's result as its source reports it: checked, worded.

The source sends the driver's MigrationResult (numamig.virt.driver) as a
dict with the status change that ends its run: ``post-migrating`` once
the guest has left, ``failed``/``cancelled``/``error`` after a run that
went partway (then only what the source could measure). This module
turns it into the Migration record's values and a line for the status
history, so that an operator reading ``migration show`` sees how long
the run took, how long the guest stood still, how it converged, and
whether numamig emulated it because the hypervisor cannot migrate.
"""

from numamig import exception
from numamig.convergence import recovery
from numamig.objects import fields
from numamig.objects import migration as migration_obj
from numamig.objects import migration_satellites as satellites

STATUS = fields.MigrationStatus

# What a source may report (MigrationResult's fields).
REPORTED = ('emulated', 'elapsed_ms', 'downtime_ms', 'memory_total',
            'memory_processed', 'post_copy', 'paused') + \
    satellites.CONVERGENCE_FIELDS + satellites.RECOVERY_FIELDS
# The progress figures a result refreshes when it has them.
_PROGRESS = ('memory_total', 'memory_processed')


def record_values(migration_uuid, result, status):
    """The columns to record for ``result`` with ``status``: the
    Migration's and those of its MigrationConvergence and
    MigrationRecovery (satellite records in the same row).

    Result fields the source did not report are recorded as unknown
    (None). The figures are checked by the repository when written.

    :raises InvalidMigrationResult: ``result`` is not a dict or names
        unknown fields; nothing is recorded then.
    """
    if not isinstance(result, dict):
        raise exception.InvalidMigrationResult(
            migration_uuid=migration_uuid,
            reason=f"it must be a dict of {', '.join(REPORTED)}, got "
                   f"{result!r}")
    unknown = sorted(set(result) - set(REPORTED))
    if unknown:
        raise exception.InvalidMigrationResult(
            migration_uuid=migration_uuid,
            reason=f"unknown fields {', '.join(unknown)}; a source "
                   f"reports {', '.join(REPORTED)}")
    values = {name: result.get(name)
              for name in migration_obj.RESULT_FIELDS}
    values.update({name: _bounded(name, result[name])
                   for name in satellites.CONVERGENCE_FIELDS
                   if result.get(name) is not None})
    values.update({name: result[name] for name in _PROGRESS
                   if result.get(name) is not None})
    values.update({name: recovery.bounded(result[name])
                   for name in satellites.RECOVERY_FIELDS
                   if isinstance(result.get(name), list)})
    if status in STATUS.COPIED:
        # The guest runs on the destination: nothing is left to send
        # (a source of API 1.3 reports the result with ``completed``).
        values['memory_remaining'] = 0
    return values


def _bounded(name, value):
    """A convergence field cut to what the record holds (a long run may
    have taken more actions than it keeps: the last ones are kept)."""
    if name == 'convergence_policy':
        return str(value)[:satellites.MAX_POLICY_NAME]
    actions = [str(a)[:satellites.MAX_ACTION_LENGTH]
               for a in list(value)]
    return actions[-satellites.MAX_ACTIONS:]


def describe(result, status=None):
    """One line for the status history, e.g. ``native run of 412 ms,
    downtime 18 ms, converged by post-copy``.

    :param status: the status recorded with it: a run that ended before
        the guest left its source (failed, cancelled) is not worded as
        one that carried the guest over.
    """
    kind = 'emulated' if result.get('emulated') else 'native'
    elapsed = result.get('elapsed_ms')
    parts = [f"{kind} run of {elapsed} ms" if elapsed is not None
             else f"{kind} run of unknown length"]
    if result.get('downtime_ms') is not None:
        parts.append(f"downtime {result['downtime_ms']} ms")
    if result.get('post_copy'):
        parts.append("converged by post-copy")
    if result.get('paused'):
        parts.append("converged by pausing the guest")
    if result.get('convergence_policy'):
        taken = len(result.get('convergence_actions') or ())
        parts.append(f"policy {result['convergence_policy']} "
                     f"({taken} action{'' if taken == 1 else 's'})")
    if result.get('postcopy_recovery'):
        parts.append(f"post-copy recovery: "
                     f"{recovery.describe(result['postcopy_recovery'])}")
    if result.get('emulated'):
        parts.append(_emulated_words(status))
    return ', '.join(parts)


def _emulated_words(status):
    """What numamig did in place of the hypervisor, by how it ended."""
    if status is None or status in STATUS.COPIED:
        return ("numamig defined the guest on the destination itself "
                "(the hypervisor cannot migrate)")
    return ("stopped before numamig defined the guest on the destination "
            "(the hypervisor cannot migrate): the guest stayed on its "
            "source")
