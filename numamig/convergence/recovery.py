"""Post-copy recovery: when to try to resume a broken post-copy, and when
to stop trying.

Once a migration has switched to post-copy, the guest's CPUs run on the
destination while pages not yet sent still live only on the source. If
the migration stream breaks then, neither side can run the guest alone:
QEMU pauses post-copy on both sides (libvirt reports the source domain
paused, reason ``postcopy-failed``) and keeps everything needed to go on.
libvirt (8.5 and later) resumes such a migration when asked again with
``VIR_MIGRATE_POSTCOPY_RESUME``; an attempt made while the link is still
down fails at once (or, with a link that swallows packets, hangs until
it is interrupted).

Nothing tells the source that the link has returned, so resuming means
trying: this module decides when. The caller reports the loss of the
link (``lost``), asks ``next_step`` what to do, and reports each
attempt's outcome (``attempted``). Attempts are spaced by delays that
start at FIRST_DELAY_S and double up to MAX_DELAY_S (a link back soon is
caught soon; a long outage costs few attempts), never beyond the
deadline; one last attempt is made at the deadline itself, so a link
that returns just before it is not missed. Recovery gives up once
``max_attempts`` attempts failed or ``timeout_s`` has passed since the
link was lost, or when asked to stop.

Pure: times are the caller's monotonic clock readings, nothing here
reads a clock, sleeps or calls libvirt; states are never changed in
place. What happened is kept as a list of Events, the migration's
recovery history that operators read.
"""

import dataclasses

# What a recovery history records.
LINK_LOST = 'link-lost'
ATTEMPT_FAILED = 'resume-failed'
RESUMED = 'resumed'
GAVE_UP = 'gave-up'
# An operator asked for one more recovery run of a migration whose
# recovery had given up (numamig-manage migration resume): its attempts
# and deadline count from here, as after a loss of the link.
RESUME_REQUESTED = 'resume-requested'
EVENTS = (LINK_LOST, ATTEMPT_FAILED, RESUMED, GAVE_UP, RESUME_REQUESTED)

# What the caller does next.
TRY = 'try'
WAIT = 'wait'
GIVE_UP = 'give-up'
DONE = 'done'

FIRST_DELAY_S = 1.0
MAX_DELAY_S = 30.0
# A history longer than this keeps its first event (when the link was
# first lost) and the most recent ones: the record's size is bounded
# whatever the link does.
MAX_EVENTS = 40
MAX_DETAIL = 300


@dataclasses.dataclass(frozen=True)
class Settings:
    """The operator's bounds (``[libvirt] live_migration_postcopy_*``).

    :param timeout_s: how long after the link was lost attempts may
        start; 0 disables recovery (the first loss gives up at once).
    :param max_attempts: attempts per loss of the link; 0 disables.
    :param attempt_timeout_s: how long one attempt may take to get the
        stream moving again before it is interrupted.
    """

    timeout_s: float
    max_attempts: int
    attempt_timeout_s: float

    @property
    def enabled(self):
        return self.timeout_s > 0 and self.max_attempts > 0


@dataclasses.dataclass(frozen=True)
class Event:
    """One entry of the recovery history. ``at`` is the caller's
    timestamp (opaque here); ``attempt`` numbers attempts from 1 within
    one loss of the link."""

    event: str
    at: object
    attempt: int | None = None
    detail: str | None = None

    def as_dict(self):
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Step:
    """What to do next: TRY (``attempt`` is its number, ``deadline`` when
    it must have the stream moving), WAIT ``delay_s``, GIVE_UP
    (``reason``) or DONE (resumed)."""

    kind: str
    delay_s: float = 0.0
    attempt: int | None = None
    deadline: float | None = None
    reason: str | None = None


@dataclasses.dataclass(frozen=True)
class State:
    """One loss of the link and the attempts since."""

    lost_at: float
    attempts: int = 0
    last_attempt_at: float | None = None
    resumed: bool = False
    stop_reason: str | None = None


def lost(now):
    """The State of a link lost at ``now``."""
    return State(lost_at=now)


def delay_before(attempt):
    """Seconds to wait before attempt number ``attempt`` (from 1) after
    the previous one (or the loss): 1, 2, 4, ... at most MAX_DELAY_S.

    The first attempt waits too: just after the loss QEMU may not have
    noticed it yet and refuses a resume as "still running".
    """
    return min(FIRST_DELAY_S * 2 ** max(attempt - 1, 0), MAX_DELAY_S)


def next_step(settings, state, now):
    """The Step to take at ``now``."""
    if state.resumed:
        return Step(DONE)
    if state.stop_reason:
        return Step(GIVE_UP, reason=f"recovery stopped: {state.stop_reason}")
    if not settings.enabled:
        return Step(GIVE_UP, reason="post-copy recovery is disabled "
                                    "(live_migration_postcopy_recovery_"
                                    "timeout or _attempts is 0)")
    if state.attempts >= settings.max_attempts:
        return Step(GIVE_UP, reason=f"{state.attempts} resume attempt"
                                    f"{'' if state.attempts == 1 else 's'} "
                                    f"failed")
    deadline = state.lost_at + settings.timeout_s
    if state.last_attempt_at is not None and \
            state.last_attempt_at >= deadline:
        return Step(GIVE_UP, reason=f"the link did not come back within "
                                    f"{settings.timeout_s:g} s "
                                    f"({state.attempts} attempts)")
    attempt = state.attempts + 1
    since = state.lost_at if state.last_attempt_at is None \
        else state.last_attempt_at
    due = min(since + delay_before(attempt), deadline)
    if due > now:
        return Step(WAIT, delay_s=due - now)
    return Step(TRY, attempt=attempt,
                deadline=now + settings.attempt_timeout_s)


def attempted(state, now, resumed):
    """The State after an attempt that started at ``now``."""
    return dataclasses.replace(state, attempts=state.attempts + 1,
                               last_attempt_at=now, resumed=bool(resumed))


def stopped(state, reason):
    """The State once someone asked recovery to stop (an abort)."""
    return dataclasses.replace(state, stop_reason=reason)


def bounded(history):
    """``history`` (a list of Events or dicts) cut to MAX_EVENTS: the
    first event and the newest, details cut to MAX_DETAIL characters."""
    events = [_short(e) for e in history]
    if len(events) <= MAX_EVENTS:
        return events
    return events[:1] + events[-(MAX_EVENTS - 1):]


def _short(event):
    if isinstance(event, Event):
        event = event.as_dict()
    detail = event.get('detail')
    if detail is not None and len(detail) > MAX_DETAIL:
        event = dict(event, detail=detail[:MAX_DETAIL - 3] + '...')
    return event


def describe(history):
    """One line for logs and the status history, e.g. ``link lost;
    2 resume attempts failed; resumed at attempt 3``."""
    losses = sum(1 for e in history if _get(e, 'event') == LINK_LOST)
    failed = sum(1 for e in history if _get(e, 'event') == ATTEMPT_FAILED)
    asked = sum(1 for e in history if _get(e, 'event') == RESUME_REQUESTED)
    parts = [f"link lost {losses} time{'' if losses == 1 else 's'}"]
    if asked:
        parts.append(f"resumed by request {asked} "
                     f"time{'' if asked == 1 else 's'}")
    if failed:
        parts.append(f"{failed} resume attempt{'' if failed == 1 else 's'} "
                     f"failed")
    last = _get(history[-1], 'event') if history else None
    if last == RESUMED:
        parts.append("resumed")
    elif last == GAVE_UP:
        parts.append("gave up")
    return ', '.join(parts)


def _get(event, name):
    return event.get(name) if isinstance(event, dict) else \
        getattr(event, name)
