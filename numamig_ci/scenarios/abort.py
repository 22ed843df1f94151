"""Abort scenarios: an operator aborts a migration in progress, at each
moment a backend can hold one, and nothing of it remains.

How a migration is held in progress is the backend's
(``hold_migration``): the embedded tier holds the source while it
prepares the destination XML (in-process); the real tiers hold nothing:
libvirt really migrates a guest that keeps dirtying its memory, over a
copy capped by libvirt, which never converges (numamig_ci.slow_copy).
What every abort must leave: the migration ``cancelled``; the guest
running on the source with its old pins (record, live and persistent
XML, QEMU's threads); no domain and no claim on the destination; every
host's reported usage as before; on hosts read from inside, every
kernel huge page counter as before.
"""

from numamig.objects import fields
from numamig_ci import slow_copy
from numamig_ci.scenarios import kernel_view
from numamig_ci.scenarios import memory
from numamig_ci.scenarios.registry import scenario
from numamig_ci.session import DEDICATED

STATUS = fields.MigrationStatus
# The most 2 MiB pages an aborted guest takes (128 MiB).
MAX_PAGES = 64
PAGE_2M_KB = 2048


@scenario('abort',
          "An operator aborts a migration as soon as it is in progress: "
          "on real hosts once the record says running (the source is "
          "calling libvirt, which sets its job up and starts the "
          "destination QEMU); on the embedded tier while the source "
          "prepares it. The guest keeps running on the source with its "
          "old pins, the destination holds nothing, claims are exactly "
          "as before.", requires=('hold_migration',))
def abort(s):
    _abort(s, slow_copy.RUNNING)


@scenario('abort-copying',
          "An operator aborts a migration while QEMU copies the guest's "
          "memory (a guest dirtying its memory, the copy capped): the "
          "destination QEMU that received part of it is gone, the guest "
          "runs on the source with its old pins, claims and (on hosts "
          "read from inside, with a huge-page guest) every kernel page "
          "counter are as before.", requires=('slow_copy',))
def abort_copying(s):
    _abort(s, slow_copy.COPYING)


@scenario('abort-paused',
          "An operator forces a copying migration to complete, which "
          "pauses the guest (post-copy not permitted), then aborts it: "
          "the guest runs again on the source, not paused, with its old "
          "pins; the destination holds nothing.", requires=('slow_copy',))
def abort_paused(s):
    _abort(s, slow_copy.COPYING, pause=True)


def _abort(s, until, pause=False):
    src, dst = s.pair()
    guest = _guest(s, src)
    with s.backend.hold_migration(src, guest) as hold:
        before = s.snapshots.take(guest)
        pages = kernel_view.counters(s) if kernel_view.available(s) \
            else None
        migration = s.api.live_migrate_instance(s.ctxt, guest.uuid, dst)
        held, seen = hold.wait(s, migration, until)
        if not held:
            hold.release()
            _not_reached(s, guest, dst, seen, until)
            return
        s.say(f"aborting migration of {guest.name} while {hold.phase}: "
              f"{seen.status}, {seen.memory_processed or 0} bytes sent")
        if pages is not None:
            _say_taken(s, pages)
        if pause:
            _pause(s, hold, guest, seen)
        s.api.migration_abort(s.ctxt, migration.uuid)
        hold.release()
        migration = s.wait(migration.uuid)
        s.say(f"aborted migration of {guest.name}: {migration.status}")
        if pause and hold.state() != 'running':
            s.fail(guest, src, 'libvirt domain state', 'running (resumed '
                   'on the source)', hold.state())
    s.expect_status(migration, guest, STATUS.CANCELLED)
    s.snapshots.compare(guest, before)
    s.check_placed(guest, src)
    s.check_host(dst)
    if pages is not None:
        failures = len(s.failures)
        kernel_view.check_counters(s, guest, dst, pages,
                                   'as before the migration')
        if len(s.failures) == failures:
            s.say(f"kernel view of {len(pages)} huge page pools after the "
                  f"abort: every free count as before")


def _guest(s, src):
    """The guest to abort: one dedicated vCPU; backed by 2 MiB pages
    where the harness reads the kernel's page counters (the destination
    QEMU takes pages while it receives, the abort must give all back)."""
    if kernel_view.available(s) and 'huge_pages' in s.backend.features:
        size, count = memory.huge_pool(s, src, size_kb=PAGE_2M_KB)
        if size and count * size // 1024 >= slow_copy.MIN_MEMORY_MB:
            pages = min(count, MAX_PAGES)
            return s.create(src, 1, memory_mb=pages * size // 1024,
                            specs=memory.pages_specs(size), label='abort')
    return s.create(src, 1, specs=dict(DEDICATED), label='abort')


def _say_taken(s, before):
    """Say which pools hold fewer free pages now than before the
    migration: what the destination QEMU took, which the abort must give
    back (evidence, not a check: when QEMU takes its pages is its own
    and libvirt's business)."""
    now = kernel_view.counters(s)
    taken = {key: free - now.get(key, 0) for key, free in before.items()
             if now.get(key, 0) < free}
    s.say("pages taken while held: " + (', '.join(
        f"kernel {kernel} node{node} {size} KiB: {count}"
        for (kernel, node, size), count in sorted(taken.items()))
        or 'none'))


def _pause(s, hold, guest, seen):
    """Force the migration to complete, which must pause the guest (the
    source's way without post-copy) while the copy still runs."""
    s.api.migration_force_complete(s.ctxt, seen.uuid)
    state = hold.state()
    if state != 'paused':
        s.fail(guest, seen.source_host, 'libvirt domain state after '
               'force-complete', 'paused (post-copy not permitted)', state)
    else:
        s.say(f"forced migration of {guest.name} to complete: guest "
              f"paused")


def _not_reached(s, guest, dst, seen, until):
    """The hold never got the migration to ``until``: fail with what it
    did instead; a migration still going is aborted to end it."""
    s.fail(guest, dst, 'migration before the abort',
           f"in progress, {until}", f"{seen.status}, "
           f"{seen.memory_processed or 0} bytes sent", seen.error or '')
    if seen.status not in STATUS.FINAL:
        s.api.migration_abort(s.ctxt, seen.uuid)
        s.wait(seen.uuid)
