"""Resuming a post-copy migration whose connection dropped.

When the migration stream breaks during post-copy, ``migrateToURI3``
fails, but the guest is not lost: libvirt (8.5 and later) leaves the
source domain paused with reason ``postcopy-failed`` (the destination's
running with the same reason, its vCPUs stalled on missing pages) and
both QEMUs keep what they need. Calling ``migrateToURI3`` again with the
original flags and parameters plus VIR_MIGRATE_POSTCOPY_RESUME carries
on where the stream stopped. Measured on libvirt 9.0 with QEMU 7.2 (TCG):

* right after the failure the source QEMU may not have noticed the
  broken stream yet; a resume then fails at once, "QEMU reports
  migration is still running". Interrupting post-copy
  (``abortJobFlags(VIR_DOMAIN_ABORT_JOB_POSTCOPY)``, libvirt 8.5) puts it
  in the paused state a resume starts from;
* a resume through a link that refuses connections fails within
  milliseconds; one through a link that swallows packets would wait for
  TCP to give up, so each attempt has a deadline by which the stream
  must be moving, after which it is interrupted the same way.

When to try, and when to give up, is numamig.convergence.recovery's
decision; this module carries it out and keeps the recovery history.
"""

import datetime
import threading
import time

import libvirt
from oslo_log import log as logging

from numamig import exception
from numamig.convergence import recovery

LOG = logging.getLogger(__name__)

POSTCOPY_RESUME = getattr(libvirt, 'VIR_MIGRATE_POSTCOPY_RESUME', 1 << 19)
ABORT_JOB_POSTCOPY = getattr(libvirt, 'VIR_DOMAIN_ABORT_JOB_POSTCOPY', 1)
PAUSED_POSTCOPY_FAILED = getattr(libvirt,
                                 'VIR_DOMAIN_PAUSED_POSTCOPY_FAILED', 13)
# The libvirt release that resumes post-copy (virGetVersion's number).
RESUME_VERSION = 8005000


def broken(dom):
    """Whether ``dom`` (the source domain) waits paused in a post-copy
    that lost its connection: the state a resume starts from."""
    try:
        state, reason = dom.state()
    except libvirt.libvirtError as exc:
        LOG.debug("State of %s unknown after its migration failed: %s",
                  dom.UUIDString(), exc)
        return False
    return state == libvirt.VIR_DOMAIN_PAUSED and \
        reason == PAUSED_POSTCOPY_FAILED


def utcnow():
    return datetime.datetime.now(datetime.UTC).isoformat(
        timespec='milliseconds')


def _message(exc):
    return exc.get_error_message() or str(exc)


class Recovery:
    """The recovery of one migration's post-copy, possibly through
    several losses of the link.

    :param migrate: ``migrate(extra_flags)`` runs ``migrateToURI3`` with
        the migration's flags and parameters plus ``extra_flags``,
        monitored as the first run was; raises libvirt.libvirtError.
    :param on_event: called with the whole history (a list of dicts)
        after each event; errors there are logged, never raised.
    :param wait: ``wait(seconds)`` pauses between attempts and returns
        True when ``stop`` was called meanwhile (default: a wait on the
        stop request itself; tests give a fake clock's).
    """

    def __init__(self, dom, settings, where, migrate, on_event=None,
                 clock=time.monotonic, wall_clock=utcnow, wait=None,
                 history=()):
        self._dom = dom
        self._settings = settings
        self._instance, self._host, self._dest = where
        self._migrate = migrate
        self._on_event = on_event
        self._clock = clock
        self._wall_clock = wall_clock
        self._stop = threading.Event()
        self._stop_reason = None
        self._wait = wait or self._stop.wait
        # An operator's resume carries on the history recorded so far.
        self.history = recovery.bounded(list(history))

    def stop(self, reason):
        """Make no further attempt (an abort); the guest stays paused."""
        self._stop_reason = reason
        self._stop.set()

    def recover(self, failure):
        """Resume after ``failure`` (the libvirtError of the broken run)
        until the migration completes.

        :raises PostCopyPaused: recovery gave up; the guest is paused.
        """
        lib_version = self._lib_version()
        if lib_version is not None and lib_version < RESUME_VERSION:
            self._lost(failure)
            self._give_up(f"libvirt {lib_version} on {self._host} cannot "
                          f"resume post-copy (needs 8.5 or later)")
        self._run(self._lost(failure))

    def resume_requested(self, reason):
        """One more recovery run, asked by an operator after recovery
        gave up (the guest waits paused): attempts and the timeout count
        from now, as after a loss of the link.

        :raises PostCopyPaused: it gave up again; the guest is paused.
        """
        lib_version = self._lib_version()
        if lib_version is not None and lib_version < RESUME_VERSION:
            self._give_up(f"libvirt {lib_version} on {self._host} cannot "
                          f"resume post-copy (needs 8.5 or later)")
        LOG.warning("Migration of %s to %s: %s; numamig tries to resume "
                    "it for up to %g s", self._instance, self._dest,
                    reason, self._settings.timeout_s)
        self._record(recovery.RESUME_REQUESTED, detail=reason)
        self._run(recovery.lost(self._clock()))

    def _run(self, state):
        while True:
            step = recovery.next_step(self._settings, state, self._clock())
            if step.kind == recovery.DONE:
                return
            if step.kind == recovery.GIVE_UP:
                self._give_up(step.reason)
            if step.kind == recovery.WAIT:
                if self._wait(step.delay_s) or self._stop.is_set():
                    state = recovery.stopped(state, self._stop_reason)
                continue
            state = self._attempt(state, step)

    def _lost(self, failure):
        LOG.warning("Migration of %s to %s lost its connection during "
                    "post-copy (%s): the guest is paused on both hosts; "
                    "numamig will try to resume it for up to %g s",
                    self._instance, self._dest, _message(failure),
                    self._settings.timeout_s)
        self._record(recovery.LINK_LOST, detail=_message(failure))
        return recovery.lost(self._clock())

    def _give_up(self, reason):
        self._record(recovery.GAVE_UP, detail=reason)
        error = exception.PostCopyPaused(instance=self._instance,
                                         host=self._host, dest=self._dest,
                                         reason=reason)
        LOG.error("%s", error)
        raise error

    def _attempt(self, state, step):
        """One resume attempt; the State after it."""
        started = self._clock()
        before = self._processed()
        LOG.info("Migration of %s: resume attempt %d (post-copy)",
                 self._instance, step.attempt)
        watch = _Watch(self, step.deadline, before)
        watch.start()
        try:
            self._migrate(POSTCOPY_RESUME)
        except libvirt.libvirtError as exc:
            watch.finish()
            if watch.moved or self._processed() > before:
                # It got going, then the link dropped again: a new loss,
                # with its own attempts and deadline.
                return self._lost(exc)
            self._failed(step.attempt, exc, watch)
            return recovery.attempted(state, started, resumed=False)
        watch.finish()
        self._record(recovery.RESUMED, attempt=step.attempt)
        LOG.info("Migration of %s resumed at attempt %d and completed",
                 self._instance, step.attempt)
        return recovery.attempted(state, started, resumed=True)

    def _failed(self, attempt, exc, watch):
        detail = _message(exc)
        if watch.interrupted:
            detail = (f"no data moved within "
                      f"{self._settings.attempt_timeout_s:g} s, "
                      f"interrupted ({detail})")
        elif 'still running' in detail:
            # QEMU has not noticed the broken stream yet (see above).
            self.interrupt()
        LOG.warning("Migration of %s: resume attempt %d failed: %s",
                    self._instance, attempt, detail)
        self._record(recovery.ATTEMPT_FAILED, attempt=attempt,
                     detail=detail)

    def interrupt(self):
        """Pause post-copy on the source (the state a resume starts
        from); True if libvirt did."""
        try:
            self._dom.abortJobFlags(ABORT_JOB_POSTCOPY)
            return True
        except (libvirt.libvirtError, AttributeError) as exc:
            LOG.debug("Interrupting the post-copy of %s: %s",
                      self._instance, exc)
            return False

    def _processed(self):
        try:
            return self._dom.jobStats().get('memory_processed', 0)
        except libvirt.libvirtError:
            return 0

    def _lib_version(self):
        try:
            return self._dom.connect().getLibVersion()
        except libvirt.libvirtError:
            return None

    def _record(self, event, attempt=None, detail=None):
        self.history = recovery.bounded(self.history + [recovery.Event(
            event, at=self._wall_clock(), attempt=attempt, detail=detail)])
        if self._on_event is None:
            return
        try:
            self._on_event(list(self.history))
        except Exception as exc:  # noqa: BLE001 - reporting is advisory
            LOG.warning("Recovery of %s: event not reported: %s",
                        self._instance, exc)


class _Watch:
    """The deadline of one attempt: at ``deadline`` (Recovery's clock)
    an attempt that has moved no memory since it started is interrupted.
    It wakes once, at the deadline or when the attempt ends."""

    def __init__(self, owner, deadline, before):
        self._owner = owner
        self._deadline = deadline
        self._before = before
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name='postcopy-resume-watch')
        self.moved = self.interrupted = False

    def start(self):
        self._thread.start()

    def finish(self):
        self._done.set()
        self._thread.join()

    def _run(self):
        owner = self._owner
        if self._done.wait(max(self._deadline - owner._clock(), 0)):
            return
        if owner._processed() > self._before:
            self.moved = True
            return
        LOG.warning("Migration of %s: the resume attempt moved no data by "
                    "its deadline; interrupting it", owner._instance)
        self.interrupted = owner.interrupt()
