"""Outage rounds: migrations requested around one outage of a server.

An outage a deployment must ride out: the database gone for 20 s, or
the broker restarted (every daemon's connection reset, new ones refused
for a moment). Neither may fail a migration: both are shorter than a
conductor worker's lease and an agent's retry budget, so every
migration requested before, during or just after one must complete,
later by at most the outage's settle target.

A round, on a FaultDeployment:

1. some guests are asked to migrate at once, part with the scheduler
   choosing and part to a destination the round names (one with room
   for them all, so that no refusal is a true one);
2. a moment later (0.3 s, the moment the issue's reproduction used, or
   a random moment within the first seconds, while destinations are
   chosen and claimed) the outage starts;
3. more guests are asked to migrate during the outage (for a broker
   restart: while the daemons reconnect) and just after it ends. A
   request the conductor could not record while the database was gone
   must say so (its answer names the database) and is asked
   again, with the same migration uuid, once the outage is over, as an
   operator would;
4. the round waits for the world to settle (world.problems: every
   migration final, records, live XML and the agents' reports agree,
   nothing left claimed) and times it from the end of the outage.

A round is clean when every migration it asked for completed, every
refusal named the cause that happened, and it settled within the
fault's target.
"""

import dataclasses
import json
import os
import statistics
import threading
import time

import oslo_messaging as messaging
from oslo_utils import uuidutils

from numamig.db import instances
from numamig.db import migrations
from numamig.objects import fields
from tests.functional.faults import rounds

COMPLETED = fields.MigrationStatus.COMPLETED
# The moment after the first requests at which the issue's reproduction
# made its fault.
ISSUE_LEAD_S = 0.3
# Other rounds make it at a random moment up to this long after them.
MAX_LEAD_S = 2.0
# The second round of each fault makes it while the conductor records
# and admits the requests (its answers lost first, for the database).
RECORDING_LEAD_S = 0.02
# Requests "just after" the outage are sent within this of its end.
AFTER_WINDOW_S = 1.0
# Around a broker restart, a request unanswered after this is asked
# again, for up to REQUEST_DEADLINE_S.
REQUEST_TIMEOUT_S = 5
REQUEST_DEADLINE_S = 60
# numamig-manage's exit code for "the conductor (or broker) cannot be
# reached", and how long an operator runs it again during a fault.
CLI_UNREACHABLE = 255
CLI_DEADLINE_S = 90


@dataclasses.dataclass(frozen=True)
class Outage:
    """One outage of a proxy (harness.FaultDeployment's ``broker`` or
    ``database``), and how soon after its end the world must be clean.

    :param cut_s: how long every connection through the proxy is refused
        (all open ones are reset at its start).
    :param target_s: seconds from the end of the outage to a clean world.
    """

    name: str
    proxy: str
    cut_s: float
    target_s: float
    # A restart also loses what the server kept in memory only.
    restart: bool = False
    # Seconds before the cut during which the server's answers are lost
    # (Proxy.cut): what was committed then is not known to be.
    unanswered_s: float = 0.0
    # A failover of the deployment's PostgreSQL pair (harness
    # FaultDeployment(standby=True)): the primary killed, the standby
    # promoted ``cut_s`` later, the outage's end when it takes writes.
    failover: bool = False
    # A fault of the deployment's RabbitMQ cluster (harness
    # FaultDeployment(cluster=...)): 'leader' SIGKILLs the node holding
    # most of the vhost's queue leaders and starts it again ``cut_s``
    # later; 'whole' stops every node and starts them all again;
    # 'killed' SIGKILLs every node and starts them all ``cut_s`` later. The
    # outage ends when the node, or every node, is back.
    cluster: str = None

    @property
    def broker_fault(self):
        return self.restart or self.cluster is not None


# The connections die with transactions under way: for 0.3 s before the
# cut the database's answers are lost, so that whatever the conductor
# commits then (an admission, a claim, a status) it does not know of.
DATABASE_CUT = Outage('database-cut-20s', 'database', 20.0, 15.0,
                      unanswered_s=0.3)
# A RabbitMQ node stopped and started again 0.3 s later, as its clients
# see it: every connection reset, none accepted until the node has
# booted (BROKER_BOOT_S, what a node takes on a loaded 2-core machine),
# and every non-durable queue and exchange gone with the messages in
# them (numamig's queues are not durable).
BROKER_BOOT_S = 10.0
BROKER_RESTART = Outage('broker-restart', 'broker', BROKER_BOOT_S, 20.0,
                        restart=True)
# The PostgreSQL primary's machine lost (every process of it killed, so
# every connection to it fails at once) and the standby promoted
# FAILOVER_DETECT_S later: the time a failover manager (Patroni,
# pg_auto_failover, an operator's script) takes to decide the primary is
# gone. The daemons find the new primary by the multi-host URL.
FAILOVER_DETECT_S = 5.0
PRIMARY_FAILOVER = Outage('primary-failover', 'database', FAILOVER_DETECT_S,
                          15.0, failover=True)
# The RabbitMQ node holding the queues' leaders lost (its beam SIGKILLed
# with every connection to it) and started again LEADER_DOWN_S later:
# the quorum queues elect leaders on the two nodes left, every daemon
# fails over to them (transport_url lists all three), and the node
# comes back as a follower.
LEADER_DOWN_S = 8.0
LEADER_KILL = Outage('leader-node-killed', 'broker', LEADER_DOWN_S, 20.0,
                     cluster='leader')
# The whole cluster restarted: the three nodes stopped at once (a
# datacentre's power, or an operator's restart of every node), then
# started together (how long that takes is the cluster's;
# the requests "during" it are sent while it is down). Quorum queues
# are durable: they and their messages outlive the restart.
CLUSTER_RESTART_GUESS_S = 15.0
CLUSTER_RESTART = Outage('cluster-restarted', 'broker',
                         CLUSTER_RESTART_GUESS_S, 20.0, cluster='whole')
# Every node of the cluster lost at once (each beam SIGKILLed with every
# process of it: the datacentre's power, not an operator's restart), then
# started together CLUSTER_DOWN_S later. Nothing was shut down: the
# quorum queues recover from their Raft logs, and only what a node had
# confirmed is owed to the daemons.
CLUSTER_DOWN_S = 5.0
CLUSTER_KILL = Outage('cluster-killed', 'broker', CLUSTER_DOWN_S, 20.0,
                      cluster='killed')


@dataclasses.dataclass(frozen=True)
class Plan:
    """What a round asks for, and when.

    :param before: [(guest, destination or None)] asked at once first.
    :param during: the same, asked one at a time during the outage.
    :param after: the same, asked within AFTER_WINDOW_S of its end.
    :param lead_s: seconds between the first requests and the outage.
    """

    before: tuple
    during: tuple
    after: tuple
    lead_s: float


@dataclasses.dataclass
class OutageResult:
    fault: str
    plan: Plan
    settle_s: float = None
    # From the fault's start to its end (settle_s counts from the end).
    outage_s: float = None
    # Migrations not final when a cluster fault began.
    in_flight: int = None
    # (guest, when its migration last changed: updated_at), and the last
    # of those asked before the fault, in seconds from its start: a
    # fault ridden out ends them while it lasts.
    end_times: list = dataclasses.field(default_factory=list)
    last_end_s: float = None
    # migration uuid -> (status, error)
    ends: dict = dataclasses.field(default_factory=dict)
    # Requests the conductor refused during the outage: (guest, error).
    refused: list = dataclasses.field(default_factory=list)
    # Requests asked again because no answer came (see _request).
    resent: int = 0
    # Around a cluster fault, what each of those was answered: (guest,
    # error).
    lost: list = dataclasses.field(default_factory=list)
    problems: list = dataclasses.field(default_factory=list)

    @property
    def clean(self):
        return not self.problems


def plan_round(deployment, rng, first=False, during=2, after=2,
               lead_s=None):
    """Every guest of the deployment moves once: most at once before the
    outage, ``during`` of them during it and ``after`` just after it.
    The ``first`` round of a fault is the issue's reproduction: every
    request at once, and the fault 0.3 s later.

    :param lead_s: seconds from the first requests to the fault (None:
        0.3 s for the first round, else a random moment).

    Every other guest of each part is sent to a destination named here:
    the host with the fewest guests, counting the moves planned so far,
    never its own. A guest planned to leave still counts on its source
    (the moves run at once), so each host is named for about one guest.
    Room is not the plan's to keep: the deployment's guests are small
    enough that any host could take them all (test_outages.GUEST_VCPUS),
    so a refusal for room is never a true one.
    """
    records = [r.instance for r in instances.get_all(deployment.db)]
    load = dict.fromkeys(deployment.hosts, 0)
    for instance in records:
        load[instance.host] += 1
    guests = [(i.uuid, i.host) for i in sorted(records,
                                               key=lambda i: i.uuid)]
    rng.shuffle(guests)
    moves = []
    for index, (guest, source) in enumerate(guests):
        dest = None
        if index % 2:
            dest = min((h for h in deployment.hosts if h != source),
                       key=lambda h: (load[h], h))
            load[dest] += 1
        moves.append((guest, dest))
    if first:
        during = after = 0
    first_part = len(moves) - during - after
    return Plan(before=tuple(moves[:first_part]),
                during=tuple(moves[first_part:first_part + during]),
                after=tuple(moves[first_part + during:]),
                lead_s=lead_s if lead_s is not None else
                ISSUE_LEAD_S if first else rng.uniform(0.05, MAX_LEAD_S))


def run_round(deployment, outage, plan, rng):
    """Ask for ``plan``'s migrations around ``outage``; wait to settle."""
    rounds._wait_for_quiet(deployment)
    deployment.api.wait_until_ready(deployment.context, attempt_timeout=5,
                                    max_attempts=24)
    result = OutageResult(outage.name, plan)
    log_marks = _log_marks(deployment)
    asked = {}      # migration uuid -> (guest, destination)
    retry = []      # (migration uuid, guest, destination)

    def ask(guest, dest):
        uuid = uuidutils.generate_uuid()
        asked[uuid] = (guest, dest)
        try:
            _request(deployment, outage, result, guest, dest, uuid)
        except Exception as exc:  # noqa: BLE001 - judged below
            text = f"{type(exc).__name__}: {exc}"
            result.refused.append((guest, text))
            # A request that meets the database gone is refused saying
            # so: a true cause, whenever it was sent.
            if not _names_cause(outage, text):
                result.problems.append(
                    f"request to migrate {guest} refused for a cause that "
                    f"did not happen: {text[:300]}")
            elif '\n' in str(exc).strip() or 'Traceback' in text:
                result.problems.append(
                    f"request to migrate {guest} refused with more than "
                    f"one line: {text[:600]}")
            retry.append((uuid, guest, dest))

    # At once, as the issue's reproduction asked: each from a thread of
    # its own, so that the conductor records and admits them while the
    # fault comes.
    senders = [threading.Thread(target=ask, args=(guest, dest))
               for guest, dest in plan.before]
    for sender in senders:
        sender.start()
    time.sleep(plan.lead_s)
    began, began_wall = time.monotonic(), time.time()
    ended = _make(deployment, outage)
    for index, (guest, dest) in enumerate(plan.during):
        pause = rng.uniform(0, max(ended - time.monotonic(), 0) /
                            max(len(plan.during), 1))
        time.sleep(pause)
        if outage.cluster and index == 0:
            # An operator's command, not only a script's client, once
            # the fault has taken the node (every node) down.
            deployment.fault_down.wait(rounds.SETTLE_DEADLINE_S)
            _ask_by_cli(deployment, result, asked, guest, dest)
        else:
            ask(guest, dest)
    time.sleep(max(ended - time.monotonic(), 0))
    if outage.failover:
        ended = _promoted(deployment)
    if outage.cluster:
        ended = _cluster_back(deployment)
    for sender in senders:
        sender.join(rounds.SETTLE_DEADLINE_S)
    for uuid, guest, dest in list(retry):
        # Asked again as an operator would, under the same uuid: a
        # request that was recorded after all is answered, not repeated.
        try:
            deployment.api.live_migrate_instance(
                deployment.context, guest, dest_host=dest,
                migration_uuid=uuid)
        except Exception as exc:  # noqa: BLE001 - judged here
            result.problems.append(f"request to migrate {guest} refused "
                                   f"again after the outage: {exc}")
            asked.pop(uuid)
    for guest, dest in plan.after:
        time.sleep(rng.uniform(0, AFTER_WINDOW_S / max(len(plan.after), 1)))
        ask(guest, dest)
    result.outage_s = ended - began
    result.in_flight = getattr(deployment, 'in_flight', None)
    result.settle_s, found = rounds.settle(deployment, ended)
    result.problems += found
    result.problems += _outcomes(deployment, asked, result)
    # Of the migrations asked before the fault: those it caught.
    before = {guest for guest, _dest in plan.before}
    ends = [t.timestamp() for guest, t in result.end_times
            if t is not None and guest in before]
    if ends:
        result.last_end_s = max(ends) - began_wall
    if outage.cluster:
        result.problems += _tracebacks(deployment, log_marks)
    if result.settle_s is not None and result.settle_s > outage.target_s:
        result.problems.append(
            f"settled {result.settle_s:.1f} s after the outage ended, over "
            f"its {outage.target_s:.0f} s target")
    return result


def _request(deployment, outage, result, guest, dest, uuid):
    """Ask for one migration as an operator's script would.

    Around a broker restart a request can be lost on its way (published
    before the conductor declared its queue again): the script waits
    REQUEST_TIMEOUT_S for the answer and asks again under the same
    migration uuid (the request is idempotent), for up to
    REQUEST_DEADLINE_S.
    """
    deadline = time.monotonic() + REQUEST_DEADLINE_S
    while True:
        try:
            return deployment.api.live_migrate_instance(
                deployment.context, guest, dest_host=dest,
                migration_uuid=uuid,
                timeout=REQUEST_TIMEOUT_S if outage.broker_fault else None)
        except (messaging.MessagingTimeout,
                messaging.MessageDeliveryFailure) as exc:
            if not outage.broker_fault or time.monotonic() > deadline:
                raise
            result.resent += 1
            if outage.cluster:
                # What the operator's script was told: one line, and no
                # traceback of another process.
                text = f"{type(exc).__name__}: {exc}"
                result.lost.append((guest, text))
                if '\n' in str(exc).strip() or 'Traceback' in text:
                    result.problems.append(
                        f"request to migrate {guest} answered with more "
                        f"than one line: {text[:600]}")


def _make(deployment, outage):
    """Start ``outage``; return the monotonic time it ends (for a
    restart, when it has ended: a request sent while a broker is down
    cannot reach it, so the requests "during" a restart come while the
    daemons reconnect)."""
    if outage.failover:
        deployment.pair.lose_primary()
        return time.monotonic() + outage.cut_s
    if outage.cluster:
        return _cluster_fault(deployment, outage)
    proxy = getattr(deployment, outage.proxy)
    if not outage.restart:
        proxy.cut(outage.cut_s, unanswered_s=outage.unanswered_s)
        return time.monotonic() + outage.cut_s
    began = time.monotonic()
    proxy.cut(rounds.SETTLE_DEADLINE_S)
    try:
        deployment.forget_transient_broker_state()
        time.sleep(max(began + outage.cut_s - time.monotonic(), 0))
    finally:
        proxy.reopen()
    return time.monotonic()


def _promoted(deployment):
    """Promote the pair's standby; the monotonic time it takes writes."""
    deployment.pair.promote()
    return time.monotonic()


def _ask_by_cli(deployment, result, asked, guest, dest):
    """``numamig-manage migration start`` during a cluster fault, run
    again while it says it could not reach the broker or the conductor
    (exit 255), as an operator would, until CLI_DEADLINE_S.

    Each refusal must be one line on stderr with no traceback; the
    command that succeeds names the migration it recorded, which joins
    the round's (it must complete like the others).
    """
    deadline = time.monotonic() + CLI_DEADLINE_S
    argv = ['migration', 'start', guest, '--format', 'json']
    if dest:
        argv += ['--host', dest]
    while True:
        done = deployment.manage(*argv)
        if done.returncode == 0:
            uuid = json.loads(done.stdout)['uuid']
            asked[uuid] = (guest, dest)
            return
        text = done.stderr.strip()
        result.lost.append((guest, f"numamig-manage exit "
                                   f"{done.returncode}: {text}"))
        if done.returncode != CLI_UNREACHABLE or '\n' in text or \
                'Traceback' in text or not text:
            result.problems.append(
                f"numamig-manage migration start {guest} exited "
                f"{done.returncode} during the fault, not with one line "
                f"saying what it could not reach: {text[:600]!r}")
            return
        if time.monotonic() > deadline:
            result.problems.append(
                f"numamig-manage migration start {guest} still refused "
                f"{CLI_DEADLINE_S} s into the fault: {text[:300]}")
            return
        result.resent += 1
        time.sleep(1)


def _names_cause(outage, text):
    """Whether a refused request names the outage that happened."""
    text = text.lower()
    if outage.proxy == 'database':
        return 'database' in text
    if outage.cluster:
        # An operator's request that no node took within its deadline.
        return 'broker' in text or 'timed out' in text
    return False


def _cluster_fault(deployment, outage):
    """Start the cluster fault in a thread of its own (the requests
    "during" it are sent meanwhile); _cluster_back waits for its end.
    Returns when the fault is expected to end."""
    cluster = deployment.cluster
    deployment.in_flight = sum(
        m.status not in rounds.world.FINAL
        for m in migrations.get_all(deployment.db))
    deployment.fault_down = down = threading.Event()
    if outage.cluster == 'killed':
        deployment.fault_node = 'all, SIGKILLed'
        # Only the nodes the fixture started (each its own session):
        # never the machine's own RabbitMQ.
        for node in cluster.nodes:
            node.kill()
        down.set()

        def back():
            time.sleep(outage.cut_s)
            cluster.start_all()
    elif outage.cluster == 'leader':
        node = cluster.leader_node(deployment.vhost)
        deployment.fault_node = node.name
        node.kill()
        down.set()

        def back():
            time.sleep(outage.cut_s)
            node.start()
            node.wait_started()
    else:
        deployment.fault_node = 'all'

        def back():
            try:
                cluster.stop_all(together=True)
            finally:
                down.set()
            cluster.start_all()
    deployment.fault_thread = _Thread(back)
    return time.monotonic() + outage.cut_s


class _Thread(threading.Thread):
    """A thread whose exception join re-raises."""

    def __init__(self, work):
        super().__init__(daemon=True)
        self._work = work
        self.error = None
        self.ended_at = None
        self.start()

    def run(self):
        try:
            self._work()
        except BaseException as exc:  # noqa: BLE001 - re-raised by join
            self.error = exc
        finally:
            self.ended_at = time.monotonic()

    def join(self, timeout=None):
        super().join(timeout)
        if self.error is not None:
            raise self.error


def _cluster_back(deployment):
    """The monotonic time the faulted node, or every node, was back."""
    deployment.fault_thread.join(rounds.SETTLE_DEADLINE_S)
    return deployment.fault_thread.ended_at or time.monotonic()


def _log_marks(deployment):
    """Each daemon's log size: where this round's lines begin."""
    return {d.log_path: os.path.getsize(d.log_path)
            for d in deployment.daemons()}


def _tracebacks(deployment, marks):
    """A daemon that logged a traceback during the round: a fault of the
    broker is an outage to ride out, not an error to dump."""
    found = []
    for daemon in deployment.daemons():
        with open(daemon.log_path, errors='replace') as log:
            log.seek(marks.get(daemon.log_path, 0))
            text = log.read()
        if 'Traceback' in text:
            at = text.index('Traceback')
            found.append(f"{daemon.host} logged a traceback: "
                         f"{text[max(at - 400, 0):at + 1200]}")
    return found


def _outcomes(deployment, asked, result):
    """Every migration asked for must have completed; anything else ends
    for a cause that did not happen (the outage only delays)."""
    found = []
    for uuid, (guest, dest) in asked.items():
        try:
            migration = migrations.get(deployment.db, uuid,
                                       with_history=False)
        except Exception:  # noqa: BLE001 - MigrationNotFound
            found.append(f"migration {uuid} of {guest} was never recorded "
                         f"although its request was answered")
            continue
        error = migration.get('error') or ''
        result.ends[uuid] = (migration.status, error)
        result.end_times.append((guest, migration.get('updated_at')))
        if migration.status != COMPLETED:
            found.append(f"migration {uuid} of {guest} "
                         f"({'to ' + dest if dest else 'scheduled'}) ended "
                         f"{migration.status} for a cause that did not "
                         f"happen: {error[:300]}")
    return found


def summary(results):
    """Lines: per fault, rounds, migrations, outcomes, settle times."""
    lines = [f"{'fault':18} {'rounds':>6} {'clean':>5} {'migrations':>10} "
             f"{'outcomes':34} {'settle median':>13} {'max':>6}"]
    for name in dict.fromkeys(r.fault for r in results):
        mine = [r for r in results if r.fault == name]
        outcomes = {}
        for r in mine:
            for status, _error in r.ends.values():
                outcomes[status] = outcomes.get(status, 0) + 1
        refused = sum(len(r.refused) for r in mine)
        if refused:
            outcomes['refused-then-asked-again'] = refused
        resent = sum(r.resent for r in mine)
        if resent:
            outcomes['request-lost-then-resent'] = resent
        times = [r.settle_s for r in mine if r.settle_s is not None]
        median = statistics.median(times) if times else None
        text = ', '.join(f"{k} {v}" for k, v in sorted(outcomes.items()))
        lines.append(
            f"{name:18} {len(mine):6} {sum(r.clean for r in mine):5} "
            f"{sum(len(r.ends) for r in mine):10} {text:34} "
            f"{rounds._seconds(median):>13} "
            f"{rounds._seconds(max(times) if times else None):>6}")
    return lines


def describe(result):
    """Lines about one unclean round."""
    plan = result.plan
    lines = [f"{result.fault}: UNCLEAN (lead {plan.lead_s:.2f} s, "
             f"{len(plan.before)} before, {len(plan.during)} during, "
             f"{len(plan.after)} after):"]
    lines += [f"    {p}" for p in result.problems[:12]]
    return lines

