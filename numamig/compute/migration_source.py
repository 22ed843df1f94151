"""The source's side of a live migration: prepare, migrate, converge.

The conductor casts ``live_migration`` to the source once a destination
holds a claim. The source then walks the statuses preparing -> running ->
post-migrating -> completed, recording each through the conductor:

* preparing: the destination's pre_live_migration; the domain XML the
  destination should run is built, with the NUMA parts rewritten from
  ``dst_numa_info`` when the destination sent it;
* running: the hypervisor migrates (progress goes into the Migration
  record), or, where it cannot (libvirt test driver), the destination
  defines the XML and the source then forgets the guest (EMULATED);
* post-migrating: the destination adopts the guest (its claim becomes
  the instance's usage) and the source drops the guest's usage.

The result of the run (how long it took, the guest's downtime, whether
it was emulated or forced to converge) goes to the conductor with the
status change that follows it: ``post-migrating`` after a run that
moved the guest, the final status after one that failed partway (then
only what the source measured itself: its length and the last progress
sample).

Before the guest has left the source, any failure rolls back: the
destination drops what it prepared and claimed, the guest keeps running
here with its old placement, and the migration ends ``failed`` (or
``cancelled`` after an abort). After that point nothing is undone: the
migration ends ``error`` and the next reconciliation sorts it out.
"""

import logging
import threading
import time

import oslo_messaging as messaging

from numamig import exception
from numamig.compute import releases
from numamig.compute import report
from numamig.objects import fields

LOG = logging.getLogger(__name__)
STATUS = fields.MigrationStatus

# Progress is written to the Migration record at most this often.
PROGRESS_INTERVAL_S = 1.0
# A status change whose answer is lost (the conductor worker died with
# it) is sent again this many times: another worker answers.
STATUS_ATTEMPTS = 3


def check_source(agent, ctxt, instance, dest_check_data):
    """Confirm the guest runs here and set the source's NUMA flag.

    :returns: the migrate data for the destination, in the version the
        destination sent (so an older destination can read it).
    :raises MigrationPreCheckError: the guest is not on this host.
    """
    if instance.uuid not in agent.driver.list_guests():
        raise exception.MigrationPreCheckError(
            reason=f"instance {instance.uuid} is not running on source "
                   f"host {agent.host}")
    migrate_data = dest_check_data.obj_clone()
    if agent.numa_live_migration:
        migrate_data.src_supports_numa_live_migration = bool(
            dest_check_data.get('dst_supports_numa_live_migration') and
            agent.compute_api.supports_numa_live_migration())
    return releases.backported(migrate_data, dest_check_data.VERSION)


class SourceMigration:
    """One outgoing live migration, run in the thread of the cast."""

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

    @property
    def numa_path(self):
        return self.migrate_data.get('dst_numa_info') is not None and \
            bool(self.migrate_data.get('src_supports_numa_live_migration'))

    def run(self):
        """Carry out the migration; never raises (the caller is a cast)."""
        try:
            if not self._set_status(STATUS.PREPARING):
                self._rollback("cancelled before it started", aborted=True)
                return
            dest_xml = self._prepare()
            self._check_abort()
            if not self._set_status(STATUS.RUNNING):
                self.abort_requested.set()
                self._check_abort()
            self._migrate(dest_xml)
        except Exception as exc:
            if self.left_source:
                self._fail_after_leaving(exc)
            else:
                LOG.warning("%s: migration %s of %s failed: %s",
                            self.agent.host, self.migration.uuid,
                            self.instance.uuid, exc)
                self._rollback(str(exc), aborted=self.abort_requested.is_set())
            return
        try:
            self._post()
        except Exception as exc:
            self._fail_after_leaving(exc)

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
        agent = self.agent
        self.migrate_data = agent.compute_api.pre_live_migration(
            self.ctxt, self.instance, self.migrate_data)
        numa_info = self.migrate_data.dst_numa_info if self.numa_path \
            else None
        if numa_info is None and self.instance.get('numa_topology') and \
                agent.numa_live_migration:
            releases.log_old_path(
                agent.host, self.migration.uuid, releases.OLD_PATH_XML,
                f"destination {self.migration.dest_host} sent no NUMA "
                f"objects; the XML of NUMA instance {self.instance.uuid} "
                f"is copied unchanged, its pins not recomputed",
                level=logging.WARNING)
        return agent.driver.get_destination_xml(self.instance.uuid,
                                                numa_info)

    def _migrate(self, dest_xml):
        agent = self.agent
        if agent.driver.supports_native_migration:
            self._run_started = time.monotonic()
            result = agent.driver.live_migrate(
                self.instance.uuid, dest_xml, self.migrate_data,
                progress_callback=self._progress)
            self.left_source = True
            self.result = self._reported(result and result.as_dict(),
                                         emulated=False)
            return
        self._check_abort()
        self._run_started = time.monotonic()
        result = agent.compute_api.accept_emulated_migration(
            self.ctxt, self.instance, self.migration, dest_xml)
        # The destination runs the guest now; an abort would lose it.
        self.left_source = True
        self.result = self._reported(result, emulated=True)
        agent.driver.destroy(self.instance.uuid)

    def _reported(self, result, emulated):
        """The run's result to report: the driver's, or (from a driver
        or destination that gave none) what this source measured."""
        if isinstance(result, dict) and result:
            return dict(result)
        return self._measured(emulated)

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

    def _progress(self, sample):
        self._last_sample = sample
        now = time.monotonic()
        if now - self._last_progress < PROGRESS_INTERVAL_S:
            return
        self._last_progress = now
        try:
            self.agent.conductor.migration_update_progress(
                self.ctxt, self.migration.uuid, sample.as_dict())
        except Exception as exc:  # progress is advisory
            LOG.debug("progress of %s not recorded: %s",
                      self.migration.uuid, exc)

    def _post(self):
        agent = self.agent
        self._set_status(STATUS.POST_MIGRATING, result=self.result)
        agent.compute_api.post_live_migration_at_destination(
            self.ctxt, self.instance, self.migration)
        if self.numa_path:
            agent.tracker.drop_instance(self.instance.uuid)
            report.send_now(agent, self.ctxt,
                            f"the departure of {self.instance.uuid}")
        elif agent.numa_live_migration:
            # The periodic recompute drops it once the records say the
            # instance lives elsewhere, as the release before relied on.
            releases.log_old_path(
                agent.host, self.migration.uuid,
                releases.OLD_PATH_SOURCE_DROP,
                "left to the next usage recompute")
        self._set_status(STATUS.COMPLETED)
        LOG.info("%s: migration %s of %s to %s completed", agent.host,
                 self.migration.uuid, self.instance.uuid,
                 self.migration.dest_host)

    def _rollback(self, reason, aborted):
        agent = self.agent
        for step in (self._rollback_destination, self._drop_dest_claim):
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

    def _set_status(self, status, error=None, result=None):
        """Record a status (with the run's ``result`` if given); False if
        the migration may not move there.

        A request whose answer times out is sent again: if the first one
        was recorded before its conductor worker died, the migration is
        already in ``status``, which counts as done.
        """
        for attempt in range(1, STATUS_ATTEMPTS + 1):
            try:
                self.migration = self.agent.conductor.migration_set_status(
                    self.ctxt, self.migration.uuid, status, error=error,
                    result=result)
                return True
            except exception.InvalidMigrationResult as exc:
                # A result the record cannot hold must not cost the
                # status change: the guest moved (or did not) regardless.
                LOG.error("%s: %s; recording status %s without it",
                          self.agent.host, exc, status)
                result = None
                continue
            except exception.InvalidStatusTransition as exc:
                current = self.agent.conductor.migration_get(
                    self.ctxt, self.migration.uuid)
                if attempt > 1 and current.status == status:
                    self.migration = current
                    return True
                LOG.warning("%s: migration %s: %s", self.agent.host,
                            self.migration.uuid, exc)
                return False
            except messaging.MessagingTimeout:
                if attempt == STATUS_ATTEMPTS:
                    raise
                LOG.warning("%s: migration %s: no answer recording status "
                            "%s (attempt %d); asking again",
                            self.agent.host, self.migration.uuid, status,
                            attempt)
        return False
