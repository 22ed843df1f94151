"""Post-copy scenarios: a link cut during a real post-copy, and an
operator's resume from the command line.

The migration is held until it crawls in post-copy
(``post_copy_hold``, numamig_ci.postcopy_cut), then the harness cuts the
link to the destination and keeps it down: the source cannot resume, and
numamig must leave the migration ``postcopy-paused``, the guest paused
and split between the hosts as libvirt says, both claims kept. With the
link back, ``numamig-manage migration resume ID --wait`` (the console
script, run as an operator runs it) must end it ``completed``, the guest
running on the destination only, with the destination's pins in its
live and persistent XML and in QEMU's vCPU threads.
"""

import json
import os
import subprocess
import sys
import time

from numamig.objects import fields
from numamig_ci import postcopy_cut
from numamig_ci.results import brief
from numamig_ci.scenarios.registry import scenario
from numamig_ci.session import DEDICATED
from numamig_ci.session import describe

STATUS = fields.MigrationStatus
# The events of a migration's post-copy recovery history, as
# 'migration show' prints them (numamig.convergence.recovery).
LINK_LOST, ATTEMPT_FAILED, GAVE_UP = 'link-lost', 'resume-failed', 'gave-up'
RESUME_REQUESTED, RESUMED = 'resume-requested', 'resumed'
# The recovery gives up RECOVERY_TIMEOUT_S after the cut (the local
# deployment's); this bounds the wait for it on a loaded machine.
PAUSED_WAIT_S = 120
CLI_TIMEOUT_S = 300


@scenario('postcopy-resume',
          "A real post-copy loses its link (the destination's libvirtd "
          "unreachable, the QEMU stream broken) and the link stays down: "
          "the migration ends postcopy-paused, the guest paused on the "
          "source and stalled on the destination as libvirt reports it, "
          "both claims kept. With the link back, 'numamig-manage "
          "migration resume ID --wait' run as a command completes it: "
          "the guest runs on the destination only, with the "
          "destination's pins in its live and persistent XML and in its "
          "QEMU's vCPU threads.", requires=('post_copy_hold', 'cut_link'))
def postcopy_resume(s):
    src, dst = s.pair()
    backend = s.backend
    # A resident on the destination takes the pCPU the guest has on the
    # source, where one pCPU each is all a small host has to give: the
    # destination's claim must then pin the guest elsewhere.
    s.create(dst, 1, specs=dict(DEDICATED), label='resident')
    guest = s.create(src, 1, specs=dict(DEDICATED), label='resume')
    with backend.post_copy_hold(src, guest) as hold:
        migration = s.api.live_migrate_instance(
            s.ctxt, guest.uuid, dst, policy=backend.post_copy_policy)
        sent = hold.wait_post_copy()
        if sent is None:
            seen = s.api.migration_get(s.ctxt, migration.uuid)
            s.fail(guest, src, 'libvirt domain state before the cut',
                   f"paused for post-copy, {postcopy_cut.CUT_AFTER} bytes "
                   f"sent", hold.state(), f"migration {seen.status}")
            return
        backend.cut_link(dst)
        hold.break_stream()
        s.say(f"cut the link to {dst} after post-copy sent {sent} bytes")
        migration = _wait_paused(s, migration.uuid)
        if not s.expect_status(migration, guest, STATUS.POSTCOPY_PAUSED):
            backend.restore_link(dst)
            return
        _check_split(s, guest, hold, src, dst, migration)
        backend.restore_link(dst)
        s.say(f"restored the link to {dst}")
        answer = _resume_command(s, guest, migration, src)
    if answer is None:
        return
    migration = s.api.migration_get(s.ctxt, migration.uuid)
    s.expect_status(migration, guest, STATUS.COMPLETED)
    events = _recovery_events(s, migration)
    tail = [e for e in events[events.index(GAVE_UP) + 1:]
            if e != ATTEMPT_FAILED] \
        if GAVE_UP in events else events
    if tail != [RESUME_REQUESTED, RESUMED]:
        s.fail(guest, src, 'record postcopy_recovery after the pause',
               f"{RESUME_REQUESTED}, {RESUMED}",
               ', '.join(events))
    record = s.check_placed(guest, dst)
    old, new = (dict(r.numa_topology.cpu_pinning) for r in (guest, record))
    if old == new:
        s.fail(guest, dst, 'record numa_topology.cpu_pinning',
               f"the destination's claim, not the source's {old}", new)
    s.say(f"resumed from the command line: {guest.name} on "
          f"{record.host}: {describe(record)}")
    s.check_host(src)
    s.check_host(dst)


def _recovery_events(s, migration):
    """The events of the migration's post-copy recovery history, as
    recorded: MigrationRecovery, a satellite record operators read
    through migration_get_satellites."""
    recovery = s.api.migration_get_satellites(
        s.ctxt, migration.uuid, ['recovery'])['recovery']
    return [e['event'] for e in recovery.events or ()]


def _wait_paused(s, uuid):
    """The record once it is postcopy-paused or ended (or the wait ran
    out)."""
    deadline = time.monotonic() + PAUSED_WAIT_S
    while True:
        migration = s.api.migration_get(s.ctxt, uuid)
        if migration.status in STATUS.SETTLED or \
                time.monotonic() > deadline:
            return migration
        time.sleep(0.2)


def _check_split(s, guest, hold, src, dst, migration):
    """What libvirt and the records say of a paused post-copy: the
    source paused (post-copy failed), the destination's half running
    stalled, the recovery given up, both claims held."""
    expected = {
        src: [postcopy_cut.libvirt.VIR_DOMAIN_PAUSED,
              postcopy_cut.PAUSED_POSTCOPY_FAILED],
        dst: [postcopy_cut.libvirt.VIR_DOMAIN_RUNNING,
              postcopy_cut.RUNNING_POSTCOPY_FAILED]}
    for host, state in expected.items():
        actual = hold.domain_state(s.backend.libvirt_uri(host))
        if actual != state:
            s.fail(guest, host, 'libvirt domain [state, reason] while '
                   'postcopy-paused', state, actual)
    events = _recovery_events(s, migration)
    if events[:1] != [LINK_LOST] or \
            events[-1:] != [GAVE_UP]:
        s.fail(guest, src, 'record postcopy_recovery',
               f"{LINK_LOST} ... {GAVE_UP}",
               ', '.join(events))
    record = s.record(guest)
    context = record.get('migration_context')
    if record.host != src or context is None or \
            context.migration_uuid != migration.uuid:
        s.fail(guest, src, 'record host and migration_context while '
               'postcopy-paused', f"{src}, {migration.uuid}",
               f"{record.host}, {context and context.migration_uuid}")
    s.say(f"postcopy-paused: {guest.name} [state, reason] "
          f"{expected[src]} on {src}, {expected[dst]} on {dst}; "
          f"recovery {', '.join(events)}")


def _resume_command(s, guest, migration, src):
    """Run ``numamig-manage migration resume ID --wait --format json``;
    return its answer, or None (a failure recorded) if it did not say
    completed with exit code 0."""
    script = os.path.join(os.path.dirname(sys.executable), 'numamig-manage')
    argv = [script, '--config-file', s.backend.cli_config(), 'migration',
            'resume', migration.uuid, '--wait', '--format', 'json']
    started = time.monotonic()
    try:
        done = subprocess.run(argv, capture_output=True, text=True,
                              timeout=CLI_TIMEOUT_S,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        s.fail(guest, src, 'numamig-manage migration resume --wait',
               'an answer', f"none within {CLI_TIMEOUT_S} s")
        return None
    s.say(f"numamig-manage migration resume {migration.uuid} --wait: exit "
          f"{done.returncode} after {time.monotonic() - started:.1f} s")
    try:
        answer = json.loads(done.stdout)
    except ValueError:
        answer = None
    if done.returncode != 0 or answer is None or \
            answer.get('status') != STATUS.COMPLETED or \
            answer.get('resume') != 'resuming':
        s.fail(guest, src, 'numamig-manage migration resume --wait',
               'exit 0, resume started, status completed',
               f"exit {done.returncode}, {brief(done.stdout or '-')[:300]}",
               brief(done.stderr or '-')[:300])
        return None
    return answer
