"""The conductor's live-migration task: choose a destination, claim, start.

Read ``_execute`` top to bottom: each ``_check_*`` step either passes or
raises an error an operator can act on. The migration is recorded as
``accepted`` before the task runs; the task tries destinations (the
requested one, or the scheduler's candidates best first), asking each to
check and claim, moves on after a refusal or a timeout up to
``migrate_max_retries`` further candidates, then records ``queued`` and
casts the migration to the source, which drives it from there.

If no destination takes the guest the migration ends ``error`` with the
reason of every host tried, and nothing stays claimed or reserved.
"""

import logging

import oslo_messaging as messaging

from numamig import exception
from numamig.compute import claims as compute_claims
from numamig.conductor import records
from numamig.conductor.tasks import base
from numamig.db import migrations
from numamig.objects import fields
from numamig.objects import service as service_obj

LOG = logging.getLogger(__name__)
STATUS = fields.MigrationStatus

# Errors after which the next candidate is tried.
_REFUSALS = (exception.MigrationPreCheckError, exception.ComputeHostDown,
             exception.ReservationConflict, exception.HostNotFound,
             messaging.MessagingTimeout)


class LiveMigrationTask(base.TaskBase):
    """Choose, claim and start one recorded (``accepted``) migration."""

    def __init__(self, ctxt, conductor, instance, migration):
        super().__init__(ctxt, conductor)
        self.instance = instance
        self.migration = migration
        self.request = None
        self.pagesize_kb = None
        self.refused = {}
        # The answer of the destination that took the guest, once one did.
        self.migrate_data = None

    def _execute(self):
        hosts = self._check_and_choose()
        self.migrate_data = self._claim_on_first_taker(hosts)
        self._queue(self.migrate_data)
        return self.migration

    def _check_and_choose(self):
        """The checks and the ordered destinations (shared by dry runs)."""
        self._check_instance_on_source()
        self._check_source_up()
        self.request = compute_claims.numa_request(self.instance)
        self.pagesize_kb = compute_claims.source_page_size(self.instance)
        self._check_numa_live_migration_supported()
        if self.migration.requested_host:
            return [self._check_requested_destination()]
        return self._scheduled_destinations()

    def rollback(self, exc):
        """Record ``error`` with every host's reason; release claims."""
        reason = str(exc)
        if self.refused:
            reason += " (refused: " + "; ".join(
                f"{h}: {r}" for h, r in self.refused.items()) + ")"
        try:
            records.set_status(self.conductor, self.migration.uuid,
                               STATUS.ERROR, error=reason,
                               detail="no destination could be prepared")
        except exception.InvalidStatusTransition:
            # Cancelled meanwhile; its claims were released then.
            return
        if self.migrate_data is not None and \
                self.migrate_data.get('dst_numa_info') is not None:
            # A destination claimed, then the start failed: it holds the
            # claim in memory until told.
            records.drop_claim_at(self.conductor, self.ctxt, self.migration,
                                  self.migration.dest_host)

    # -- checks ------------------------------------------------------------

    def _check_instance_on_source(self):
        if self.instance.host != self.migration.source_host:
            raise exception.MigrationError(
                reason=f"instance {self.instance.uuid} runs on "
                       f"{self.instance.host}, not on the migration's source "
                       f"{self.migration.source_host}")

    def _check_source_up(self):
        self.conductor.cache.check_up(self.migration.source_host)

    def _check_numa_live_migration_supported(self):
        if self.instance.get('numa_topology') is None or \
                not self.conductor.release.numa_live_migration:
            # A conductor of the release before had no such check: it
            # copied the XML of every guest.
            return
        version = service_obj.NUMA_LIVE_MIGRATION_VERSION
        old = sorted(s.host for s in self.conductor.cache.host_states()
                     if s.report.service_version < version)
        if not old:
            return
        if not self.conductor.enable_numa_live_migration_workaround:
            raise exception.NUMALiveMigrationUnsupported(
                instance_uuid=self.instance.uuid, hosts=', '.join(old),
                version=version)
        LOG.warning("Live-migrating NUMA instance %s while hosts %s are "
                    "older than NUMA-aware live migration ([workarounds] "
                    "enable_numa_live_migration): migrations touching them "
                    "copy the XML verbatim", self.instance.uuid,
                    ', '.join(old))

    def _check_requested_destination(self):
        host = self.migration.requested_host
        if host == self.migration.source_host:
            raise exception.InvalidDestination(
                host=host, instance_uuid=self.instance.uuid,
                reason="it is the instance's source host")
        state = self.conductor.cache.check_up(host)
        source = self.conductor.cache.get(self.migration.source_host)
        if state.hypervisor_type != source.hypervisor_type:
            raise exception.InvalidDestination(
                host=host, instance_uuid=self.instance.uuid,
                reason=f"its hypervisor type {state.hypervisor_type} "
                       f"differs from the source's "
                       f"{source.hypervisor_type}")
        return host

    def _scheduled_destinations(self):
        selection = self.conductor.scheduler.select_destinations(
            self.request, self.migration.source_host,
            limits=self.conductor.limits, pagesize_kb=self.pagesize_kb)
        refusals = selection.refusals()
        refusals.pop(self.migration.source_host, None)
        self.refused.update(refusals)
        if not selection.candidates:
            raise selection.no_valid_host()
        return selection.hosts

    # -- claiming ------------------------------------------------------------

    def _claim_on_first_taker(self, hosts):
        retries = self.conductor.migrate_max_retries
        attempts = hosts if retries < 0 else hosts[:retries + 1]
        for host in attempts:
            try:
                return self._try_destination(host)
            except _REFUSALS as exc:
                reason = _reason_of(exc, self.conductor.check_timeout)
                LOG.info("Migration %s: %s refused instance %s: %s",
                         self.migration.uuid, host, self.instance.uuid,
                         reason)
                self.refused[host] = reason
                self.conductor.cache.release(host, self.instance.uuid)
                if isinstance(exc, messaging.MessagingTimeout):
                    # It may still claim after we stopped waiting.
                    records.drop_claim_at(self.conductor, self.ctxt,
                                          self.migration, host)
                self._record_refusal(host, reason)
        skipped = len(hosts) - len(attempts)
        raise exception.NoValidHost(
            reason=f"{len(attempts)} destination(s) tried for instance "
                   f"{self.instance.uuid}, none could take it"
                   + (f" ({skipped} more not tried: migrate_max_retries is "
                      f"{retries})" if skipped else ''))

    def _try_destination(self, host):
        if self.request is not None and not self.migration.requested_host:
            self.conductor.scheduler.reserve(
                host, self.instance.uuid, self.instance.project_id,
                self.request, limits=self.conductor.limits,
                pagesize_kb=self.pagesize_kb)
        else:
            self.conductor.cache.check_up(host)
        self.migration = migrations.set_dest_host(
            self.conductor.db, self.migration.uuid, host)
        return self.conductor.compute_api.check_can_live_migrate_destination(
            self.ctxt, self.instance, host, self.migration,
            self.conductor.limits, timeout=self.conductor.check_timeout)

    def _record_refusal(self, host, reason):
        # Raises MigrationNotInProgress if the migration was cancelled
        # meanwhile, which ends the task.
        migrations.add_refused_host(self.conductor.db, self.migration.uuid,
                                    host, reason)

    def _queue(self, migrate_data):
        try:
            self.migration = records.set_status(
                self.conductor, self.migration.uuid, STATUS.QUEUED,
                expected=[STATUS.ACCEPTED],
                detail=f"destination {self.migration.dest_host} claimed")
        except exception.InvalidStatusTransition:
            # Cancelled meanwhile: drop the claim, if one was taken (an
            # old destination has neither a claim nor the drop method).
            if migrate_data.get('dst_numa_info') is not None:
                self.conductor.compute_api.drop_move_claim_at_destination(
                    self.ctxt, self.instance, self.migration)
            raise
        self.conductor.compute_api.live_migration(
            self.ctxt, self.instance, self.migration, migrate_data)


def _reason_of(exc, timeout):
    if isinstance(exc, messaging.MessagingTimeout):
        return f"did not answer within {timeout} s"
    return str(exc)
