"""``numamig-manage host drain HOST`` (without --dry-run), ``drain show``
and ``drain abort``: start a drain, follow it guest by guest, print it.

Following uses the conductor's ``host_drain_wait`` (API 1.10): each
call is held in the conductor until the drain or one of its migrations
changes, so progress is drawn as it happens with no polling at a fixed
interval; every wait is bounded by what is left of ``--timeout``.

A move whose migration does not change for STILL_WAITING_AFTER_S gets a
``still waiting`` line, at most one round of them per
STILL_WAITING_EVERY_S: a drain stuck on one guest is not silent, and a
long one does not flood the terminal. They come when a wait returns (at
most WAIT_CHUNK_S apart), not from a poll of their own.
"""

import sys
import time

from numamig.cmd import common
from numamig.cmd.manage_commands import _access

STATUS = common.lazy('numamig.objects.fields', 'MigrationStatus')
# Longest single host_drain_wait; the command asks again after it.
WAIT_CHUNK_S = 10.0
# A wait answered unchanged well before its time (the conductor held as
# many waits as it allows) is followed by this pause.
BUSY_PAUSE_S = 0.5
ENDED = ('completed', 'failed', 'aborted')
# A migrating move unchanged this long gets a "still waiting" line ...
STILL_WAITING_AFTER_S = 30.0
# ... again at most this often (one line per such move each time).
STILL_WAITING_EVERY_S = 30.0


def start(host, to, keep_free_nodes, parallel, wait, timeout,
          output_format, clock=time.monotonic, sleep=time.sleep):
    """Start the drain; with ``wait`` follow it to its end."""
    api = _access.conductor()
    ctxt = _access.context()
    data = api.host_drain_start(ctxt, host, parallel, to=to,
                                keep_free_nodes=keep_free_nodes)
    if not wait:
        common.print_output(data, output_format, _show)
        return common.EXIT_OK
    data = follow(api, ctxt, data, output_format, timeout, clock=clock,
                  sleep=sleep)
    common.print_output(data, output_format, _show)
    return _verdict(data, timeout)


def defragment(vcpus, memory_mb, specs, hosts, max_moves, parallel, wait,
               timeout, output_format, clock=time.monotonic,
               sleep=time.sleep):
    """Start the defragmentation; with ``wait`` follow it to its end."""
    api = _access.conductor()
    ctxt = _access.context()
    data = api.host_defragment_start(ctxt, vcpus, memory_mb, specs,
                                     parallel, hosts=hosts,
                                     max_moves=max_moves)
    if wait:
        data = follow(api, ctxt, data, output_format, timeout, clock=clock,
                      sleep=sleep)
    common.print_output(data, output_format, _show)
    return _verdict(data, timeout) if wait else common.EXIT_OK


def show_drain(host, output_format):
    data = _access.conductor().host_drain_show(_access.context(), host=host)
    common.print_output(data, output_format, _show)
    return common.EXIT_OK


def abort(host, abort_running, output_format):
    data = _access.conductor().host_drain_abort(
        _access.context(), host, abort_running=abort_running)
    common.print_output(data, output_format, _show)
    return common.EXIT_OK


def follow(api, ctxt, data, output_format, timeout=None, stream=None,
           clock=time.monotonic, sleep=time.sleep):
    """Follow a drain until it ends (or ``timeout`` s), printing a line
    per guest whose state changed to ``stream`` (stderr: stdout keeps
    the final answer; nothing with --format json)."""
    stream = stream or sys.stderr
    draw = output_format != 'json'
    deadline = None if timeout is None else clock() + timeout
    shown = {}
    stuck = _StillWaiting(stream)
    while True:
        if draw:
            _draw_changes(data, shown, stream)
            stuck.note(data, clock())
        if data['status'] in ENDED:
            return data
        remaining = None if deadline is None else deadline - clock()
        if remaining is not None and remaining <= 0:
            return data
        asked = WAIT_CHUNK_S if remaining is None else \
            min(WAIT_CHUNK_S, remaining)
        began = clock()
        seen = api.host_drain_wait(ctxt, data, asked)
        if seen['signature'] == data['signature'] and \
                clock() - began < asked / 2:
            sleep(min(BUSY_PAUSE_S, asked))
        data = seen


class _StillWaiting:
    """Say which migrating moves have not changed for a while, and since
    when (as this command saw them), at a bounded rate."""

    def __init__(self, stream):
        self.stream = stream
        self.since = {}         # instance uuid -> (its line, first seen)
        self.said_at = None

    def note(self, data, now):
        stuck = []
        for move in data['moves']:
            key = move['instance_uuid']
            if move['status'] != 'migrating':
                self.since.pop(key, None)
                continue
            line = move_line(move)
            seen = self.since.get(key)
            if seen is None or seen[0] != line:
                self.since[key] = (line, now)
                continue
            if now - seen[1] >= STILL_WAITING_AFTER_S:
                stuck.append((move, now - seen[1]))
        if not stuck or (self.said_at is not None and
                         now - self.said_at < STILL_WAITING_EVERY_S):
            return
        self.said_at = now
        for move, for_s in stuck:
            print(f"  still waiting: {still_waiting_line(move, for_s)}",
                  file=self.stream, flush=True)


def still_waiting_line(move, for_s):
    """``web-1 -> dst, migration M accepted for 45 s``."""
    where = move['dest_host'] or move['planned_host'] or '?'
    migration = move.get('migration')
    state = "its migration not recorded yet" if migration is None else \
        f"migration {migration['uuid']} {migration['status']}"
    if migration is not None and migration['memory_total']:
        copied = 100 * migration['memory_processed'] // \
            migration['memory_total']
        state += f" at {copied}%"
    return f"{move['name']} -> {where}, {state} for {for_s:.0f} s"


def move_line(move):
    """One guest's state, as --wait and ``show`` print it."""
    where = move['dest_host'] or move['planned_host'] or '?'
    source = f"{move['source_host']} " if move.get('source_host') else ''
    line = f"{move['name']} {move['instance_uuid']} {source}-> {where}: " \
        f"{move['status']}"
    migration = move.get('migration')
    if migration is not None:
        line += f" (migration {migration['uuid']} {migration['status']}"
        total = migration['memory_total']
        if total:
            line += f", {100 * migration['memory_processed'] // total}%"
        line += ")"
    if move['attempts'] > 1:
        line += f", re-planned {move['attempts'] - 1} time(s)"
    if move['error']:
        line += f": {move['error']}"
    if migration is not None and migration['status'] in STATUS.HALTED:
        # Only the operator moves it on; the drain waits for it.
        line += (f": the drain waits for 'numamig-manage migration resume "
                 f"{migration['uuid']}'")
    return line


def _draw_changes(data, shown, stream):
    for move in data['moves']:
        line = move_line(move)
        if shown.get(move['instance_uuid']) != line:
            shown[move['instance_uuid']] = line
            print(f"  {line}", file=stream, flush=True)


def _what(data, of='of'):
    if data.get('kind') == 'defragment':
        return f"defragmentation {data['uuid']} on {data['host']}"
    return f"drain {data['uuid']} {of} {data['host']}"


def _verdict(data, timeout):
    if data['status'] == 'completed':
        return common.EXIT_OK
    if data['status'] not in ENDED:
        return common.fail(
            f"{_what(data)} did not end within {timeout} s; it goes on: "
            f"follow it with 'numamig-manage host drain show "
            f"{data['host']}'", common.EXIT_NO)
    report = data['report']
    why = '; '.join(f"{f['name']}: {f['reason']}" for f in report['failed'])
    room = ''
    if data.get('kind') == 'defragment' and not report.get('room'):
        room = f"; no room for the guest: {report.get('room_reason')}"
    return common.fail(
        f"{_what(data)} {data['status']}: "
        f"{report['moved']} moved, {len(report['failed'])} failed"
        + (f" ({why})" if why else '')
        + f", {report['cancelled']} cancelled" + room, common.EXIT_NO)


def _show(data):
    """Print a drain for people: its state, each move, the report."""
    what = _what(data, of='of host')
    print(f"{what[0].upper()}{what[1:]}: {data['status']} "
          f"({len(data['moves'])} guest(s), {data['parallel']} at once, "
          f"started {data['created_at']})")
    for move in data['moves']:
        print(f"  {move_line(move)}")
    report = data['report']
    print(f"Moved {report['moved']}, failed {len(report['failed'])}, "
          f"cancelled {report['cancelled']}, pending {report['pending']}, "
          f"migrating {report['migrating']}; re-planned "
          f"{report['replanned']} time(s); {report['elapsed_s']} s")
    for failed in report['failed']:
        print(f"  failed: {failed['name']} {failed['instance_uuid']}: "
              f"{failed['reason']}")
    if data.get('kind') == 'defragment':
        if data['status'] in ENDED:
            _show_room(data)
    elif data['status'] in ENDED:
        print(f"Host {data['host']} stays disabled; 'numamig-manage host "
              f"enable {data['host']}' after the maintenance.")


def _show_room(data):
    report = data['report']
    if report.get('room'):
        print(f"Room for the guest on {data['host']}: yes (looked for "
              f"after the moves; no longer held).")
    else:
        print(f"Room for the guest on {data['host']}: "
              f"{'no' if report.get('room') is False else 'unknown'}: "
              f"{report.get('room_reason')}")
