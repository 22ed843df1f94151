"""The source's side of a live migration: prepare, migrate, converge.

The conductor casts ``live_migration`` to the source once a destination
holds a recorded claim; the agent runs it in its bounded migration
executor (the cast's RPC thread returns at once). The source then
records, through the conductor, as few status changes as the conductor
allows:

* with the conductor's records API (release 2): ``running`` once the
  destination's pre_live_migration answered, and ``completed`` with the
  run's result and the claim applied, in one call and one transaction, once the
  destination counts the guest (post_live_migration_at_destination with
  records_by_source);
* with an older (or capped) conductor, the walk before 1.3: preparing ->
  running -> post-migrating (with the run's result; the destination
  applies the claim) -> completed.

What each step does:

* prepare: the destination's pre_live_migration; the domain XML the
  destination should run is built, with the NUMA parts rewritten from
  ``dst_numa_info`` when the destination sent it;
* run: the hypervisor migrates (progress goes into the Migration record
  by cast), or, where it cannot (libvirt test driver), the destination
  defines the XML and the source then forgets the guest (EMULATED);
* converge: the destination adopts the guest (its claim becomes the
  instance's usage) and the source drops the guest's usage.

Before the guest has left the source, any failure rolls back: the
destination drops what it prepared and claimed, the guest keeps running
here with its old placement, and the migration ends ``failed`` (or
``cancelled`` after an abort). A post-copy whose stream broke and could
not be resumed waits ``postcopy-paused`` (numamig.compute.postcopy_paused).
After that point nothing is undone: the
destination's and the conductor's answers are waited for again (their
requests are idempotent), then the migration ends ``error`` and the next
reconciliation sorts it out; a crash of any service then still ends
``completed`` (see reconcile.py).
"""

import threading
import time

from oslo_log import log as logging
import oslo_messaging as messaging

from numamig import exception
from numamig import releases
from numamig.compute import completion
from numamig.compute import devices
from numamig.compute import events
from numamig.compute import migration_threads
from numamig.compute import patience
from numamig.compute import report
from numamig.convergence import policy as convergence
from numamig.objects import fields

LOG = logging.getLogger(__name__)
# Where a request to the destination's wait comes from, for its error.
_TRIES_OPTION = (f"one of {patience.ATTEMPTS} tries, growing shares of "
                 f"{patience.ATTEMPTS} thirds of [DEFAULT] "
                 f"rpc_response_timeout")
STATUS = fields.MigrationStatus
# Statuses only the source's run of a migration records (see _set_status).
_SOURCE_ONLY = (STATUS.PREPARING, STATUS.RUNNING)

# Progress is written to the Migration record at most this often.
PROGRESS_INTERVAL_S = 1.0


def check_source(agent, ctxt, instance, dest_check_data):
    """Confirm the guest runs here and set the source's NUMA flag.

    :returns: the migrate data for the destination, in the version the
        destination sent (so an older destination can read it).
    :raises MigrationPreCheckError: the guest is not on this host.
    """
    check_guest_here(agent, instance)
    devices.check_source(agent, instance)
    migrate_data = dest_check_data.obj_clone()
    migrate_data.src_supports_numa_live_migration = bool(
        dest_check_data.get('dst_supports_numa_live_migration') and
        agent.compute_api.supports_numa_live_migration())
    migrate_data.set_guest_cpu(_guest_cpu(agent, instance))
    return releases.backported(migrate_data, dest_check_data.VERSION)


def _guest_cpu(agent, instance):
    """The guest's CPU for the destinations' checks; None (no check)
    when it cannot be read, which must not stop a migration that
    release 1 would have run."""
    try:
        return agent.driver.guest_cpu(instance.uuid)
    except Exception as exc:  # noqa: BLE001 - advisory, logged
        LOG.warning("%s: CPU of %s unread, destinations will not check "
                    "it: %s", agent.host, instance.uuid, exc)
        return None


def check_guest_here(agent, instance):
    """:raises MigrationPreCheckError: the guest is not on this host."""
    if instance.uuid not in agent.driver.list_guests():
        raise exception.MigrationPreCheckError(
            reason=f"instance {instance.uuid} is not running on source "
                   f"host {agent.host}")


def choose_policy(driver, instance, requested=None):
    """(Policy, where its name came from) of a migration of
    ``instance`` from this host: ``requested``, else the flavor's, the
    image's, or the host's default.

    :raises UnknownMigrationPolicy:
    """
    return driver.select_migration_policy(
        requested,
        (instance.get('extra_specs') or {}).get(convergence.FLAVOR_KEY),
        (instance.get('image_properties') or {}).get(convergence.IMAGE_KEY))


def _with_copy(accepted, copy):
    """An emulated run's result: the modelled copy's (a MigrationResult,
    or None where none was modelled) with the destination's define and
    start (a dict, or None from an older destination) added to its time.
    """
    if copy is None:
        return accepted
    result = copy.as_dict()
    if isinstance(accepted, dict) and accepted.get('elapsed_ms'):
        result['elapsed_ms'] += accepted['elapsed_ms']
    return result


class SourceMigration:
    """One outgoing live migration, run in the agent's migration executor."""

    def __init__(self, agent, ctxt, instance, migration, migrate_data):
        self.agent = agent
        self.ctxt = ctxt
        self.instance = instance
        self.migration = migration
        self.migrate_data = migrate_data
        self.abort_requested = threading.Event()
        self.left_source = False
        self._last_progress = 0.0
        # Set once the run starts: its monotonic start, its last progress
        # sample, and how it ended (a MigrationResult dict).
        self._run_started = None
        self._last_sample = None
        self.result = None
        # The post-copy recovery history, once the stream broke in
        # post-copy (numamig.virt.libvirt.postcopy).
        self._recovery = None
        # The statuses this run recorded itself.
        self._recorded = set()
        # The passed-through devices unplugged before the copy.
        self.devices = devices.SourceDevices(agent, instance, migration)

    @property
    def numa_path(self):
        return self.migrate_data.get('dst_numa_info') is not None and \
            bool(self.migrate_data.get('src_supports_numa_live_migration'))

    def run(self):
        """Carry out the migration; never raises (the caller is a cast)."""
        try:
            short = self.agent.conductor_api.supports_short_path()
            if not short and not self._set_status(STATUS.PREPARING):
                if not self._driven_elsewhere():
                    self._rollback("cancelled before it started",
                                   aborted=True)
                return
            dest_xml = self._prepare()
            self._check_abort()
            if not self._record_running(short):
                self.abort_requested.set()
                self._check_abort()
            # The destination holds its claim (devices included): the
            # guest lets go of this host's devices before the copy.
            self.devices.unplug()
            self._check_abort()
            self._migrate(dest_xml)
        except exception.PostCopyPaused as exc:
            self._end_paused(exc)
            return
        except Exception as exc:
            if self.left_source:
                self._fail_after_leaving(exc)
            elif not self._driven_elsewhere():
                LOG.warning("%s: migration %s of %s failed: %s",
                            self.agent.host, self.migration.uuid,
                            self.instance.uuid, exc)
                self._rollback(str(exc), aborted=self.abort_requested.is_set())
            return
        try:
            self._post()
        except Exception as exc:
            self._fail_after_leaving(exc)

    def _record_running(self, short):
        """queued -> running in one step where the conductor can (1.3)."""
        if short:
            try:
                return self._set_status(STATUS.RUNNING,
                                        send=self._send_running)
            except messaging.UnsupportedVersion:
                LOG.info("%s: the conductor serves release 1's API only; "
                         "migration %s records preparing first",
                         self.agent.host, self.migration.uuid)
            if not self._set_status(STATUS.PREPARING):
                return False
        return self._set_status(STATUS.RUNNING)

    def _send_running(self, status, error=None, result=None, timeout=None):
        return self.agent.conductor_api.migration_set_running(
            self.ctxt, self.migration.uuid, timeout=timeout)

    def _driven_elsewhere(self):
        """Whether another run drove this migration past where this one
        stopped: this run came from a repeated start request (a
        redelivered cast) and must undo nothing (the guest may run on the
        destination by now). Asked only when this run fails or is refused
        before it recorded ``running``.
        """
        if STATUS.RUNNING in self._recorded:
            return False
        try:
            current = self.agent.conductor_api.migration_get(
                self.ctxt, self.migration.uuid)
        except Exception as exc:  # noqa: BLE001 - roll back as before
            LOG.warning("%s: migration %s: status unknown (%s)",
                        self.agent.host, self.migration.uuid, exc)
            return False
        moved_on = STATUS.STARTED + (STATUS.COMPLETED,)
        if current.status not in moved_on or \
                current.status in self._recorded:
            return False
        LOG.info("%s: migration %s is %s: this start request is a "
                 "repeated one and is ignored", self.agent.host,
                 self.migration.uuid, current.status)
        return True

    def abort(self):
        """Ask the migration to stop; it rolls back if not too late.

        :returns: False once the guest has left the source.
        """
        if self.left_source:
            return False
        self.abort_requested.set()
        if self.agent.driver.supports_native_migration:
            try:
                self.agent.driver.live_migration_abort(self.instance.uuid)
            except exception.NumamigException as exc:
                LOG.info("%s: abort of %s: %s", self.agent.host,
                         self.migration.uuid, exc)
        return True

    def _check_abort(self):
        if self.abort_requested.is_set():
            raise exception.MigrationError(
                reason=f"migration {self.migration.uuid} aborted by request")

    def _prepare(self):
        """The destination's pre_live_migration, asked in
        patience.ATTEMPTS growing shares of [DEFAULT]
        rpc_response_timeout.

        A broker restart loses the reply queue with any answer in it, and
        a destination agent killed holding the request never answers: the
        request is idempotent (the claim is only checked, the watch of
        incoming threads starts once), so it is simply sent again and the
        migration goes on after the first, short share instead of failing
        with a reason that blames the destination.
        """
        agent = self.agent

        def ask(timeout):
            self._check_abort()
            return agent.compute_api.pre_live_migration(
                self.ctxt, self.instance, self.migrate_data,
                timeout=timeout, timeout_option=_TRIES_OPTION)

        try:
            self.migrate_data = completion.retried(
                agent, self.migration,
                f"from destination {self.migration.dest_host} "
                f"(pre_live_migration)", ask)
        except messaging.MessagingTimeout as exc:
            # The record must say what happened, not a message ID.
            raise exception.MigrationError(
                reason=f"destination {self.migration.dest_host} did not "
                       f"answer pre_live_migration in "
                       f"{patience.ATTEMPTS} tries (its agent stopped or "
                       f"restarted, or is stuck): "
                       f"{exception.brief(exc)}") from exc
        numa_info = self.migrate_data.dst_numa_info if self.numa_path \
            else None
        if numa_info is None and self.instance.get('numa_topology'):
            agent.flows.log_old_path(
                agent.host, self.migration.uuid, releases.OLD_PATH_XML,
                f"destination {self.migration.dest_host} sent no NUMA "
                f"objects; the XML of NUMA instance {self.instance.uuid} "
                f"is copied unchanged, its pins not recomputed",
                level=logging.WARNING)
        return agent.driver.get_destination_xml(self.instance.uuid,
                                                numa_info)

    def _migrate(self, dest_xml):
        agent = self.agent
        policy = self._policy()
        if agent.driver.supports_native_migration:
            # An abort that came once ``running`` was recorded may find
            # no hypervisor job yet: the driver honours the event itself.
            self._check_abort()
            self._run_started = time.monotonic()
            result = agent.driver.live_migrate(
                self.instance.uuid, dest_xml, self.migrate_data,
                progress_callback=self._progress, policy=policy,
                recovery_callback=self._recovery_report,
                abort_requested=self.abort_requested,
                threads=migration_threads.for_source(
                    agent, self.ctxt, self.instance, self.migration.uuid),
                action_callback=self._action_teller(policy))
            self.left_source = True
            self.result = self._reported(result and result.as_dict(),
                                         emulated=False)
            return
        self._check_abort()
        self._run_started = time.monotonic()
        copy = agent.driver.emulate_copy(self.instance.uuid, policy,
                                         self._progress,
                                         self._action_teller(policy))
        if copy is not None and self._last_sample is not None:
            self._progress(self._last_sample, force=True)
        self._check_abort()
        result = self._accept_emulated(dest_xml)
        # The destination runs the guest now; an abort would lose it.
        self.left_source = True
        self.result = self._reported(_with_copy(result, copy),
                                     emulated=True)
        agent.driver.destroy(self.instance.uuid)

    def _action_teller(self, policy):
        """The driver's action callback: each policy action goes to the
        agent's event listeners as it happens."""
        def tell(action, outcome, line):
            self.agent.events.emit(events.POLICY_ACTION, events.PolicyAction(
                migration_uuid=self.migration.uuid,
                instance_uuid=self.instance.uuid,
                source_host=self.agent.host,
                dest_host=self.migration.dest_host, policy=policy.name,
                kind=action.kind, outcome=outcome, line=line))
        return tell

    def _accept_emulated(self, dest_xml):
        """The destination's accept_emulated_migration, asked in
        patience.ATTEMPTS growing shares of [DEFAULT] rpc_response_timeout.

        A destination agent killed holding the request never answers it;
        its restarted agent answers the next try (the request is
        idempotent: a guest defined by the lost one is left as it is),
        so the migration goes on after the first share (10 s with the
        defaults) instead of failing after the whole timeout.
        """
        return completion.retried(
            self.agent, self.migration,
            f"from destination {self.migration.dest_host} "
            f"(accept_emulated_migration)",
            lambda timeout: self.agent.compute_api.accept_emulated_migration(
                self.ctxt, self.instance, self.migration, dest_xml,
                timeout=timeout, timeout_option=_TRIES_OPTION))

    def _policy(self):
        """The convergence Policy to run under: the conductor's choice
        (LiveMigrateData 1.1), else the flavor's, the image's, or this
        host's default (as a source chose before conductors chose).

        :raises UnknownMigrationPolicy: this host does not know it (the
            hosts' [libvirt] live_migration_policies differ).
        """
        requested = self.migrate_data.get('convergence_policy') \
            if 'convergence_policy' in self.migrate_data.fields else None
        policy, where = choose_policy(self.agent.driver, self.instance,
                                      requested)
        LOG.info("%s: migration %s of %s runs under convergence policy %s "
                 "(%s)", self.agent.host, self.migration.uuid,
                 self.instance.uuid, policy.name, where)
        return policy

    def _reported(self, result, emulated):
        """The run's result to report: the driver's, or (from a driver
        or destination that gave none) what this source measured.

        A post-copy recovery history is reported only where there is one:
        a conductor of release 1 refuses a result naming it.
        """
        if isinstance(result, dict) and result:
            result = dict(result)
            if result.get('postcopy_recovery') is None:
                result.pop('postcopy_recovery', None)
            return result
        return self._measured(emulated)

    def _recovery_report(self, history):
        """Tell the conductor how the post-copy recovery goes, each time
        its history grows (the guest is paused meanwhile)."""
        self._recovery = history
        completion.record_recovery(self.agent, self.ctxt, self.migration,
                                   history)

    def _end_paused(self, exc):
        """The post-copy could not be resumed: recorded postcopy-paused,
        both claims kept (numamig.compute.postcopy_paused)."""
        from numamig.compute import postcopy_paused
        postcopy_paused.end_paused(self, exc)

    def _measured(self, emulated):
        """What the source knows of a run by itself: its length and the
        last progress sample; None if no run started."""
        if self._run_started is None:
            return None
        elapsed_ms = int((time.monotonic() - self._run_started) * 1000)
        sample = self._last_sample
        return {'emulated': emulated, 'elapsed_ms': elapsed_ms,
                'downtime_ms': None,
                'memory_total': sample.memory_total if sample else None,
                'memory_processed':
                    sample.memory_processed if sample else None,
                'post_copy': None, 'paused': None}

    def _progress(self, sample, force=False):
        self._last_sample = sample
        now = time.monotonic()
        if not force and now - self._last_progress < PROGRESS_INTERVAL_S:
            return
        self._last_progress = now
        try:
            self.agent.conductor_api.migration_update_progress(
                self.ctxt, self.migration.uuid, sample.as_dict())
        except Exception as exc:  # progress is advisory
            LOG.debug("progress of %s not recorded: %s",
                      self.migration.uuid, exc)

    def _post(self):
        agent = self.agent
        if not self.numa_path:
            # The periodic recompute drops it once the records say the
            # instance lives elsewhere, as the release before relied on.
            agent.flows.log_old_path(
                agent.host, self.migration.uuid,
                releases.OLD_PATH_SOURCE_DROP,
                "left to the next usage recompute")
        self.migration = self._complete_recorded()
        if self.numa_path:
            report.request(agent, f"the departure of {self.instance.uuid}")
        LOG.info("%s: migration %s of %s to %s completed", agent.host,
                 self.migration.uuid, self.instance.uuid,
                 self.migration.dest_host)

    def _complete_recorded(self):
        """``complete`` (whose steps are each asked again while
        unanswered); a result the record cannot hold must not cost the
        completion."""
        try:
            return completion.complete(self.agent, self.ctxt, self.instance,
                            self.migration, result=self.result,
                            drop_usage=self.numa_path)
        except exception.InvalidMigrationResult as exc:
            LOG.error("%s: %s; completing without it", self.agent.host, exc)
            self.result = None
        return completion.complete(self.agent, self.ctxt, self.instance,
                        self.migration, drop_usage=self.numa_path)

    def _rollback(self, reason, aborted):
        agent = self.agent
        for step in (self.devices.replug, self._rollback_destination,
                     self._drop_dest_claim):
            try:
                step()
            except Exception as exc:
                LOG.error("%s: rollback of migration %s: %s", agent.host,
                          self.migration.uuid, exc)
        final = STATUS.CANCELLED if aborted else STATUS.FAILED
        self._set_status(final, error=reason, result=self._measured(
            not self.agent.driver.supports_native_migration))

    def _rollback_destination(self):
        self.agent.compute_api.rollback_live_migration_at_destination(
            self.ctxt, self.instance, self.migration)

    def _drop_dest_claim(self):
        if self.migrate_data.get('dst_numa_info') is not None:
            self.agent.compute_api.drop_move_claim_at_destination(
                self.ctxt, self.instance, self.migration)

    def _fail_after_leaving(self, exc):
        if isinstance(exc, messaging.MessagingTimeout):
            # A peer or the conductor did not answer: the guest runs on
            # the destination, so the migration must complete, not fail.
            # It stays in progress; this agent's periodic reconciliation
            # (or the destination's start) finishes it.
            LOG.error("%s: migration %s of %s: no answer after the guest "
                      "left the source (%s); it is left %s for the "
                      "reconciliation to complete", self.agent.host,
                      self.migration.uuid, self.instance.uuid, exc,
                      self.migration.status)
            return
        LOG.error("%s: migration %s of %s failed after the guest left the "
                  "source: %s; the next start-up reconciliation of %s "
                  "completes it", self.agent.host, self.migration.uuid,
                  self.instance.uuid, exc, self.migration.dest_host)
        # The result again: the failure may have come before the
        # post-migrating change that carries it was recorded.
        self._set_status(STATUS.ERROR, error=f"after the guest left "
                                             f"{self.agent.host}: {exc}",
                         result=self.result)

    def _set_status(self, status, error=None, result=None, send=None):
        """Record a status (with the run's ``result`` if given); False if
        the migration may not move there.

        A request whose answer times out is sent again: if the first one
        was recorded before its conductor worker died, the migration is
        already in ``status``, which counts as done. So does a refusal to
        move to ``preparing`` or ``running`` from there, retried or not:
        oslo.messaging publishes a request again by itself when the
        connection breaks before the broker confirmed it (a broker
        restart), so the conductor can get this run's request twice and
        answer the second with the refusal; and only the source's one run
        of a migration (manager.live_migration registers it) records those
        two.

        :param send: how to send it (default: migration_set_status).
        """
        send = send or self._send_status
        asking = completion.asking(self.agent, self.migration,
                         f"recording status {status}")
        while True:
            try:
                self.migration = send(status, error=error, result=result,
                                      timeout=asking.timeout())
                self._recorded.add(status)
                return True
            except exception.InvalidMigrationResult as exc:
                # A result the record cannot hold must not cost the
                # status change: the guest moved (or did not) regardless.
                LOG.error("%s: %s; recording status %s without it",
                          self.agent.host, exc, status)
                result = None
            except exception.InvalidStatusTransition as exc:
                current = self.agent.conductor_api.migration_get(
                    self.ctxt, self.migration.uuid)
                if current.status == status and \
                        (asking.retried or status in _SOURCE_ONLY):
                    self.migration = current
                    self._recorded.add(status)
                    return True
                LOG.warning("%s: migration %s: %s", self.agent.host,
                            self.migration.uuid, exc)
                return False
            except patience.RETRIED as exc:
                asking.again(exc)

    def _send_status(self, status, error=None, result=None, timeout=None):
        return self.agent.conductor_api.migration_set_status(
            self.ctxt, self.migration.uuid, status, error=error,
            result=result, timeout=timeout)
