"""Convergence policies and the engine deciding a migration's next step.

A pre-copy migration sends the guest's memory in passes (libvirt's
``memory_iteration``); each pass resends what the guest dirtied during
the one before. It converges once what remains can be sent within the
allowed downtime. It stalls when the remaining bytes stop shrinking
from one pass to the next: the guest dirties as fast as the link sends.
Raising the allowed downtime on a timer (the behaviour numamig had, kept
as the ``timer`` policy) reacts to seconds, not to that: a fast link
waits for nothing, a slow one escalates too late. A policy here reacts
per stalled pass instead:

* every ``stall_iterations`` stalled passes, the next step of its
  ``downtime_ms`` schedule is allowed;
* once the schedule is exhausted, every further stall applies the next
  of its ``tiers``: ``auto_converge`` (QEMU throttles the vCPUs; the job
  was started with it, the tier gives the throttle its passes),
  ``post_copy`` (switch: the guest runs on the destination at once),
  ``pause`` (the guest stops until the copy ends) or ``abort`` (the
  guest stays on the source);
* past the completion timeout the last tier applies at once.

Everything here is pure: ``start``, ``observe`` and ``timed_out`` take a
State and return a new one with the Actions to apply. The policy text
format, shared by the configuration and the documentation::

    NAME: downtime=100,150,200; then=post_copy,abort; stall_iterations=1;
          min_progress=5

``min_progress`` is the percentage by which the remaining bytes must
shrink over a pass for it to count as progress (default 5).
"""

import dataclasses

from numamig import exception

DOWNTIME = 'downtime'
AUTO_CONVERGE = 'auto_converge'
POST_COPY = 'post_copy'
PAUSE = 'pause'
ABORT = 'abort'
TIERS = (AUTO_CONVERGE, POST_COPY, PAUSE, ABORT)
# Tiers after which nothing remains to decide: the job converges (or is
# cancelled) by itself.
FINAL_TIERS = (POST_COPY, PAUSE, ABORT)

TIMER = 'timer'
# The shipped policies' names; see SHIPPED.
NFV = 'nfv'
FINISH = 'finish'
NEVER_PAUSE = 'never_pause'

# Where a guest names its policy: a flavor key and an image property.
FLAVOR_KEY = 'hw:live_migration_policy'
IMAGE_KEY = 'hw_live_migration_policy'

MAX_STEPS = 32
MAX_DOWNTIME_MS = 60000
MAX_NAME = 64


def _check_policy(policy):
    def invalid(reason):
        return exception.InvalidMigrationPolicy(name=policy.name,
                                                reason=reason)
    if not policy.name or len(policy.name) > MAX_NAME or \
            not policy.name.replace('_', '').replace('-', '').isalnum():
        raise invalid(f"a name is 1-{MAX_NAME} letters, digits, '-' or "
                      f"'_'")
    if policy.timer:
        if policy.downtime_ms or policy.tiers:
            raise invalid("the timer policy takes no schedule")
        return
    if not 1 <= len(policy.downtime_ms) <= MAX_STEPS:
        raise invalid(f"downtime needs 1-{MAX_STEPS} steps")
    if any(not 1 <= d <= MAX_DOWNTIME_MS for d in policy.downtime_ms):
        raise invalid(f"downtime steps must be 1-{MAX_DOWNTIME_MS} ms")
    if list(policy.downtime_ms) != sorted(policy.downtime_ms):
        raise invalid("downtime steps must not decrease")
    unknown = [t for t in policy.tiers if t not in TIERS]
    if unknown:
        raise invalid(f"unknown tier {unknown[0]!r} (tiers: "
                      f"{', '.join(TIERS)})")
    if len(set(policy.tiers)) != len(policy.tiers):
        raise invalid("a tier may be named once")
    for tier in policy.tiers[:-1]:
        if tier in (PAUSE, ABORT):
            raise invalid(f"{tier} ends the migration; nothing can follow "
                          f"it")
    if not 1 <= policy.stall_iterations <= 100:
        raise invalid("stall_iterations must be 1-100")
    if not 0 <= policy.min_progress < 100:
        raise invalid("min_progress must be 0-99 (percent)")


@dataclasses.dataclass(frozen=True)
class Policy:
    """One named convergence schedule (see the module's docstring).

    ``timer``: the timer-based behaviour of the ``[libvirt]
    live_migration_downtime*`` and completion timeout options; such a
    policy has no schedule and this engine decides nothing for it.
    """

    name: str
    downtime_ms: tuple = ()
    tiers: tuple = ()
    stall_iterations: int = 1
    min_progress: float = 5.0
    timer: bool = False

    def __post_init__(self):
        _check_policy(self)

    @property
    def uses_post_copy(self):
        """Whether the job must start with post-copy allowed."""
        return POST_COPY in self.tiers

    @property
    def uses_auto_converge(self):
        """Whether the job must start with auto-converge (throttling)."""
        return AUTO_CONVERGE in self.tiers

    @property
    def final_tier(self):
        """What the completion timeout applies: the last tier, or abort."""
        return self.tiers[-1] if self.tiers else ABORT

    def describe(self):
        """The policy in its configuration format."""
        if self.timer:
            return f"{self.name}: timer"
        parts = [f"downtime={','.join(str(d) for d in self.downtime_ms)}",
                 f"then={','.join(self.tiers) or ABORT}",
                 f"stall_iterations={self.stall_iterations}",
                 f"min_progress={self.min_progress:g}"]
        return f"{self.name}: " + '; '.join(parts)


SHIPPED = {p.name: p for p in (
    Policy(TIMER, timer=True),
    # Network functions: never more than 200 ms of downtime; post-copy
    # (whose switch-over is brief) when that is not enough, else give up.
    Policy(NFV, downtime_ms=(50, 100, 150, 200), tiers=(POST_COPY, ABORT)),
    # Whatever it takes: up to 500 ms, then throttle, post-copy, pause.
    Policy(FINISH, downtime_ms=(100, 150, 200, 300, 400, 500),
           tiers=(AUTO_CONVERGE, POST_COPY, PAUSE)),
    # Never stop the guest for long: throttle and post-copy, then abort.
    Policy(NEVER_PAUSE, downtime_ms=(100, 150, 200, 300, 400, 500),
           tiers=(AUTO_CONVERGE, POST_COPY, ABORT)),
)}


def parse(text):
    """Parse one policy line (``NAME: key=value; ...``) into a Policy.

    :raises InvalidMigrationPolicy: naming what is wrong.
    """
    name, sep, body = str(text).partition(':')
    name = name.strip()
    if not sep:
        raise exception.InvalidMigrationPolicy(
            name=name or repr(text), reason="expected 'NAME: key=value; ...'")
    body = body.strip()
    if body == TIMER:
        return Policy(name, timer=True)
    values = {}
    for item in filter(None, (i.strip() for i in body.split(';'))):
        key, eq, value = item.partition('=')
        key = key.strip()
        if not eq or key not in _PARSERS:
            raise exception.InvalidMigrationPolicy(
                name=name, reason=f"{item!r} is not one of "
                                  f"{'=..., '.join(_PARSERS)}=...")
        try:
            values[_PARSERS[key][0]] = _PARSERS[key][1](value)
        except ValueError:
            raise exception.InvalidMigrationPolicy(
                name=name, reason=f"{key}={value.strip()!r} is not a "
                                  f"valid value")
    return Policy(name, **values)


def _numbers(value):
    return tuple(int(v) for v in value.split(',') if v.strip())


def _names(value):
    return tuple(v.strip() for v in value.split(',') if v.strip())


_PARSERS = {'downtime': ('downtime_ms', _numbers),
            'then': ('tiers', _names),
            'stall_iterations': ('stall_iterations', int),
            'min_progress': ('min_progress', float)}


def catalog(lines):
    """The shipped policies overlaid with the configured ``lines``.

    :raises InvalidMigrationPolicy: a line does not parse, or names a
        policy twice.
    """
    policies = dict(SHIPPED)
    configured = set()
    for line in lines or ():
        policy = parse(line)
        if policy.name in configured:
            raise exception.InvalidMigrationPolicy(
                name=policy.name, reason="configured twice")
        configured.add(policy.name)
        policies[policy.name] = policy
    return policies


def select(catalog, requested=None, flavor=None, image=None, default=TIMER):
    """The policy a migration runs: requested for this migration, else
    the flavor's, else the image's, else the default.

    :returns: (Policy, where it came from).
    :raises UnknownMigrationPolicy: the chosen name is not in ``catalog``.
    """
    for name, where in ((requested, 'requested for the migration'),
                        (flavor, 'flavor key hw:live_migration_policy'),
                        (image, 'image property hw_live_migration_policy'),
                        (default, 'the configured default')):
        if name:
            if name not in catalog:
                raise exception.UnknownMigrationPolicy(
                    name=name, where=where, known=', '.join(sorted(catalog)))
            return catalog[name], where
    raise exception.UnknownMigrationPolicy(
        name='(none)', where='no default configured',
        known=', '.join(sorted(catalog)))


@dataclasses.dataclass(frozen=True)
class Sample:
    """What the engine reads of one job-statistics sample (bytes, B/s)."""

    iteration: int
    remaining: int
    dirty_rate: int = 0
    bandwidth: int = 0


# What became of an action the engine decided: the hypervisor took it,
# refused it, or the policy only observes (nothing is applied).
APPLIED, FAILED, OBSERVED = 'applied', 'failed', 'observed'
ACTION_OUTCOMES = (APPLIED, FAILED, OBSERVED)


@dataclasses.dataclass(frozen=True)
class Action:
    """One thing to do to the job: DOWNTIME (``downtime_ms``) or a tier."""

    kind: str
    reason: str
    downtime_ms: int | None = None

    def describe(self):
        if self.kind == DOWNTIME:
            return f"allow {self.downtime_ms} ms of downtime ({self.reason})"
        return f"{self.kind.replace('_', '-')} ({self.reason})"


@dataclasses.dataclass(frozen=True)
class State:
    """Where a job stands in its policy.

    ``iteration``: the last pass seen; ``start_remaining``: the remaining
    bytes first seen in that pass; ``stalls``: stalled passes since the
    last escalation; ``step``/``tier``: the next schedule step and tier;
    ``ended``: a final tier was applied, nothing more is decided.
    """

    iteration: int = 0
    start_remaining: int | None = None
    stalls: int = 0
    step: int = 0
    tier: int = 0
    ended: bool = False
    escalations: tuple = ()


def start(policy):
    """The state and actions of a job starting: the first downtime step."""
    state = State()
    if policy.timer:
        return state, []
    return _escalate(policy, state, 'the job starts')


def observe(policy, state, sample):
    """Take one statistics sample; return (new state, actions).

    A stall is judged once per pass, when a new pass begins: the bytes
    remaining at its start against those at the start of the pass before
    (several passes between two samples count as one comparison).
    """
    if policy.timer or state.ended:
        return state, []
    if sample.iteration <= state.iteration:
        if state.start_remaining is None:
            state = dataclasses.replace(state,
                                        start_remaining=sample.remaining)
        return state, []
    before, passes = state.start_remaining, sample.iteration - state.iteration
    state = dataclasses.replace(state, iteration=sample.iteration,
                                start_remaining=sample.remaining)
    if before is None or state.iteration <= 1:
        return state, []
    if shrank(before, sample.remaining, policy.min_progress):
        return dataclasses.replace(state, stalls=0), []
    stalls = state.stalls + 1
    if stalls < policy.stall_iterations:
        return dataclasses.replace(state, stalls=stalls), []
    reason = (f"pass {sample.iteration}: {sample.remaining} bytes remain, "
              f"{before} did {passes} pass{'es' if passes > 1 else ''} "
              f"before")
    if sample.dirty_rate and sample.bandwidth:
        reason += (f"; dirtying {sample.dirty_rate} B/s against "
                   f"{sample.bandwidth} B/s")
    return _escalate(policy, dataclasses.replace(state, stalls=0), reason)


def timed_out(policy, state, limit_s):
    """The completion timeout passed: apply the last tier at once."""
    if policy.timer or state.ended:
        return state, []
    tier = policy.final_tier
    action = Action(tier, f"completion timeout of {limit_s:.0f} s")
    return dataclasses.replace(state, tier=len(policy.tiers), ended=True,
                               escalations=state.escalations + (action,)), \
        [action]


def failed(policy, state, action):
    """Applying ``action`` failed (the hypervisor refused it): the next
    tier, if any, instead."""
    if action.kind == DOWNTIME or state.tier >= len(policy.tiers):
        return dataclasses.replace(state, ended=True), []
    return _escalate(policy, dataclasses.replace(state, ended=False),
                     f"{action.kind} failed")


def shrank(before, now, min_progress):
    """Whether ``now`` is at least ``min_progress`` % below ``before``."""
    return now < before * (1 - min_progress / 100.0) or now == 0


def _escalate(policy, state, reason):
    if state.step < len(policy.downtime_ms):
        action = Action(DOWNTIME, reason, policy.downtime_ms[state.step])
        state = dataclasses.replace(state, step=state.step + 1)
    elif state.tier < len(policy.tiers):
        action = Action(policy.tiers[state.tier], reason)
        # After post-copy, pause or abort the job ends by itself; a
        # tier after post-copy applies only if the switch fails (failed).
        state = dataclasses.replace(state, tier=state.tier + 1,
                                    ended=action.kind in FINAL_TIERS)
    else:
        return dataclasses.replace(state, ended=True), []
    return dataclasses.replace(
        state, escalations=state.escalations + (action,)), [action]
