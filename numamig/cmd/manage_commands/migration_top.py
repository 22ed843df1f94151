"""numamig-manage migration top: the migrations in flight, live.

A view refreshed in place on a terminal: per migration its hosts,
status, progress, memory left, the dirty rate sampled before the copy,
how long it has run, its convergence policy and the step that policy
takes next if the copy stalls. Read from the conductor's database at
each refresh (``--interval``); with ``--format json`` one JSON document
per refresh and line, for a script.

Kept apart from numamig.cmd.manage_commands.migration (which mixes it
into its category): the view's arithmetic is its own concern.
"""

import json
import sys
import time

from numamig import exception
from numamig.cmd import common
from numamig.cmd.manage_commands import _access

STATUS = common.lazy('numamig.objects.fields', 'MigrationStatus')
# Refreshes come no faster than this (each reads the database).
MIN_INTERVAL_S = 0.5
MAX_INTERVAL_S = 3600.0
MAX_COUNT = 1_000_000
# Moves the cursor home and clears the screen (ANSI; every terminal).
CLEAR = '\x1b[H\x1b[2J'


class TopCommand:
    """The ``top`` action of ``numamig-manage migration``."""

    @common.args('--interval', dest='interval', type=float, default=2.0,
                 metavar='SECONDS',
                 help=f"Seconds between refreshes ({MIN_INTERVAL_S:g} to "
                      f"{MAX_INTERVAL_S:g}; default 2).")
    @common.args('--count', dest='count', type=int, default=None,
                 metavar='N',
                 help="Refresh N times, then exit 0 (default: until "
                      "Ctrl-C on a terminal, once otherwise).")
    @common.args('--host', dest='host', metavar='HOST', default=None,
                 help="Only migrations from or to HOST.")
    @common.format_option
    @common.guarded
    def top(self, interval=2.0, count=None, host=None,
            output_format='human'):
        """Watch the migrations in flight: progress, memory left, the
        dirty rate, the time they have run and the next step of their
        convergence policy, refreshed every --interval seconds (in place
        on a terminal). With --format json: one JSON document per
        refresh and line.

        Exit codes: 0 done (Ctrl-C on a terminal included); 127 a bad
        option (nothing is read); 255 the database cannot be used.
        """
        if not MIN_INTERVAL_S <= interval <= MAX_INTERVAL_S:
            raise exception.Invalid(
                reason=f"--interval {interval:g} is not between "
                       f"{MIN_INTERVAL_S:g} and {MAX_INTERVAL_S:g} seconds")
        if count is not None and not 1 <= count <= MAX_COUNT:
            raise exception.Invalid(
                reason=f"--count {count} is not between 1 and {MAX_COUNT}")
        terminal = output_format != 'json' and sys.stdout.isatty()
        if count is None:
            count = MAX_COUNT if terminal else 1
        policies = _policies()
        try:
            with _access.database() as db:
                if host is not None:
                    _require_host(db, host)
                for frame in range(count):
                    began = time.monotonic()
                    view = _frame(db, policies, host)
                    _show(view, output_format, terminal)
                    if frame + 1 < count:
                        time.sleep(max(0.0, interval - (
                            time.monotonic() - began)))
        except KeyboardInterrupt:
            if terminal:
                print()
        return common.EXIT_OK


def _require_host(db, host):
    """A misspelt host name is refused, not shown as an idle host."""
    from numamig.db import compute_nodes
    compute_nodes.get(db, host)


def _policies():
    """{name: Policy} of the shipped policies and [libvirt]'s."""
    from numamig.conf import CONF
    from numamig.convergence import policy
    try:
        return policy.catalog(CONF.libvirt.live_migration_policies)
    except exception.NumamigException:
        # A policy line the conductor would refuse: the shipped ones
        # still name the next steps of most migrations.
        return dict(policy.SHIPPED)


def _frame(db, policies, host):
    """The view of one refresh: {'at', 'migrations', 'waiting'}."""
    from oslo_utils import timeutils

    from numamig.db import migration_satellites
    from numamig.db import migrations
    now = timeutils.utcnow(with_timezone=True)
    found = migrations.get_in_progress(db)
    if host is not None:
        found = [m for m in found if host in (m.source_host,
                                              m.get('dest_host'))]
    waiting = [m for m in found if m.status in (STATUS.ACCEPTED,
                                               STATUS.QUEUED)]
    going = [m for m in found if m not in waiting]
    # The sampled dirty rate is the prediction's (MigrationPrediction),
    # the policy and its actions MigrationConvergence's (satellite
    # records): one query for every row shown, not one each.
    read = migration_satellites.get_many(
        db, [m.uuid for m in going], ('prediction', 'convergence'))
    return {'at': now.isoformat(),
            'waiting': len(waiting),
            'migrations': [_row(m, policies, now,
                                read.get(m.uuid, {}).get('prediction'),
                                read.get(m.uuid, {}).get('convergence'))
                           for m in going]}


def _row(migration, policies, now, prediction=None, convergence=None):
    """One migration's line; ``prediction`` and ``convergence``: its
    MigrationPrediction and MigrationConvergence (None: not read)."""
    total = migration.memory_total or 0
    processed = migration.memory_processed or 0
    convergence = convergence or {}
    actions = list(convergence.get('actions') or [])
    started = migration.get('admitted_at') or migration.get('created_at')
    return {
        'uuid': migration.uuid,
        'instance_uuid': migration.instance_uuid,
        'source_host': migration.source_host,
        'dest_host': migration.get('dest_host'),
        'status': migration.status,
        'progress_percent': (round(100.0 * processed / total, 1)
                             if total else None),
        'memory_remaining': migration.memory_remaining or 0,
        'memory_total': total,
        'dirty_rate': (prediction.get('sampled_dirty_rate')
                       if prediction is not None else None),
        'running_s': (round((now - started).total_seconds(), 1)
                      if started else None),
        'policy': convergence.get('policy'),
        'actions_taken': len(actions),
        'next_step': next_step(policies.get(convergence.get('policy')),
                               len(actions)),
    }


def next_step(found, taken):
    """What ``found`` (a Policy) does next when the copy stalls, after
    ``taken`` escalations; None when it has none left or is unknown."""
    if found is None or found.timer:
        return None
    if taken < len(found.downtime_ms):
        return f"allow {found.downtime_ms[taken]} ms of downtime"
    tier = taken - len(found.downtime_ms)
    if tier < len(found.tiers):
        return found.tiers[tier].replace('_', '-')
    return None


def _show(view, output_format, terminal):
    if output_format == 'json':
        print(json.dumps(view, sort_keys=True), flush=True)
        return
    lines = _lines(view)
    if terminal:
        sys.stdout.write(CLEAR)
    print('\n'.join(lines), flush=True)


def _lines(view):
    rows = view['migrations']
    lines = [f"{view['at'][:19].replace('T', ' ')} UTC  {len(rows)} in "
             f"flight, {view['waiting']} waiting for admission"]
    if not rows:
        return lines
    lines.append(f"{'MIGRATION':<9}  {'SOURCE -> DEST':<27}  "
                 f"{'STATUS':<15}  {'DONE':>6}  {'LEFT':>9}  "
                 f"{'DIRTY':>10}  {'RUN':>7}  POLICY (NEXT STEP)")
    for row in rows:
        hosts = f"{row['source_host']} -> {row['dest_host'] or '?'}"
        done = '' if row['progress_percent'] is None else \
            f"{row['progress_percent']:.1f}%"
        dirty = '' if row['dirty_rate'] is None else \
            f"{row['dirty_rate'] / 2 ** 20:.1f} MiB/s"
        run = '' if row['running_s'] is None else f"{row['running_s']:.0f} s"
        policy = row['policy'] or '-'
        if row['next_step']:
            policy += f" ({row['next_step']})"
        lines.append(
            f"{row['uuid'][:8]:<9}  {hosts[:27]:<27}  {row['status']:<15}  "
            f"{done:>6}  {_gib(row['memory_remaining']):>9}  {dirty:>10}  "
            f"{run:>7}  {policy}")
    return lines


def _gib(amount):
    return f"{amount / 2 ** 30:.2f} GiB"
