"""How ``migration show`` words a migration's convergence: the policy it
ran under, what the policy did, the pre-flight prediction next to the
outcome, and the recovery of a post-copy whose stream broke
(numamig.convergence)."""

from numamig.cmd.manage_commands import _names
from numamig.convergence import recovery

STATUS = _names.MigrationStatus


def view(migration, prediction=None, convergence=None):
    """The JSON-able convergence part of a migration's view;
    ``prediction`` and ``convergence``: its MigrationPrediction and
    MigrationConvergence (satellite records) or mappings of their
    fields; None: not read (shown empty).
    """
    if prediction is None:
        prediction = {}
    if convergence is None:
        convergence = {}
    return {
        'policy': convergence.get('policy'),
        'actions': list(convergence.get('actions') or []),
        'prediction': prediction.get('prediction'),
        'predicted_elapsed_ms': prediction.get('predicted_elapsed_ms'),
        'predicted_downtime_ms': prediction.get('predicted_downtime_ms'),
        'sampled_dirty_rate': prediction.get('sampled_dirty_rate'),
        'outcome': outcome(migration),
    }


def outcome(migration):
    """What happened, in the prediction's terms: converged (pre-copy),
    post-copy, paused, failed, cancelled; None while it runs."""
    if migration.status not in STATUS.SETTLED:
        return None
    if migration.status != STATUS.COMPLETED:
        return migration.status
    if migration.get('post_copy'):
        return 'post-copy'
    if migration.get('paused'):
        return 'paused'
    return 'converged'


def lines(data):
    """``migration show`` lines of ``view``'s data."""
    found = []
    if data['policy']:
        found.append(f"convergence policy: {data['policy']}")
    for action in data['actions']:
        found.append(f"  {action}")
    if data['prediction']:
        found.append(f"prediction: {data['prediction']}"
                     + _figures(data) + (f"; outcome: {data['outcome']}"
                                         if data['outcome'] else ''))
    return found


def _figures(data):
    parts = []
    if data.get('predicted_elapsed_ms') is not None:
        parts.append(f"in {data['predicted_elapsed_ms'] / 1000:.1f} s")
    if data.get('predicted_downtime_ms') is not None:
        parts.append(f"downtime {data['predicted_downtime_ms']} ms")
    if data.get('sampled_dirty_rate') is not None:
        parts.append(f"dirty rate {data['sampled_dirty_rate'] / 2 ** 20:.1f}"
                     f" MiB/s")
    return f" ({', '.join(parts)})" if parts else ''


def prediction_lines(prediction):
    """Dry-run lines of the source's prediction (None: not asked)."""
    if not prediction:
        return []
    head = f"convergence: {prediction['prediction']}"
    if prediction.get('policy'):
        head += f" under policy {prediction['policy']}"
    found = [head + _figures(prediction)]
    if prediction.get('reason'):
        found.append(f"  {prediction['reason']}")
    if prediction.get('dirty_rate_method'):
        found.append(f"  dirty rate measured by "
                     f"{prediction['dirty_rate_method']}")
    return found


def recovery_view(history):
    """The JSON-able post-copy recovery history ([{event, at, attempt,
    detail}]) of ``history`` (MigrationRecovery.events), or None where
    the stream never broke in post-copy (or it was not read)."""
    if not history:
        return None
    return [{'event': e.get('event'), 'at': e.get('at'),
             'attempt': _int(e.get('attempt')), 'detail': e.get('detail')}
            for e in history]


def recovery_lines(history):
    """``migration show`` lines of ``recovery_view``'s data: a summary
    and one line per event."""
    if not history:
        return []
    found = [f"post-copy recovery: {recovery.describe(history)}"]
    for event in history:
        attempt = f" {event['attempt']}" if event['attempt'] else ''
        detail = f": {event['detail']}" if event['detail'] else ''
        found.append(f"  {event['at']}  {event['event']}{attempt}{detail}")
    return found


def _int(value):
    try:
        return None if value is None else int(value)
    except ValueError:
        return None
