"""Fault rounds: concurrent migrations, one fault, then the world check.

A round asks for a few live migrations at once (the conductor's
scheduler chooses each destination), makes one fault while they run,
and then waits for the world to settle: for world.problems to come back
empty. The time to settle runs from the moment the fault cleared (the
killed daemon started again, the proxy let traffic through again) to
the first clean check; a round that does not settle within its deadline
is unclean, with the problems still seen.

The faults:

* ``kill-<role>-random``: SIGKILL the conductor, or a migrating guest's
  source or destination agent, at a random moment of the round, and
  start it again at once;
* ``kill-<role>-at-<status>``: the same the moment one of the round's
  migrations is seen in that status (the database polled every 10 ms);
* ``cut-broker-<s>s`` / ``freeze-broker-<s>s``: reset every daemon's
  broker connection and refuse new ones, or let no byte through, for
  that many seconds;
* ``cut-database-<s>s`` / ``freeze-database-<s>s``: the same between
  the daemons and PostgreSQL.
"""

import dataclasses
import statistics
import time

from numamig.db import instances
from numamig.db import migrations
from tests.functional.faults import world

# Looks at the world while waiting for it to settle.
SETTLE_POLL_S = 0.25
# A round that has not settled after this is unclean.
SETTLE_DEADLINE_S = 120
# Recovery in seconds, not minutes: interrupted migrations resume or end
# within one stall interval of the fault clearing, under 30 s with the
# defaults. A round of those faults that settles later is not clean.
SETTLE_TARGET_S = 30
SETTLE_TARGET_FAULTS = ('kill-conductor', 'cut-', 'freeze-',
                        # A start request lost with the killed source is
                        # sent again within two sweeps.
                        'kill-source-at-queued')
# What a round that did not settle left behind must end within this
# before the next round starts.
QUIET_DEADLINE_S = 300
STATUS_POLL_S = 0.01
# A fault at a status waits this long for a migration to reach it.
STATUS_DEADLINE_S = 30
ROLES = ('conductor', 'source', 'dest')
STATUSES = ('accepted', 'queued', 'running')


class FaultMissed(Exception):
    """The round's migrations never gave the fault its moment."""


@dataclasses.dataclass(frozen=True)
class Fault:
    """A named fault. ``act(round)`` makes it and returns the monotonic
    time it cleared."""

    name: str
    act: object


@dataclasses.dataclass(frozen=True)
class KnownFailure:
    """A failure the suite found and numamig does not fix yet.

    :param reason: exactly why, for the summary.
    :param matches: ``matches(result, problem)`` tells whether one
        problem of a round is this failure. A round whose every problem
        is a known failure counts as one, not as a new failure.
    """

    name: str
    reason: str
    matches: object


@dataclasses.dataclass
class RoundResult:
    fault: str
    clean: bool
    settle_s: float = None
    problems: tuple = ()
    ends: tuple = ()
    missed: str = None
    known: str = None
    # The host of the agent the fault killed, if it killed one.
    killed: str = None


class Round:
    """One round's migrations on a deployment, and the fault's helpers."""

    def __init__(self, deployment, rng, migration_uuids, guests):
        self.dep = deployment
        self.rng = rng
        self.migration_uuids = migration_uuids
        self.guests = guests
        self.killed = None

    def kill(self, daemon):
        """SIGKILL and restart ``daemon``; remember an agent's host."""
        if daemon is not self.dep.conductor:
            self.killed = daemon.host
        self.dep.restart(daemon)

    def daemon_for(self, role, migration=None):
        """The conductor, or the source/dest agent of ``migration`` (a
        random migration of the round when None)."""
        if role == 'conductor':
            return self.dep.conductor
        if migration is None:
            migration = self._random_migration_with(role)
        host = migration.source_host if role == 'source' \
            else migration.dest_host
        return self.dep.agents[host]

    def _random_migration_with(self, role):
        found = [m for m in self._migrations()
                 if (m.source_host if role == 'source' else m.dest_host)]
        if not found:
            raise FaultMissed(f"no migration of the round has a {role} "
                              f"host yet")
        return self.rng.choice(found)

    def _migrations(self):
        return [migrations.get(self.dep.db, u, with_history=False)
                for u in self.migration_uuids]

    def wait_for_status(self, status, role):
        """The first migration of the round seen in ``status`` (with a
        host for ``role``), polled every STATUS_POLL_S."""
        wanted = set(self.migration_uuids)
        deadline = time.monotonic() + STATUS_DEADLINE_S
        while time.monotonic() < deadline:
            for migration in migrations.get_all(self.dep.db,
                                                status=status):
                if migration.uuid in wanted and (
                        role == 'conductor' or
                        (migration.source_host if role == 'source'
                         else migration.dest_host)):
                    return migration
            if all(m.status in world.FINAL for m in self._migrations()):
                break
            time.sleep(STATUS_POLL_S)
        raise FaultMissed(f"no migration of the round was seen "
                          f"{status} (they went too fast or ended)")


def kill_random(role):
    def act(rnd):
        time.sleep(rnd.rng.uniform(0, 1.5))
        rnd.kill(rnd.daemon_for(role))
        return time.monotonic()
    return Fault(f'kill-{role}-random', act)


def kill_at(role, status):
    def act(rnd):
        migration = rnd.wait_for_status(status, role)
        rnd.kill(rnd.daemon_for(role, migration))
        return time.monotonic()
    return Fault(f'kill-{role}-at-{status}', act)


def outage(kind, proxy_name, seconds):
    """``kind``: 'cut' or 'freeze' of the 'broker' or 'database' proxy."""
    def act(rnd):
        time.sleep(rnd.rng.uniform(0, 1.0))
        getattr(getattr(rnd.dep, proxy_name), kind)(seconds)
        time.sleep(seconds)
        return time.monotonic()
    return Fault(f'{kind}-{proxy_name}-{seconds}s', act)


def every_fault(outage_s=5):
    """Every fault of the suite, in a fixed order."""
    faults = [kill_random(role) for role in ROLES]
    faults += [kill_at(role, status) for status in STATUSES
               for role in ROLES]
    faults += [outage(kind, proxy_name, outage_s)
               for proxy_name in ('broker', 'database')
               for kind in ('cut', 'freeze')]
    return faults


def run_round(deployment, fault, rng, movers=4, known=()):
    """Migrate ``movers`` random guests, make ``fault``, wait to settle.

    :param known: KnownFailures.
    """
    _wait_for_quiet(deployment)
    deployment.api.wait_until_ready(deployment.context, attempt_timeout=5,
                                    max_attempts=24)
    guests = rng.sample(sorted(
        r.instance.uuid for r in instances.get_all(deployment.db)), movers)
    requested = [deployment.api.live_migrate_instance(
        deployment.context, guest).uuid for guest in guests]
    rnd = Round(deployment, rng, requested, guests)
    try:
        cleared = fault.act(rnd)
    except FaultMissed as exc:
        cleared, missed = time.monotonic(), str(exc)
    else:
        missed = None
    # The records' clock is the wall clock.
    cleared_wall = time.time() - (time.monotonic() - cleared)
    settle_s, found = settle(deployment, cleared)
    found += world.unexplained_ends(deployment, requested)
    if settle_s is not None and settle_s > SETTLE_TARGET_S and \
            fault.name.startswith(SETTLE_TARGET_FAULTS):
        found.append(f"settled {settle_s:.1f} s after the fault cleared, "
                     f"over the {SETTLE_TARGET_S} s target")
    ends = tuple(_end(m, cleared_wall) for m in rnd._migrations())
    result = RoundResult(fault.name, not found, settle_s, tuple(found),
                         ends, missed, killed=rnd.killed)
    result.known = _known(result, known)
    return result


def _known(result, known):
    """The known failures that explain every problem of ``result``
    ('; '-joined), or None if one problem is new."""
    used = {}
    for problem in result.problems:
        failure = next((f for f in known if f.matches(result, problem)),
                       None)
        if failure is None:
            return None
        used[failure.name] = failure.reason
    return '; '.join(f"{name}: {reason}" for name, reason in used.items()) \
        or None


def _wait_for_quiet(deployment, timeout=QUIET_DEADLINE_S):
    """Let what a round that did not settle left in progress end before
    the next round starts (its time is not the next round's)."""
    deadline = time.monotonic() + timeout
    while any(m.status not in world.FINAL
              for m in migrations.get_all(deployment.db)):
        if time.monotonic() > deadline:
            raise AssertionError(f"migrations still in progress {timeout} s "
                                 f"after their round ended")
        time.sleep(SETTLE_POLL_S)


def _end(migration, cleared_wall):
    """(status, error, seconds from the fault clearing to the end)."""
    error = migration.get('error') or ''
    ended = migration.get('updated_at')
    after = None if ended is None else ended.timestamp() - cleared_wall
    return (migration.status, error[:200], after)


def settle(deployment, cleared):
    """(seconds from ``cleared`` to a clean world, []) or (None, the
    problems still seen at the deadline)."""
    deadline = cleared + SETTLE_DEADLINE_S
    while True:
        found = _dead_daemons(deployment) + world.problems(deployment)
        if not found:
            return time.monotonic() - cleared, []
        if time.monotonic() > deadline:
            return None, found
        time.sleep(SETTLE_POLL_S)


def _dead_daemons(deployment):
    """A daemon that stopped by itself is a problem; it is restarted so
    that the rounds after this one can run."""
    found = []
    for daemon in deployment.daemons():
        code = daemon.exited()
        if code is not None:
            found.append(f"{daemon.host} exited by itself with {code}: "
                         f"{daemon.log_tail(500)!r}")
            daemon.start()
    return found


def summary(results):
    """Lines: per fault, rounds run, clean, missed, settle median/max."""
    lines = [f"{'fault':32} {'rounds':>6} {'clean':>5} {'missed':>6} "
             f"{'settle median':>13} {'max':>6}"]
    for name in dict.fromkeys(r.fault for r in results):
        mine = [r for r in results if r.fault == name]
        times = [r.settle_s for r in mine if r.settle_s is not None]
        lines.append(
            f"{name:32} {len(mine):6} {sum(r.clean for r in mine):5} "
            f"{sum(r.missed is not None for r in mine):6} "
            f"{_seconds(statistics.median(times) if times else None):>13} "
            f"{_seconds(max(times) if times else None):>6}")
    return lines


def _seconds(value):
    return '-' if value is None else f"{value:.1f}s"
