"""How a client reaches the conductor: its release, each API's cap, sending.

Both conductor clients (the agents' numamig.conductor.records_rpcapi and
the operators' numamig.conductor.rpcapi) hold a ConductorLink and send
through it; neither reaches into the other.

A link asks the conductor its service version once, with ``ping`` at
release 1's API 1.0 (which every release serves; a conductor of release
1 answers ``'pong'``), before its first call.
numamig.objects.service.SERVICE_VERSION_HISTORY then says which APIs the
conductor serves and at which versions, so a conductor is never sent a
version it refuses and no call waits for a refusal: an API of release 2
goes to its namespace at its version; to a conductor of release 1 (or
under ``[upgrade_levels] conductor`` below 2.0) the same calls go to
release 1's API (no namespace, 1.0-1.1) without release 2's arguments.
An uncapped client sends every object in its newest version (less
HELD_BACK); a capped one backports to its cap's manifest, and the
conductor answers each API version in the objects that version carries
(numamig.conductor.endpoints).
"""

import collections
import threading

from oslo_log import log as logging
import oslo_messaging as messaging

from numamig import context as nm_context
from numamig import exception
from numamig import rpc
from numamig.conductor import api_versions
from numamig.objects import service as service_obj

LOG = logging.getLogger(__name__)

# Seconds a wait's answer may take beyond the wait itself, when the
# client has no default timeout of its own.
CALL_MARGIN_S = 10


class Route(collections.namedtuple('Route', 'client namespaced cap')):
    """Where one API's calls go now: the RPC client, whether it is the
    API's own namespace (else release 1's API), and the newest version
    sent there (None: uncapped)."""

    def allows(self, version):
        """Whether what ``version`` brought may be sent: an API of
        release 2 carries all that release 1's had (1.x)."""
        if self.namespaced and api_versions.allows(api_versions.RELEASE_1,
                                                   version):
            return True
        return self.client.can_send_version(version)


class ConductorLink:
    """One client's view of the conductor: its service version and a
    route per API, rebuilt when the conductor reports another version.

    :param timeout: default seconds to wait for an answer.
    :param topic, exchange: where the conductor listens (tests and
        embedded deployments sharing a broker use their own).
    :param release_objects: object versions of the older release the
        caller runs as (a testing aid): sent, and the newest accepted in
        answers. None: this release's.
    :param conductor_version: the conductor's service version when the
        caller knows it; None: asked with ``ping`` before the first call.
    """

    def __init__(self, transport, version_cap=None, timeout=None,
                 topic=None, exchange=None, release_objects=None,
                 conductor_version=None):
        self.transport = transport
        self.timeout = timeout
        self.topic = topic
        self.exchange = exchange
        self.configured_cap = api_versions.VERSION_ALIASES.get(
            version_cap, version_cap)
        self.release_objects = release_objects
        # Under the lock: an agent's threads share one link.
        self._lock = threading.Lock()
        self.conductor_version = None
        self._routes = {}
        if conductor_version is not None:
            self.learn(conductor_version)

    def _client(self, topic, target_version, namespace, cap):
        manifest = self.release_objects or rpc.manifest_for_cap(
            api_versions.OBJECT_VERSIONS, cap, api_versions.HELD_BACK)
        return rpc.get_client(
            self.transport, messaging.Target(
                topic=topic, exchange=self.exchange, namespace=namespace,
                version=target_version),
            version_cap=cap, version_manifest=manifest,
            known_versions=self.release_objects)

    def ask_version(self, ctxt, timeout):
        """Ping the conductor at API 1.0 and route every API by what its
        answer names."""
        options = {'timeout': timeout} if timeout else {}
        answer = self._client(self.topic, '1.0', None, '1.0').prepare(
            **options).call(ctxt, 'ping')
        self.learn(service_version_of(answer))

    def wait_until_ready(self, ctxt, attempt_timeout=5, max_attempts=None):
        """Block until a conductor answers the ping (and route by its
        answer); a service starting with its conductor calls it.

        A call sent before any conductor listens is lost (no queue holds
        it), so a service starting with its conductor must ask again.

        :raises MessagingTimeout: after ``max_attempts`` unanswered tries.
        """
        attempt = 0
        while True:
            attempt += 1
            try:
                self.ask_version(ctxt, attempt_timeout)
                return
            except messaging.MessagingTimeout:
                if max_attempts is not None and attempt >= max_attempts:
                    raise
                LOG.warning("No conductor answered within %s s (attempt "
                            "%d); still waiting", attempt_timeout, attempt)

    def learn(self, conductor_version):
        """Route the APIs by what ``conductor_version`` serves."""
        with self._lock:
            if conductor_version == self.conductor_version:
                return
            if self.conductor_version is not None:
                LOG.info("The conductor now reports service version %s "
                         "(was %s)", conductor_version,
                         self.conductor_version)
            self.conductor_version = conductor_version
            self._routes = {}

    def older(self):
        """Whether the conductor is known to run an older release."""
        return self.conductor_version is not None and \
            self.conductor_version < service_obj.SERVICE_VERSION

    def route(self, api, topic=None):
        """Where ``api``'s calls go (asking the conductor its version
        first if not known yet).

        :param topic: the API's own topic (the agents'), used when the
            conductor serves the API; else the conductor topic.
        """
        if self.conductor_version is None:
            self.ask_version(nm_context.get_admin_context(), self.timeout)
        with self._lock:
            key = (api, topic)
            if key not in self._routes:
                self._routes[key] = self._route(api, topic or self.topic)
            return self._routes[key]

    def _route(self, api, topic):
        # A conductor of this release or a newer one serves this client's
        # versions: uncapped (every object in its newest version, less
        # HELD_BACK) unless configured.
        older = self.older()
        served = service_obj.api_version_for(
            self.conductor_version, api.service_key) if older else None
        cap = api_versions.lower(served, self.configured_cap)
        if (served is not None or not older) and \
                api_versions.allows(cap, api.first):
            return Route(self._client(topic, api.first, api.namespace, cap),
                         True, cap)
        # Release 1's API, on the conductor topic.
        legacy = api_versions.RELEASE_1_API
        served = service_obj.api_version_for(
            self.conductor_version, legacy.service_key) if older else None
        cap = api_versions.lower(
            api_versions.lower(served, self.configured_cap), legacy.version)
        return Route(self._client(self.topic, legacy.first, None, cap),
                     False, cap)

    def call(self, api, ctxt, method, timeout=None, version='1.0',
             newer_kwargs=None, topic=None, **kwargs):
        """Call ``method`` once: in ``api``'s namespace at its version
        when the conductor serves it (with ``newer_kwargs``), else at
        release 1's ``version`` without them.

        :param version: the version of release 1's API taking
            ``kwargs``.
        :param newer_kwargs: the arguments only ``api`` takes.
        """
        route = self.route(api, topic)
        if route.namespaced:
            return self.send(route, ctxt, method, api.version, timeout,
                             **kwargs, **(newer_kwargs or {}))
        if newer_kwargs:
            LOG.info("%s: %s not sent: the conductor or [upgrade_levels] "
                     "conductor allows only API %s", method,
                     ', '.join(sorted(newer_kwargs)), route.cap)
        return self.send(route, ctxt, method, version, timeout, **kwargs)

    def call_since(self, api, ctxt, method, what, timeout=None, **kwargs):
        """Call ``method``, which only ``api`` has; Invalid, naming
        ``what`` needs it, when the conductor or the cap is older."""
        route = self.route(api)
        if not route.namespaced:
            raise exception.Invalid(
                reason=f"{what} needs conductor API {api.version}, but "
                       f"{self.what_caps(route)}")
        return self.send(route, ctxt, method, api.version, timeout,
                         **kwargs)

    def send(self, route, ctxt, method, version, timeout, **kwargs):
        """One call; sent again while no conductor's queue takes it
        (rpc.sent_until_taken: after a broker restart, until a conductor
        has declared its queue again), within the call's deadline."""
        timeout = timeout or self.timeout

        def call(wait):
            options = {'version': version,
                       'transport_options': rpc.MANDATORY}
            if wait or timeout:
                options['timeout'] = wait or timeout
            return route.client.prepare(**options).call(
                ctxt, method, **kwargs)
        try:
            return rpc.sent_until_taken(
                call, lambda: timeout or self.transport.conf.
                rpc_response_timeout, f"{method} to the conductor")
        except messaging.MessageUndeliverable:
            raise messaging.MessagingTimeout(
                f"no queue of the conductor took {method}") from None

    def what_caps(self, route):
        """What holds ``route`` below a version, for an operator."""
        if self.older():
            return (f"the conductor runs an older release (service version "
                    f"{self.conductor_version}, conductor API "
                    f"{route.cap}): upgrade it first")
        return "[upgrade_levels] conductor caps this client below it"


def service_version_of(ping_answer):
    """The service version a conductor's ping answer names: a dict with
    ``service_version`` from release 2, ``'pong'`` from release 1."""
    if isinstance(ping_answer, dict):
        version = ping_answer.get('service_version')
        if isinstance(version, int) and version >= 1:
            return version
    return 1
