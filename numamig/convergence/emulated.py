"""A modelled pre-copy, for hosts that cannot migrate (the embedded tier).

The libvirt test driver cannot migrate, so numamig carries the guest
over itself; the copy itself took no time and produced no statistics,
and nothing exercised convergence there. This model produces what a
hypervisor reports, pass by pass, for a guest of ``memory`` bytes
dirtying ``dirty_rate`` B/s over a link of ``bandwidth`` B/s: each pass
sends what remains, during which the guest dirties more, until what
remains fits the allowed downtime. The same policy engine as a real job
decides (numamig.convergence.policy), so a stalled emulated migration
escalates exactly as a real one would. Time is modelled, never slept.

The model is QEMU's in outline only: auto-converge throttles the vCPUs
by 20 % and then 10 % more per pass (QEMU's defaults), a pause stops
dirtying, post-copy ends the pre-copy at once (the rest is fetched on
demand).
"""

import dataclasses

from numamig.convergence import policy as pol

# libvirt's (QEMU's) maximum downtime before anyone sets one.
DEFAULT_DOWNTIME_MS = 300
THROTTLE_INITIAL, THROTTLE_STEP, THROTTLE_MAX = 0.2, 0.1, 0.99
# Passes after which the model stops, whatever the policy: a bound on
# the loop, as a real job is bounded by its completion timeout.
MAX_PASSES = 10000

CONVERGED, POST_COPY, PAUSED, ABORTED = ('converged', 'post-copy',
                                          'paused', 'aborted')


@dataclasses.dataclass(frozen=True)
class Timer:
    """The timer policy's behaviour: [(seconds, downtime ms)] steps and
    what the completion timeout does ('abort' or 'force_complete', which
    is post-copy when ``post_copy`` else a pause)."""

    steps: tuple = ()
    timeout_s: float = 0
    timeout_action: str = 'abort'
    post_copy: bool = False


@dataclasses.dataclass(frozen=True)
class Outcome:
    """How the modelled copy ended, and what it reported on the way."""

    outcome: str
    elapsed_s: float
    downtime_ms: int | None
    bytes_sent: int
    passes: int
    samples: tuple
    actions: tuple
    reason: str = ''
    # The policy Actions behind ``actions``, in the same order.
    taken: tuple = ()


@dataclasses.dataclass
class _Copy:
    memory: int
    dirty_rate: float
    bandwidth: float
    downtime_ms: int = DEFAULT_DOWNTIME_MS
    throttle: float = 0.0
    elapsed: float = 0.0
    sent: int = 0
    ended: tuple | None = None

    @property
    def dirtying(self):
        return self.dirty_rate * (1 - self.throttle)


def run(policy, memory, dirty_rate, bandwidth, timer=Timer(),
        timeout_s=0, working_set=None):
    """Model a pre-copy under ``policy``; return its Outcome.

    :param memory, dirty_rate, bandwidth: bytes and bytes per second
        (``bandwidth`` > 0).
    :param working_set: the most the guest can have dirtied again at the
        end of a pass (the pages it keeps writing); default ``memory``.
    :param timer: the timer behaviour, used when ``policy`` is the timer.
    :param timeout_s: the completion timeout of other policies (0: none).
    """
    copy = _Copy(memory, max(dirty_rate, 0), bandwidth)
    state, due = pol.start(policy)
    steps = list(timer.steps) if policy.timer else []
    remaining, iteration, samples, actions = memory, 1, [], []
    taken = []
    while copy.ended is None and iteration <= MAX_PASSES:
        sample = pol.Sample(iteration, int(remaining), int(copy.dirtying),
                            int(bandwidth))
        samples.append(sample)
        state, more = pol.observe(policy, state, sample)
        state, more = _timeouts(policy, state, copy, timer, timeout_s,
                                due + more)
        due = []
        _timer_steps(copy, steps)
        for action in more:
            actions.append(action.describe())
            taken.append(action)
            _apply(copy, action, remaining)
        if copy.ended is not None:
            break
        stop_s = remaining / bandwidth
        if stop_s * 1000 <= copy.downtime_ms:
            copy.ended = (CONVERGED, int(stop_s * 1000), '')
            copy.sent += int(remaining)
            copy.elapsed += stop_s
            break
        copy.elapsed += stop_s
        copy.sent += int(remaining)
        remaining = min(working_set or memory, copy.dirtying * stop_s)
        iteration += 1
        if copy.throttle:
            copy.throttle = min(copy.throttle + THROTTLE_STEP, THROTTLE_MAX)
    if copy.ended is None:
        copy.ended = (ABORTED, None, f"no end after {MAX_PASSES} passes")
    outcome, downtime_ms, reason = copy.ended
    return Outcome(outcome, copy.elapsed, downtime_ms, copy.sent,
                   iteration, tuple(samples), tuple(actions), reason,
                   tuple(taken))


def _timeouts(policy, state, copy, timer, timeout_s, actions):
    """Add what a passed completion timeout does to ``actions``."""
    if policy.timer:
        if timer.timeout_s and copy.elapsed > timer.timeout_s:
            kind = pol.ABORT if timer.timeout_action == 'abort' else \
                pol.POST_COPY if timer.post_copy else pol.PAUSE
            actions = actions + [pol.Action(
                kind, f"completion timeout of {timer.timeout_s:.0f} s")]
        return state, actions
    if timeout_s and copy.elapsed > timeout_s:
        state, more = pol.timed_out(policy, state, timeout_s)
        actions = actions + more
    return state, actions


def _timer_steps(copy, steps):
    while steps and steps[0][0] <= copy.elapsed:
        copy.downtime_ms = steps.pop(0)[1]


def _apply(copy, action, remaining):
    if action.kind == pol.DOWNTIME:
        copy.downtime_ms = action.downtime_ms
    elif action.kind == pol.AUTO_CONVERGE:
        copy.throttle = max(copy.throttle, THROTTLE_INITIAL)
    elif action.kind == pol.POST_COPY:
        # The switch-over stops the guest for its device state only.
        copy.ended = (POST_COPY, 0, action.reason)
        copy.sent += int(remaining)
        copy.elapsed += remaining / copy.bandwidth
    elif action.kind == pol.PAUSE:
        stop_s = remaining / copy.bandwidth
        copy.ended = (PAUSED, int(stop_s * 1000), action.reason)
        copy.sent += int(remaining)
        copy.elapsed += stop_s
    elif action.kind == pol.ABORT:
        copy.ended = (ABORTED, None, action.reason)
