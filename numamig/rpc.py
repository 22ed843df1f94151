"""RPC plumbing: transport, serializers, clients with version caps, servers.

Objects cross the wire as versioned primitives. Each RPC API declares
which object versions each of its versions carries (``OBJECT_VERSIONS``
in its rpcapi module). An uncapped client sends every object in its
newest version (``newest_versions``), less what the module's
``HELD_BACK`` names with a reason; a client capped by
``[upgrade_levels]`` backports to the manifest of its cap; a compute
message goes at the lowest API version whose manifest carries its
objects, so an agent that refuses it is asked again at an older version
with the objects backported, and a newer agent loses nothing.

How to add a field to an object that crosses RPC (doc/source/
contributing.rst says the same, with the database side):

1. Add the field, bump ``VERSION`` with a ``# Version X.Y:`` line, and
   drop the field for older targets in ``obj_make_compatible``. Bump the
   parents that hold the object (``obj_relationships``) the same way.
2. Update the pinned hashes in tests/unit/objects/test_objects.py.
3. Add an API version to each rpcapi module whose messages carry it
   (history line in the class docstring, ``VERSION``), whose
   ``OBJECT_VERSIONS`` entry names the new object versions: an agent or
   conductor of the API version before cannot read them.
   tests/unit/test_object_manifests.py fails until the newest manifest
   carries every object's current version.
4. Record the release that serves the new API version in
   numamig/releases.py, and test a capped client (it backports) and an
   older peer (it is asked again at its version).

An enum value is a change of the field too: add it to the enum, declare
it in the ``obj_enum_values`` of every object holding the field under
its new version, and, for MigrationStatus, name in ``OLDER`` the status
it refines (see numamig/objects/fields_enums.py for what each enum does
for an older peer).
"""

import time
import typing

import futurist
from oslo_config import cfg
from oslo_log import log as logging
import oslo_messaging as messaging
from oslo_messaging._drivers import amqpdriver
from oslo_messaging.rpc import dispatcher
from oslo_versionedobjects import base as ovo_base
from oslo_versionedobjects import exception as ovo_exception

from numamig import context as nm_context
from numamig import exception
from numamig import library_notices
from numamig import metrics
from numamig.conf import opts as conf_opts
from numamig.objects import base as obj_base

# Modules whose exceptions cross RabbitMQ as themselves (a Name_Remote
# subclass) instead of as a generic RemoteError. The dispatcher's own
# (UnsupportedVersion, NoSuchMethod) are included so that an rpcapi can
# catch an old peer's refusal by type on every transport, as on fake://.
# numamig.compute.rpcapi: its AgentCallTimeout (a compute agent that did
# not answer) reaches operators through the conductor; this module's
# LinkLost (an agent's own broker link broke while it served a request)
# reaches the caller as the timeout it is.
LOG = logging.getLogger(__name__)

ALLOWED_EXMODS = [exception.__name__, dispatcher.__name__,
                  'numamig.compute.rpcapi', __name__]
CONTROL_EXCHANGE = conf_opts.CONTROL_EXCHANGE

_TRANSPORTS = {}

# The shortest slice an AMQP listener or reply waiter waits in (see
# _calm_amqp_polling).
AMQP_FIRST_POLL_S = 0.05
# The private constant of oslo.messaging's AMQP driver that
# _calm_amqp_polling raises: a documented workaround, pinned with the
# library (requirements.txt: oslo.messaging's upper bound) and held to
# the library's code by tests/unit/test_rpc_library_pins.py, which fails
# when the constant, its default or the way the driver reads it changes.
AMQP_POLL_CONSTANT = 'ACK_REQUEUE_EVERY_SECONDS_MIN'

# Requests to a service go with RabbitMQ's mandatory flag: one that no
# queue takes (a broker restart took the queue with it and the service
# has not declared it again yet; non-durable queues) comes back at once,
# instead of being dropped and waited for until its caller's deadline.
# See sent_until_taken. fake:// keeps every message: nothing comes back.
MANDATORY = messaging.TransportOptions(at_least_once=True)
RETURNED_PAUSE_S = 0.25
RETURNED_PAUSE_MAX_S = 2.0


def get_transport(conf, url=None):
    """Return the (cached) RPC transport for ``url`` or the configured one."""
    conf_opts.update_library_defaults()
    _calm_amqp_polling()
    library_notices.quiet_amqp_close_notice()
    library_notices.quiet_duplicate_notice()
    library_notices.quiet_reply_lost_notice()
    library_notices.quiet_message_lost_notice()
    key = url or _configured_url(conf) or 'default'
    if key not in _TRANSPORTS:
        _TRANSPORTS[key] = messaging.get_rpc_transport(
            conf, url=url, allowed_remote_exmods=ALLOWED_EXMODS)
    return _TRANSPORTS[key]


def _calm_amqp_polling():
    """Have oslo.messaging's AMQP pollers start from 50 ms, not 1 ms.

    Its RPC listeners and reply waiters wait for messages in slices that
    restart at 1 ms after every message and double up to 5 s: each of a
    daemon's pollers woke about ten times after each message (1, 2, 4 ...
    ms), each wake a pass through kombu's retry wrapper. Measured in an
    embedded cloud over RabbitMQ, that was ~113 polls per migration and
    a fifth of its CPU. A message arriving wakes a poller at once
    whatever the slice; the slice only bounds how long an acknowledgement
    queued by another thread waits to be sent (at-least-once delivery
    is unchanged: every numamig RPC method is idempotent under
    redelivery).

    oslo.messaging offers no option for it, so this writes one private
    constant of its driver (see AMQP_POLL_CONSTANT), the only write into
    another library numamig makes; the option that would replace it is
    the first slice of the AMQP pollers (doc/source/control-plane.rst).
    A library without the constant is left alone: the pollers then spin
    as the library has them, and nothing breaks.
    """
    first = getattr(amqpdriver, AMQP_POLL_CONSTANT, None)
    if first is not None and first < AMQP_FIRST_POLL_S:
        setattr(amqpdriver, AMQP_POLL_CONSTANT, AMQP_FIRST_POLL_S)


def sent_until_taken(send, timeout, what, clock=time.monotonic,
                     sleep=time.sleep):
    """``send(wait)``, sent again while the broker returns it.

    :param send: sends one request with ``transport_options=MANDATORY``;
        ``wait``: None on the first try (the caller's own timeout), then
        the whole seconds left of ``timeout``.
    :param timeout: a function giving the seconds from the first return
        within which a queue must take the request (it comes back in
        milliseconds, so this is the caller's deadline); asked only when
        a request came back.
    :param what: the request and its service, for the log.
    :raises MessageUndeliverable: still returned at the deadline.
    """
    deadline = None
    wait = None
    pause = RETURNED_PAUSE_S
    while True:
        try:
            return send(wait)
        except messaging.MessageUndeliverable:
            now = clock()
            if deadline is None:
                deadline = now + timeout()
            if now + pause >= deadline:
                raise
        LOG.info("No queue took %s (the broker restarted?); sent again in "
                 "%.2f s", what, pause)
        sleep(pause)
        pause = min(pause * 2, RETURNED_PAUSE_MAX_S)
        wait = max(1, int(deadline - clock() + 0.999))


def transport_url(conf):
    """The configured TransportURL (what get_transport connects to)."""
    conf_opts.update_library_defaults()
    return messaging.TransportURL.parse(conf, _configured_url(conf))


def _configured_url(conf):
    # oslo.messaging registers transport_url only when it first builds a
    # transport; before that the option simply is not there.
    try:
        return conf.transport_url
    except cfg.NoSuchOptError:
        return None


def response_timeout(conf):
    """``[DEFAULT] rpc_response_timeout``, as oslo.messaging reads it.

    oslo.messaging registers the option only when it first builds an RPC
    client; a daemon that derives a wait from it before that registers
    it here, from the library's own definition (the one its config
    generator lists), so the operator's value is read either way.
    """
    try:
        return conf.rpc_response_timeout
    except cfg.NoSuchOptError:
        pass
    import oslo_messaging.opts as messaging_opts
    for group, group_opts in messaging_opts.list_opts():
        if group is None:
            conf.register_opts([o for o in group_opts
                                if o.name == 'rpc_response_timeout'])
    return conf.rpc_response_timeout


def get_notification_transport(conf):
    """The (cached) transport of ``[oslo_messaging_notifications]``
    (its transport_url, else the RPC one's)."""
    conf_opts.update_library_defaults()
    key = ('notifications', id(conf))
    if key not in _TRANSPORTS:
        _TRANSPORTS[key] = messaging.get_notification_transport(conf)
    return _TRANSPORTS[key]


def cleanup():
    """Close every cached transport (service stop, test tear-down)."""
    while _TRANSPORTS:
        _url, transport = _TRANSPORTS.popitem()
        transport.cleanup()


def close_transport(transport):
    """Close one transport ``get_transport`` gave, and forget it.

    The next ``get_transport`` for its URL then builds a new one: a
    closed transport left in the cache answers nothing (a process that
    reaches one deployment after another on the same broker, as the
    real tier's tests do, waited for a conductor that had answered).
    """
    for key, cached in list(_TRANSPORTS.items()):
        if cached is transport:
            del _TRANSPORTS[key]
    transport.cleanup()


# What a primitive that does not parse raises in oslo.versionedobjects
# (found by the wire fuzz, tests/functional/test_wire_fuzz.py).
MALFORMED = (ValueError, TypeError, KeyError, AttributeError, IndexError,
             RecursionError)
# Deepest nesting of lists, mappings and objects a message may carry.
MAX_DEPTH = 32


class ObjectSerializer(ovo_base.VersionedObjectSerializer):
    """Serialize numamig objects, backported to a manifest if one is given.

    An object is never sent above the version it was received in (a
    service that got an old peer's object answers in that version), and
    its content always matches the version it is labelled with.

    On receipt every object is validated, so a malformed object is
    rejected with an error naming it before any endpoint acts on it.
    ``known_versions`` (object name -> newest version) makes it refuse
    objects newer than that, as an older release's registry would: a
    service running as an older release (a testing aid) reads only what
    that release could.
    """

    OBJ_BASE_CLASS = obj_base.NumamigObject

    def __init__(self, version_manifest=None, known_versions=None):
        super().__init__()
        self.version_manifest = version_manifest
        self.known_versions = known_versions

    def serialize_entity(self, ctxt, entity):
        if isinstance(entity, obj_base.NumamigObject):
            # Never above what the object needs (obj_version_needed): a
            # guest without virtio-mem devices reaches any peer as the
            # 1.0 objects every release reads, answers included.
            target = _lower(entity.obj_version_needed(), entity.VERSION)
            if self.version_manifest:
                target = _lower(self.version_manifest.get(
                    entity.obj_name(), target), target)
            return primitive_for(entity, target, self.version_manifest)
        return super().serialize_entity(ctxt, entity)

    def deserialize_entity(self, ctxt, entity):
        _check_shape(entity, self.known_versions)
        try:
            result = super().deserialize_entity(ctxt, entity)
        except (ovo_exception.VersionedObjectsException,
                *MALFORMED) as exc:
            # Unknown class, version newer than this service knows, bad
            # namespace, or a primitive that does not parse at all (a
            # version that is no version, data that is no mapping, fields
            # that do not coerce): refuse it as a numamig error so it
            # crosses the broker as itself and names the object, before
            # any endpoint sees it.
            raise exception.ObjectValidationError(
                objname=_primitive_name(entity),
                reason=exception.brief(exc) or type(exc).__name__)
        _validate_tree(result)
        return result


def primitive_for(obj, target_version=None, version_manifest=None):
    """The primitive of ``obj`` at ``target_version`` (default: its own).

    An object received from an older peer keeps that peer's version
    (oslo.versionedobjects sets it on the instance); fields newer than
    it that were set since are backported away here, so that the
    version on the wire always describes the content.
    """
    target_version = target_version or obj.VERSION
    if obj.VERSION == type(obj).VERSION:
        return obj.obj_to_primitive(target_version=target_version,
                                    version_manifest=version_manifest)
    if obj_base.version_tuple(target_version) > \
            obj_base.version_tuple(type(obj).VERSION):
        raise ovo_exception.InvalidTargetVersion(version=target_version)
    return obj.obj_primitive_at(target_version, version_manifest)


def _lower(version_a, version_b):
    return min(version_a, version_b, key=_version_tuple)


def _check_shape(entity, known_versions=None):
    """Refuse object primitives whose data is missing or no mapping,
    nesting deeper than MAX_DEPTH, and (with ``known_versions``, object
    name -> newest version) objects newer than a service reads.

    oslo.versionedobjects reads missing or non-mapping data as "no field
    set", so a message carrying ``"data": "x"`` would arrive as an object
    of defaults instead of being refused. One walk over the primitive,
    without a call per value: it runs on every value of every message.
    """
    name_key = f'{obj_base.NumamigObject.OBJ_SERIAL_NAMESPACE}.name'
    data_key = f'{obj_base.NumamigObject.OBJ_SERIAL_NAMESPACE}.data'
    pending = [(entity, 0)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, dict):
            if name_key in value:
                if not isinstance(value.get(data_key), dict):
                    raise exception.ObjectValidationError(
                        objname=_primitive_name(value),
                        reason="its data is missing or not a mapping")
                if known_versions:
                    _check_known(value, known_versions)
            children = value.values()
        elif isinstance(value, (list, tuple)):
            children = value
        else:
            continue
        if depth >= MAX_DEPTH and children:
            raise exception.ObjectValidationError(
                objname=_primitive_name(entity),
                reason=f"nested deeper than {MAX_DEPTH} levels")
        pending.extend((child, depth + 1) for child in children
                       if isinstance(child, (dict, list, tuple)))


def _check_known(primitive, known_versions):
    """Refuse an object primitive newer than ``known_versions``."""
    prefix = obj_base.NumamigObject.OBJ_SERIAL_NAMESPACE
    name = primitive.get(f'{prefix}.name')
    version = primitive.get(f'{prefix}.version')
    if name in known_versions and version is not None and \
            _version_tuple(version) > _version_tuple(known_versions[name]):
        raise exception.ObjectValidationError(
            objname=name,
            reason=f"version {version} is newer than "
                   f"{known_versions[name]}, the newest this service reads")


def _children(entity):
    """What a primitive's list or mapping holds (nothing for a scalar)."""
    if isinstance(entity, dict):
        return entity.values()
    if isinstance(entity, (list, tuple)):
        return entity
    return ()


def _primitive_name(entity):
    """The object name a (possibly nested) primitive claims, for errors."""
    key = f'{obj_base.NumamigObject.OBJ_SERIAL_NAMESPACE}.name'
    if isinstance(entity, dict) and key in entity:
        return str(entity[key])
    for value in _children(entity):
        name = _primitive_name(value)
        if name != 'object':
            return name
    return 'object'


def _validate_tree(value):
    if isinstance(value, obj_base.NumamigObject):
        value.validate()
    elif isinstance(value, (list, tuple)):
        for item in value:
            _validate_tree(item)
    elif isinstance(value, dict):
        for item in value.values():
            _validate_tree(item)


class RequestContextSerializer(messaging.Serializer):
    """Carry a RequestContext, delegating entities to a base serializer."""

    def __init__(self, base):
        self._base = base

    def serialize_entity(self, ctxt, entity):
        return self._base.serialize_entity(ctxt, entity)

    def deserialize_entity(self, ctxt, entity):
        return self._base.deserialize_entity(ctxt, entity)

    def serialize_context(self, ctxt):
        return ctxt.to_dict()

    def deserialize_context(self, ctxt):
        return nm_context.RequestContext.from_dict(ctxt)


def get_serializer(version_manifest=None, known_versions=None):
    return RequestContextSerializer(ObjectSerializer(version_manifest,
                                                     known_versions))


def get_client(transport, target, version_cap=None, version_manifest=None,
               known_versions=None):
    """Return an RPC client that never sends above ``version_cap``.

    :param version_manifest: object name -> version to backport objects
        to; give the manifest of the API version the cap allows.
    :param known_versions: object name -> newest version replies may
        carry (a service running as an older release); None: any.
    """
    _calm_amqp_polling()
    return messaging.get_rpc_client(
        transport, target, client_cls=RPCClient, version_cap=version_cap,
        serializer=get_serializer(version_manifest, known_versions))


# A call whose broker connection broke is asked again after this pause,
# doubling up to the longest, within the call's deadline.
LINK_PAUSE_S = 0.25
LINK_PAUSE_MAX_S = 2.0
# oslo.messaging's default [DEFAULT] rpc_response_timeout, for a context
# that names none.
LINK_DEFAULT_TIMEOUT_S = 60
# [DEFAULT] rpc_call_silence_timeout's default, for a transport whose
# configuration does not carry numamig's options (a library user's).
SILENCE_DEFAULT_S = 6
# A server sends oslo.messaging's call-monitor heartbeat every half of
# the caller's silence timeout, in whole seconds: below this, none.
SILENCE_MIN_S = 2


class LinkLost(messaging.MessagingTimeout):
    """A call whose broker connection broke under it: sent or not, its
    answer will not come.

    oslo.messaging retries a broken connection inside its publish, but a
    break in the few milliseconds after a new pooled connection logged in
    (its channel opened outside that retry), or one a peer met while it
    served the request (a builtin error, rebuilt here), reaches the
    caller as a bare ``ConnectionResetError``. A broker restart made one
    such break end a migration ``error`` with "[Errno 104] Connection
    reset by peer" although nothing had refused it. Every RPC method
    numamig serves may be asked again, so the call is (_PreparedCall),
    until its deadline; then it is what it amounts to, an unanswered
    call: every caller that asks again or moves on after a timeout does
    so after this too. Its module is in
    ALLOWED_EXMODS: raised by an agent serving a request, it reaches the
    conductor as itself.
    """

    def __init__(self, method, cause=None):
        text = method if cause is None else (
            f"{method}: the connection to the broker broke and no answer "
            f"came within the call's deadline ({_brief_link_error(cause)})")
        super().__init__(text)


def link_broken(exc):
    """Whether ``exc`` says the broker connection broke, not that the
    peer refused: a socket or AMQP connection error raised here, or a
    connection error the peer met while serving the request."""
    if isinstance(exc, messaging.MessagingTimeout):
        return False
    remote = getattr(exc, 'remote_traceback', None) is not None
    if remote:
        return isinstance(exc, ConnectionError)
    return library_notices.connection_error(exc)


def _brief_link_error(exc):
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else \
        type(exc).__name__


class RPCClient(messaging.RPCClient):
    """oslo.messaging's client whose calls raise a peer's error with its
    message alone as its ``str`` (numamig.exception.keep_remote_message).

    This is where an error from another process becomes the conductor's,
    an agent's or an operator's: cleaning it here, once, spares every
    record, log line and command that names it the peer's traceback.
    """

    def prepare(self, *args, **kwargs):
        return _PreparedCall(super().prepare(*args, **kwargs))


class _PreparedCall:
    """A prepared call context (what ``RPCClient.prepare`` answers; its
    ``call`` is also what ``RPCClient.call`` runs)."""

    def __init__(self, context, clock=time.monotonic, sleep=time.sleep):
        self._context = context
        self._clock = clock
        self._sleep = sleep

    def call(self, ctxt, method, **kwargs):
        """oslo.messaging's call, asked again within its own deadline
        while the broker connection breaks under it (LinkLost) or the
        peer stays silent (``[DEFAULT] rpc_call_silence_timeout``).

        Asked again after a pause, not at once: a connection that broke
        stays broken while the broker restarts, and a caller that counts
        its attempts would spend them all within a second of the outage
        (the fault suite measured a migration left for the reconciliation
        a minute later that way). Every method numamig serves may be
        asked again.

        Silence: a request published before its server declared its
        queue again, or an answer sent to a reply queue a broker restart
        deleted, is lost at once, and its caller used to learn it only
        when the whole wait ran out (a share of its timeout: 10-15 s
        with the defaults, which made the fault suite's broker restart
        settle past its target). The call asks oslo.messaging's call
        monitor for the server's heartbeat instead: a server working on
        the request heartbeats every half of the silence timeout, so a
        silence that long means nothing is working on it, and it is sent
        again at once, each further silence waiting twice as long.
        """
        began = self._clock()
        outcome = 'error'
        context = self._context
        deadline = None
        pause = LINK_PAUSE_S
        silence = self._silence_s(None)
        if silence:
            deadline = began + self._timeout_s()
            context = self._context.prepare(call_monitor_timeout=silence)
        try:
            while True:
                try:
                    answer = context.call(ctxt, method, **kwargs)
                    outcome = 'answered'
                    return answer
                except messaging.MessagingTimeout as exc:
                    outcome = 'timeout'
                    exception.keep_remote_message(exc)
                    if not silence or getattr(exc, 'remote_traceback',
                                              None) is not None:
                        raise
                    # The whole wait's end, or the monitor's: the latter
                    # leaves time for another try.
                    left = deadline - self._clock()
                    if left < SILENCE_MIN_S:
                        raise
                    silence = self._silence_s(silence)
                    monitor = silence if silence < left else None
                    LOG.info("%s: no answer and no heartbeat of the "
                             "service within its silence timeout (the "
                             "request or its answer was lost); asked "
                             "again, %s", method,
                             f"waiting up to {monitor} s for a sign of "
                             f"life" if monitor else
                             f"for the {left:.0f} s left of its wait")
                    context = self._context.prepare(
                        timeout=max(1, int(left)),
                        call_monitor_timeout=monitor)
                except Exception as exc:
                    exception.keep_remote_message(exc)
                    if not link_broken(exc):
                        raise
                    if deadline is None:
                        deadline = began + self._timeout_s()
                    left = deadline - self._clock()
                    if left <= pause:
                        outcome = 'timeout'
                        raise LinkLost(method, exc) from exc
                    LOG.info("%s: the connection to the broker broke "
                             "(%s); asked again in %.2f s", method,
                             _brief_link_error(exc), pause)
                    self._sleep(pause)
                    pause = min(pause * 2, LINK_PAUSE_MAX_S)
                    left = max(1, int(deadline - self._clock() + 0.999))
                    context = self._context.prepare(
                        timeout=left, call_monitor_timeout=silence
                        if silence and silence < left else None)
        finally:
            metrics.RPC_CALLS.observe(method, outcome,
                                      self._clock() - began)

    def _silence_s(self, last):
        """Seconds of silence the next try waits for (None: no monitor):
        ``[DEFAULT] rpc_call_silence_timeout`` first, then twice the
        ``last`` one. Only where the whole wait is longer: a shorter
        call has no time for another try."""
        if last is not None:
            return last * 2
        conf = getattr(self._context, 'conf', None)
        try:
            silence = conf.rpc_call_silence_timeout
        except (AttributeError, cfg.NoSuchOptError):
            silence = SILENCE_DEFAULT_S
        if not silence or silence < SILENCE_MIN_S or \
                self._timeout_s() <= silence:
            return None
        return int(silence)

    def _timeout_s(self):
        timeout = getattr(self._context, 'timeout', None)
        if timeout:
            return timeout
        conf = getattr(self._context, 'conf', None)
        return getattr(conf, 'rpc_response_timeout', None) or \
            LINK_DEFAULT_TIMEOUT_S

    def cast(self, ctxt, method, **kwargs):
        try:
            return self._context.cast(ctxt, method, **kwargs)
        except Exception as exc:
            if link_broken(exc):
                raise messaging.MessageDeliveryFailure(
                    f"{method} was not sent: the connection to the broker "
                    f"broke ({_brief_link_error(exc)})") from exc
            raise

    def prepare(self, *args, **kwargs):
        return _PreparedCall(self._context.prepare(*args, **kwargs))

    def __getattr__(self, name):
        # cast, can_send_version, target, timeout... as oslo's.
        return getattr(self._context, name)


def get_server(transport, target, endpoints, version_manifest=None,
               known_versions=None):
    """Return an RPC server (threading executor) for the endpoints.

    :param version_manifest: backport replies to these object versions.
    :param known_versions: refuse requests carrying newer objects.
        Both serve a service running as an older release; None: newest.
    """
    _calm_amqp_polling()
    server = messaging.get_rpc_server(
        transport, target, endpoints,
        serializer=get_serializer(version_manifest, known_versions),
        access_policy=DeclaredOnlyPolicy)
    server._executor_cls = RequestPool
    return server


class RequestPool(futurist.DynamicThreadPoolExecutor):
    """The pool an RPC server runs requests in: a thread per request
    only while none is idle, up to ``executor_thread_pool_size``.

    oslo.messaging's threading executor (futurist.ThreadPoolExecutor)
    starts a new thread for each request until it has
    ``executor_thread_pool_size`` of them, idle or not, and every idle
    one wakes each second. An embedded cloud of 20 agents grew to 970
    threads that way, whose wake-ups and switches under the GIL cost a
    quarter of the CPU of 100 concurrent migrations. The bound, and so
    the deadlock analysis of doc/source/control-plane.rst, is unchanged.
    """


class DeclaredOnlyPolicy(dispatcher.RPCAccessPolicyBase):
    """Dispatch to what an endpoint declares, where it declares at all.

    An endpoint class that sets ``wire_declared`` (numamig's managers)
    exposes only the methods declared with numamig.wire.args: its public
    helpers (add_end_listener, run_admitted, ...) stay out of reach of
    any broker client. Other endpoints keep oslo.messaging's default
    (every public method).
    """

    def is_allowed(self, endpoint, method):
        if method.startswith('_'):
            return False
        if not getattr(endpoint, 'wire_declared', False):
            return True
        return getattr(getattr(endpoint, method, None), 'exposed', False)


def manifest_for_cap(object_versions, version_cap, held_back=None):
    """Pick the object manifest of the highest API version within a cap.

    :param object_versions: API version string -> {object name: version},
        as each rpcapi module declares it.
    :param version_cap: the cap, or None for the newest.
    :param held_back: object name -> the version an uncapped client
        still sends it in (see ``newest_versions``).
    :returns: the manifest; uncapped: every object's newest version.
    """
    if version_cap is None:
        return newest_versions(held_back)
    cap = _version_tuple(version_cap)
    # Same major version, minor at most the cap's: what a peer at the cap
    # implements (RPC minor versions only ever add).
    allowed = [v for v in object_versions
               if _version_tuple(v)[0] == cap[0] and _version_tuple(v) <= cap]
    if not allowed:
        raise exception.InvalidConfiguration(
            option='upgrade_levels',
            reason=f"cap {version_cap} is below every known API version "
                   f"{sorted(object_versions, key=_version_tuple)}")
    return object_versions[max(allowed, key=_version_tuple)]


def newest_versions(held_back=None):
    """Object name -> the version an uncapped client sends it in.

    Each registered numamig object's newest version, except those
    ``held_back`` names (an rpcapi module's explicit list, each with its
    reason): read from the registry when a client is made, so a bumped
    object is sent in its new version even if no manifest names it yet.
    """
    versions = {name: classes[0].VERSION for name, classes in
                obj_base.NumamigObjectRegistry.obj_classes().items()
                if issubclass(classes[0], obj_base.NumamigObject)}
    versions.update(held_back or {})
    return versions


def object_versions_in(values):
    """Object name -> the highest version of it ``values`` need
    (``obj_version_needed``; walked through lists, dict values and the
    objects' own object fields)."""
    return object_needs_in(values).versions


class ObjectNeeds(typing.NamedTuple):
    """What a message's objects need of the peer receiving them."""

    versions: dict          # object name -> highest version needed
    virtio_mem: bool        # a guest cell with a virtio-mem device


def object_needs_in(values):
    """``object_versions_in`` and ``holds_virtio_mem`` in one walk, for a
    client that asks both before every call."""
    found, cells = {}, []
    _collect_versions(values, found, cells)
    return ObjectNeeds(found, any(cell.has_virtio_mem for cell in cells))


def _collect_versions(value, found, cells):
    if isinstance(value, obj_base.NumamigObject):
        name = value.obj_name()
        if name == 'InstanceNUMACell':
            cells.append(value)
        needed = value.obj_version_needed()
        if name not in found or _version_tuple(needed) > \
                _version_tuple(found[name]):
            found[name] = needed
        value = [value.get(field) for field in
                 obj_base.object_fields(type(value))]
    for item in _children(value):
        _collect_versions(item, found, cells)


def holds_virtio_mem(values):
    """Whether ``values`` (walked as object_versions_in walks them) hold
    a guest cell with a virtio-mem device: what an agent or conductor
    older than the virtio-mem API versions would lose."""
    if isinstance(values, obj_base.NumamigObject):
        if values.obj_name() == 'InstanceNUMACell':
            return values.has_virtio_mem
        values = [values.get(field) for field in
                  obj_base.object_fields(type(values))]
    return any(holds_virtio_mem(item) for item in _children(values))


def carries(manifest, wanted):
    """Whether ``manifest`` holds each object of ``wanted`` (name ->
    version) in that version or a newer one."""
    return all(name in manifest and
               _version_tuple(manifest[name]) >= _version_tuple(version)
               for name, version in wanted.items())


def _version_tuple(version):
    try:
        major, minor = (int(part) for part in str(version).split('.'))
    except ValueError:
        raise exception.InvalidConfiguration(
            option='upgrade_levels',
            reason=f"{version!r} is not an RPC version such as '1.3'")
    return major, minor
