"""Client side of the conductor's RPC API (agents, operators, tools call it).

Only the conductor touches the database: agents record reports, claims
and migration statuses through these calls, and operators start and
follow migrations and create or adopt instances through them.

A client is capped at what the conductor serves: the conductor names
its service version in its answer to ``ping`` (a conductor of release 1
answers ``'pong'``), asked once per client before its first call, and
numamig.objects.service.SERVICE_VERSION_HISTORY maps it to an API
version. Every call then goes at the newest version that cap and the
call allow, so a conductor is never sent a version it refuses and no
call waits for a refusal (an operator's read against a release-1
conductor is the ping and the read). ``[upgrade_levels] conductor``
caps further. An uncapped client sends every object in its newest
version (less HELD_BACK); a capped one backports to its cap's
manifest, and the conductor answers each API version in the objects
that version carries (numamig.conductor.endpoints).
"""

import threading

from oslo_log import log as logging
import oslo_messaging as messaging
from oslo_utils import uuidutils

from numamig import context as nm_context
from numamig import exception
from numamig import rpc
from numamig.conductor import rpcapi_drain
from numamig.conductor import rpcapi_hosts
from numamig.conductor import rpcapi_runs
from numamig.conductor.api_versions import HELD_BACK
from numamig.conductor.api_versions import OBJECT_VERSIONS
from numamig.conductor.api_versions import RELEASE_1
from numamig.conductor.api_versions import RELEASE_2
from numamig.conductor.api_versions import VERSION_ALIASES
from numamig.objects import service as service_obj

LOG = logging.getLogger(__name__)
TOPIC = 'numamig-conductor'
# Where conductors of release 2 serve compute agents' calls, with
# RPC threads of their own: an operator's requests can then never take
# every thread an agent's call back needs (see doc/source/control-plane.rst).
AGENT_TOPIC = 'numamig-conductor-agents'

# Seconds a wait's answer may take beyond the wait itself, when the
# client has no default timeout of its own.
CALL_MARGIN_S = 10


class ConductorAPI(rpcapi_drain.DrainCalls, rpcapi_hosts.HostCalls,
                   rpcapi_runs.RunCalls):
    """Client side of the conductor RPC API.

    The API version history is numamig.conductor.api_versions's
    docstring, beside the version table.

    A client sends every call at the newest version its cap allows, so
    that answers carry what it reads, without the arguments older
    versions lack. The cap is the lower of ``[upgrade_levels]
    conductor`` and what the conductor's reported service version
    serves (see the module docstring): nothing is learnt from refusals.
    """

    VERSION = RELEASE_2

    def __init__(self, transport, version_cap=None, timeout=None,
                 topic=TOPIC, exchange=None, release_objects=None,
                 agent_topic=None, status_timeout=None,
                 conductor_version=None):
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
        :param conductor_version: the conductor's service version when
            the caller knows it; None: asked with ``ping`` before the
            first call.
        """
        self.timeout = timeout
        self.status_timeout = status_timeout
        self.topic = topic
        self.agent_topic = agent_topic
        self._configured_cap = VERSION_ALIASES.get(version_cap,
                                                   version_cap)
        self._release_objects = release_objects

        def client_for(topic, objects_, cap):
            return rpc.get_client(
                transport, messaging.Target(topic=topic, exchange=exchange,
                                            version='1.0'),
                version_cap=cap, version_manifest=objects_,
                known_versions=release_objects)
        self._client_for = client_for
        # The conductor's service version and the clients capped at what
        # it serves, set together by _learn (under the lock: an agent's
        # threads share one client).
        self._lock = threading.Lock()
        self.conductor_version = None
        self._client = None
        if conductor_version is not None:
            self._learn(conductor_version)

    @property
    def version_cap(self):
        """The newest API version sent: ``[upgrade_levels] conductor``
        or what the conductor serves, whichever is older (None before
        the conductor's version is known and when nothing caps)."""
        self._known()
        return self._cap

    @property
    def client(self):
        """The RPC client, capped at what the conductor serves."""
        self._known()
        return self._client

    def _known(self):
        """Ask the conductor its service version if not known yet."""
        if self._client is None:
            self._ask_version(nm_context.get_admin_context(), self.timeout)

    def _ask_version(self, ctxt, timeout):
        """Ping the conductor at API 1.0 (which every release serves) and
        cap this client at what its answer names."""
        options = {'timeout': timeout} if timeout else {}
        answer = self._client_for(
            self.topic, {}, '1.0').prepare(**options).call(ctxt, 'ping')
        self._learn(_service_version_of(answer))

    def _learn(self, conductor_version):
        """Cap the clients at what ``conductor_version`` serves."""
        # A conductor of this release or a newer one: uncapped (every
        # object in its newest version, less HELD_BACK).
        served = None if conductor_version >= service_obj.SERVICE_VERSION \
            else service_obj.api_version_for(conductor_version,
                                             'conductor_rpc')
        cap = _lower_cap(served, self._configured_cap)
        with self._lock:
            if self._client is not None and cap == self._cap:
                self.conductor_version = conductor_version
                return
            if self._client is not None:
                LOG.info("The conductor now reports service version %s: "
                         "calls go at conductor API %s", conductor_version,
                         cap)
            self._build(cap)
            self.conductor_version = conductor_version

    def _build(self, cap):
        release_objects = self._release_objects
        manifest = release_objects or rpc.manifest_for_cap(
            OBJECT_VERSIONS, cap, HELD_BACK)
        self._cap = cap
        self._manifest = manifest
        self._client = self._client_for(self.topic, manifest, cap)

    @classmethod
    def from_conf(cls, conf, transport, **kwargs):
        """A client capped by ``[upgrade_levels] conductor``."""
        return cls(transport, version_cap=conf.upgrade_levels.conductor,
                   **kwargs)

    def _call(self, ctxt, method, timeout=None, version='1.0',
              newer_kwargs=None, **kwargs):
        """Call ``method`` once: at release 2's version when the cap
        allows it (answers then carry every object's newest version),
        else at ``version`` without ``newer_kwargs``.

        :param version: the API version taking ``kwargs`` (release 1's).
        :param newer_kwargs: release 2's arguments.
        """
        self._known()
        if self.client.can_send_version(RELEASE_2):
            return self._send(ctxt, method, RELEASE_2, timeout, **kwargs,
                              **(newer_kwargs or {}))
        if newer_kwargs:
            LOG.info("%s: %s not sent: the conductor or [upgrade_levels] "
                     "conductor allows only API %s", method,
                     ', '.join(sorted(newer_kwargs)), self._cap)
        return self._send(ctxt, method, version, timeout, **kwargs)

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
            return self.client.prepare(**options).call(
                ctxt, method, **kwargs)
        try:
            return rpc.sent_until_taken(
                call, lambda: timeout or self.client.transport.conf.
                rpc_response_timeout, f"{method} to the conductor")
        except messaging.MessageUndeliverable:
            raise messaging.MessagingTimeout(
                f"no queue of the conductor took {method}") from None

    def _what_caps(self):
        """What holds this client below a version, for an operator."""
        if self.conductor_version is not None and \
                self.conductor_version < service_obj.SERVICE_VERSION:
            return (f"the conductor runs an older release (service version "
                    f"{self.conductor_version}, conductor API "
                    f"{self._cap}): upgrade it first")
        return "[upgrade_levels] conductor caps this client below it"

    def _operation(self, ctxt, method, timeout=None, **kwargs):
        """Call a 1.1 operation, refusing clearly when capped below."""
        if not self.can_operate():
            raise exception.Invalid(
                reason=f"{method} needs conductor API "
                       f"{RELEASE_1}, but {self._what_caps()}")
        return self._call(ctxt, method, timeout=timeout,
                          version=RELEASE_1, **kwargs)

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
        """Ping, and cap this client at what the answering conductor's
        service version serves; an agent's client moves to the agents'
        topic when that is RELEASE_2 or newer."""
        self._ask_version(ctxt, timeout)
        if self.agent_topic and self.topic != self.agent_topic:
            if not self._client.can_send_version(RELEASE_2):
                LOG.info("The conductor serves API %s (an older release): "
                         "agent calls stay on topic %s", self._cap,
                         self.topic)
                return
            with self._lock:
                self.topic = self.agent_topic
                self._build(self._cap)

    # -- compute agents -----------------------------------------------------

    def report_compute_node(self, ctxt, report, timeout=None):
        """Send a report and wait until it is stored (``timeout``: seconds,
        default the client's).

        Sent at RELEASE_2 with the guard's state when the cap allows;
        an older conductor (release 1) gets it at 1.0 without the state.
        While the conductor is older than this client's release it is
        asked its service version again first (one ping per periodic
        report), so that an agent follows its conductor's upgrade.
        """
        if self._release_objects is None and \
                self.conductor_version is not None and \
                self.conductor_version < service_obj.SERVICE_VERSION:
            self._ask_version(ctxt, timeout or self.timeout)
        if self.client.can_send_version(RELEASE_2):
            return self._send(ctxt, 'report_compute_node', RELEASE_2,
                              timeout, report=report)
        return self._send(ctxt, 'report_compute_node', '1.0', timeout,
                          report=_report_1_0(report))

    def report_compute_node_cast(self, ctxt, report):
        """Send a report without waiting (cast): the reports an agent
        sends after a guest arrived or left, off every migration's path;
        a lost one is replaced by the next periodic report."""
        if self.client.can_send_version(RELEASE_2):
            self.client.prepare(version=RELEASE_2).cast(
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
        return self.client.can_send_version(RELEASE_1)

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
                              version=RELEASE_1,
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

        A conductor of release 2 checks and records the request in its
        admission queue and answers at once (status accepted, with the
        queue position); its migration threads choose the destination
        and start it. An older conductor answers once the source has
        been told to migrate (status queued).

        :param priority: 0-100, higher first (see
            numamig.objects.migration.PRIORITIES); an older conductor is
            not sent it.
        :param migration_uuid: the uuid to record the migration under
            (default: a new one). A conductor of release 2 answers a
            request whose migration it recorded already with that
            migration, so the same request delivered (or sent) again
            never records a second; an older conductor is not sent it
            and makes up its own.
        :param policy: the convergence policy to run it under (a name
            of numamig.convergence.policy or ``[libvirt]
            live_migration_policies``); a conductor of release 2 refuses
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
            if not self.client.can_send_version(RELEASE_2):
                raise exception.Invalid(
                    reason=f"a convergence policy needs conductor API "
                           f"{RELEASE_2}, but "
                           f"{self._what_caps()}; nothing was recorded")
        return self._call(ctxt, 'live_migrate_instance', timeout=timeout,
                          instance_uuid=instance_uuid, dest_host=dest_host,
                          newer_kwargs=newer)

    def live_migration_dry_run(self, ctxt, instance_uuid, dest_host=None,
                               policy=None):
        """Where the guest would go and how pinned; claims nothing.

        :param policy: the convergence policy the migration would be
            requested under: refused when unknown, as the
            request would be, and the prediction made under it. An older
            conductor cannot take it: refused here (Invalid) rather than
            answered under another policy.
        """
        if policy is not None:
            return self._since(ctxt, 'live_migration_dry_run',
                               RELEASE_2,
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
        """Ask the source to resume a postcopy-paused migration.

        :param pauses: how many times the caller saw it postcopy-paused
            (the request's identity: a repeat after that pause was
            resumed starts nothing).
        :returns: {'migration': Migration, 'outcome': one of
            numamig.conductor.tasks.resume.OUTCOMES}.
        :raises Invalid: the cap or the conductor is of release 1.
        """
        return self._since(ctxt, 'migration_resume', RELEASE_2,
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
                       f"{self._what_caps()}")
        return self._call(ctxt, method, timeout=timeout, version=version,
                          **kwargs)

    def migration_wait(self, ctxt, migration, timeout):
        """``migration`` as recorded once its status or progress differs
        from ``migration``'s, or after ``timeout`` seconds; sooner when
        the conductor holds as many waits as it allows (the caller then
        waits on its own before asking again).

        :raises UnsupportedVersion: the conductor (or a cap) is older
            than 1.5: poll migration_get instead.
        """
        if not self.client.can_send_version(RELEASE_2):
            raise messaging.UnsupportedVersion(RELEASE_2)
        cctxt = self.client.prepare(
            version=RELEASE_2,
            timeout=timeout + (self.timeout or CALL_MARGIN_S))
        return cctxt.call(
            ctxt, 'migration_wait', migration_uuid=migration.uuid,
            status=migration.status,
            memory_processed=migration.memory_processed, timeout=timeout)


def _lower_cap(cap, other):
    """The older of two caps (None: no cap)."""
    if cap is None or other is None:
        return cap or other
    return min(cap, other, key=_tuple)


def _service_version_of(ping_answer):
    """The service version a conductor's ping answer names: a dict with
    ``service_version`` from release 2, ``'pong'`` from release 1."""
    if isinstance(ping_answer, dict):
        version = ping_answer.get('service_version')
        if isinstance(version, int) and version >= 1:
            return version
    return 1


def _tuple(version):
    major, minor = version.split('.')
    return int(major), int(minor)


def _report_1_0(report):
    """``report`` as ComputeNodeReport 1.0 (no migration guard state)."""
    if report.VERSION == '1.0':
        return report
    primitive = rpc.primitive_for(report, '1.0')
    return type(report).obj_from_primitive(primitive)
