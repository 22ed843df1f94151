"""Services: a compute agent or a conductor worker, with its RPC server.

Each service is an oslo.service Service (threading backend) so that the
daemons get signal handling from oslo.service's launcher, and it can also
be started and stopped directly, several per process (the embedded
deployment). Stopping is graceful: the RPC server stops taking requests,
in-flight ones finish, then the periodic task ends.
"""

import os
import threading
import time

from oslo_log import log as logging
import oslo_messaging as messaging
from oslo_messaging import opts as messaging_opts
from oslo_service import service as os_service

from numamig import context as nm_context
from numamig import filemodes
from numamig import library_notices
from numamig import log_brief
from numamig import metrics
from numamig import periodic
from numamig import releases
from numamig import rpc
from numamig import version
from numamig.compute import manager as compute_manager
from numamig.compute import metrics as compute_metrics
from numamig.compute import rpcapi as compute_rpcapi
from numamig.compute import settings as compute_settings
from numamig.conductor import endpoints as conductor_endpoints
from numamig.conductor import executor
from numamig.conductor import manager as conductor_manager
from numamig.conductor import metrics as conductor_metrics
from numamig.conductor import records_rpcapi
from numamig.conductor import rpcapi as conductor_rpcapi
from numamig.conductor import settings as conductor_settings
from numamig.conf import checks
from numamig.notifications import notifier
from numamig.objects import service as service_obj
from numamig.scheduler import host_state
from numamig.scheduler import scheduler as nm_scheduler

LOG = logging.getLogger(__name__)

# Seconds a stopping service gives its RPC servers, all together, to
# stop taking requests and finish the ones in flight. With the broker
# reachable they take well under a second; with it away, oslo.messaging's
# listener sees the stop only between its reconnection attempts (backing
# off to 30 s), and no answer could be sent anyway. What is abandoned
# then is what a killed daemon abandons, which a restart reconciles.
SERVER_STOP_S = 3.0


class RPCNames:
    """Where services meet on the broker: exchange and topics.

    Deployments sharing one broker (tests, several embedded runs) give
    each its own ``suffix``.
    """

    def __init__(self, suffix=None, exchange=None):
        tail = f'-{suffix}' if suffix else ''
        self.exchange = exchange
        self.compute_topic = compute_rpcapi.TOPIC + tail
        self.conductor_topic = conductor_rpcapi.TOPIC + tail
        self.conductor_agent_topic = records_rpcapi.AGENT_TOPIC + tail

    @classmethod
    def from_conf(cls, conf):
        """The names of the deployment ``conf`` belongs to.

        RabbitMQ names a topic's queue after the topic alone, whatever
        the exchange, so two deployments sharing a broker under different
        ``control_exchange`` values would share queues. A deployment on a
        control exchange other than numamig's suffixes its topics with
        the exchange's name; every client must use these names.
        """
        exchange = conf.control_exchange
        if exchange == rpc.CONTROL_EXCHANGE:
            return cls()
        return cls(suffix=exchange, exchange=exchange)

    def compute_api(self, transport, version_cap=None, release=None,
                    peer_versions=None):
        """A compute client; ``release``: the one the caller runs as;
        ``peer_versions``: host -> its reported service version (the
        conductor's host reports, which it then trusts first)."""
        release = release or releases.for_service_version(
            service_obj.SERVICE_VERSION)
        return compute_rpcapi.ComputeAPI(
            transport, version_cap=release.compute_version_cap(version_cap),
            topic=self.compute_topic, exchange=self.exchange,
            release_objects=release.object_versions,
            peer_versions=peer_versions,
            reports_first=peer_versions is not None)

    def conductor_api(self, transport, version_cap=None, timeout=None,
                      release=None, agent=False, status_timeout=None):
        """An operator's conductor client (the operations API), or with
        ``agent`` a compute agent's (``records_api``); ``release``: the
        one the caller runs as."""
        if agent:
            return self.records_api(transport, version_cap, timeout,
                                    release, status_timeout)
        if release is not None:
            version_cap = release.conductor_version_cap(version_cap)
        return conductor_rpcapi.ConductorAPI(
            transport, version_cap=version_cap, timeout=timeout,
            topic=self.conductor_topic, exchange=self.exchange,
            release_objects=release and release.object_versions)

    def records_api(self, transport, version_cap=None, timeout=None,
                    release=None, status_timeout=None):
        """A compute agent's conductor client (the records API): on the
        agents' topic once the conductor is known to serve it (release
        2), else on the conductor topic; ``release``: the one the agent
        runs as."""
        if release is not None:
            version_cap = release.conductor_version_cap(version_cap)
        return records_rpcapi.RecordAPI(
            transport, version_cap=version_cap, timeout=timeout,
            topic=self.conductor_topic, exchange=self.exchange,
            release_objects=release and release.object_versions,
            agent_topic=self.conductor_agent_topic,
            status_timeout=status_timeout)


def stop_rpc_server(server, name, deadline):
    """Stop ``server`` and wait for its requests in flight, giving up at
    ``deadline`` (time.monotonic()) with one WARNING line.

    :returns: whether it stopped in time.
    """
    stopped, done, failed = threading.Event(), threading.Event(), []

    def stop():
        try:
            server.stop()
            stopped.set()
            server.wait()
        except Exception as error:  # noqa: BLE001 - reported below
            failed.append(error)
        finally:
            done.set()
    threading.Thread(target=stop, daemon=True,
                     name=f'stop-{name}').start()
    if done.wait(max(0.0, deadline - time.monotonic())):
        if failed:
            LOG.warning("The RPC server of %s failed to stop cleanly (%s: "
                        "%s); stopping without it", name,
                        type(failed[0]).__name__, failed[0])
        return not failed
    if stopped.is_set():
        LOG.warning("The RPC server of %s still runs requests after %.0f "
                    "s; stopping without them (a restart reconciles what "
                    "they left)", name, SERVER_STOP_S)
    else:
        LOG.warning("The RPC server of %s did not stop taking requests "
                    "within %.0f s (is the message broker reachable?); "
                    "stopping without it", name, SERVER_STOP_S)
    return False


class _RPCService(os_service.Service):
    """An RPC server for one manager, started and stopped gracefully."""

    def __init__(self, transport, target, manager, release=None):
        """:param release: the numamig release the service runs as (a
            testing aid); None: the current one.
        """
        super().__init__()
        self.transport = transport
        self.rpc_target = target
        self.manager = manager
        self.release = release or releases.for_service_version(
            service_obj.SERVICE_VERSION)
        self.rpc_server = None
        self.periodic = None
        # The Prometheus endpoint (numamig.metrics.Endpoint), set by
        # from_conf when [metrics] port asks for one.
        self.metrics_endpoint = None
        self._stopped = threading.Event()

    def _endpoints(self):
        return [self.manager]

    def _start_server(self):
        self.rpc_server = self._server(self.rpc_target, self._endpoints())
        self.rpc_server.start()

    def _server(self, target, endpoints):
        # An older release answers in, and accepts only, its own object
        # versions.
        objects_ = self.release.object_versions
        return rpc.get_server(
            self.transport, target, endpoints,
            version_manifest=objects_, known_versions=objects_)

    def stop(self, graceful=True):
        """Stop taking requests, let in-flight ones finish, stop periodic.

        Periodic runs are waited for only a grace, and while the servers
        stop: one may be blocked on a peer that is gone (see
        numamig.periodic), and a daemon stops within seconds of SIGTERM.
        """
        self._stop_metrics()
        self._stop_periodic(self._stop_servers)
        super().stop(graceful)
        self._stopped.set()

    def _start_metrics(self):
        if self.metrics_endpoint is not None:
            self.metrics_endpoint.start()

    def _stop_metrics(self):
        if self.metrics_endpoint is not None:
            self.metrics_endpoint.stop()

    def _stop_periodic(self, meanwhile):
        """Stop the periodic jobs, call ``meanwhile``, then wait what is
        left of the jobs' grace for their runs in progress."""
        jobs, self.periodic = self.periodic, None
        if jobs is None:
            meanwhile()
            return
        deadline = jobs.deadline()
        jobs.stop(wait=False)
        meanwhile()
        jobs.wait_stopped(deadline)

    def _stop_servers(self):
        self._stop_server_by('rpc_server', self.rpc_target,
                             time.monotonic() + SERVER_STOP_S)

    def _stop_server_by(self, attr, target, deadline):
        """Stop the RPC server held in ``attr`` (serving ``target``) and
        wait for its requests in flight until ``deadline``, then go on
        without it."""
        server = getattr(self, attr)
        setattr(self, attr, None)
        if server is not None:
            stop_rpc_server(server, f'topic {target.topic}', deadline)

    def wait(self):
        """Block until the service is stopped (a daemon's main thread)."""
        # Short waits keep the main thread responsive to signals.
        while not self._stopped.wait(1):
            pass


class ComputeService(_RPCService):
    """One compute agent: its manager, RPC server and periodic report."""

    def __init__(self, host, driver, transport, settings, names=None,
                 service_version=service_obj.SERVICE_VERSION):
        """:param settings: its ComputeSettings
            (compute_settings_from_conf): the periodic jobs' intervals,
            the wait of its status requests, its limits.
        :param service_version: the release the agent runs as (a testing
            aid, see numamig.releases).
        """
        names = names or RPCNames()
        release = releases.for_service_version(service_version)
        manager = compute_manager.ComputeManager(
            host, driver, names.records_api(
                transport, release=release,
                status_timeout=settings.status_timeout),
            names.compute_api(transport, settings.compute_version_cap,
                              release),
            settings, service_version=service_version)
        target = messaging.Target(topic=names.compute_topic, server=host,
                                  exchange=names.exchange)
        super().__init__(transport, target, manager, release)
        self.host = host
        self.report_interval = settings.report_interval
        self.reconcile_interval = settings.reconcile_interval
        self.update_resources_interval = settings.update_resources_interval
        # None: the locality watch is off and never looks.
        self.locality_interval = (None if settings.locality['mode'] == 'off'
                                  else settings.locality_interval)
        # 0: no background dirty-rate samples (a drain samples first).
        self.dirty_rate_interval = settings.dirty_rate_sample_interval
        # numamig.notifications.notifier.Notifier, set by from_conf when
        # [oslo_messaging_notifications] driver names one.
        self.notifier = None

    @classmethod
    def from_conf(cls, conf, driver, transport):
        svc = cls(conf.host, driver, transport,
                  compute_settings_from_conf(conf),
                  names=RPCNames.from_conf(conf),
                  service_version=service_version_from_conf(conf))
        svc.metrics_endpoint = metrics.Endpoint.from_conf(
            conf, compute_metrics.collectors(svc.manager), conf.host)
        svc.notifier = notifier.Notifier.from_conf(
            conf, rpc.get_notification_transport, conf.host,
            publisher=notifier.AGENT_PUBLISHER)
        return svc

    def _endpoints(self):
        return releases.endpoints_for(self.manager, self.release)

    def stop(self, graceful=True):
        """As every service; then, when graceful, let the outgoing
        migrations running in the manager's executor finish. A locality
        look in progress is told first: it ends after the guest it is
        moving, within the periodic jobs' grace."""
        self.manager.locality.stop()
        super().stop(graceful)
        self.manager.stop(wait=graceful)
        if self.notifier is not None:
            self.notifier.stop()

    def start(self):
        """Wait for a conductor, reconcile, serve RPC, report once, then
        report periodically.

        The server starts only once usage is known, so no claim is ever
        fitted against an empty tracker.
        """
        ctxt = nm_context.get_admin_context()
        # Served from the first moment: an agent waiting for its
        # conductor is up, and its monitoring sees it.
        # Where the guard's log ends now: decisions from here on are news.
        self.manager.guard_decisions.poll()
        self._start_metrics()
        if self.notifier is not None:
            self.notifier.start()
            self.manager.agent.events.listeners.append(self.notifier.changes)
        self.manager.conductor_api.wait_until_ready(ctxt)
        self.manager.init_host(ctxt)
        self._start_server()
        self.manager.report(ctxt)
        manager = self.manager
        self.periodic = periodic.PeriodicJobs(self.host).add(
            'reconcile outgoing migrations', self.reconcile_interval,
            lambda: manager.reconcile_outgoing(ctxt)).add(
            'recompute usage', self.update_resources_interval,
            lambda: manager.tracker.update_available_resource(ctxt)).add(
            # Never longer than an interval: a report older than the next
            # is worthless, and a stopping agent waits for this run.
            'report', self.report_interval,
            lambda: manager.report(ctxt, timeout=self.report_interval))
        if self.locality_interval is not None:
            self.periodic.add('locality watch', self.locality_interval,
                              manager.look_at_locality)
        if self.dirty_rate_interval:
            # The first soon after the start, so that a drain of a
            # restarted agent's host finds samples.
            self.periodic.add("sample the guests' dirty rates",
                              self.dirty_rate_interval,
                              manager.sample_dirty_rates_now,
                              first=min(30, self.dirty_rate_interval))
        guard_refresh = manager.driver.migration_guard_refresh_s()
        if guard_refresh:
            self.periodic.add('publish claims to the migration guard',
                              guard_refresh, manager.tracker.publish_claims)
            self.periodic.add("read the migration guard's decisions",
                              guard_refresh, manager.guard_decisions.poll)
        self.periodic.start()
        LOG.info("Compute agent %s started (service version %s)", self.host,
                 self.manager.service_version)


class ConductorService(_RPCService):
    """One conductor worker: database, scheduler cache and RPC server."""

    def __init__(self, db, transport, settings, host, names=None,
                 service_version=service_obj.SERVICE_VERSION):
        """:param settings: its ConductorSettings
            (conductor.settings.from_conf).
        :param host: the name it serves under on the broker.
        :param service_version: the release the conductor runs as (a
            testing aid, see numamig.releases).
        """
        names = names or RPCNames()
        release = releases.for_service_version(service_version)
        cache = host_state.HostStateCache()
        scheduler = nm_scheduler.Scheduler(
            cache, strategy=settings.scheduler_strategy,
            cell_strategy=settings.cell_strategy,
            max_candidates=settings.max_candidates)
        manager = conductor_manager.ConductorManager(
            db, cache, scheduler,
            names.compute_api(transport, settings.compute_version_cap,
                              release, peer_versions=cache.service_version),
            settings, service_version=service_version)
        target = messaging.Target(topic=names.conductor_topic, server=host,
                                  exchange=names.exchange)
        super().__init__(transport, target, manager, release)
        self.agent_target = messaging.Target(
            topic=names.conductor_agent_topic, server=host,
            exchange=names.exchange)
        self.agent_server = None
        self.db = db
        # numamig.notifications.notifier.Notifier, set by from_conf when
        # [oslo_messaging_notifications] driver names one.
        self.notifier = None
        # The workers' shared RPC call history (metrics.SharedCallTimes),
        # set by from_conf when [metrics] port asks for metrics.
        self.calls = None
        # Seconds between looks for migrations a dead conductor worker
        # left behind.
        self.sweep_interval = settings.sweep_interval
        self.executor = executor.MigrationExecutor(
            db, settings.admission, settings.migration_workers,
            manager.run_admitted, recheck=min(5.0, self.sweep_interval),
            recover=manager.requeue_after_database_error,
            give_up=manager.end_after_outage,
            outage_wait=settings.database_outage_wait, host=host)

    def _start_server(self):
        """Serve operators (and release 1's API) on the conductor topic
        and, with RPC threads of their own, agents on the agents' topic
        (a release that had no such topic serves everyone on the
        first)."""
        on_conductor, on_agents = conductor_endpoints.served(self.manager,
                                                             self.release)
        self.rpc_server = self._server(self.rpc_target, on_conductor)
        self.rpc_server.start()
        if on_agents is not None:
            self.agent_server = self._server(self.agent_target, on_agents)
            self.agent_server.start()

    def _stop_servers(self):
        deadline = time.monotonic() + SERVER_STOP_S
        self._stop_server_by('rpc_server', self.rpc_target, deadline)
        self._stop_server_by('agent_server', self.agent_target, deadline)

    def stop(self, graceful=True):
        """Start nothing new from the first moment; stop taking
        requests; let the migration tasks running reach a point where
        another worker can go on.

        Before anything waits: no migration is admitted, no drain or
        defragmentation move started, no start request sent again, and
        the operators' waits held here are answered. The RPC servers
        wait for their requests in flight, and a worker that went on
        meanwhile started drain moves after SIGTERM whose migrations
        then ran with no conductor to record their ends.
        """
        self.executor.stop_admitting()
        self.manager.drains.stop_starting()
        LOG.info("Conductor %s stopping: no migration, drain move or "
                 "defragmentation move starts here any more; migrations "
                 "admitted here and not started go back to the queue",
                 self.rpc_target.server)
        self.manager.watch.stop()
        self.manager.drain_watch.stop()
        self._stop_periodic(self._stop_servers)
        self.manager.drains.stop()
        self.manager.live_migratable.stop()
        self.executor.stop(graceful)
        super().stop(graceful)
        if self.notifier is not None:
            self.notifier.stop()
        if self.calls is not None:
            self.calls.stop()

    @classmethod
    def from_conf(cls, conf, db, transport):
        svc = cls(db, transport, conductor_settings_from_conf(conf),
                  conf.host, names=RPCNames.from_conf(conf),
                  service_version=service_version_from_conf(conf))
        if conf.metrics.port:
            svc.calls = metrics.SharedCallTimes(
                conductor_calls_directory(conf), metrics.RPC_CALLS)
        svc.metrics_endpoint = metrics.Endpoint.from_conf(
            conf, conductor_metrics.collectors(db, svc.calls), conf.host)
        svc.notifier = notifier.Notifier.from_conf(
            conf, rpc.get_notification_transport, conf.host)
        return svc

    def start(self):
        """Check the schema, load the reports, end stalled migrations,
        then serve RPC and look for stalled migrations periodically."""
        ctxt = nm_context.get_admin_context()
        self.db.check_schema()
        if self.calls is not None:
            self.calls.start()
        self._start_metrics()
        if self.notifier is not None:
            self.notifier.start()
            self.db.change_listeners.append(self.notifier.changes)
        self.manager.load_reports()
        self.manager.end_stalled_migrations(ctxt)
        self._start_server()
        self.manager.executor = self.executor
        self.executor.start()
        # Drains recorded before this start (a restart) carry on.
        self.manager.drains.start()
        self.manager.live_migratable.start()
        self.periodic = self._periodic_jobs(ctxt)
        self.periodic.start()
        LOG.info("Conductor %s started (service version %s)",
                 self.rpc_target.server, self.release.service_version)

    def _periodic_jobs(self, ctxt):
        # The first sweep after this start's comes once this worker has
        # had the database for a whole lease (15 s with the defaults):
        # the first that may trust leases and end what a dead worker
        # left, 5 s sooner than the second interval's sweep would.
        jobs = periodic.PeriodicJobs(self.rpc_target.server).add(
            'end stalled migrations', self.sweep_interval,
            lambda: self.manager.end_stalled_migrations(
                ctxt, resend_after=self.sweep_interval),
            first=self.executor.lease_s)
        sync_s = self.manager.worker.settings.report_sync_interval
        if sync_s:
            # Off the migrations' path: a migration then reads only what
            # other workers stored in the last few seconds.
            jobs.add("read the reports other workers stored", sync_s,
                     self.manager.sync_reports)
        return jobs


class ConductorWorker(os_service.Service):
    """One worker process of a multi-worker conductor.

    oslo.service forks the workers; neither a database engine's pooled
    connections nor an RPC transport survive a fork, so each worker
    builds its own in ``start`` and runs a ConductorService on them. The
    workers share the RPC topic (the broker spreads requests over them)
    and the database (whose writes are conditional, so they never
    corrupt a record).
    """

    def __init__(self, conf):
        super().__init__()
        self.conf = conf
        self.conductor = None
        self._db = None
        self._stopped = threading.Event()

    def start(self):
        from numamig.db import api as db_api
        self._db = db_api.Database.from_config(self.conf)
        self._db.wait_until_reachable(
            max_retries=self.conf.database.max_retries,
            interval=self.conf.database.retry_interval)
        self.conductor = ConductorService.from_conf(
            self.conf, self._db, rpc.get_transport(self.conf))
        self.conductor.start()

    def stop(self, graceful=True):
        try:
            if self.conductor is not None:
                self.conductor.stop(graceful)
        finally:
            if self._db is not None:
                self._db.dispose()
            rpc.cleanup()
            self._stopped.set()

    def wait(self):
        while not self._stopped.wait(1):
            pass


def transport_opts():
    """oslo.messaging's transport_url and control_exchange options, from
    its public option list: equal to the ones it registers itself when a
    transport is built (after set_transport_defaults), so both
    registrations agree."""
    for group, opts in messaging_opts.list_opts():
        if group is None:
            return [opt for opt in opts
                    if opt.name in ('transport_url', 'control_exchange')]
    return []


def parse_args(conf, argv, description=None):
    """Parse a daemon's command line and configuration files, set up
    logging, and check the configuration before anything starts.

    :param description: what ``--help`` says the daemon is.

    :raises InvalidConfiguration: naming the first unusable option.
    """
    logging.register_options(conf)
    # alembic announces each of its plugins at INFO on every start.
    logging.set_defaults(default_log_levels=[
        *logging.get_default_log_levels(), 'alembic=WARN'])
    # transport_url and control_exchange are registered by oslo.messaging
    # only when a transport is built; register them now so that the
    # files' values can be read before that.
    messaging.set_transport_defaults(rpc.CONTROL_EXCHANGE)
    conf.register_opts(transport_opts())
    conf(argv, project='numamig', version=version.version_string(),
         description=description)
    filemodes.prepare_log_file(conf)
    logging.setup(conf, 'numamig')
    log_brief.install()
    filemodes.warn_readable_secrets(conf)
    checks.check(conf)


def run(conf, svc, workers=1):
    """Run a service until SIGTERM stops it gracefully.

    oslo.service's launcher installs the signal handlers: SIGTERM stops
    the service (in-flight RPCs finish) and exits; SIGINT exits at once.
    One worker runs in this process; more are forked processes under
    this one, each starting ``svc`` itself (see ConductorWorker).
    """
    if workers == 1:
        library_notices.quiet_no_fork_notice()
        launcher = os_service.launch(conf, svc, workers=1, no_fork=True)
    else:
        launcher = os_service.launch(conf, svc, workers=workers)
    return launcher.wait()


def conductor_calls_directory(conf):
    """Where a conductor's workers share their RPC call history
    (metrics.SharedCallTimes): one directory per conductor daemon."""
    return os.path.join(conf.state_path, 'metrics', f'conductor-{conf.host}')


def service_version_from_conf(conf):
    """The release to run as: ``[testing] pretend_service_version``.

    A testing aid for rolling upgrades; unset (production): the current
    release. Running as an older one is logged loudly.
    """
    version = conf.testing.pretend_service_version
    if version is None or version == service_obj.SERVICE_VERSION:
        return service_obj.SERVICE_VERSION
    releases.for_service_version(version)
    LOG.warning("[testing] pretend_service_version = %s: this service "
                "runs as an older release (a testing aid, never for "
                "production)", version)
    return version


def conductor_settings_from_conf(conf):
    """The conductor's frozen ConductorSettings from a parsed CONF: what
    a daemon, an embedded deployment and a test build a conductor from
    (numamig.conductor.settings).

    :raises InvalidConfiguration: a convergence policy option is unusable.
    """
    return conductor_settings.from_conf(conf)


def compute_settings_from_conf(conf):
    """A compute agent's frozen ComputeSettings from a parsed CONF: what
    a daemon, an embedded deployment and a test build an agent from
    (numamig.compute.settings)."""
    return compute_settings.from_conf(
        conf, compute_manager.status_timeout(rpc.response_timeout(conf)))
