"""numamig-manage migration: start, follow, list, show, top, abort,
complete, resume.

Starting, aborting and forcing go through the conductor (it records
every step and keeps the claims consistent); listing and showing read
its database.
"""

import sys
import time

from numamig import exception
from numamig.cmd import common
from numamig.cmd import pictures
from numamig.cmd.manage_commands import _access
from numamig.cmd.manage_commands import _names
from numamig.cmd.manage_commands import convergence_view
from numamig.cmd.manage_commands import devices_view
from numamig.cmd.manage_commands import migration_resume
from numamig.cmd.manage_commands import migration_top
from numamig.cmd.manage_commands import reclaim_view
from numamig.cmd.manage_commands import threads_view

# The statuses by name without the object registry (which brings
# oslo.messaging with it): the reads word them, --status offers them.
STATUS = _names.MigrationStatus
STATUSES = STATUS.ALL
# Imported when an action uses it (common.lazy): the actions that build
# a migration.
migration_obj = common.lazy('numamig.objects.migration')
# A migration followed with --wait is polled FIRST_POLL_S after it last
# changed (status or progress), then at intervals growing by POLL_GROWTH
# up to POLL_INTERVAL: a change means the next step may be near, so the
# end of a short migration is seen within tens of ms, while a long, quiet
# one costs the conductor a call every POLL_INTERVAL at most.
# No poll comes later than WAIT_SHARE of the time waited so far either,
# so that seeing the end late adds at most that share to the wait.
FIRST_POLL_S = 0.025
POLL_GROWTH = 1.5
POLL_INTERVAL = 0.5
WAIT_SHARE = 0.1
# Longest single migration_wait; the command asks again after it.
WAIT_CHUNK_S = 10.0
BAR_WIDTH = 30


class MigrationCommands(migration_resume.ResumeCommand,
                        migration_top.TopCommand):
    """Live migrations: start (or dry-run), follow, inspect, stop."""

    @common.args('instance', metavar='INSTANCE',
                 help="Instance UUID, or its name when one instance has it.")
    @common.args('--host', dest='host', metavar='DEST', default=None,
                 help="Destination host (default: the scheduler chooses).")
    @common.args('--dry-run', dest='dry_run', action='store_true',
                 default=False,
                 help="Only say where the guest would go, how it would "
                      "be pinned and under which convergence policy "
                      "(--policy included); claim and record nothing.")
    @common.args('--wait', action='store_true', default=False,
                 help="Follow the migration with a progress bar until it "
                      "ends.")
    @common.args('--priority', dest='priority', metavar='PRIORITY',
                 default=None,
                 help="Place in the admission queue: routine (default), "
                      "maintenance, drain, or a number from 0 to 100; "
                      "higher is admitted first.")
    @common.args('--policy', dest='policy', metavar='NAME', default=None,
                 help="Convergence policy to run it under (default: the "
                      "flavor's hw:live_migration_policy, the image's "
                      "hw_live_migration_policy, else [libvirt] "
                      "live_migration_policy): timer, nfv, finish, "
                      "never_pause or one of [libvirt] "
                      "live_migration_policies.")
    @common.args('--wait-timeout', dest='wait_timeout', type=float,
                 default=None, metavar='SECONDS',
                 help="With --wait: stop following after SECONDS and exit "
                      "1 (the migration goes on; 'migration show' follows "
                      "it). Default: until it ends.")
    @common.format_option
    @common.guarded
    def start(self, instance, host=None, dry_run=False, wait=False,
              priority=None, wait_timeout=None, policy=None,
              output_format='human'):
        """Live-migrate a guest, re-pinning it for the destination.

        The request is checked and queued at once; when the admission
        limits allow, the destination fits the guest to its own free
        pCPUs, nodes and pages and claims them, and the source rewrites
        the domain XML and migrates. --dry-run answers synchronously
        from the hosts' last reports and changes nothing. Exit codes: 0
        accepted (with --wait: completed; with --dry-run: a destination
        fits); 1 (--wait) no destination could take the guest, the
        migration failed or it was aborted (shown cancelled), (--dry-run)
        no destination fits; 127 bad input
        (unknown instance, host or policy, a guest already migrating, a
        full queue; nothing changed); 130 interrupted (--wait: the migration
        goes on, printed first); 255 the conductor cannot be reached.
        """
        instance = _access.instance_uuid(instance)
        if dry_run and wait:
            raise exception.Invalid(reason="--dry-run starts nothing to "
                                           "--wait for")
        priority = parse_priority(priority)
        if wait_timeout is not None and not (wait and wait_timeout > 0):
            raise exception.Invalid(
                reason=f"--wait-timeout {wait_timeout:g} needs --wait and a "
                       f"number of seconds above 0")
        if dry_run:
            api, ctxt = _access.conductor(), _access.context()
            answer = api.live_migration_dry_run(ctxt, instance, host,
                                                policy=policy)
            data = _dry_run_view(answer)
            common.print_output(data, output_format, _print_dry_run)
            return common.EXIT_OK if data['dest_host'] else common.EXIT_NO
        # Without oslo.messaging where the configuration allows it
        # (_access.direct_conductor): loading it was most of the time.
        api = _access.direct_conductor() or _access.conductor()
        try:
            return self._start(api, instance, host, wait, priority,
                               wait_timeout, policy, output_format)
        finally:
            getattr(api, 'close', lambda: None)()

    def _start(self, api, instance, host, wait, priority, wait_timeout,
               policy, output_format):
        ctxt = _access.context()
        try:
            migration = api.live_migrate_instance(ctxt, instance, host,
                                                  priority=priority,
                                                  policy=policy)
        except exception.NoValidHost as exc:
            # A conductor older than the admission queue chooses the
            # destination before it answers.
            return common.fail(exc, common.EXIT_NO, output_format)
        except KeyboardInterrupt:
            return common.fail(
                f"interrupted before the conductor answered: a migration of "
                f"{instance} may have been recorded; see 'numamig-manage "
                f"migration list --instance {instance}'",
                common.EXIT_INTERRUPTED, output_format)
        if wait:
            try:
                migration = follow(api, ctxt, migration, output_format,
                                   timeout=wait_timeout)
            except KeyboardInterrupt:
                return _interrupted(migration, output_format)
        common.print_output(_view(migration), output_format, _print_show)
        if wait and migration.status not in STATUS.SETTLED:
            # stderr only: stdout already holds the migration.
            return common.fail(
                f"migration {migration.uuid} is still {migration.status} "
                f"after {wait_timeout} s; it goes on: follow it with "
                f"'numamig-manage migration show {migration.uuid}'",
                common.EXIT_NO)
        if wait and migration.status != STATUS.COMPLETED:
            return common.EXIT_NO
        return common.EXIT_OK

    @common.args('--status', default=None, choices=list(STATUSES),
                 help="Only migrations in this status.")
    @common.args('--host', dest='host', metavar='HOST', default=None,
                 help="Only migrations from or to this host.")
    @common.args('--instance', default=None, metavar='INSTANCE',
                 help="Only migrations of this instance (its UUID, or its "
                      "name when one instance has it).")
    @common.format_option
    @common.guarded
    def list(self, status=None, host=None, instance=None,
             output_format='human'):
        """List migrations, oldest first, with status, hosts, the guest's
        downtime and times.

        Exit codes: 0 listed (also when there is none); 127 bad filter;
        255 the database cannot be used.
        """
        if instance is not None:
            instance = _access.instance_uuid(instance)
        with _access.direct_reader() as reader:
            if reader is None:
                found = _list_through_orm(host, instance, status)
            else:
                found = reader.migrations(instance_uuid=instance,
                                          status=status)
                waiting = reader.queue_positions()
                for migration in found:
                    migration.queue_position = waiting.get(migration.uuid)
                found = _on_host(found, host)
                if host is not None and not found:
                    # "No migration matches" would hide a misspelt host
                    # name (as 'instance list --host').
                    reader.require_host(host)
        data = {'migrations': [_view(m) for m in found]}
        common.print_output(data, output_format, _print_list)
        return common.EXIT_OK

    @common.args('migration', metavar='ID', help="Migration UUID.")
    @common.format_option
    @common.guarded
    def show(self, migration, output_format='human'):
        """Show a migration: status history with times, progress, the
        result of its run (duration, downtime, whether numamig emulated
        it, post-copy or paused to converge), every destination tried
        with why it refused, and the virtio-mem memory reclaimed from
        other guests to place it (``[virtio_mem] placement_reclaim``).

        Exit codes: 0 shown; 127 unknown migration; 255 the database
        cannot be used.
        """
        _access.require_uuid(migration, 'migration')
        with _access.direct_reader() as reader:
            if reader is None:
                found, satellites = _show_through_orm(migration)
            else:
                found = reader.migrations(uuid=migration)[0]
                found.queue_position = reader.queue_position(found.uuid)
                satellites = _satellites_of_record(found)
        common.print_output(_view(found, satellites), output_format,
                            _print_show)
        return common.EXIT_OK

    @common.args('migration', metavar='ID', help="Migration UUID.")
    @common.format_option
    @common.guarded
    def abort(self, migration, output_format='human'):
        """Cancel a migration not started yet, or abort a running one.

        The guest stays on its source with its old placement; the
        destination's claim is released. A postcopy-paused migration (or
        one being resumed) is refused: neither half of its guest is the
        guest; resume it instead. Exit codes: 0 cancelled or abort
        requested; 127 unknown migration, or one that can no longer be
        aborted (nothing changed); 255 the conductor cannot be reached.
        """
        _access.require_uuid(migration, 'migration')
        result = _access.conductor().migration_abort(_access.context(),
                                                     migration)
        common.print_output(_view(result), output_format, _print_show)
        return common.EXIT_OK

    @common.args('migration', metavar='ID', help="Migration UUID.")
    @common.format_option
    @common.guarded
    def force_complete(self, migration, output_format='human'):
        """Make a running migration converge (post-copy or pause).

        Exit codes: 0 requested; 127 unknown migration or not running
        (nothing changed); 255 the conductor cannot be reached.
        """
        _access.require_uuid(migration, 'migration')
        result = _access.conductor().migration_force_complete(
            _access.context(), migration)
        common.print_output(_view(result), output_format, _print_show)
        return common.EXIT_OK


def _on_host(found, host):
    """The migrations from or to ``host`` (all of them for None)."""
    if host is None:
        return found
    return [m for m in found if host in (m.source_host, m.get('dest_host'))]


def _list_through_orm(host, instance, status):
    """``list``'s migrations where numamig.db.direct does not serve the
    database URL: through numamig.db's repositories, as objects."""
    from numamig.db import migrations
    from numamig.db import queue
    with _access.database() as db:
        found = migrations.get_all(db, instance_uuid=instance,
                                   status=status)
        waiting = queue.positions(db)
    for migration in found:
        migration.queue_position = waiting.get(migration.uuid)
    found = _on_host(found, host)
    if host is not None and not found:
        from numamig.db import compute_nodes
        with _access.database() as db:
            compute_nodes.get(db, host)
    return found


def _show_through_orm(uuid):
    """``show``'s migration and its satellite records (see
    _satellites_of_record) through numamig.db's repositories."""
    from numamig.db import migration_satellites
    from numamig.db import migrations
    from numamig.db import queue
    with _access.database() as db:
        found = migrations.get(db, uuid)
        found.queue_position = queue.position(db, found.uuid)
        read = migration_satellites.get(db, uuid, _names.SATELLITES)
    return found, {'reclaim': read['reclaim'].entries,
                   'threads': read['threads'].sides,
                   'prediction': read['prediction'],
                   'convergence': read['convergence'],
                   'recovery': read['recovery'].events,
                   'devices': {'host': read['devices'].host,
                               'devices': read['devices'].devices}}


def _satellites_of_record(record):
    """What ``show`` words of a migration's satellite records
    (numamig.objects.migration_satellites), from a numamig.db.direct
    record, which reads them with the row: {'reclaim': entries,
    'threads': sides, 'prediction': {PREDICTION_FIELDS}, 'convergence':
    {'policy', 'actions'}, 'recovery': events, 'devices': {host,
    devices}}."""
    return {'reclaim': record.get('memory_reclaim') or [],
            'threads': record.get('migration_threads') or {},
            'prediction': {name: record.get(name)
                           for name in _names.PREDICTION_FIELDS},
            'convergence': {
                'policy': record.get('convergence_policy'),
                'actions': record.get('convergence_actions')},
            'recovery': record.get('postcopy_recovery'),
            'devices': record.get('migration_devices')}


def _interrupted(migration, output_format):
    """Ctrl-C while following: the migration itself goes on."""
    common.print_output(_view(migration), output_format, _print_show)
    return common.fail(
        f"interrupted: migration {migration.uuid} goes on (last seen "
        f"{migration.status}); follow it with 'numamig-manage migration "
        f"show {migration.uuid}', stop it with 'numamig-manage migration "
        f"abort {migration.uuid}'", common.EXIT_INTERRUPTED)


def follow(api, ctxt, migration, output_format, timeout=None,
           stream=None, sleep=time.sleep, clock=time.monotonic):
    """Follow a migration until it ends, drawing progress; return it.

    A conductor of API 1.5 holds each request until the migration
    changes (``migration_wait``), so the end is seen when it is recorded,
    with one round trip per change. An older one is polled: polls back
    off from FIRST_POLL_S to POLL_INTERVAL, start short again whenever
    the migration changed, and are never further apart than WAIT_SHARE
    of the time waited so far. With ``timeout`` (seconds), no wait goes
    past it and the migration is returned as last seen, maybe still in
    progress. Progress goes to ``stream`` (stderr by default) so that
    stdout stays the final answer; with --format json nothing is drawn.
    """
    stream = stream or sys.stderr
    draw = output_format != 'json'
    started = clock()
    deadline = None if timeout is None else started + timeout
    last = delays = None
    waits = True
    while migration.status not in STATUS.SETTLED:
        line = progress_line(migration)
        if line != last:
            if draw:
                print(line, file=stream, flush=True)
            last, delays = line, poll_delays()
        remaining = None if deadline is None else deadline - clock()
        if remaining is not None and remaining <= 0:
            return migration
        if waits:
            seen = _wait_once(api, ctxt, migration, remaining, clock, sleep)
            if seen is not None:
                migration = seen
                continue
            waits = False       # a conductor older than API 1.5
        delay = min(next(delays),
                    max(FIRST_POLL_S, WAIT_SHARE * (clock() - started)))
        if remaining is not None:
            delay = min(delay, remaining)
        sleep(delay)
        migration = api.migration_get(ctxt, migration.uuid)
    if draw:
        print(progress_line(migration), file=stream, flush=True)
    return migration


def _wait_once(api, ctxt, migration, remaining, clock, sleep):
    """One ``migration_wait`` of at most WAIT_CHUNK_S (or ``remaining``).

    :returns: the migration as answered, or None from a conductor that
        does not serve it. An answer that came back unchanged well before
        its time (the conductor held as many waits as it allows) is
        followed by one POLL_INTERVAL pause, so that such a caller polls
        instead of spinning.
    """
    asked = WAIT_CHUNK_S if remaining is None else min(WAIT_CHUNK_S,
                                                       remaining)
    began = clock()
    try:
        seen = api.migration_wait(ctxt, migration, asked)
    except Exception as exc:
        # Only numamig.rpc's client raises it, so only with
        # oslo.messaging loaded (direct_rpc's serves no older conductor).
        messaging = sys.modules.get('oslo_messaging')
        if messaging is not None and \
                isinstance(exc, messaging.UnsupportedVersion):
            return None
        raise
    unchanged = (seen.status, seen.memory_processed) == \
        (migration.status, migration.memory_processed)
    if unchanged and clock() - began < asked / 2:
        sleep(min(POLL_INTERVAL, asked))
    return seen


def poll_delays():
    """FIRST_POLL_S, then growing by POLL_GROWTH, capped at POLL_INTERVAL.

    The module's values are read now, so that tests can change them.
    """
    delay = min(FIRST_POLL_S, POLL_INTERVAL)
    while True:
        yield delay
        delay = min(delay * POLL_GROWTH, POLL_INTERVAL)


def progress_line(migration):
    """``[#####.....]  40%  1.2/3.0 GiB  running``."""
    total = migration.memory_total
    done = migration.memory_processed
    if total:
        share = min(done / total, 1.0)
        filled = int(share * BAR_WIDTH)
        amounts = (f"{share:4.0%}  {_gib(done)}/{_gib(total)} GiB, "
                   f"{_gib(migration.memory_remaining)} GiB left")
    else:
        filled = BAR_WIDTH if migration.status == STATUS.COMPLETED else 0
        amounts = "no memory statistics yet"
    bar = '#' * filled + '.' * (BAR_WIDTH - filled)
    return f"[{bar}]  {amounts}  {migration.status}"


def _gib(amount):
    return f"{amount / 1024 ** 3:.1f}"


def _view(migration, satellites=None):
    """The JSON-able view of a migration; ``satellites``: its satellite
    records as _satellites_of_record gives them, where the command read
    them (``show``); None: the answer of an operation, which carries the
    migration alone (the satellites are then shown empty)."""
    satellites = satellites or {}
    return {
        'uuid': migration.uuid, 'instance_uuid': migration.instance_uuid,
        'source_host': migration.source_host,
        'dest_host': migration.get('dest_host'),
        'requested_host': migration.get('requested_host'),
        'status': migration.status,
        'priority': migration.get('priority', 0),
        # 1 for the next to be admitted, while it waits; else None.
        'queue_position': migration.get('queue_position'),
        'created_at': _time(migration.get('created_at')),
        'updated_at': _time(migration.get('updated_at')),
        'progress': {k: migration.get(k) for k in (
            'memory_total', 'memory_processed', 'memory_remaining')},
        'error': migration.get('error'),
        'refused_hosts': dict(migration.get('refused_hosts') or {}),
        'history': [{'status': h.status, 'at': _time(h.changed_at),
                     'detail': h.get('detail')}
                    for h in migration.get('history') or []],
        # None until the source reports how the run went (and for runs
        # of sources that never report it).
        'result': ({name: migration.get(name)
                    for name in _names.RESULT_FIELDS}
                   if _has_result(migration) else None),
        'convergence': convergence_view.view(
            migration, satellites.get('prediction'),
            satellites.get('convergence')),
        'memory_reclaim': reclaim_view.view(satellites.get('reclaim')),
        # None where the stream never broke during post-copy.
        'postcopy_recovery': convergence_view.recovery_view(
            satellites.get('recovery')),
        # None where no host recorded where the migration's threads ran.
        'migration_threads': threads_view.view(satellites.get('threads')),
        # None where the destination verified no passed-through device.
        'devices': devices_view.view(satellites.get('devices')),
    }


def _has_result(migration):
    """Migration.has_result, of an object or a numamig.db.direct record:
    whether the source reported how the run went."""
    return any(migration.get(name) is not None
               for name in _names.RESULT_FIELDS)


def _dry_run_view(answer):
    topology = answer.get('numa_topology')
    return {
        'instance_uuid': answer['instance_uuid'],
        'source_host': answer['source_host'],
        'dest_host': answer['dest_host'],
        'candidates': list(answer.get('candidates') or []),
        'refused_hosts': dict(answer.get('refused') or {}),
        'numa_topology': common.plain(topology),
        'placement': pictures.placement_lines(topology),
        # A conductor of release 1 does not say: None.
        'distance': answer.get('distance'),
        'policy': answer.get('policy'),
        'policy_from': answer.get('policy_from'),
        'prediction': answer.get('prediction'),
        'reclaim': answer.get('reclaim'),
        'reclaim_note': answer.get('reclaim_note'),
    }


def _time(value):
    return value.isoformat(timespec='seconds') if value else None


def _print_list(data):
    if not data['migrations']:
        print("No migration matches.")
        return
    print(f"{'UUID':<36}  {'INSTANCE':<8}  {'SOURCE':<12} {'DEST':<12} "
          f"{'STATUS':<16} {'PRI':>3} {'DOWNTIME':>9}  UPDATED")
    for row in data['migrations']:
        print(f"{row['uuid']:<36}  {row['instance_uuid'][:8]:<8}  "
              f"{row['source_host']:<12} {row['dest_host'] or '-':<12} "
              f"{_status_cell(row):<16} {row['priority']:>3} "
              f"{_downtime_cell(row['result']):>9}  "
              f"{row['updated_at'] or '-'}")


def _status_cell(row):
    """``queued #3`` for a migration waiting for admission."""
    if row['queue_position'] is not None:
        return f"queued #{row['queue_position']}"
    return row['status']


def parse_priority(value):
    """A priority name or number as the integer the queue orders by.

    :raises Invalid: naming the accepted names and range.
    """
    if value is None:
        return None
    names = migration_obj.PRIORITIES
    if value in names:
        return names[value]
    try:
        number = int(value)
    except ValueError:
        number = -1
    if not 0 <= number <= migration_obj.MAX_PRIORITY:
        raise exception.Invalid(
            reason=f"--priority {value!r}: use one of "
                   f"{', '.join(names)} or a number from 0 to "
                   f"{migration_obj.MAX_PRIORITY}")
    return number


def _downtime_cell(result):
    """``18 ms``; ``emulated`` for runs numamig carried out itself (the
    guest was defined anew, not paused); ``-`` where unknown."""
    if result is None:
        return '-'
    if result['downtime_ms'] is not None:
        return f"{result['downtime_ms']} ms"
    return 'emulated' if result['emulated'] else '-'


def _print_show(data):
    print(f"Migration {data['uuid']}: {data['status'].upper()}"
          + (f", waiting for admission: position {data['queue_position']}"
             f" in the queue" if data['queue_position'] is not None
             else ''))
    if data['priority']:
        print(f"  priority {data['priority']}")
    print(f"  instance {data['instance_uuid']}: {data['source_host']} -> "
          f"{data['dest_host'] or '(not chosen)'}"
          + (f" (requested {data['requested_host']})"
             if data['requested_host'] else ''))
    progress = data['progress']
    if progress['memory_total']:
        print(f"  memory {_gib(progress['memory_processed'])} of "
              f"{_gib(progress['memory_total'])} GiB transferred, "
              f"{_gib(progress['memory_remaining'])} GiB remaining")
    for line in _result_lines(data['result'], data['status']) + \
            convergence_view.lines(data['convergence']) + \
            reclaim_view.lines(data['memory_reclaim']) + \
            convergence_view.recovery_lines(data['postcopy_recovery']) + \
            threads_view.lines(data['migration_threads']) + \
            devices_view.lines(data['devices']):
        print(f"  {line}")
    if data['history']:
        print("  history:")
    for entry in data['history']:
        detail = f"  {entry['detail']}" if entry['detail'] else ''
        print(f"    {entry['at']}  {entry['status']:<14}{detail}")
    if data['refused_hosts']:
        print("  destinations that refused:")
    for host, reason in data['refused_hosts'].items():
        print(f"    {host}: {reason}")
    if data['error']:
        print(f"  error: {data['error']}")


def _result_lines(result, status):
    """How the run went, in words; nothing before the source says."""
    if result is None:
        if status in STATUS.SETTLED:
            return ["result: not reported (the run never started, or its "
                    "source did not report one)"]
        return []
    # A rolled-back run reports how far it went, not a whole migration.
    partial = {STATUS.FAILED: " (before it failed)",
               STATUS.CANCELLED: " (before it was cancelled)"}
    lines = [f"duration: {_ms(result['elapsed_ms'])}"
             f"{partial.get(status, '')}"]
    if result['emulated'] and status in STATUS.UNSUCCESSFUL:
        # Stopped before the destination defined the guest: nothing
        # was carried over, whatever the modelled copy had reached.
        return lines + [
            "emulated: yes (the hypervisor cannot migrate, e.g. the "
            "libvirt test driver); the run was stopped before numamig "
            "defined the guest on the destination: the guest stayed on "
            "its source"]
    if result['emulated'] and result['downtime_ms'] is not None:
        return lines + [
            f"downtime: {_ms(result['downtime_ms'])} (modelled)",
            "emulated: yes, with a modelled pre-copy ([libvirt] "
            "emulated_migration_bandwidth); the guest was defined on the "
            "destination by numamig",
            f"post-copy: {_yes_no(result['post_copy'])}, paused to "
            f"converge: {_yes_no(result['paused'])}"]
    if result['emulated']:
        # No live copy happened, so downtime and convergence do not apply.
        return lines + [
            "emulated: yes, numamig defined the guest on the destination "
            "itself (the hypervisor cannot migrate, e.g. the libvirt test "
            "driver); no memory was copied live, the duration is the "
            "destination's define and start"]
    return lines + [
        f"downtime: {_ms(result['downtime_ms'])}",
        f"emulated: {_yes_no(result['emulated'])}",
        f"post-copy: {_yes_no(result['post_copy'])}, paused to converge: "
        f"{_yes_no(result['paused'])}"]


def _ms(value):
    return 'unknown' if value is None else f"{value} ms"


def _yes_no(flag):
    return 'unknown' if flag is None else ('yes' if flag else 'no')


def _print_dry_run(data):
    print(f"Dry run for instance {data['instance_uuid']} on "
          f"{data['source_host']} (nothing claimed or recorded):")
    reclaim = data.get('reclaim')
    if reclaim:
        print(f"  no host takes it as it is; only a reclaim places it: "
              f"would go to {reclaim['host']} once {reclaim['freed_mb']} "
              f"MiB are reclaimed on its host node {reclaim['host_node']} "
              f"from:")
        for step in reclaim['steps']:
            print(f"    guest {step['instance_uuid']} cell {step['cell']}: "
                  f"{step['before_mb']} -> {step['after_mb']} MiB")
    elif data['dest_host']:
        print(f"  would go to {data['dest_host']}, placed as:")
        for line in data['placement']:
            print(f"    {line}")
        if data.get('distance'):
            print(f"  NUMA distance: {data['distance']['reason']}; "
                  f"{data['distance']['excess']} beyond the host's "
                  f"nearest pairs")
    else:
        print("  no destination can take it")
    if data.get('reclaim_note'):
        print(f"  {data['reclaim_note']}")
    if data['candidates']:
        print(f"  candidates in order: {', '.join(data['candidates'])}")
    for host, reason in data['refused_hosts'].items():
        print(f"  {host} refused: {reason}")
    if data.get('policy'):
        print(f"  would run under convergence policy {data['policy']} "
              f"({data['policy_from']})")
    for line in convergence_view.prediction_lines(data['prediction']):
        print(f"  {line}")
