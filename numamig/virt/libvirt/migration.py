"""One native live migration: the migrateToURI3 call and its monitor.

The calling thread blocks in ``migrateToURI3`` (peer to peer: the source
libvirtd drives the whole protocol); a monitor thread polls the job's
statistics meanwhile and reports progress. How the job is made to
converge is the migration's policy (numamig.convergence.policy): the
``timer`` policy raises the allowed downtime in steps on a timer and,
past the completion timeout, aborts or forces convergence; the others
feed each sample (memory pass, remaining bytes, dirty rate, bandwidth)
to the policy engine and apply what it decides, or, observe-only, log
it while the timer behaviour acts.
``abort`` and ``force_complete`` may be called from any other thread.
An abort asked before libvirt's job exists (the source records
``running`` just before it calls ``migrateToURI3``, so an operator's
abort can land first) is not lost: the caller's ``abort_requested``
event stops the job from starting, or aborts it at the monitor's first
sight of it.
What the finished job measured (downtime, bytes) comes from libvirt's
job-completed event (see events). A job whose connection drops during
post-copy is resumed (numamig.virt.libvirt.postcopy) rather than failed:
the guest cannot go back to the source then.
"""

import dataclasses
import threading
import time

import libvirt
from oslo_log import log as logging

from numamig import exception
from numamig.convergence import policy as convergence
from numamig.objects import migration_threads as thread_record
from numamig.virt import driver
from numamig.virt.libvirt import data_plane
from numamig.virt.libvirt import errors
from numamig.virt.libvirt import events
from numamig.virt.libvirt import migration_threads
from numamig.virt.libvirt import postcopy

LOG = logging.getLogger(__name__)

BASE_FLAGS = (libvirt.VIR_MIGRATE_LIVE | libvirt.VIR_MIGRATE_PEER2PEER |
              libvirt.VIR_MIGRATE_PERSIST_DEST |
              libvirt.VIR_MIGRATE_UNDEFINE_SOURCE)
KIB_PER_GIB = 1024 * 1024
ACTIVE_JOB_TYPES = (libvirt.VIR_DOMAIN_JOB_BOUNDED,
                    libvirt.VIR_DOMAIN_JOB_UNBOUNDED)
# How long a successful job waits for its job-completed event, which
# libvirt may deliver just after migrateToURI3 returned.
COMPLETED_EVENT_WAIT_S = 2.0
# The monitor's first look at a starting job, doubled until it is active.
FIRST_POLL_S = 0.01


def acts(settings, policy):
    """Whether ``policy``'s engine, not the timer, drives the job."""
    return not policy.timer and not settings.observe_only


def migration_flags(settings, policy=None):
    """Return the VIR_MIGRATE_* flags for MigrationSettings and the
    migration's policy (one acting needs post-copy or throttling allowed
    from the start: libvirt cannot turn them on in a running job)."""
    flags = BASE_FLAGS
    if policy is not None and acts(settings, policy):
        if policy.uses_post_copy:
            flags |= libvirt.VIR_MIGRATE_POSTCOPY
        if policy.uses_auto_converge:
            flags |= libvirt.VIR_MIGRATE_AUTO_CONVERGE
    elif settings.permit_post_copy:
        flags |= libvirt.VIR_MIGRATE_POSTCOPY
    elif settings.permit_auto_converge:
        # Throttling is pointless once post-copy can make it converge.
        flags |= libvirt.VIR_MIGRATE_AUTO_CONVERGE
    if settings.native_tls:
        flags |= getattr(libvirt, 'VIR_MIGRATE_TLS', 1 << 16)
    if settings.parallel_connections > 1:
        flags |= getattr(libvirt, 'VIR_MIGRATE_PARALLEL', 1 << 17)
    return flags | data_plane.flags_and_params(settings)[0]


def migration_params(settings, dest_xml, migration_uri, bandwidth_mib=None,
                     live_xml=None):
    """Return the typed parameters of migrateToURI3.

    The rewritten XML is both DEST_XML (what runs now) and PERSIST_XML
    (what a later restart on the destination uses), so new pins survive;
    ``live_xml``, where given, is DEST_XML instead: the rewritten XML
    with what the running guest cannot change kept as it runs (its
    cells' distances: migration_xml.with_running_distances).
    """
    params = {libvirt.VIR_MIGRATE_PARAM_DEST_XML: live_xml or dest_xml,
              libvirt.VIR_MIGRATE_PARAM_PERSIST_XML: dest_xml,
              libvirt.VIR_MIGRATE_PARAM_BANDWIDTH:
                  bandwidth_mib or settings.bandwidth_mib}
    if migration_uri:
        params[libvirt.VIR_MIGRATE_PARAM_URI] = migration_uri
    if settings.parallel_connections > 1:
        params[libvirt.VIR_MIGRATE_PARAM_PARALLEL_CONNECTIONS] = \
            settings.parallel_connections
    params.update(data_plane.flags_and_params(settings)[1])
    return params


def downtime_steps(settings, memory_gib):
    """Return [(elapsed seconds, max downtime ms)], smallest first.

    The first step allows downtime/steps; each later one, spaced by the
    delay scaled by guest memory, adds an equal share until the
    configured maximum is reached.
    """
    steps = max(settings.downtime_steps, 1)
    delay = settings.downtime_delay_s * max(memory_gib, 1)
    base = settings.downtime_ms / steps
    increment = (settings.downtime_ms - base) / steps
    return [(delay * i, int(base + increment * i))
            for i in range(steps + 1)]


class MigrationJob:
    """A live migration of one domain, from start to end."""

    def __init__(self, dom, settings, host, dest, progress_callback=None,
                 clock=time.monotonic, completion=None, policy=None,
                 recovery_callback=None, abort_requested=None,
                 threads=None, action_callback=None):
        """:param completion: what catches the finished job's statistics;
            an events.JobCompletedWatcher of ``dom`` unless given.
        :param policy: the convergence Policy (default: the settings'
            default policy).
        :param recovery_callback: called with the post-copy recovery
            history (a list of dicts) after each of its events.
        :param abort_requested: a threading.Event the caller sets to
            abort, honoured even before libvirt's job exists.
        :param threads: the CPUs chosen for the job's threads (see
            ComputeDriver.live_migrate); None: [libvirt]
            migration_thread_cpus, if set.
        :param action_callback: called with each policy Action, its
            outcome (convergence ACTION_OUTCOMES) and its line in the
            result's actions, as it happens.
        """
        self._dom = dom
        self._completion = completion or events.JobCompletedWatcher(dom)
        self._settings = settings
        self._host, self._dest = host, dest
        self._callback = progress_callback
        self._clock = clock
        self._lock = threading.Lock()
        self._recovery_callback = recovery_callback
        self._action_callback = action_callback
        # How recovery waits between attempts (None: in real time).
        self._recover_wait = None
        self.recovery = None
        self._aborted_reason = None
        self._abort_requested = abort_requested or threading.Event()
        # Whether libvirt took an abortJob (one sent before its job
        # existed was refused and must be sent again).
        self._abort_sent = False
        self._post_copy = False
        self._paused = False
        self.instance = dom.UUIDString()
        self._memory_gib = dom.info()[1] / KIB_PER_GIB
        self._steps = downtime_steps(settings, self._memory_gib)
        self._last = driver.MigrationProgress()
        self._policy = policy or settings.select_policy()[0]
        self._acting = acts(settings, self._policy)
        # The engine's state, the actions due when the job is first seen
        # active, and every action applied (or, observe-only, logged).
        self._state, self._due = convergence.start(self._policy)
        self.actions = []
        self._threads_chosen(threads)

    def _threads_chosen(self, threads):
        """Set up the thread pinner and the number of parallel
        connections from the CPUs chosen for the job's threads."""
        self._threads_report = getattr(threads, 'report', None)
        cpus, self._threads_basis = (
            (threads.cpus, threads.basis) if threads is not None else
            (self._settings.thread_cpus, thread_record.HOUSEKEEPING))
        self.threads = None if threads is None and cpus is None else \
            migration_threads.ThreadPinner(self.instance, cpus,
                                           sending=True)
        self.connections = data_plane.connections_for(self._settings,
                                                      len(cpus or ()))
        if self.connections != self._settings.parallel_connections:
            LOG.info("Migration of %s: %d parallel connection(s) instead of "
                     "the %d configured: %d CPU(s) for its threads",
                     self.instance, self.connections,
                     self._settings.parallel_connections, len(cpus))
            self._settings = dataclasses.replace(
                self._settings, parallel_connections=self.connections)

    def threads_record(self):
        """Where the job's threads ran (this host's side of
        MigrationThreads.sides), or None when nothing watched."""
        if self.threads is None:
            return None
        return thread_record.side(
            self._host, self._threads_basis, self.threads.cpus,
            self.threads.threads, self.connections)

    def _report_threads(self):
        if self._threads_report is None or self.threads is None:
            return
        try:
            self._threads_report(self.threads_record())
        except Exception as exc:  # noqa: BLE001 - the record is advisory
            LOG.warning("Migration of %s: where its threads ran was not "
                        "recorded: %s", self.instance, exc)

    def run(self, peer_uri, dest_xml, migration_uri, bandwidth_mib=None,
            live_xml=None):
        """Migrate; return a MigrationResult or raise a numamig error.

        ``live_xml``: DEST_XML where it differs from ``dest_xml`` (the
        PERSIST_XML); see migration_params.

        :raises MigrationNotSupported: a stream option this libvirt
            lacks (numamig.virt.libvirt.data_plane); nothing started.
        """
        self._check_data_plane(peer_uri, bandwidth_mib)
        if self._abort_requested.is_set():
            raise exception.MigrationAborted(
                instance=self.instance, host=self._host, dest=self._dest,
                code=libvirt.VIR_ERR_OPERATION_ABORTED,
                reason='aborted by request before the job started')
        flags = migration_flags(self._settings, self._policy)
        params = migration_params(self._settings, dest_xml, migration_uri,
                                  bandwidth_mib, live_xml)
        LOG.info("Live-migrating %s from %s to %s (%s, flags %#x, policy "
                 "%s%s)", self.instance, self._host, self._dest, peer_uri,
                 flags, self._policy.name,
                 ', observe-only' if self._settings.observe_only and
                 not self._policy.timer else '')
        self._completion.start()
        try:
            self._migrate_monitored(peer_uri, params, flags)
            completed = self._completion.wait(COMPLETED_EVENT_WAIT_S)
        finally:
            self._completion.stop()
            self._report_threads()
        return self._result(completed)

    def resume(self, peer_uri, dest_xml, migration_uri, history, reason):
        """One more recovery run of a post-copy that lost its stream and
        whose recovery gave up (the guest waits paused), asked by an
        operator: the flags and parameters of a post-copy migration to
        the same destination, plus VIR_MIGRATE_POSTCOPY_RESUME.

        :param history: the recovery history recorded so far, carried on.
        :returns: a MigrationResult once the migration completed.
        :raises PostCopyPaused: it gave up again; the guest is paused.
        """
        flags = migration_flags(self._settings, self._policy) | \
            libvirt.VIR_MIGRATE_POSTCOPY
        params = migration_params(self._settings, dest_xml, migration_uri)
        self._post_copy = True
        self._started = self._clock()
        with self._lock:
            self.recovery = postcopy.Recovery(
                self._dom, self._settings.postcopy_recovery,
                (self.instance, self._host, self._dest),
                lambda extra: self._run_monitored(peer_uri, params,
                                                  flags | extra),
                on_event=self._recovery_callback, clock=self._clock,
                wait=self._recover_wait, history=history)
        self._completion.start()
        try:
            try:
                self.recovery.resume_requested(reason)
            finally:
                self._ended = self._clock()
            completed = self._completion.wait(COMPLETED_EVENT_WAIT_S)
        finally:
            self._completion.stop()
        return self._result(completed)

    def _check_data_plane(self, peer_uri, bandwidth_mib):
        try:
            version = self._dom.connect().getLibVersion()
        except libvirt.libvirtError as exc:
            raise errors.hypervisor_error(exc, self._host,
                                          'report its libvirt version')
        data_plane.check(self._settings, version, self._host, peer_uri,
                         bandwidth_mib)

    def _migrate_monitored(self, peer_uri, params, flags):
        self._started = self._clock()
        try:
            self._run_monitored(peer_uri, params, flags)
            return
        except libvirt.libvirtError as exc:
            failure = exc
        if self._post_copy and postcopy.broken(self._dom):
            # Nothing to roll back to: the guest's CPUs ran on the
            # destination. Resume, with the same flags and parameters.
            self._recover(failure, lambda extra: self._run_monitored(
                peer_uri, params, flags | extra))
            return
        self._resume_if_paused()
        raise errors.migration_error(
            failure, self.instance, self._host, self._dest,
            self._aborted_reason) from failure

    def _run_monitored(self, peer_uri, params, flags):
        """One migrateToURI3 call, its job polled by a monitor thread."""
        done = threading.Event()
        monitor = threading.Thread(target=self._monitor, args=(done,),
                                   daemon=True,
                                   name=f'migration-monitor-{self.instance}')
        monitor.start()
        try:
            self._dom.migrateToURI3(peer_uri, params, flags)
        finally:
            self._ended = self._clock()
            done.set()
            monitor.join()

    def _recover(self, failure, migrate):
        """:raises PostCopyPaused: it could not be resumed."""
        with self._lock:
            self.recovery = postcopy.Recovery(
                self._dom, self._settings.postcopy_recovery,
                (self.instance, self._host, self._dest), migrate,
                on_event=self._recovery_callback, clock=self._clock,
                wait=self._recover_wait)
            if self._aborted_reason:
                self.recovery.stop(self._aborted_reason)
        try:
            self.recovery.recover(failure)
        finally:
            self._ended = self._clock()

    def abort(self, reason='aborted by request'):
        """Cancel the job; the guest keeps running on the source.

        During a post-copy recovery nothing can be cancelled any more:
        recovery stops trying and the guest stays paused.

        :raises libvirtError: libvirt has no job yet (one asked through
            ``abort_requested`` is then applied once the job exists).
        """
        with self._lock:
            self._aborted_reason = reason
            recovering = self.recovery
        if recovering is not None:
            recovering.stop(reason)
            return
        self._dom.abortJob()
        self._abort_sent = True

    def force_complete(self):
        """Make the job converge: post-copy if permitted, else pause.

        A second call while the first one's effect lasts does nothing.
        If the job fails after all, ``run`` resumes a guest paused here.
        """
        with self._lock:
            if self._post_copy or self._paused:
                return
            if self._settings.permit_post_copy:
                self._dom.migrateStartPostCopy(0)
                self._post_copy = True
            else:
                self._dom.suspend()
                self._paused = True
        LOG.info("Forcing migration of %s to complete by %s", self.instance,
                 'post-copy' if self._post_copy else 'pausing the guest')

    def _monitor(self, done):
        # The first downtime step is due when the job starts. Polled only
        # every progress interval, a job ran its first interval with
        # libvirt's default maximum downtime (300 ms) instead of the
        # operator's first step; until the job is seen active, the polls
        # back off from FIRST_POLL_S.
        interval = self._settings.progress_interval_s
        delays = backoff(FIRST_POLL_S, interval)
        active = False
        while not done.wait(interval if active else next(delays)):
            active = self._poll_quietly() or active

    def _poll_quietly(self):
        """Poll; return whether the job was active."""
        try:
            return self._poll()
        except libvirt.libvirtError as exc:
            # The job may end between two polls; the migrateToURI3
            # caller reports the outcome, so this is not an error.
            LOG.debug("Migration monitor of %s: %s", self.instance, exc)
            return False

    def _poll(self):
        stats = self._dom.jobStats()
        if stats.get('type') not in ACTIVE_JOB_TYPES:
            # No job yet, or one that has ended (completed, failed,
            # cancelled) and reports zeros: that is no progress.
            return False
        if self._abort_requested.is_set() and not self._abort_sent:
            # Asked before libvirt's job existed: applied now it does.
            self.abort()
            return True
        elapsed = self._clock() - self._started
        self._last = _progress(stats)
        if self._callback is not None:
            self._callback(self._last)
        if self.threads is not None:
            self.threads.poll()
        if self._acting:
            self._apply(self._decide(stats, elapsed))
            return True
        self._step_downtime(elapsed)
        self._check_timeout(elapsed)
        if not self._policy.timer:
            self._observe(self._decide(stats, elapsed))
        return True

    def _decide(self, stats, elapsed):
        """The policy engine's actions for one active sample."""
        actions, self._due = self._due, []
        self._state, more = convergence.observe(self._policy, self._state,
                                                engine_sample(stats))
        actions += more
        limit = self._timeout_s()
        if limit and elapsed > limit:
            self._state, more = convergence.timed_out(
                self._policy, self._state, limit)
            actions += more
        return actions

    def _observe(self, actions):
        for action in actions:
            LOG.info("Migration of %s: observe-only: policy %s would %s",
                     self.instance, self._policy.name, action.describe())
            self._acted(action, convergence.OBSERVED,
                        'would ' + action.describe())

    def _apply(self, actions):
        """Apply the engine's actions; one the hypervisor refuses makes
        the engine choose the next tier instead."""
        while actions:
            action = actions.pop(0)
            if self._aborted_reason or self._post_copy or self._paused:
                return
            LOG.info("Migration of %s: policy %s: %s", self.instance,
                     self._policy.name, action.describe())
            try:
                self._do(action)
                self._acted(action, convergence.APPLIED, action.describe())
            except libvirt.libvirtError as exc:
                LOG.warning("Migration of %s: %s failed: %s",
                            self.instance, action.kind, exc)
                self._acted(action, convergence.FAILED,
                            f"{action.describe()} failed: "
                            f"{exc.get_error_message()}")
                self._state, more = convergence.failed(
                    self._policy, self._state, action)
                actions = more + actions

    def _acted(self, action, outcome, line):
        """Keep a policy action's line for the result, and tell the
        caller now (a notification, while the copy still runs)."""
        self.actions.append(line)
        if self._action_callback is not None:
            try:
                self._action_callback(action, outcome, line)
            except Exception:  # noqa: BLE001 - never stop the monitor
                LOG.exception("Migration of %s: the policy action %r "
                              "was not passed on", self.instance, line)

    def _do(self, action):
        if action.kind == convergence.DOWNTIME:
            self._dom.migrateSetMaxDowntime(action.downtime_ms, 0)
        elif action.kind == convergence.POST_COPY:
            with self._lock:
                self._dom.migrateStartPostCopy(0)
                self._post_copy = True
        elif action.kind == convergence.PAUSE:
            with self._lock:
                self._dom.suspend()
                self._paused = True
        elif action.kind == convergence.ABORT:
            self.abort(f"policy {self._policy.name}: {action.reason}")
        # AUTO_CONVERGE: the job started with throttling allowed; QEMU
        # raises the throttle by itself while the guest outpaces the
        # link, and this tier gives it stalled passes to do so.

    def _timeout_s(self):
        return self._settings.completion_timeout_s * max(
            self._memory_gib, 1)

    def _step_downtime(self, elapsed):
        while self._steps and self._steps[0][0] <= elapsed:
            _, downtime = self._steps.pop(0)
            LOG.debug("Migration of %s: max downtime %d ms", self.instance,
                      downtime)
            self._dom.migrateSetMaxDowntime(downtime, 0)

    def _check_timeout(self, elapsed):
        limit = self._timeout_s()
        if not limit or elapsed <= limit or self._aborted_reason or \
                self._post_copy or self._paused:
            return
        LOG.warning("Migration of %s exceeded its completion timeout of "
                    "%.0f s; action: %s", self.instance, limit,
                    self._settings.timeout_action)
        if self._settings.timeout_action == 'force_complete':
            self.force_complete()
        else:
            self.abort(f"completion timeout of {limit:.0f} s exceeded")

    def _resume_if_paused(self):
        # The guest ran before force_complete paused it; a failed job
        # must leave it as it found it, running on the source.
        if not self._paused:
            return
        try:
            self._dom.resume()
            LOG.info("Resumed %s on %s: its migration failed after "
                     "force_complete paused it", self.instance, self._host)
        except libvirt.libvirtError as exc:
            LOG.error("Migration of %s failed after it was paused, and "
                      "resuming it on %s failed too: %s", self.instance,
                      self._host, exc)

    def _result(self, completed):
        """Build the MigrationResult; ``completed`` are libvirt's final
        job statistics, or None when they did not arrive."""
        elapsed_ms = int((self._ended - self._started) * 1000)
        completed = completed or {}
        result = driver.MigrationResult(
            emulated=False, elapsed_ms=elapsed_ms,
            downtime_ms=completed.get('downtime'),
            memory_total=completed.get('memory_total',
                                       self._last.memory_total),
            memory_processed=completed.get('memory_processed',
                                           self._last.memory_processed),
            post_copy=self._post_copy, paused=self._paused,
            convergence_policy=self._policy.name,
            convergence_actions=list(self.actions),
            postcopy_recovery=None if self.recovery is None
            else list(self.recovery.history))
        LOG.info("Live migration of %s to %s completed in %d ms, downtime "
                 "%s ms%s", self.instance, self._dest, elapsed_ms,
                 'unknown' if result.downtime_ms is None
                 else result.downtime_ms,
                 ' (post-copy)' if self._post_copy else
                 ' (paused to converge)' if self._paused else '')
        return result


def _progress(stats):
    return driver.MigrationProgress(
        memory_total=stats.get('memory_total', 0),
        memory_processed=stats.get('memory_processed', 0),
        memory_remaining=stats.get('memory_remaining', 0),
        disk_total=stats.get('disk_total', 0),
        disk_processed=stats.get('disk_processed', 0),
        disk_remaining=stats.get('disk_remaining', 0),
        dirty_rate=stats.get('memory_dirty_rate', 0),
        iteration=stats.get('memory_iteration', 0),
        elapsed_ms=stats.get('time_elapsed', 0))


def engine_sample(stats):
    """The policy engine's Sample of one jobStats() dict. libvirt gives
    the dirty rate in pages per second (memory_dirty_rate) and the page
    size apart (memory_page_size); the engine reads bytes."""
    page = stats.get('memory_page_size') or 4096
    return convergence.Sample(
        iteration=stats.get('memory_iteration', 0),
        remaining=stats.get('memory_remaining', 0),
        dirty_rate=stats.get('memory_dirty_rate', 0) * page,
        bandwidth=stats.get('memory_bps', 0))


def backoff(first, cap):
    """Delays from ``first``, doubling, then ``cap`` for ever."""
    delay = min(first, cap)
    while True:
        yield delay
        delay = min(delay * 2, cap)
