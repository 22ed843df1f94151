"""The conductor's operations endpoint, and the worker's parts behind it.

The conductor owns the database and the scheduler's host cache. Operators
start, follow and stop migrations, drain and defragment hosts, change
guests' memory and create or adopt instances through the operations API
(numamig.conductor.api_versions, OPERATIONS; client
numamig.conductor.rpcapi), each endpoint thin, delegating to the plans
(drain.py, defragment.py, maintenance.py) or the tasks (tasks/). Agents
record through the records API, whose endpoint this manager holds
(``records``, numamig.conductor.records_manager).
"""

from oslo_log import log as logging
import oslo_messaging as messaging
from oslo_utils import timeutils

from numamig import context as nm_context
from numamig import exception
from numamig import releases
from numamig import wire
from numamig.conductor import api_versions
from numamig.conductor import defragment
from numamig.conductor import drain
from numamig.conductor import live_migratable
from numamig.conductor import maintenance
from numamig.conductor import records
from numamig.conductor import records_manager
from numamig.conductor import requests
from numamig.conductor import restarts
from numamig.conductor import watch
from numamig.conductor import worker as worker_mod
from numamig.conductor.tasks import build
from numamig.conductor.tasks import defragment as defragment_task
from numamig.conductor.tasks import drain as drain_task
from numamig.conductor.tasks import drain_driver
from numamig.conductor.tasks import dry_run
from numamig.conductor.tasks import live_migrate
from numamig.conductor.tasks import memory
from numamig.conductor.tasks import resume
from numamig.db import instances
from numamig.db import migration_satellites
from numamig.db import migrations
from numamig.db import queue
from numamig.objects import fields
from numamig.objects import migration_satellites as satellites
from numamig.objects import service as service_obj

LOG = logging.getLogger(__name__)
STATUS = fields.MigrationStatus

STATUS_KIND = records_manager.STATUS_KIND
_EXPECTED = records_manager.EXPECTED
# How many times a migration was paused: bounded by its history's.
PAUSES = wire.integer(0, 10000)
SATELLITE_NAMES = wire.Kind(
    f"a list of some of {', '.join(satellites.SATELLITES)}",
    lambda v: isinstance(v, list) and len(v) <= len(satellites.SATELLITES)
    and all(isinstance(n, str) and n in satellites.SATELLITES for n in v))


class ConductorManager:
    """The operations API's endpoint (namespace ``operations``) of a
    conductor worker, and what the worker's migration threads, sweeps
    and drains run.

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
    :ivar records: the records API's endpoint (RecordManager).
    """

    target = messaging.Target(namespace=api_versions.OPERATIONS.namespace,
                              version=api_versions.OPERATIONS.version)
    # Dispatch only to the methods declared with wire.args.
    wire_declared = True

    def __init__(self, db, cache, scheduler, compute_api, settings,
                 service_version=None):
        self.release = releases.for_service_version(
            service_version or service_obj.SERVICE_VERSION)
        self.db = db
        self.cache = cache
        self.compute_api = compute_api
        self.records = records_manager.RecordManager(worker_mod.Worker(
            db=db, cache=cache, scheduler=scheduler, compute_api=compute_api,
            release=self.release, migration_ended=self.migration_ended,
            settings=settings,
            reports=worker_mod.ReportCursor(settings.report_writers)))
        # The MigrationExecutor running admitted migrations, set by the
        # service once it starts (None: requests wait in the queue).
        self.executor = None
        self._end_listeners = []
        self.watch = watch.MigrationWatch(settings.migration_watchers)
        self.add_end_listener(self.watch.heard)
        # Drains: the service starts the driver's thread.
        self.drain_watch = watch.MigrationWatch(settings.migration_watchers)
        self.drains = drain_driver.DrainDriver(
            self.worker, self._wake_executor, self.drain_watch.heard)
        self.add_end_listener(self.drains.heard)
        # Every guest's standing live-migratable answer; the service
        # starts its thread.
        self.live_migratable = live_migratable.LiveMigratableWatch(
            self.worker)
        # Since when this worker's stalled-migration sweeps have reached
        # the database without a break (None: not yet, or it failed).
        self._database_since = None

    @property
    def worker(self):
        """What the flows get: never this manager, so that no flow can
        call an endpoint or read what it was not given. The records
        endpoint holds it; both endpoints read it from there."""
        return self.records.worker

    @worker.setter
    def worker(self, worker):
        self.records.worker = worker

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

    def sync_reports(self):
        """Take the reports other workers stored since this one looked
        (``[conductor] report_sync_interval``)."""
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
                lease_s=executor.lease_s if executor is not None else 15,
                by=executor.holder if executor is not None else None)
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

    # -- reads ----------------------------------------------------------------
    # The reads operators share with agents are declared by both APIs, so
    # that each changes on its own; the records endpoint does the reading.

    @wire.args(migration_uuid=wire.UUID)
    @messaging.expected_exceptions(*_EXPECTED)
    def migration_get(self, ctxt, migration_uuid):
        """Idempotent: a repeat reads only and gets the same answer."""
        return self.records.migration_get(ctxt, migration_uuid)

    @wire.args(migration_uuid=wire.UUID, names=SATELLITE_NAMES)
    @messaging.expected_exceptions(*_EXPECTED)
    def migration_get_satellites(self, ctxt, migration_uuid, names):
        """The satellite records ``names`` of a migration
        (numamig.objects.migration_satellites): {name: object}, each
        empty where nothing was recorded. Operators' only: agents never
        read them, so what a feature adds there changes neither Migration
        nor the records API.

        Idempotent: a repeat reads only and gets the same answer.
        """
        return migration_satellites.get(self.db, migration_uuid, names)

    @wire.args(instance_uuid=wire.UUID)
    @messaging.expected_exceptions(*_EXPECTED)
    def instance_get(self, ctxt, instance_uuid):
        """Idempotent: a repeat reads only and gets the same answer."""
        return self.records.instance_get(ctxt, instance_uuid)

    @wire.args(host=wire.HOST.or_none())
    @messaging.expected_exceptions(*_EXPECTED)
    def instance_get_all(self, ctxt, host=None):
        """Idempotent: a repeat reads only and gets the same answer."""
        return self.records.instance_get_all(ctxt, host=host)

    @wire.args(host=wire.HOST)
    @messaging.expected_exceptions(*_EXPECTED)
    def instance_get_claims_on_host(self, ctxt, host):
        """Idempotent: a repeat reads only and gets the same answer."""
        return self.records.instance_get_claims_on_host(ctxt, host)

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

    # -- migrations -----------------------------------------------------------

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
        of release 2 choose) returns the migration the first recorded,
        whatever its status now, and records nothing. A request without
        it (an older client) is refused while a migration of the
        instance is in progress (InstanceBusy); one that comes after it
        ended is a new request.

        :param policy: the convergence policy requested for this
            migration (release 2); else the flavor's, the image's or the
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
                                         admitted.maintenance),
            policy=admitted.convergence.policy).execute()

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
        which convergence policy (``policy``, release 2: requested as
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
        return self.records.compute_node_get_all(ctxt)

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

    @wire.args(migration_uuid=wire.UUID, pauses=PAUSES.or_none())
    @messaging.expected_exceptions(exception.MigrationError,
                                   exception.Invalid, exception.NotFound)
    def migration_resume(self, ctxt, migration_uuid, pauses=None):
        """Ask the source to resume a postcopy-paused migration (release 2).

        Idempotent: a repeat finds it running (or completed, or paused
        again since the ``pauses`` the caller saw) and answers so,
        starting nothing; see numamig.conductor.tasks.resume.

        :returns: {'migration': Migration, 'outcome': resume.OUTCOMES}.
        """
        return resume.ResumeTask(ctxt, self.worker, migration_uuid,
                                 seen_pauses=pauses).execute()

    # -- hosts ----------------------------------------------------------------


    @wire.args(host=wire.HOST)
    @messaging.expected_exceptions(*_EXPECTED)
    def compute_node_delete(self, ctxt, host):
        """Forget a host that no longer runs numamig.

        Idempotent: a repeat finds no record and answers False.
        """
        return maintenance.delete_host(self.worker, host)

    @wire.args(dry_run=wire.BOOL)
    @messaging.expected_exceptions(*_EXPECTED)
    def heal_claims(self, ctxt, dry_run=False):
        """Find, and unless ``dry_run`` release, leaked claims.

        Idempotent: a repeat finds no leaked claim left and releases
        nothing.
        """
        return maintenance.heal_claims(self.worker, ctxt, dry_run=dry_run)

    @wire.args(host=wire.HOST)
    @messaging.expected_exceptions(*_EXPECTED)
    def host_domains(self, ctxt, host):
        """Every domain of ``host`` with its XML.

        Idempotent: a repeat reads only and gets the same answer.
        """
        return maintenance.host_domains(self.worker, ctxt, host)

    @wire.args(host=wire.HOST)
    @messaging.expected_exceptions(*_EXPECTED)
    def host_refresh_usage(self, ctxt, host):
        """Have ``host`` recompute its usage from the records and report.

        Idempotent: a repeat recomputes the same usage from the same
        records.
        """
        return maintenance.refresh_usage(self.worker, ctxt, host)

    @wire.args(change_uuid=wire.UUID, instance_uuid=wire.UUID,
               node=wire.integer(0, memory.MAX_NODE),
               size_mb=wire.integer(0, memory.MAX_SIZE_MB),
               exact=wire.BOOL, dry_run=wire.BOOL)
    @messaging.expected_exceptions(*_EXPECTED, exception.HypervisorError)
    def instance_memory_set(self, ctxt, change_uuid, instance_uuid, node,
                            size_mb, exact, dry_run):
        """Set a guest's plugged virtio-mem memory, node ``node`` first
        (see conductor.tasks.memory).

        Idempotent: a repeat of ``change_uuid`` gets the recorded change.
        """
        return memory.SetInstanceMemoryTask(
            ctxt, self.worker, change_uuid, instance_uuid, node, size_mb,
            exact, dry_run, self.worker.settings.virtio_mem).execute()

    @wire.args(change_uuid=wire.UUID, host=wire.HOST,
               node=wire.integer(0, memory.MAX_NODE),
               size_mb=wire.integer(1, memory.MAX_SIZE_MB),
               exact=wire.BOOL, dry_run=wire.BOOL)
    @messaging.expected_exceptions(*_EXPECTED, exception.HypervisorError)
    def host_reclaim(self, ctxt, change_uuid, host, node, size_mb, exact,
                     dry_run):
        """Free ``size_mb`` MiB on host node ``node`` from the host's
        guests (see conductor.tasks.memory).

        Idempotent: a repeat of ``change_uuid`` gets the recorded change.
        """
        return memory.HostReclaimTask(
            ctxt, self.worker, change_uuid, host, node, size_mb, exact,
            dry_run, self.worker.settings.virtio_mem).execute()

    @wire.args(host=wire.HOST, disabled=wire.BOOL,
               reason=wire.text(drain.REASON_LENGTH).or_none())
    @messaging.expected_exceptions(*_EXPECTED)
    def host_set_disabled(self, ctxt, host, disabled, reason=None):
        """Disable a host for maintenance, or enable it.

        Idempotent: a repeat leaves the same state (a disabled host keeps
        since when it is disabled).
        """
        return drain.set_disabled(self.worker, host, disabled, reason)

    @wire.args(host=wire.HOST,
               to=wire.host_list(drain.MAX_DESTINATIONS).or_none(),
               keep_free_nodes=wire.integer(0, drain.MAX_KEEP_FREE))
    @messaging.expected_exceptions(*_EXPECTED)
    def host_drain_plan(self, ctxt, host, to=None, keep_free_nodes=0):
        """Where every guest of ``host`` would go, at once.

        Idempotent: a repeat reads only and gets the same plan; nothing
        is recorded, reserved or claimed.
        """
        return drain.plan(self.worker, host, to=to,
                          keep_free_nodes=keep_free_nodes)

    # -- drains and defragmentations -----------------------------------------


    @wire.args(host=wire.HOST, drain_uuid=wire.UUID,
               parallel=wire.integer(1, drain_task.MAX_PARALLEL),
               to=wire.host_list(drain.MAX_DESTINATIONS).or_none(),
               keep_free_nodes=wire.integer(0, drain.MAX_KEEP_FREE))
    @messaging.expected_exceptions(*_EXPECTED)
    def host_drain_start(self, ctxt, host, drain_uuid, parallel, to=None,
                         keep_free_nodes=0):
        """Plan the drain of ``host``; if it empties it, disable the host
        and start moving its guests.

        Idempotent: a repeat (the same ``drain_uuid``, chosen by the
        client) answers with the drain the first started and starts
        nothing.
        """
        return drain_task.DrainTask(
            ctxt, self.worker, self.drains, host, drain_uuid, parallel,
            to=to, keep_free_nodes=keep_free_nodes).execute()

    @wire.args(host=wire.HOST.or_none(), drain_uuid=wire.UUID.or_none())
    @messaging.expected_exceptions(*_EXPECTED)
    def host_drain_show(self, ctxt, host=None, drain_uuid=None):
        """A drain and its moves: ``drain_uuid``'s, or the host's active
        (else last) one.

        Idempotent: a repeat reads only.
        """
        if (host is None) == (drain_uuid is None):
            raise exception.Invalid(
                reason="name either a host or a drain uuid")
        return drain_task.show(self.worker, host=host, drain_uuid=drain_uuid)

    @wire.args(drain_uuid=wire.UUID, signature=wire.text(64),
               wait_s=wire.number(0, 3600))
    @messaging.expected_exceptions(*_EXPECTED)
    def host_drain_wait(self, ctxt, drain_uuid, signature, wait_s):
        """The drain once its ``signature`` differs from the one given
        (what the caller last saw), or after ``wait_s`` seconds (at most
        watch.MAX_WAIT_S): the same bounded waits as migration_wait.

        Idempotent: a repeat reads only.
        """
        return self.drain_watch.wait(
            lambda: drain_task.show(self.worker, drain_uuid=drain_uuid),
            drain_uuid, lambda data: data['signature'] != signature,
            wait_s)

    @wire.args(vcpus=wire.integer(1, 4096),
               memory_mb=wire.integer(1, 2 ** 31),
               extra_specs=wire.mapping(64),
               hosts=wire.host_list(defragment.MAX_HOSTS).or_none(),
               max_moves=wire.integer(0, defragment.MAX_MOVES))
    @messaging.expected_exceptions(*_EXPECTED)
    def host_defragment_plan(self, ctxt, vcpus, memory_mb, extra_specs,
                             hosts=None, max_moves=3):
        """The fewest migrations that make room for a guest of these
        specs on one host; nothing moves.

        Idempotent: a repeat reads only and gets the same plan.
        """
        return defragment.plan(self.worker, vcpus, memory_mb, extra_specs,
                               hosts=hosts, max_moves=max_moves)

    @wire.args(vcpus=wire.integer(1, 4096),
               memory_mb=wire.integer(1, 2 ** 31),
               extra_specs=wire.mapping(64), drain_uuid=wire.UUID,
               parallel=wire.integer(1, drain_task.MAX_PARALLEL),
               hosts=wire.host_list(defragment.MAX_HOSTS).or_none(),
               max_moves=wire.integer(0, defragment.MAX_MOVES))
    @messaging.expected_exceptions(*_EXPECTED)
    def host_defragment_start(self, ctxt, vcpus, memory_mb, extra_specs,
                              drain_uuid, parallel, hosts=None,
                              max_moves=3):
        """Plan room for a guest of these specs on one host and, if a
        plan is found, carry it out as a drain of kind ``defragment``;
        refused with nothing recorded otherwise.

        Idempotent: a repeat (the same ``drain_uuid``, chosen by the
        client) answers with the defragmentation the first started and
        starts nothing.
        """
        return defragment_task.DefragmentTask(
            ctxt, self.worker, self.drains, drain_uuid, vcpus, memory_mb,
            extra_specs, parallel, hosts=hosts,
            max_moves=max_moves).execute()

    @wire.args(host=wire.HOST, abort_running=wire.BOOL)
    @messaging.expected_exceptions(*_EXPECTED)
    def host_drain_abort(self, ctxt, host, abort_running=False):
        """Cancel the pending moves of the host's drain; with
        ``abort_running`` abort its running migrations too.

        Idempotent: a repeat finds nothing left to cancel and asks the
        sources to abort again, which changes nothing more.
        """
        return drain_task.abort(self.worker, self.drains, host,
                                abort_running=abort_running)
