"""The conductor's RPC endpoints: thin, each delegating to records or tasks.

The conductor owns the database and the scheduler's host cache. Agents
record through it (records.py holds the rules that keep claims
consistent); operators start, follow and stop migrations and create or
adopt instances through it (tasks/).
"""

from oslo_log import log as logging
import oslo_messaging as messaging
from oslo_utils import timeutils

from numamig import context as nm_context
from numamig import exception
from numamig import releases
from numamig import wire
from numamig.conductor import drain_endpoints
from numamig.conductor import host_endpoints
from numamig.conductor import maintenance
from numamig.conductor import records
from numamig.conductor import recovery_endpoints
from numamig.conductor import requests
from numamig.conductor import restarts
from numamig.conductor import rpcapi as conductor_rpcapi
from numamig.conductor import threads_endpoints
from numamig.conductor import watch
from numamig.conductor import worker as worker_mod
from numamig.conductor.tasks import build
from numamig.conductor.tasks import drain_driver
from numamig.conductor.tasks import dry_run
from numamig.conductor.tasks import live_migrate
from numamig.conductor.tasks import resume
from numamig.db import compute_nodes
from numamig.db import instances
from numamig.db import migrations
from numamig.db import queue
from numamig.objects import fields
from numamig.objects import service as service_obj

LOG = logging.getLogger(__name__)
STATUS = fields.MigrationStatus

STATUS_KIND = wire.one_of(fields.MigrationStatus.ALL)

_EXPECTED = host_endpoints.EXPECTED


class ConductorManager(drain_endpoints.DrainEndpoints,
                        host_endpoints.HostEndpoints,
                        recovery_endpoints.RecoveryEndpoints,
                        threads_endpoints.ThreadsEndpoints):
    """The endpoints of a conductor worker.

    Only the methods declared with ``wire.args`` are callable over RPC.

    :param db: the numamig.db.api.Database.
    :param cache: the scheduler's HostStateCache.
    :param scheduler: the Scheduler choosing destinations.
    :param compute_api: the compute RPC client (capped by upgrade levels).
    :param settings: the worker's ConductorSettings
        (conductor.settings.from_conf).
    :param service_version: the release the conductor runs as (a testing
        aid): the release before NUMA-aware live migration had no check
        of the compute hosts' versions.
    """

    target = messaging.Target(version=conductor_rpcapi.ConductorAPI.VERSION)
    # Dispatch only to the methods declared with wire.args.
    wire_declared = True

    def __init__(self, db, cache, scheduler, compute_api, settings,
                 service_version=None):
        self.release = releases.for_service_version(
            service_version or service_obj.SERVICE_VERSION)
        self.db = db
        self.cache = cache
        self.compute_api = compute_api
        # What the flows get: never this manager, so that no flow can
        # call an endpoint or read what it was not given.
        self.worker = worker_mod.Worker(
            db=db, cache=cache, scheduler=scheduler, compute_api=compute_api,
            release=self.release, migration_ended=self.migration_ended,
            settings=settings,
            reports=worker_mod.ReportCursor(settings.report_writers))
        # The MigrationExecutor running admitted migrations, set by the
        # service once it starts (None: requests wait in the queue).
        self.executor = None
        self._end_listeners = []
        self.watch = watch.MigrationWatch(settings.migration_watchers)
        self.add_end_listener(self.watch.heard)
        # Drains (API 1.10): the service starts the driver's thread.
        self.drain_watch = drain_endpoints.make_watch(
            settings.migration_watchers)
        self.drains = drain_driver.DrainDriver(
            self.worker, self._wake_executor, self.drain_watch.heard)
        self.add_end_listener(self.drains.heard)
        # Since when this worker's stalled-migration sweeps have reached
        # the database without a break (None: not yet, or it failed).
        self._database_since = None

    @property
    def admission(self):
        """The queue.Limits migrations are admitted within."""
        return self.worker.settings.admission

    def load_reports(self):
        """Fill the cache from the stored reports (at start).

        Each report counts as received when it was made, so that a host
        that died with the previous conductor does not look up.
        """
        records.sync_reports(self.worker)

    def end_stalled_migrations(self, ctxt, resend_after=0):
        """End migrations a dead conductor worker (or a source that lost
        its cast) left behind, and send again the start requests of
        queued ones not changed for ``resend_after`` seconds (see
        restarts.py); at start (0: every queued one) and periodically.

        Leases count only once this worker has had the database for a
        whole lease: right after an outage (or this worker's start) no
        live worker may have renewed its leases yet.
        """
        now = timeutils.utcnow(with_timezone=True)
        executor = self.executor
        trusted = executor is not None and self._database_since is not None \
            and (now - self._database_since).total_seconds() >= \
            executor.lease_s
        try:
            ended = records.end_stalled_migrations(
                self.worker, ctxt, now, trust_leases=trusted,
                held=executor.held() if executor is not None else (),
                lease_s=executor.lease_s if executor is not None else 15)
        except exception.DatabaseError:
            self._database_since = None
            raise
        if self._database_since is None:
            self._database_since = now
        restarts.send_again(self.worker, ctxt, now, resend_after,
                            held=executor.held() if executor else ())
        return ended

    def requeue_after_database_error(self, migration_uuid):
        """Put back in the queue an admitted migration whose task failed
        because the database was unreachable (the executor calls it once
        the database may be back); see records.requeue_after_outage."""
        if records.requeue_after_outage(self.worker, migration_uuid) and \
                self.executor is not None:
            self.executor.wake()

    def end_after_outage(self, migration_uuid, waited_s):
        """End an admitted migration whose task waited for the database
        longer than ``[conductor] database_outage_wait`` (the executor
        calls it once the database answers again)."""
        records.end_after_outage(self.worker, migration_uuid, waited_s,
                                 "[conductor] database_outage_wait")

    @wire.args()
    def ping(self, ctxt):
        """Answer agents waiting for a conductor at their start, and
        every client asking which release the conductor runs: its
        service version, which caps the API versions clients send it
        (numamig.objects.service.SERVICE_VERSION_HISTORY). A conductor
        running as release 1 answers ``'pong'``, as that release did.

        Idempotent: a repeat reads only and gets the same answer.
        """
        if not self.release.numa_live_migration:
            return 'pong'
        return {'service_version': self.release.service_version}

    # -- compute agents -----------------------------------------------------

    @wire.args(report=wire.obj('ComputeNodeReport'))
    @messaging.expected_exceptions(*_EXPECTED)
    def report_compute_node(self, ctxt, report):
        """Store a host's report and feed it to the scheduler's cache.

        Idempotent: a repeat stores the same report again; one older than
        the stored report (delayed in transit) is ignored. Reports carry
        whole seconds, so two made within one second are not ordered.
        """
        records.save_report(self.worker, report)

    @wire.args(instance_uuid=wire.UUID)
    @messaging.expected_exceptions(*_EXPECTED)
    def instance_get(self, ctxt, instance_uuid):
        """Idempotent: a repeat reads only and gets the same answer."""
        return instances.get(self.db, instance_uuid).instance

    @wire.args(host=wire.HOST.or_none())
    @messaging.expected_exceptions(*_EXPECTED)
    def instance_get_all(self, ctxt, host=None):
        """Idempotent: a repeat reads only and gets the same answer."""
        return [r.instance for r in instances.get_all(self.db, host=host)]

    @wire.args(host=wire.HOST)
    @messaging.expected_exceptions(*_EXPECTED)
    def instance_get_claims_on_host(self, ctxt, host):
        """Idempotent: a repeat reads only and gets the same answer."""
        return [r.instance for r in
                instances.get_claims_on_host(self.db, host)]

    @wire.args(instance_uuid=wire.UUID, host=wire.HOST,
               numa_topology=wire.obj('InstanceNUMATopology').or_none())
    @messaging.expected_exceptions(*_EXPECTED)
    def instance_set_placement(self, ctxt, instance_uuid, host,
                               numa_topology):
        """Record where an instance runs and its placement there.

        Idempotent: a repeat finds it recorded and writes nothing (the
        revision stays).
        """
        return records.set_placement(self.worker, instance_uuid, host,
                                     numa_topology)

    @wire.args(instance_uuid=wire.UUID, values=wire.mapping(16))
    @messaging.expected_exceptions(*_EXPECTED)
    def instance_update(self, ctxt, instance_uuid, values):
        """Change an instance's power or task state.

        Idempotent: a repeat finds it recorded and writes nothing (the
        revision stays).
        """
        return records.update_instance(self.worker, instance_uuid, values)

    @wire.args(migration_uuid=wire.UUID)
    @messaging.expected_exceptions(*_EXPECTED)
    def migration_get(self, ctxt, migration_uuid):
        """Idempotent: a repeat reads only and gets the same answer."""
        return requests.get(self.db, migration_uuid)

    @wire.args(migration_uuid=wire.UUID, status=STATUS_KIND,
               memory_processed=wire.integer().or_none(),
               timeout=wire.number(0, 3600))
    @messaging.expected_exceptions(*_EXPECTED)
    def migration_wait(self, ctxt, migration_uuid, status, memory_processed,
                       timeout):
        """The migration once its status or progress differs from
        ``status`` and ``memory_processed`` (what the caller last saw),
        or after ``timeout`` seconds (at most watch.MAX_WAIT_S); see
        numamig.conductor.watch.

        Idempotent: a repeat reads only (a waiting one holds one of the
        limited watchers again).
        """
        def changed(migration):
            return (migration.status, migration.memory_processed) != \
                (status, memory_processed)
        return self.watch.wait(
            lambda: requests.get(self.db, migration_uuid),
            migration_uuid, changed, timeout)

    @wire.args(host=wire.HOST)
    @messaging.expected_exceptions(*_EXPECTED)
    def migration_get_in_progress_by_host(self, ctxt, host):
        """Idempotent: a repeat reads only and gets the same answer."""
        return migrations.get_in_progress_by_host(self.db, host)

    @wire.args(migration_uuid=wire.UUID, status=STATUS_KIND,
               detail=wire.TEXT.or_none(), error=wire.TEXT.or_none(),
               result=wire.mapping(32).or_none())
    @messaging.expected_exceptions(*_EXPECTED)
    def migration_set_status(self, ctxt, migration_uuid, status,
                             detail=None, error=None, result=None):
        """Record a status change (at API 1.3 a source moves a migration
        queued -> running in one step).

        Idempotent: a repeat is refused (InvalidStatusTransition) and
        changes nothing, as is a change that comes after the migration
        moved past it (running after it completed); a sender whose first
        request's answer was lost reads the status and counts it done
        (SourceMigration._set_status).
        """
        return records.set_status(self.worker, migration_uuid, status,
                                  detail=detail, error=error, result=result)

    @wire.args(migration_uuid=wire.UUID,
               result=wire.mapping(32).or_none(),
               detail=wire.TEXT.or_none())
    @messaging.expected_exceptions(*_EXPECTED)
    def migration_complete(self, ctxt, migration_uuid, result=None,
                           detail=None):
        """``completed``, the run's result and the applied claim, in one
        transaction (API 1.3).

        Idempotent: a repeat finds the migration completed and returns
        it, changing nothing.
        """
        return records.complete(self.worker, migration_uuid, result=result,
                                detail=detail)

    @wire.args(migration_uuid=wire.UUID, progress=wire.mapping(16))
    def migration_update_progress(self, ctxt, migration_uuid, progress):
        """Record a progress sample (a cast).

        Idempotent: a repeat records the same values; a sample older than
        the recorded one (less memory copied), or one that comes after the
        migration ended, is ignored.
        """
        fields_ = {k: v for k, v in progress.items()
                   if k in migrations.PROGRESS_FIELDS}
        migrations.update_progress(self.db, migration_uuid, **fields_)

    @wire.args(context=wire.obj('MigrationContext'))
    @messaging.expected_exceptions(*_EXPECTED)
    def migration_context_set(self, ctxt, context):
        """Record a destination's move claim (compute API 1.1 path).

        Idempotent: a repeat finds the claim recorded and writes nothing;
        one that comes after the migration ended or moved on to another
        destination is refused (MigrationPreCheckError), changing nothing.
        """
        records.set_migration_context(self.worker, context)

    @wire.args(instance_uuid=wire.UUID, migration_uuid=wire.UUID,
               dest_host=wire.HOST.or_none())
    @messaging.expected_exceptions(*_EXPECTED)
    def migration_context_drop(self, ctxt, instance_uuid, migration_uuid,
                               dest_host=None):
        """Drop a claim; with ``dest_host`` only the one held there.

        Idempotent: a repeat, or one after the claim was applied or
        replaced, finds nothing held and answers False.
        """
        return instances.drop_migration_context(
            self.db, instance_uuid, migration_uuid, claim_host=dest_host)

    @wire.args(instance_uuid=wire.UUID, migration_uuid=wire.UUID)
    @messaging.expected_exceptions(*_EXPECTED)
    def migration_context_apply(self, ctxt, instance_uuid, migration_uuid):
        """Make the claim the instance's placement and drop it.

        Idempotent: a repeat, or one after the claim was dropped, is refused
        (MigrationContextConflict) and changes nothing.
        """
        return instances.apply_migration_context(
            self.db, instance_uuid, migration_uuid).instance

    # -- operators ------------------------------------------------------------

    @wire.args(instance_uuid=wire.UUID, dest_host=wire.HOST.or_none(),
               priority=wire.integer(0, 100).or_none(),
               migration_uuid=wire.UUID.or_none(),
               policy=wire.text(64, "a convergence policy name (at most "
                                    "64 characters)").or_none())
    @messaging.expected_exceptions(*_EXPECTED)
    def live_migrate_instance(self, ctxt, instance_uuid, dest_host=None,
                              priority=None, migration_uuid=None,
                              policy=None):
        """Check, record and queue a migration; return at once.

        Only what can be checked without asking a host is checked here
        (the instance, its source, a requested destination, the specs);
        the migration then waits in the admission queue and a migration
        thread chooses and claims its destination (see executor.py).

        Idempotent: a repeat (the same ``migration_uuid``, which clients
        of API 1.9 choose) returns the migration the first recorded,
        whatever its status now, and records nothing. A request without
        it (an older client) is refused while a migration of the
        instance is in progress (InstanceBusy); one that comes after it
        ended is a new request.

        :param policy: the convergence policy requested for this
            migration (API 1.12); else the flavor's, the image's or the
            configured default is recorded.
        :returns: the Migration, ``accepted``, with its queue position.
        :raises Invalid: ``migration_uuid`` names a migration of another
            instance.
        :raises UnknownMigrationPolicy: no policy of that name.
        """
        try:
            migration = requests.record(self.worker, ctxt, instance_uuid,
                                        dest_host, priority, migration_uuid,
                                        policy)
        except exception.NumamigException:
            # A repeat finds its migration recorded (the uuid taken, the
            # instance busy with it, or a check that no longer passes):
            # looked for only then, so a first request reads nothing more.
            recorded = migration_uuid and requests.recorded_already(
                self.db, instance_uuid, migration_uuid)
            if not recorded:
                raise
            return recorded
        if self.executor is not None:
            self.executor.wake()
        return migration

    def run_admitted(self, migration_uuid):
        """Choose, claim and start an admitted migration (a migration
        thread of the executor runs it; never an RPC thread).

        A migration that cannot start is recorded ``error`` with the
        reason by its task; here that is only logged, without a trace.

        :returns: False when it went back to the queue (its destinations
            were busy): only a migration ending frees one, so the queue
            need not be looked at again before then.
        """
        try:
            self.execute_admitted(migration_uuid)
        except exception.DestinationsBusy as exc:
            LOG.info("Migration %s back in the queue: %s", migration_uuid,
                     exc)
            return False
        except _EXPECTED as exc:
            LOG.info("Migration %s did not start: %s", migration_uuid, exc)
        return True

    def execute_admitted(self, migration_uuid):
        """Run an admitted migration's task; its errors propagate.

        :returns: the Migration as the task left it, or None when it was
            cancelled while it waited.
        """
        admitted = records.read_admitted(self.worker, migration_uuid)
        if admitted.instance is None:
            return None
        return live_migrate.LiveMigrationTask(
            nm_context.get_admin_context(), self.worker, admitted.instance,
            admitted.migration,
            hosts=live_migrate.HostsRead(admitted.busy,
                                         admitted.maintenance)).execute()

    def _wake_executor(self):
        if self.executor is not None:
            self.executor.wake()

    def migration_ended(self, migration):
        """``migration`` reached a final status here: its slot is free,
        and whoever in this process listens is told."""
        if self.executor is not None:
            self.executor.wake()
        for listener in list(self._end_listeners):
            listener(migration)

    def add_end_listener(self, listener):
        """Call ``listener(migration)`` when a migration ends here.

        For observers in this process (the embedded tier's waits, the
        benchmarks) that would otherwise poll the records. Only ends
        recorded by this worker are heard; a listener must be quick and
        must not raise: it runs in the thread that recorded the end.
        """
        self._end_listeners.append(listener)

    @wire.args(instance_uuid=wire.UUID, dest_host=wire.HOST.or_none(),
               policy=wire.text(64, "a convergence policy name (at most "
                                    "64 characters)").or_none())
    @messaging.expected_exceptions(*_EXPECTED)
    def live_migration_dry_run(self, ctxt, instance_uuid, dest_host=None,
                               policy=None):
        """Where the guest would go and how it would be pinned, and under
        which convergence policy (``policy``, API 1.18: requested as
        live_migrate_instance's; else the flavor's, image's or default).

        Idempotent: a repeat reads only and gets the same answer.

        :raises UnknownMigrationPolicy: the policy that would be chosen
            is unknown (as the request would be refused).
        """
        instance = instances.get(self.db, instance_uuid).instance
        records.sync_reports(self.worker)
        return dry_run.LiveMigrationDryRun(ctxt, self.worker, instance,
                                           dest_host, policy).execute()

    @wire.args(migration_uuid=wire.UUID)
    @messaging.expected_exceptions(*_EXPECTED)
    def migration_abort(self, ctxt, migration_uuid):
        """Cancel a migration not yet started, or abort a running one.

        Idempotent: a repeat after the migration was cancelled is refused
        (MigrationNotAbortable) and changes nothing; while it still runs
        the source is asked again, which changes nothing more.

        :returns: the Migration as it is after the request.
        """
        migration = migrations.get(self.db, migration_uuid)
        if migration.status in STATUS.NOT_STARTED:
            try:
                return records.set_status(
                    self.worker, migration_uuid, STATUS.CANCELLED,
                    expected=list(STATUS.NOT_STARTED),
                    detail="aborted by request before it started")
            except exception.InvalidStatusTransition:
                migration = migrations.get(self.db, migration_uuid)
        if resume.halted_or_resuming(migration):
            raise exception.MigrationNotAbortable(
                migration_uuid=migration_uuid, status=migration.status,
                reason=resume.NOT_ABORTABLE)
        if migration.status not in STATUS.ABORTABLE:
            *others, last = STATUS.NOT_STARTED + STATUS.ABORTABLE
            raise exception.MigrationNotAbortable(
                migration_uuid=migration_uuid, status=migration.status,
                reason=f"only a migration that is {', '.join(others)} or "
                       f"{last} can be aborted")
        instance = instances.get(self.db, migration.instance_uuid).instance
        if not self.compute_api.live_migration_abort(ctxt, instance,
                                                     migration):
            raise exception.MigrationNotAbortable(
                migration_uuid=migration_uuid, status=migration.status,
                reason="the guest has already left the source")
        return migrations.get(self.db, migration_uuid)

    @wire.args(migration_uuid=wire.UUID)
    @messaging.expected_exceptions(*_EXPECTED)
    def migration_force_complete(self, ctxt, migration_uuid):
        """Ask the source to make a running migration converge.

        Idempotent: a repeat asks the source again, which changes nothing
        more; once the migration ended it is refused.
        """
        migration = migrations.get(self.db, migration_uuid)
        if migration.status != STATUS.RUNNING:
            raise exception.MigrationNotAbortable(
                migration_uuid=migration_uuid, status=migration.status,
                reason="only a running migration can be forced to "
                       "complete")
        instance = instances.get(self.db, migration.instance_uuid).instance
        self.compute_api.live_migration_force_complete(ctxt, instance,
                                                       migration)
        return migration

    @wire.args(instance_uuid=wire.UUID.or_none(),
               status=STATUS_KIND.or_none(), host=wire.HOST.or_none())
    @messaging.expected_exceptions(*_EXPECTED)
    def migration_get_all(self, ctxt, instance_uuid=None, status=None,
                          host=None):
        """Idempotent: a repeat reads only and gets the same answer."""
        found = migrations.get_all(self.db, instance_uuid=instance_uuid,
                                   status=status)
        if host is not None:
            found = [m for m in found
                     if host in (m.source_host, m.get('dest_host'))]
        if any(m.waiting for m in found):
            waiting = queue.positions(self.db)
            for migration in found:
                if migration.waiting:
                    migration.queue_position = waiting.get(migration.uuid)
        return found

    @wire.args(instance=wire.obj('Instance'), host=wire.HOST.or_none())
    @messaging.expected_exceptions(*_EXPECTED)
    def instance_create(self, ctxt, instance, host=None):
        """Record an instance and build it on a chosen or scheduled host.

        Idempotent: a repeat finds the instance recorded and is refused
        (RecordExists), changing nothing.
        """
        records.sync_reports(self.worker)
        return build.BuildInstanceTask(ctxt, self.worker, instance,
                                       host).execute()

    @wire.args(host=wire.HOST)
    @messaging.expected_exceptions(*_EXPECTED)
    def instance_adopt(self, ctxt, host):
        """Record the NUMA guests of ``host`` numamig does not know.

        Idempotent: a repeat finds them recorded and records nothing more.
        """
        records.sync_reports(self.worker)
        return build.adopt_guests(self.worker, ctxt, host)

    @wire.args()
    @messaging.expected_exceptions(*_EXPECTED)
    def compute_node_get_all(self, ctxt):
        """Idempotent: a repeat reads only and gets the same answer."""
        return compute_nodes.get_all(self.db)

    @wire.args(instance_uuid=wire.UUID)
    @messaging.expected_exceptions(*_EXPECTED)
    def instance_delete(self, ctxt, instance_uuid):
        """Destroy an instance's guest, release its usage, drop its record.

        Idempotent: a repeat finds no record and answers False.
        """
        return maintenance.delete_instance(self.worker, ctxt, instance_uuid)

    @wire.args(instance_uuid=wire.UUID)
    @messaging.expected_exceptions(*_EXPECTED)
    def get_domain_xml(self, ctxt, instance_uuid):
        """The live domain XML of an instance, from its host.

        Idempotent: a repeat reads only and gets the same answer.
        """
        instance = instances.get(self.db, instance_uuid).instance
        if not instance.host:
            raise exception.InstanceNotFound(instance_uuid=instance_uuid)
        # A host that stopped reporting would leave the caller waiting
        # for the whole call's timeout. Its reports may have reached
        # other workers only: this one takes them first.
        records.sync_reports(self.worker)
        self.cache.check_up(instance.host)
        return self.compute_api.get_domain_xml(ctxt, instance.host,
                                               instance_uuid)
