"""The compute agent's RPC endpoints: thin, each delegating to a flow.

Destination-side migration steps live in migration_dest, source-side ones
in migration_source, guest creation and adoption in build, start-up
reconciliation in reconcile and the periodic report in report. Endpoints
only unpack arguments, mark the errors that are part of their contract
(``expected_exceptions``: not logged as crashes) and call the flow.
"""

from concurrent import futures

from oslo_log import log as logging
import oslo_messaging as messaging

from numamig import exception
from numamig import releases
from numamig import wire
from numamig.compute import agent as agent_mod
from numamig.compute import build
from numamig.compute import cpu_power
from numamig.compute import dirty_rates
from numamig.compute import domains
from numamig.compute import events as events_mod
from numamig.compute import flows as flows_mod
from numamig.compute import guard_decisions
from numamig.compute import locality
from numamig.compute import memory as compute_memory
from numamig.compute import migration_dest
from numamig.compute import migration_source
from numamig.compute import outgoing
from numamig.compute import patience
from numamig.compute import peers
from numamig.compute import postcopy_paused
from numamig.compute import reconcile
from numamig.compute import report
from numamig.compute import resource_tracker
from numamig.compute import rpcapi as compute_rpcapi
from numamig.objects import service as service_obj

LOG = logging.getLogger(__name__)


def status_timeout(rpc_response_timeout):
    """Seconds an agent's request recording a migration's status waits
    (the daemon's wiring sets its conductor client with it)."""
    return patience.attempt_timeout(rpc_response_timeout)


# Longest domain XML a message may carry: far above any real domain's
# (a few KiB, ~100 KiB with many devices).
MAX_XML = 4 * 1024 * 1024
# Most guests one sample_dirty_rates call measures (a drain of more asks
# in several calls).
MAX_SAMPLED = 256

_EXPECTED = (exception.MigrationError, exception.Invalid,
             exception.NotFound, exception.ConcurrentUpdate)


class ComputeManager:
    """The endpoints of one compute agent (one host).

    Only the methods declared with ``wire.args`` are callable over RPC.
    """

    target = messaging.Target(version=compute_rpcapi.ComputeAPI.VERSION)
    # Dispatch only to the methods declared with wire.args.
    wire_declared = True

    def __init__(self, host, driver, conductor_api, compute_api, settings,
                 service_version=service_obj.SERVICE_VERSION):
        """:param settings: the agent's ComputeSettings
            (compute.settings.from_conf): its fit strategy, how many
            outgoing migrations run at once (more wait in order), how
            long a move claim the conductor never recorded is kept (see
            ResourceTracker) and how soon a report follows another after
            guests changed (report.BackgroundReporter).
        :param service_version: the release this agent behaves as.

        Below NUMA_LIVE_MIGRATION_VERSION the agent neither offers nor
        takes part in NUMA-aware live migration and serves API 1.0 only
        (see numamig.releases): a testing aid for mixed-version
        clouds. The service gives such an agent RPC clients and a server
        of that release too.

        :raises InvalidConfiguration: unknown service version.
        """
        self.host = host
        self.driver = driver
        self.conductor_api = conductor_api
        self.compute_api = compute_api
        if getattr(compute_api, 'peer_versions', False) is None:
            # Its peers' versions, from the conductor's host reports.
            compute_api.peer_versions = peers.PeerVersions(conductor_api)
        self.release = releases.for_service_version(service_version)
        self.service_version = service_version
        if not self.release.is_current:
            self.target = messaging.Target(
                version=self.release.compute_api_version)
        # CPU power management ([compute] cpu_power_management): the
        # tracker powers dedicated pCPUs up and down as its usage changes.
        self.cpu_power = cpu_power.CPUPower(host, settings.cpu_power)
        self.tracker = resource_tracker.ResourceTracker(
            host, driver, conductor_api, strategy=settings.strategy,
            unrecorded_claim_timeout=settings.unrecorded_claim_timeout,
            power=self.cpu_power, pci_alias=settings.pci_alias)
        self.reporter = report.BackgroundReporter(
            host, self._cast_report,
            min_interval=settings.min_change_report_interval)
        self.outgoing = outgoing.OutgoingMigrations()
        # The guests' last dirty-rate samples, which a drain may use
        # instead of waiting for a fresh window.
        self.dirty_rates = dirty_rates.DirtyRateBook()
        events = events_mod.Events()
        # Floating guests' memory locality ([locality]; a periodic job).
        self.locality = locality.LocalityWatch(
            host, driver, locality.Policy(**settings.locality),
            settings.proc_root,
            locality.pinned_by_records(self.tracker), events)
        # What the flows get: never this manager, so that no flow can
        # call back into an endpoint or read what it was not given.
        self.agent = agent_mod.Agent(
            host=host, driver=driver, tracker=self.tracker,
            conductor_api=conductor_api, compute_api=compute_api,
            release=self.release, reporter=self.reporter,
            outgoing=self.outgoing,
            flows=flows_mod.for_release(self.release), events=events,
            locality=self.locality,
            device_detach_timeout=settings.device_detach_timeout)
        # The migration guard's decisions, read from its log.
        self.guard_decisions = guard_decisions.GuardDecisions(
            host, driver, self.agent.events)
        # Outgoing migrations run here, never in an RPC server thread: a
        # migration lasts minutes, and a pool that waits for it cannot
        # serve the calls (abort, a peer's check) it needs meanwhile.
        self.max_concurrent_live_migrations = \
            settings.max_concurrent_live_migrations
        self._migrations = futures.ThreadPoolExecutor(
            max_workers=settings.max_concurrent_live_migrations,
            thread_name_prefix=f'numamig-compute-{host}-migration')

    # -- lifecycle (called by the service, not over RPC) -------------------

    def init_host(self, ctxt):
        """Connect the driver, recompute usage, reconcile the records."""
        self.driver.init_host(self.host)
        self.tracker.start(ctxt)
        reconcile.reconcile_host(self.agent, ctxt)

    def stop(self, wait=False):
        """Stop reporting in the background and take no new migrations;
        ``wait``: let the running ones finish first."""
        self.reporter.stop()
        self.locality.stop()
        self._migrations.shutdown(wait=wait)

    def reconcile_outgoing(self, ctxt):
        """Finish outgoing migrations no thread here drives any more
        (periodic: [compute] reconcile_interval)."""
        reconcile.reconcile_outgoing(self.agent, ctxt)

    def look_at_locality(self):
        """One look of the locality watch (periodic: [locality]
        interval)."""
        self.locality.look()

    def report(self, ctxt, timeout=None):
        """Send this host's report and wait for it to be stored
        (``timeout``: seconds, default the RPC client's)."""
        report.send(self.agent, ctxt, timeout=timeout)

    def _cast_report(self, ctxt):
        report.cast(self.agent, ctxt)

    # -- live migration, destination side ---------------------------------

    @wire.args(instance=wire.obj('Instance'), source_host=wire.HOST,
        migration_uuid=wire.UUID,
        migration=wire.obj('Migration').or_none(),
        limits=wire.obj('NUMALimits').or_none(),
        source_data=wire.obj('LiveMigrateData').or_none())
    @messaging.expected_exceptions(*_EXPECTED)
    def check_can_live_migrate_destination(self, ctxt, instance, source_host,
                                           migration_uuid, migration=None,
                                           limits=None, source_data=None):
        """Check this host can take the guest, and claim it (see
        migration_dest.check_destination).

        Idempotent: a repeat returns the claim already held for the
        migration. One that comes after the claim was dropped (the
        migration ended) claims again, unrecorded: this host's next
        usage recompute releases it, as it does any claim whose migration
        has ended.
        """
        return self.agent.flows.check_destination(
            self.agent, ctxt, instance, source_host, migration_uuid,
            migration=migration, limits=limits, source_data=source_data)

    @wire.args(instance=wire.obj('Instance'),
               migrate_data=wire.obj('LiveMigrateData'))
    @messaging.expected_exceptions(*_EXPECTED)
    def pre_live_migration(self, ctxt, instance, migrate_data):
        """Get ready for the guest; check this host still holds its claim.

        Idempotent: a repeat reads only and gets the same answer.
        """
        return migration_dest.pre_live_migration(self.agent, ctxt, instance,
                                                 migrate_data)

    @wire.args(instance=wire.obj('Instance'), migration=wire.obj('Migration'),
               dest_xml=wire.text(MAX_XML))
    @messaging.expected_exceptions(*_EXPECTED)
    def accept_emulated_migration(self, ctxt, instance, migration,
                                  dest_xml):
        """Define and start the guest's XML here (an emulated migration).

        Idempotent: a repeat leaves the guest that runs here untouched and
        answers None; one after this host rolled the migration back is
        refused (see migration_dest.accept_emulated).
        """
        return migration_dest.accept_emulated(self.agent, ctxt, instance,
                                              migration, dest_xml)

    @wire.args(instance=wire.obj('Instance'), migration=wire.obj('Migration'),
               records_by_source=wire.BOOL)
    @messaging.expected_exceptions(*_EXPECTED)
    def post_live_migration_at_destination(self, ctxt, instance, migration,
                                           records_by_source=False):
        """Make the arrived guest this host's (see
        migration_dest.post_at_destination).

        Idempotent: a repeat finds the guest counted here (or placed here
        by the records) and counts it once; before the guest arrived it
        is refused (GuestNotArrived), changing nothing.
        """
        return self.agent.flows.post_at_destination(
            self.agent, ctxt, instance, migration,
            records_by_source=records_by_source)

    @wire.args(instance=wire.obj('Instance'), migration=wire.obj('Migration'))
    @messaging.expected_exceptions(*_EXPECTED)
    def rollback_live_migration_at_destination(self, ctxt, instance,
                                               migration):
        """Remove the guest's partial copy and the claim here.

        Idempotent: a repeat finds nothing left to remove; one after the
        migration completed never destroys the guest that arrived.
        """
        self.agent.flows.rollback_at_destination(self.agent, ctxt,
                                                 instance, migration)

    @wire.args(instance=wire.obj('Instance'), migration=wire.obj('Migration'))
    @messaging.expected_exceptions(*_EXPECTED)
    def drop_move_claim_at_destination(self, ctxt, instance, migration):
        """Drop this host's claim of a migration, here and in the records.

        Idempotent: a repeat, or one after the claim was applied, finds
        nothing held and changes nothing.
        """
        migration_dest.drop_claim(self.agent, ctxt, instance, migration.uuid)

    # -- live migration, source side --------------------------------------

    @wire.args(instance=wire.obj('Instance'),
               dest_check_data=wire.obj('LiveMigrateData'))
    @messaging.expected_exceptions(*_EXPECTED)
    def check_can_live_migrate_source(self, ctxt, instance, dest_check_data):
        """Confirm the guest runs here and report this host's NUMA flag;
        asked by the conductor (API 1.3) or by a destination asked the
        way before.

        Idempotent: a repeat reads only and gets the same answer.
        """
        return self.agent.flows.check_source(self.agent, ctxt, instance,
                                             dest_check_data)

    @wire.args(instance=wire.obj('Instance'), migration=wire.obj('Migration'),
               migrate_data=wire.obj('LiveMigrateData'))
    def live_migration(self, ctxt, instance, migration, migrate_data):
        """Start an outgoing migration (cast): hand it to the migration
        executor and return at once.

        Idempotent: a repeat of a migration this agent runs or waits to
        run is not taken twice, and one that comes after the migration ran
        finds its status moved on and undoes nothing (SourceMigration).
        """
        job = migration_source.SourceMigration(
            self.agent, ctxt, instance, migration, migrate_data)
        # Registered before it can move past queued, as
        # reconcile_outgoing requires.
        if not self.outgoing.register(job):
            LOG.info("%s: migration %s is already running here; the "
                     "repeated start request is ignored", self.host,
                     migration.uuid)
            return
        try:
            self._migrations.submit(self._run_outgoing, job)
        except RuntimeError:
            # Shut down: nothing ran; the conductor fails it once it
            # stayed queued too long, and the restarted agent is free.
            self.outgoing.unregister(migration.uuid)
            LOG.error("%s: migration %s not started: the agent is "
                      "stopping", self.host, migration.uuid)

    def _run_outgoing(self, job):
        try:
            job.run()
        finally:
            self.outgoing.unregister(job.migration.uuid)

    @wire.args(instance=wire.obj('Instance'), migration=wire.obj('Migration'))
    @messaging.expected_exceptions(*_EXPECTED)
    def live_migration_abort(self, ctxt, instance, migration):
        """Ask the running outgoing migration to stop.

        Idempotent: a repeat asks the same job again, which changes
        nothing more, and gets the same answer.

        :returns: True if the abort will take effect.
        """
        return self._outgoing_job(migration).abort()

    @wire.args(instance=wire.obj('Instance'), migration=wire.obj('Migration'))
    @messaging.expected_exceptions(*_EXPECTED)
    def live_migration_force_complete(self, ctxt, instance, migration):
        """Ask the running outgoing migration to converge.

        Idempotent: a repeat asks the hypervisor again, which changes
        nothing more; with no migration running here it is refused.
        """
        self._outgoing_job(migration)
        self.driver.live_migration_force_complete(instance.uuid)

    @wire.args(instance=wire.obj('Instance'), migration=wire.obj('Migration'))
    @messaging.expected_exceptions(*_EXPECTED)
    def resume_postcopy(self, ctxt, instance, migration):
        """Resume a postcopy-paused migration (API 1.7): hand one more
        recovery run to the migration executor and return at once.

        Idempotent: a repeat while the run goes on starts nothing and
        answers False; one after it ended finds no paused guest here and
        is refused, changing nothing.
        """
        return postcopy_paused.accept_resume(
            self.agent, ctxt, instance, migration,
            lambda job: self._migrations.submit(self._run_outgoing, job))

    @wire.args(instance=wire.obj('Instance'), migration=wire.obj('Migration'))
    @messaging.expected_exceptions(*_EXPECTED)
    def postcopy_resume_target(self, ctxt, instance, migration):
        """What a source resumes a postcopy-paused migration into (API
        1.7). Idempotent: a repeat reads only and gets the same answer."""
        return postcopy_paused.resume_target(self.agent, instance, migration)

    def _outgoing_job(self, migration):
        job = self.outgoing.get(migration.uuid)
        if job is None:
            raise exception.MigrationError(
                reason=f"migration {migration.uuid} is not running on "
                       f"source host {self.host}")
        return job

    # -- guests -------------------------------------------------------------

    @wire.args(instance=wire.obj('Instance'),
               limits=wire.obj('NUMALimits').or_none())
    @messaging.expected_exceptions(*_EXPECTED)
    def build_instance(self, ctxt, instance, limits=None):
        """Claim and create a guest here (see build.build_instance).

        Idempotent: a repeat for a guest that runs here returns its record
        and changes nothing.
        """
        return build.build_instance(self.agent, ctxt, instance, limits)

    @wire.args()
    @messaging.expected_exceptions(*_EXPECTED)
    def adopt_guests(self, ctxt):
        """Describe, and count here, the NUMA guests the records lack.

        Idempotent: a repeat describes the same guests until the conductor
        records them, and counts each here once.
        """
        return build.adopt_guests(self.agent, ctxt)

    @wire.args(instance_uuid=wire.UUID)
    @messaging.expected_exceptions(*_EXPECTED)
    def get_domain_xml(self, ctxt, instance_uuid):
        """The live domain XML of a guest here.

        Idempotent: a repeat reads only and gets the same answer.
        """
        return self.driver.get_domain_xml(instance_uuid)

    @wire.args()
    @messaging.expected_exceptions(*_EXPECTED)
    def list_domains(self, ctxt):
        """Every domain here with its live and persistent XML.

        Idempotent: a repeat reads only and gets the same answer.
        """
        return domains.list_domains(self.agent)

    @wire.args(instance=wire.obj('Instance'),
               policy=wire.text(64, "a convergence policy name (at most "
                                    "64 characters)").or_none())
    @messaging.expected_exceptions(*_EXPECTED)
    def predict_convergence(self, ctxt, instance, policy=None):
        """Sample the guest's dirty rate here and predict whether its
        migration under ``policy`` (default: its flavor's, image's or this
        host's) converges; see ComputeDriver.predict_convergence.

        Idempotent: a repeat measures again and changes nothing.

        :raises UnknownMigrationPolicy: InstanceNotFound:
        """
        chosen, _where = migration_source.choose_policy(
            self.driver, instance, policy)
        return self.driver.predict_convergence(instance.uuid, chosen)

    @wire.args(instance_uuids=wire.uuid_list(MAX_SAMPLED),
               seconds=wire.integer(1, 10),
               max_age=wire.integer(0, 86400))
    @messaging.expected_exceptions(*_EXPECTED)
    def sample_dirty_rates(self, ctxt, instance_uuids, seconds=1,
                           max_age=0):
        """Estimate how fast each of these guests dirties memory, all in
        one window of ``seconds``, before any of them migrates: a drain
        orders its moves and chooses their policies from it; see
        ComputeDriver.sample_dirty_rates. Guests not here are left out.
        A guest this agent sampled at most ``max_age`` seconds ago
        ([compute] dirty_rate_sample_interval) is answered from that
        sample at once; each guest's ``age`` says how old its answer is.

        Idempotent: a repeat answers from the kept samples or measures
        again, and changes nothing else.
        """
        return dirty_rates.sample(self.driver, self.dirty_rates,
                                  instance_uuids, seconds, max_age)

    def sample_dirty_rates_now(self):
        """Sample every guest here but those migrating out, and keep the
        answers (periodic: [compute] dirty_rate_sample_interval)."""
        return dirty_rates.sample_all(
            self.driver, self.dirty_rates,
            lambda: {job.instance.uuid for job in self.outgoing.jobs()},
            seconds=1, batch=MAX_SAMPLED)

    @wire.args()
    @messaging.expected_exceptions(*_EXPECTED)
    def refresh_usage(self, ctxt):
        """Recompute usage from the records and report it (see
        report.refresh).

        Idempotent: a repeat recomputes the same usage from the same
        records.
        """
        return report.refresh(self.agent, ctxt)

    @wire.args(instance_uuid=wire.UUID,
               requested=wire.mapping(compute_memory.MAX_CELLS),
               deadline_s=wire.number(0, compute_memory.MAX_DEADLINE_S))
    @messaging.expected_exceptions(*_EXPECTED, exception.HypervisorError)
    def resize_virtio_mem(self, ctxt, instance_uuid, requested, deadline_s):
        """Set a guest's virtio-mem requested sizes ({cell: MiB}) and
        answer what it has plugged by ``deadline_s`` (API 1.5).

        Idempotent: a repeat asks for the same absolute sizes, which are
        asked already, and answers the guest's state then.
        """
        return compute_memory.resize(self.agent, instance_uuid, requested,
                                     deadline_s)

    @wire.args(instance=wire.obj('Instance'))
    @messaging.expected_exceptions(*_EXPECTED)
    def delete_instance(self, ctxt, instance):
        """Destroy a guest here and stop counting it.

        Idempotent: a repeat finds no domain left and answers False.
        """
        return domains.delete_instance(self.agent, ctxt, instance)
