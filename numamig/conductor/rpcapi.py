"""Client side of the conductor's RPC API (agents, operators, tools call it).

Only the conductor touches the database: agents record reports, claims
and migration statuses through these calls, and operators start and
follow migrations and create or adopt instances through them.

An uncapped client sends every object in its newest version (less
HELD_BACK); the conductor is upgraded before the agents, so it reads
them. A client capped by ``[upgrade_levels] conductor`` backports to its
cap's manifest, and the conductor answers each API version in the
objects that version carries (numamig.conductor.endpoints).
"""

from oslo_log import log as logging
import oslo_messaging as messaging
from oslo_utils import uuidutils

from numamig import exception
from numamig import rpc
from numamig.conductor import rpcapi_drain
from numamig.conductor import rpcapi_hosts
from numamig.conductor import rpcapi_runs
from numamig.conductor.api_versions import CONVERGENCE_VERSION
from numamig.conductor.api_versions import DRY_RUN_POLICY_VERSION
from numamig.conductor.api_versions import GUARD_VERSION
from numamig.conductor.api_versions import HELD_BACK
from numamig.conductor.api_versions import MEMORY_RECLAIM_VERSION
from numamig.conductor.api_versions import OBJECT_VERSIONS
from numamig.conductor.api_versions import OPERATIONS_VERSION
from numamig.conductor.api_versions import PAUSED_VERSION
from numamig.conductor.api_versions import QUEUE_VERSION
from numamig.conductor.api_versions import RECOVERY_VERSION
from numamig.conductor.api_versions import REQUEST_UUID_VERSION  # noqa: F401
from numamig.conductor.api_versions import RESULTS_VERSION
from numamig.conductor.api_versions import SHORT_PATH_VERSION  # noqa: F401
from numamig.conductor.api_versions import SINCE as _SINCE
from numamig.conductor.api_versions import THREADS_VERSION
from numamig.conductor.api_versions import VIRTIO_MEM_VERSION
from numamig.conductor.api_versions import WAIT_VERSION

LOG = logging.getLogger(__name__)
TOPIC = 'numamig-conductor'
# Where conductors of API 1.3 and later serve compute agents' calls, with
# RPC threads of their own: an operator's requests can then never take
# every thread an agent's call back needs (see doc/source/control-plane.rst).
AGENT_TOPIC = 'numamig-conductor-agents'

# Calls answering with migrations operators read (their convergence
# fields need API 1.12).
_SHOWS_MIGRATIONS = frozenset({
    'migration_get', 'migration_get_all', 'live_migrate_instance',
    'migration_abort', 'migration_force_complete', 'migration_resume'})
# Calls whose answers hold migrations whose status a caller acts on: a
# postcopy-paused one reads ``running`` below PAUSED_VERSION (a source's
# reconciliation must tell it from a running one). migration_set_status
# answers with the status just recorded; it goes at PAUSED_VERSION only
# to record postcopy-paused (rpcapi_runs).
_READS_STATUS = _SHOWS_MIGRATIONS | frozenset({
    'migration_get_in_progress_by_host'})

# Seconds a wait's answer may take beyond the wait itself, when the
# client has no default timeout of its own.
CALL_MARGIN_S = 10


# Methods whose answers hold instances or their topologies (records an
# agent counts usage from): asked at VIRTIO_MEM_VERSION first.
_GUEST_ANSWERS = frozenset((
    'instance_get', 'instance_get_all', 'instance_get_all_by_host',
    'instance_get_claims_on_host', 'instance_set_placement',
    'instance_update', 'instance_create', 'instance_adopt',
    'migration_context_set', 'migration_context_apply',
    'migration_complete'))


def _carries_virtio_mem(kwargs):
    """Whether the arguments hold a guest cell with a virtio-mem device."""
    return rpc.holds_virtio_mem(tuple(kwargs.values()))


class ConductorAPI(rpcapi_drain.DrainCalls, rpcapi_hosts.HostCalls,
                   rpcapi_runs.RunCalls):
    """Client side of the conductor RPC API.

    The API version history is numamig.conductor.api_versions's
    docstring, beside the version table.

    A client sends every call at the newest version its cap allows, so
    that answers carry what it reads; a conductor of an older release
    refuses it (UnsupportedVersion, before any endpoint runs) and the
    call is sent again at the next older version, without the arguments
    that version lacks, down to the version the call needs.
    """

    VERSION = DRY_RUN_POLICY_VERSION

    def __init__(self, transport, version_cap=None, timeout=None,
                 topic=TOPIC, exchange=None, release_objects=None,
                 agent_topic=None, status_timeout=None):
        """:param timeout: default seconds to wait for an answer.
        :param status_timeout: seconds one request recording a
            migration's status or completion waits (they take the
            conductor milliseconds; an agent asks again, see
            numamig.compute.patience); None: ``timeout``.

        :param topic, exchange: where the conductor listens (tests and
            embedded deployments sharing a broker use their own).
        :param release_objects: object versions of the older release the
            caller runs as (a testing aid): sent, and the newest accepted
            in answers. None: this release's.
        :param agent_topic: a compute agent's client: the agents' topic,
            used once ``wait_until_ready`` found a conductor serving it.
        """
        self.timeout = timeout
        self.status_timeout = status_timeout
        self.topic = topic
        self.agent_topic = agent_topic
        manifest = release_objects or rpc.manifest_for_cap(
            OBJECT_VERSIONS, version_cap, HELD_BACK)

        def client_for(topic, objects_=manifest):
            return rpc.get_client(
                transport, messaging.Target(topic=topic, exchange=exchange,
                                            version='1.0'),
                version_cap=version_cap, version_manifest=objects_,
                known_versions=release_objects)
        self._client_for = client_for
        self.client = client_for(topic)
        # Calls sent below VIRTIO_MEM_VERSION (to a conductor of an older
        # release) backport their objects to what it reads: the newest
        # manifest below that version, unless a cap or release_objects
        # already hold the client below it.
        older = rpc.manifest_for_cap(OBJECT_VERSIONS, _before(
            VIRTIO_MEM_VERSION))
        self._older_manifest = None if release_objects or (
            version_cap and _tuple(version_cap) < _tuple(
                VIRTIO_MEM_VERSION)) else older
        self._older_clients = {}
        # A client that reads guest cells with devices (not one running
        # as an older release) asks at VIRTIO_MEM_VERSION where answers
        # hold guests.
        self._reads_virtio_mem = _tuple(
            manifest.get('InstanceNUMACell', '1.0')) >= (1, 1)
        # Whether the conductor reads ComputeNodeReport 1.1 (None: not
        # known yet; see report_compute_node).
        self._reads_guard = None

    @classmethod
    def from_conf(cls, conf, transport, **kwargs):
        """A client capped by ``[upgrade_levels] conductor``."""
        return cls(transport, version_cap=conf.upgrade_levels.conductor,
                   **kwargs)

    def _call(self, ctxt, method, timeout=None, version='1.0',
              newer_kwargs=None, **kwargs):
        """Call ``method`` at the newest version allowed and served.

        :param version: the oldest API version taking ``kwargs``; the
            last one tried.
        :param newer_kwargs: arguments of later versions (see _SINCE),
            sent only at a version that takes them.
        """
        newer_kwargs = newer_kwargs or {}
        # Versions from QUEUE_VERSION to below VIRTIO_MEM_VERSION carry
        # the same objects: they are tried only for the arguments that
        # need them, so that a call costs no refused round trip against
        # an older conductor. VIRTIO_MEM_VERSION is tried first by the
        # calls whose questions or answers hold guest cells that may
        # have virtio-mem devices, which older versions drop.
        wanted = {QUEUE_VERSION, RESULTS_VERSION} | \
            {_SINCE[name] for name in newer_kwargs}
        if method in _SHOWS_MIGRATIONS:
            # What operators read: the convergence fields of Migration
            # 1.3 come only in answers at 1.12, the memory reclaimed to
            # place the guest (1.4) at 1.14, the post-copy recovery (1.5)
            # at 1.15, where the migration's threads ran (1.6) at 1.16.
            wanted.update((CONVERGENCE_VERSION, MEMORY_RECLAIM_VERSION,
                           RECOVERY_VERSION, THREADS_VERSION))
        if method in _READS_STATUS:
            wanted.add(PAUSED_VERSION)
        if self._reads_virtio_mem and (method in _GUEST_ANSWERS or
                                       _carries_virtio_mem(kwargs)):
            wanted.add(VIRTIO_MEM_VERSION)
        newer = [v for v in sorted(wanted, key=_tuple, reverse=True)
                 if _tuple(v) > _tuple(version)]
        for attempt in newer:
            if not self.client.can_send_version(attempt):
                continue
            try:
                return self._send(ctxt, method, attempt, timeout, **kwargs,
                                  **_taken_at(attempt, newer_kwargs))
            except messaging.UnsupportedVersion:
                LOG.info("The conductor does not serve API %s (a conductor "
                         "of an older release); %s sent again at an older "
                         "version", attempt, method)
        dropped = sorted(set(newer_kwargs) - set(_taken_at(version,
                                                           newer_kwargs)))
        if dropped:
            LOG.info("%s: %s not sent: the conductor or [upgrade_levels] "
                     "conductor allows only API %s", method,
                     ', '.join(dropped), version)
        return self._send(ctxt, method, version, timeout, **kwargs,
                          **_taken_at(version, newer_kwargs))

    def _send(self, ctxt, method, version, timeout, **kwargs):
        """One call; sent again while no conductor's queue takes it
        (rpc.sent_until_taken: after a broker restart, until a conductor
        has declared its queue again), within the call's deadline."""
        timeout = timeout or self.timeout

        def call(wait):
            options = {'version': version,
                       'transport_options': rpc.MANDATORY}
            if wait or timeout:
                options['timeout'] = wait or timeout
            return self._client_at(version).prepare(**options).call(
                ctxt, method, **kwargs)
        try:
            return rpc.sent_until_taken(
                call, lambda: timeout or self.client.transport.conf.
                rpc_response_timeout, f"{method} to the conductor")
        except messaging.MessageUndeliverable:
            raise messaging.MessagingTimeout(
                f"no queue of the conductor took {method}") from None

    def _client_at(self, version):
        """The client whose serializer backports to what ``version``
        reads (one per topic, made on first use)."""
        if self._older_manifest is None or \
                _tuple(version) >= _tuple(VIRTIO_MEM_VERSION):
            return self.client
        if self.topic not in self._older_clients:
            self._older_clients[self.topic] = self._client_for(
                self.topic, self._older_manifest)
        return self._older_clients[self.topic]

    def _operation(self, ctxt, method, timeout=None, **kwargs):
        """Call a 1.1 operation, refusing clearly when capped below."""
        if not self.can_operate():
            raise exception.Invalid(
                reason=f"{method} needs conductor API "
                       f"{OPERATIONS_VERSION}, but [upgrade_levels] "
                       f"conductor caps this client below it")
        return self._call(ctxt, method, timeout=timeout,
                          version=OPERATIONS_VERSION, **kwargs)

    def wait_until_ready(self, ctxt, attempt_timeout=5, max_attempts=None):
        """Block until a conductor answers; agents call it at start.

        A call sent before any conductor listens is lost (no queue holds
        it), so an agent starting with its conductor must ask again.

        :raises MessagingTimeout: after ``max_attempts`` unanswered tries.
        """
        attempt = 0
        while True:
            attempt += 1
            try:
                self._ping(ctxt, attempt_timeout)
                return
            except messaging.MessagingTimeout:
                if max_attempts is not None and attempt >= max_attempts:
                    raise
                LOG.warning("No conductor answered within %s s (attempt "
                            "%d); still waiting", attempt_timeout, attempt)

    def ping(self, ctxt, timeout):
        """Whether a conductor serves this client's topic, within
        ``timeout`` seconds (a command asks before its action).

        :raises MessagingTimeout: none answered.
        """
        self._ping(ctxt, timeout)

    def _ping(self, ctxt, timeout):
        """Ping; an agent's client moves to the agents' topic when the
        conductor answers at QUEUE_VERSION (an older one refuses it)."""
        if self.agent_topic and self.client.can_send_version(QUEUE_VERSION):
            try:
                self.client.prepare(timeout=timeout,
                                    version=QUEUE_VERSION).call(ctxt, 'ping')
            except messaging.UnsupportedVersion:
                LOG.info("The conductor does not serve API %s (an older "
                         "release): agent calls stay on topic %s",
                         QUEUE_VERSION, self.topic)
            else:
                self.topic = self.agent_topic
                self.client = self._client_for(self.agent_topic)
                return
        self.client.prepare(timeout=timeout).call(ctxt, 'ping')

    # -- compute agents -----------------------------------------------------

    def report_compute_node(self, ctxt, report, timeout=None):
        """Send a report and wait until it is stored (``timeout``: seconds,
        default the client's).

        Sent at GUARD_VERSION with the guard's state when the cap allows;
        a conductor that refuses it (an older release) is sent the report
        again at 1.0, without the state, and so are this client's casts
        until a call at GUARD_VERSION is answered (the conductor was
        upgraded).
        """
        if self.client.can_send_version(GUARD_VERSION):
            try:
                answer = self._send(ctxt, 'report_compute_node',
                                    GUARD_VERSION, timeout, report=report)
                self._reads_guard = True
                return answer
            except messaging.UnsupportedVersion:
                LOG.info("The conductor does not serve API %s (an older "
                         "release): reports go without the migration "
                         "guard's state", GUARD_VERSION)
                self._reads_guard = False
        return self._send(ctxt, 'report_compute_node', '1.0', timeout,
                          report=_report_1_0(report))

    def report_compute_node_cast(self, ctxt, report):
        """Send a report without waiting (cast): the reports an agent
        sends after a guest arrived or left, off every migration's path;
        a lost one is replaced by the next periodic report. A cast gets
        no refusal back: it goes at GUARD_VERSION only once a call there
        was answered."""
        if self._reads_guard:
            self.client.prepare(version=GUARD_VERSION).cast(
                ctxt, 'report_compute_node', report=report)
            return
        self.client.cast(ctxt, 'report_compute_node',
                         report=_report_1_0(report))

    def instance_get(self, ctxt, instance_uuid):
        return self._call(ctxt, 'instance_get', instance_uuid=instance_uuid)

    def instance_get_all_by_host(self, ctxt, host):
        return self._call(ctxt, 'instance_get_all', host=host)

    def instance_get_claims_on_host(self, ctxt, host):
        """Instances holding a claim on ``host`` (in-progress migrations)."""
        return self._call(ctxt, 'instance_get_claims_on_host', host=host)

    def instance_set_placement(self, ctxt, instance_uuid, host,
                               numa_topology):
        """Record where an instance runs and how it is placed there."""
        return self._call(ctxt, 'instance_set_placement',
                          instance_uuid=instance_uuid, host=host,
                          numa_topology=numa_topology)

    def instance_update(self, ctxt, instance_uuid, values):
        return self._call(ctxt, 'instance_update',
                          instance_uuid=instance_uuid, values=values)

    def migration_get(self, ctxt, migration_uuid):
        return self._call(ctxt, 'migration_get',
                          migration_uuid=migration_uuid)

    def migration_get_in_progress_by_host(self, ctxt, host):
        return self._call(ctxt, 'migration_get_in_progress_by_host',
                          host=host)

    def migration_context_set(self, ctxt, context):
        """Record a move claim; answers only once it is committed.

        :raises MigrationPreCheckError: the migration no longer tries
            this destination, or the instance holds another claim.
        """
        return self._call(ctxt, 'migration_context_set', context=context)

    def can_operate(self):
        """Whether the 1.1 operations may be sent (the cap allows it)."""
        return self.client.can_send_version(OPERATIONS_VERSION)

    def migration_context_drop(self, ctxt, instance_uuid, migration_uuid,
                               dest_host=None):
        """Drop a migration's claim; with ``dest_host``, only if held there.

        A conductor capped below 1.1 is not sent ``dest_host`` and drops
        the migration's claim wherever it is held, as 1.0 did.
        """
        kwargs = {'instance_uuid': instance_uuid,
                  'migration_uuid': migration_uuid}
        if dest_host is not None and self.can_operate():
            return self._call(ctxt, 'migration_context_drop',
                              version=OPERATIONS_VERSION,
                              dest_host=dest_host, **kwargs)
        return self._call(ctxt, 'migration_context_drop', **kwargs)

    def migration_context_apply(self, ctxt, instance_uuid, migration_uuid):
        return self._call(ctxt, 'migration_context_apply',
                          instance_uuid=instance_uuid,
                          migration_uuid=migration_uuid)

    # -- operators ------------------------------------------------------------

    def live_migrate_instance(self, ctxt, instance_uuid, dest_host=None,
                              timeout=None, priority=None,
                              migration_uuid=None, policy=None):
        """Request a live migration.

        A conductor of API 1.3 checks and records the request in its
        admission queue and answers at once (status accepted, with the
        queue position); its migration threads choose the destination
        and start it. An older conductor answers once the source has
        been told to migrate (status queued).

        :param priority: 0-100, higher first (see
            numamig.objects.migration.PRIORITIES); an older conductor is
            not sent it.
        :param migration_uuid: the uuid to record the migration under
            (default: a new one). A conductor of API 1.9 answers a
            request whose migration it recorded already with that
            migration, so the same request delivered (or sent) again
            never records a second; an older conductor is not sent it
            and makes up its own.
        :param policy: the convergence policy to run it under (a name
            of numamig.convergence.policy or ``[libvirt]
            live_migration_policies``); a conductor of API 1.12 refuses
            an unknown one (UnknownMigrationPolicy). An older conductor
            cannot take it: the request is then refused here, not sent
            without it (the migration would run under another policy).
        :returns: the Migration.
        :raises InstanceBusy: a migration of the instance is in progress.
        :raises MigrationQueueFull: too many migrations wait already.
        :raises NoValidHost: (older conductors only) no destination
            could take the guest.
        """
        newer = {'migration_uuid': migration_uuid or
                 uuidutils.generate_uuid()}
        if priority is not None:
            newer['priority'] = priority
        if policy is not None:
            newer['policy'] = policy
            if not self.client.can_send_version(CONVERGENCE_VERSION):
                raise exception.Invalid(
                    reason=f"a convergence policy needs conductor API "
                           f"{CONVERGENCE_VERSION}; [upgrade_levels] "
                           f"conductor allows less; nothing was recorded")
        return self._call(ctxt, 'live_migrate_instance', timeout=timeout,
                          instance_uuid=instance_uuid, dest_host=dest_host,
                          newer_kwargs=newer)

    def live_migration_dry_run(self, ctxt, instance_uuid, dest_host=None,
                               policy=None):
        """Where the guest would go and how pinned; claims nothing.

        :param policy: the convergence policy the migration would be
            requested under (API 1.18): refused when unknown, as the
            request would be, and the prediction made under it. An older
            conductor cannot take it: refused here (Invalid) rather than
            answered under another policy.
        """
        if policy is not None:
            return self._since(ctxt, 'live_migration_dry_run',
                               DRY_RUN_POLICY_VERSION,
                               "a dry run under a requested policy",
                               instance_uuid=instance_uuid,
                               dest_host=dest_host, policy=policy)
        return self._call(ctxt, 'live_migration_dry_run',
                          instance_uuid=instance_uuid, dest_host=dest_host)

    def migration_abort(self, ctxt, migration_uuid):
        return self._call(ctxt, 'migration_abort',
                          migration_uuid=migration_uuid)

    def migration_force_complete(self, ctxt, migration_uuid):
        return self._call(ctxt, 'migration_force_complete',
                          migration_uuid=migration_uuid)

    def migration_resume(self, ctxt, migration_uuid, pauses=None):
        """Ask the source to resume a postcopy-paused migration (1.17).

        :param pauses: how many times the caller saw it postcopy-paused
            (the request's identity: a repeat after that pause was
            resumed starts nothing).
        :returns: {'migration': Migration, 'outcome': one of
            numamig.conductor.resume.OUTCOMES}.
        :raises Invalid: the cap or the conductor is older than 1.17.
        """
        return self._since(ctxt, 'migration_resume', PAUSED_VERSION,
                           "resuming a post-copy migration",
                           migration_uuid=migration_uuid, pauses=pauses)

    def migration_get_all(self, ctxt, instance_uuid=None, status=None,
                          host=None):
        return self._call(ctxt, 'migration_get_all',
                          instance_uuid=instance_uuid, status=status,
                          host=host)

    def instance_get_all(self, ctxt, host=None):
        return self._call(ctxt, 'instance_get_all', host=host)

    def instance_create(self, ctxt, instance, host=None):
        """Record and build an instance on ``host`` or a scheduled one."""
        return self._call(ctxt, 'instance_create', instance=instance,
                          host=host)

    def instance_adopt(self, ctxt, host):
        """Record the NUMA guests of ``host`` numamig does not know yet."""
        return self._call(ctxt, 'instance_adopt', host=host)

    def compute_node_get_all(self, ctxt):
        return self._call(ctxt, 'compute_node_get_all')

    def get_domain_xml(self, ctxt, instance_uuid):
        """The live domain XML of an instance, from its host."""
        return self._call(ctxt, 'get_domain_xml',
                          instance_uuid=instance_uuid)

    def instance_delete(self, ctxt, instance_uuid, timeout=None):
        """Destroy an instance's guest and remove its record; idempotent.

        :returns: False if no such instance is recorded (nothing to do).
        :raises InstanceBusy: a migration of it is in progress.
        """
        return self._operation(ctxt, 'instance_delete', timeout=timeout,
                               instance_uuid=instance_uuid)

    def _since(self, ctxt, method, version, what, timeout=None, **kwargs):
        """Call ``method``, which needs API ``version``; Invalid, naming
        ``what`` needs it, when the cap or the conductor is older."""
        if not self.client.can_send_version(version):
            raise exception.Invalid(
                reason=f"{what} needs conductor API {version}, but "
                       f"[upgrade_levels] conductor caps this client "
                       f"below it")
        try:
            return self._call(ctxt, method, timeout=timeout,
                              version=version, **kwargs)
        except messaging.UnsupportedVersion:
            raise exception.Invalid(
                reason=f"{what} needs conductor API {version}; the "
                       f"conductor is older: upgrade it first")

    def migration_wait(self, ctxt, migration, timeout):
        """``migration`` as recorded once its status or progress differs
        from ``migration``'s, or after ``timeout`` seconds; sooner when
        the conductor holds as many waits as it allows (the caller then
        waits on its own before asking again).

        :raises UnsupportedVersion: the conductor (or a cap) is older
            than 1.5: poll migration_get instead.
        """
        if not self.client.can_send_version(WAIT_VERSION):
            raise messaging.UnsupportedVersion(WAIT_VERSION)
        for version in (PAUSED_VERSION, THREADS_VERSION, RECOVERY_VERSION,
                        MEMORY_RECLAIM_VERSION, CONVERGENCE_VERSION,
                        WAIT_VERSION):
            if not self.client.can_send_version(version):
                continue
            cctxt = self.client.prepare(
                version=version,
                timeout=timeout + (self.timeout or CALL_MARGIN_S))
            try:
                return cctxt.call(
                    ctxt, 'migration_wait', migration_uuid=migration.uuid,
                    status=migration.status,
                    memory_processed=migration.memory_processed,
                    timeout=timeout)
            except messaging.UnsupportedVersion:
                if version == WAIT_VERSION:
                    raise
                LOG.info("The conductor does not serve API %s; "
                         "migration_wait sent again at %s", version,
                         WAIT_VERSION)



def _before(version):
    """The newest declared API version below ``version``."""
    return max((v for v in OBJECT_VERSIONS if _tuple(v) < _tuple(version)),
               key=_tuple)


def _tuple(version):
    major, minor = version.split('.')
    return int(major), int(minor)


def _taken_at(version, newer_kwargs):
    """The arguments of ``newer_kwargs`` API ``version`` takes."""
    return {name: value for name, value in newer_kwargs.items()
            if _tuple(_SINCE[name]) <= _tuple(version)}


def _report_1_0(report):
    """``report`` as ComputeNodeReport 1.0 (no migration guard state)."""
    if report.VERSION == '1.0':
        return report
    primitive = rpc.primitive_for(report, '1.0')
    return type(report).obj_from_primitive(primitive)
