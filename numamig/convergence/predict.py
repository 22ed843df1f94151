"""Will a migration converge? The arithmetic, from a sampled dirty rate.

Pre-copy sends the guest's ``memory`` in a first pass of memory /
bandwidth seconds; each later pass resends what the guest dirtied during
the one before: with a dirty rate D and a bandwidth B, pass k+1 carries
D/B times what pass k carried (never more than the pages the guest keeps
writing, its working set, when known). The job stops once a pass fits
the allowed downtime. So:

* D < B: what remains shrinks geometrically by D/B per pass; the number
  of passes, the total time and the final (stop-and-copy) downtime
  follow. If that time exceeds the completion timeout, it does not
  converge in time.
* D >= B: it never shrinks below the working set; it converges only if
  the working set fits the downtime. Otherwise only a tier of the
  policy makes it end: auto-converge (QEMU throttles up to 99 %, enough
  when D * 0.01 < B), post-copy (always ends), pause (always ends).
* No dirty rate (the hypervisor cannot measure it) or no bandwidth
  figure: ``unknown``. Never guessed.

Pure: figures in, a Prediction out; no I/O.
"""

import dataclasses

from numamig.convergence import policy as pol

CONVERGES = 'converges'
NEEDS_AUTO_CONVERGE = 'needs-auto-converge'
NEEDS_POST_COPY = 'needs-post-copy'
NEEDS_PAUSE = 'needs-pause'
WILL_NOT_CONVERGE = 'will-not-converge'
UNKNOWN = 'unknown'
OUTCOMES = (CONVERGES, NEEDS_AUTO_CONVERGE, NEEDS_POST_COPY, NEEDS_PAUSE,
            WILL_NOT_CONVERGE, UNKNOWN)
# QEMU's auto-converge throttles the vCPUs at most this much.
MAX_THROTTLE = 0.99
MAX_PASSES = 10000


@dataclasses.dataclass(frozen=True)
class Prediction:
    """The verdict, with the estimates where pre-copy converges."""

    outcome: str
    reason: str
    elapsed_ms: int | None = None
    downtime_ms: int | None = None
    passes: int | None = None

    @property
    def converges(self):
        """Whether the migration is predicted to end on the destination
        (by pre-copy or by a tier of its policy)."""
        return self.outcome not in (WILL_NOT_CONVERGE, UNKNOWN)


def predict(memory, dirty_rate, bandwidth, downtime_ms, timeout_s=0,
            tiers=(), working_set=None):
    """Predict a pre-copy migration; see the module's docstring.

    :param memory: guest memory, bytes.
    :param dirty_rate: bytes per second, None when not measured.
    :param bandwidth: bytes per second, None or 0 when not known.
    :param downtime_ms: the largest downtime the job will allow.
    :param timeout_s: the completion timeout (0: none).
    :param tiers: the policy's tiers (what it does once the downtime
        steps are used up), or the timer's forced completion.
    :param working_set: bytes the guest keeps dirtying, if known.
    """
    if dirty_rate is None:
        return Prediction(UNKNOWN, "the guest's dirty rate could not be "
                                   "measured on this hypervisor")
    if not bandwidth:
        return Prediction(UNKNOWN, "no bandwidth figure (set [libvirt] "
                                   "live_migration_bandwidth)")
    fits = bandwidth * downtime_ms / 1000.0
    precopy = _precopy(memory, dirty_rate, bandwidth, fits, working_set)
    if precopy is not None:
        elapsed_s, final, passes = precopy
        if not timeout_s or elapsed_s <= timeout_s:
            return Prediction(
                CONVERGES, f"{passes} passes over {elapsed_s:.1f} s, the "
                           f"last of {final / 2 ** 20:.1f} MiB",
                int(elapsed_s * 1000), int(final / bandwidth * 1000),
                passes)
        reason = (f"pre-copy needs {elapsed_s:.0f} s, over the completion "
                  f"timeout of {timeout_s:.0f} s")
    else:
        reason = (f"dirtying {dirty_rate / 2 ** 20:.1f} MiB/s against "
                  f"{bandwidth / 2 ** 20:.1f} MiB/s: what remains never "
                  f"fits {downtime_ms} ms")
    return _by_tier(tiers, dirty_rate, bandwidth, reason)


def _precopy(memory, dirty_rate, bandwidth, fits, working_set):
    """(seconds, final pass bytes, passes) of a converging pre-copy, or
    None when it does not converge."""
    remaining, elapsed = float(memory), 0.0
    cap = float(working_set) if working_set else float(memory)
    for passes in range(1, MAX_PASSES + 1):
        if remaining <= fits:
            return elapsed + remaining / bandwidth, remaining, passes
        pass_s = remaining / bandwidth
        elapsed += pass_s
        following = min(cap, dirty_rate * pass_s)
        if following >= remaining and following > fits:
            return None
        remaining = following
    return None


def _by_tier(tiers, dirty_rate, bandwidth, reason):
    for tier in tiers:
        if tier == pol.AUTO_CONVERGE and \
                dirty_rate * (1 - MAX_THROTTLE) < bandwidth:
            return Prediction(NEEDS_AUTO_CONVERGE, reason + "; throttling "
                              "the vCPUs can make it converge")
        if tier == pol.POST_COPY:
            return Prediction(NEEDS_POST_COPY, reason + "; post-copy ends "
                              "it")
        if tier == pol.PAUSE:
            return Prediction(NEEDS_PAUSE, reason + "; pausing the guest "
                              "ends it")
    return Prediction(WILL_NOT_CONVERGE, reason)


def for_policy(policy, memory, dirty_rate, bandwidth, timer_downtime_ms,
               timeout_s, timer_tiers=(), working_set=None):
    """``predict`` with a Policy's largest downtime and tiers (the timer
    policy: the [libvirt] downtime and its forced completion)."""
    if policy.timer:
        downtime, tiers = timer_downtime_ms, tuple(timer_tiers)
    else:
        downtime, tiers = policy.downtime_ms[-1], policy.tiers
    return predict(memory, dirty_rate, bandwidth, downtime, timeout_s,
                   tiers, working_set)
