"""Calls to the conductor's operations API over RabbitMQ with py-amqp alone.

``numamig-manage migration start`` sends one request and exits. Through
numamig.rpc it paid, before sending anything, for oslo.messaging with
its rabbit driver (kombu; ~9x a bare interpreter's start on the
development machine) and the versioned objects (which load it too): the
command took ~10x a bare interpreter, its round trips a few milliseconds
of it (issue 43). Here the same calls are sent in the same wire format
with py-amqp (oslo.messaging's own AMQP library under kombu, ~1.5x), and
the Migration the conductor answers is read as a plain record, as
numamig.db.direct reads rows.

Why a client of our own rather than a daemon or the database: the
conductor still checks and records the request exactly as before (the
command writes nothing itself), and the request is the same message
oslo.messaging would send, so a conductor cannot tell the two apart
(tests/functional/test_direct_rpc_wire.py sends with this client to an
oslo.messaging RPC server and compares its message with the one
oslo.messaging sends).

What stays the same as through numamig.rpc, tested side by side over
the real RabbitMQ (tests/functional/test_cli_direct_rpc.py):

* the message: oslo.messaging's envelope (``oslo.version`` 2.0 and the
  message as JSON text), its keys (method, args, namespace, version,
  ``_msg_id``, ``_reply_q``, ``_timeout``, ``_unique_id``, the context
  as ``_context_*``) and properties (JSON, persistent, the call's
  timeout as expiration); a request to the conductor goes with the
  mandatory flag and is sent again while no queue takes it, within its
  deadline (numamig.rpc.sent_until_taken); replies are read from a
  queue ``reply_<uuid>`` until one says ``ending``;
* the checks before: the broker reached (numamig.broker, same words),
  the login (same refusal), the conductor's ping within
  ``[DEFAULT] cli_conductor_timeout`` (ConductorUnreachable);
* the errors: a refusal the conductor raises from numamig.exception is
  rebuilt as oslo.messaging rebuilds it, so the command prints the same
  line and exit code; a timeout is the same line too.

What is not served here (``connect`` returns None, or a call raises
Unserved, and the caller goes through numamig.rpc as before, with the
same migration uuid, so a request already recorded is answered, not
recorded twice): a transport URL other than ``rabbit://`` with exactly
one host and its credentials and no query (several hosts mean
oslo.messaging's failover; fake:// and inproc:// are in-process), any
``[oslo_messaging_rabbit]`` option set (TLS, quorum queues, login
method, heartbeats...: their defaults are what this client does, but
for the login mechanism, which is the broker check's), an
``[upgrade_levels] conductor`` cap or a conductor of an older release
(numamig.conductor.rpcclient routes those), options given through the
environment or a config source, an answer in an object version this
module does not read, a failure raised from any other module than
numamig.exception, and a broken connection.

The client asks the broker for no heartbeats: every wait of it is
bounded by its call's deadline (socket timeouts), which is what a
heartbeat would bound.
"""

import datetime
import json
import os
import time
import uuid

from numamig import exception

# oslo.messaging's envelope (oslo_messaging._drivers.common).
ENVELOPE_VERSION = '2.0'
# The conductor API this client speaks: numamig.conductor.api_versions
# OPERATIONS, and the ping of release 1's API (a unit test keeps these
# equal to that module's).
OPERATIONS_NAMESPACE = 'operations'
OPERATIONS_VERSION = '2.0'
PING_VERSION = '1.0'
# The oldest conductor service version served here
# (numamig.objects.service.SERVICE_VERSION of this release; a unit test
# keeps it equal): an older conductor is routed by numamig.rpcclient.
SERVICE_VERSION = 2
TOPIC = 'numamig-conductor'
# numamig.conf.opts.CONTROL_EXCHANGE (a unit test keeps it equal).
CONTROL_EXCHANGE = 'numamig'
# The Migration primitives read here, by version (the versions the
# operations API answers in; a unit test keeps them current).
MIGRATION_VERSIONS = ('1.0', '1.1')
STATUS_CHANGE_VERSIONS = ('1.0', '1.1')
_OBJ = 'numamig_object.'
# Fields of Migration and MigrationStatusChange held as ISO times.
_TIMES = ('created_at', 'updated_at', 'admitted_at', 'changed_at')
# numamig.rpc.sent_until_taken's pauses.
RETURNED_PAUSE_S = 0.25
RETURNED_PAUSE_MAX_S = 2.0
# Seconds a wait's answer may take beyond the wait itself
# (numamig.conductor.rpcclient.CALL_MARGIN_S).
CALL_MARGIN_S = 10
CONNECT_TIMEOUT_S = 5


class Unserved(Exception):
    """Something this client does not do exactly as numamig.rpc: the
    caller goes through numamig.rpc instead."""


class CallTimeout(Exception):
    """No answer within the call's deadline (oslo.messaging's
    MessagingTimeout; numamig.cmd.common words both alike)."""


class Url:
    """A transport URL as numamig.broker reads oslo.messaging's
    TransportURL: transport, hosts (hostname, port, username,
    password), virtual_host."""

    def __init__(self, transport, host, virtual_host):
        self.transport = transport
        self.hosts = [host]
        self.virtual_host = virtual_host


class Host:
    def __init__(self, hostname, port, username, password):
        self.hostname = hostname
        self.port = port
        self.username = username
        self.password = password


class _NoTLS:
    """``[oslo_messaging_rabbit]`` as numamig.broker reads it, at the
    defaults this client serves (no TLS)."""
    ssl = False
    ssl_ca_file = ssl_cert_file = ssl_key_file = None


def parse_url(text):
    """The URL if this client serves it exactly, else None.

    Parsed as oslo.messaging's TransportURL.parse parses it, for the
    shape served: ``rabbit://user:password@host[:port]/[vhost]``.
    """
    from urllib import parse
    if not isinstance(text, str):
        return None
    url = parse.urlparse(text)
    if url.scheme != 'rabbit' or url.query or url.params or \
            url.fragment or ',' in url.netloc or '@' not in url.netloc:
        return None
    credentials, hostport = url.netloc.rsplit('@', 1)
    if ':' not in credentials or hostport.startswith('['):
        return None
    username, password = credentials.split(':', 1)
    hostname, _, port = hostport.partition(':')
    if not hostname or (port and not port.isdigit()):
        return None
    virtual_host = None
    if url.path.startswith('/'):
        virtual_host = parse.unquote(url.path[1:])
    return Url('rabbit', Host(hostname, int(port) if port else None,
                              parse.unquote(username),
                              parse.unquote(password)), virtual_host)


def messaging_settings(conf):
    """(transport_url, control_exchange) as the configuration files give
    them, or None when oslo.messaging could read anything else.

    oslo.messaging registers its options only when it builds a
    transport, so they are read from the files oslo.config parsed, with
    its own parser: the last file naming an option wins, as in
    oslo.config. Options from the environment (``OS_<GROUP>__<NAME>``)
    or a config source, and any ``[oslo_messaging_rabbit]`` option, are
    not served here.
    """
    from oslo_config import cfg
    if any(name.startswith(('OS_DEFAULT__', 'OS_OSLO_MESSAGING'))
           for name in os.environ):
        return None
    if getattr(conf, 'config_source', None):
        return None
    files = list(conf.config_file or ())
    for directory in conf.config_dir or ():
        if os.path.isdir(directory):
            files += sorted(os.path.join(directory, name)
                            for name in os.listdir(directory)
                            if name.endswith('.conf'))
    values = {}
    for path in files:
        sections = {}
        try:
            cfg.ConfigParser(path, sections).parse()
        except (OSError, cfg.ParseError):
            return None
        if sections.get('oslo_messaging_rabbit'):
            return None
        for name, given in sections.get('DEFAULT', {}).items():
            if name in ('transport_url', 'control_exchange'):
                values[name] = given[-1]
    # oslo.config substitutes ``$name`` references in values: not read
    # here.
    if 'transport_url' not in values or \
            any('$' in value for value in values.values()):
        return None
    return values['transport_url'], values.get('control_exchange',
                                               CONTROL_EXCHANGE)


def connect(conf, call_timeout):
    """A Client of the conductor if this module serves the configuration
    (after the broker and login checks numamig-manage makes), else None.

    :raises BrokerUnreachable, BrokerRefused: as numamig.broker.
    """
    if conf.upgrade_levels.conductor:
        return None
    settings = messaging_settings(conf)
    if settings is None:
        return None
    url = parse_url(settings[0])
    if url is None:
        return None
    from numamig import broker
    broker.check_reachable(url, conf.cli_broker_retries)
    links = []

    def login(**kwargs):
        links.append(_open(**kwargs))
    broker.check_accepted(url, _NoTLS, connect=login)
    exchange = settings[1]
    topic = TOPIC if exchange == CONTROL_EXCHANGE else f'{TOPIC}-{exchange}'
    import amqp
    try:
        return Client(links[0], url, exchange, topic, call_timeout)
    except (OSError, amqp.exceptions.AMQPError):
        # The reply queue not declared (the link broke, a policy of the
        # broker's refused it): oslo.messaging's client words it.
        _close_quietly(links[0])
        return None


def _open(hostname, port, userid, password, virtual_host, ssl,
          connect_timeout):
    """One logged-in py-amqp connection, logged in as numamig.broker's
    check logs in (kombu's default for py-amqp: PLAIN, which checks the
    same user and password as oslo.messaging's AMQPLAIN), so that a
    refusal reads the same words."""
    import amqp
    link = amqp.Connection(
        f'{hostname}:{port}', userid=userid, password=password,
        virtual_host=virtual_host, ssl=ssl, login_method='PLAIN',
        connect_timeout=connect_timeout, heartbeat=0)
    try:
        link.connect()
    except BaseException:
        _close_quietly(link)
        raise
    return link


def _close_quietly(link):
    try:
        link.collect()
    except Exception:  # noqa: BLE001, S110 - closing what failed anyway
        pass


class Client:
    """The conductor's operations API, the calls numamig-manage
    ``migration start`` makes. ``close()`` it."""

    def __init__(self, link, url, exchange, topic, timeout):
        import amqp
        self._amqp = amqp
        self.link = link
        self.url = url
        self.exchange = exchange
        self.topic = topic
        self.timeout = timeout
        self.channel = link.channel()
        self.reply_q = f'reply_{uuid.uuid4().hex}'
        self._replies = []
        self._returned = []
        # Deleted with the connection: nobody else reads a command's
        # answers, and nothing is left behind for the broker to expire.
        self.channel.queue_declare(self.reply_q, exclusive=True)
        self.channel.basic_consume(self.reply_q, no_ack=True,
                                   callback=self._replies.append)
        self.channel.events['basic_return'].add(self._on_return)
        self._declared = False
        self._ctxt = None
        self._closed = False

    def close(self):
        """Log out as oslo.messaging does (the broker logs a connection
        that just drops); a link that broke is only let go."""
        if self._closed:
            return
        self._closed = True
        try:
            self.link.close()
        except Exception:  # noqa: BLE001 - broken: nothing to log out of
            _close_quietly(self.link)

    def _on_return(self, exc, exchange, routing_key, message):
        self._returned.append(message)

    def _context(self):
        if self._ctxt is None:
            from numamig import context as nm_context
            self._ctxt = nm_context.get_admin_context().to_dict()
        return self._ctxt

    # -- the calls ------------------------------------------------------------

    def ping(self, timeout):
        """The conductor's service version; CallTimeout when none
        answers within ``timeout`` seconds.

        :raises Unserved: it runs an older release.
        """
        answer = self._call('ping', {}, None, PING_VERSION, timeout,
                            mandatory=False)
        if not isinstance(answer, dict) or not isinstance(
                answer.get('service_version'), int) or \
                answer['service_version'] < SERVICE_VERSION:
            raise Unserved("the conductor runs an older release")
        return answer['service_version']

    def live_migrate_instance(self, instance_uuid, dest_host, priority,
                              policy, migration_uuid):
        args = {'instance_uuid': instance_uuid, 'dest_host': dest_host,
                'migration_uuid': migration_uuid}
        if priority is not None:
            args['priority'] = priority
        if policy is not None:
            args['policy'] = policy
        return migration_record(self._operation(
            'live_migrate_instance', args, self.timeout))

    def migration_get(self, ctxt, migration_uuid):
        return migration_record(self._operation(
            'migration_get', {'migration_uuid': migration_uuid},
            self.timeout))

    def migration_wait(self, ctxt, migration, timeout):
        return migration_record(self._call(
            'migration_wait', {
                'migration_uuid': migration.uuid,
                'status': migration.status,
                'memory_processed': migration.memory_processed,
                'timeout': timeout},
            OPERATIONS_NAMESPACE, OPERATIONS_VERSION,
            timeout + (self.timeout or CALL_MARGIN_S), mandatory=False))

    def _operation(self, method, args, timeout):
        return self._call(method, args, OPERATIONS_NAMESPACE,
                          OPERATIONS_VERSION, timeout, mandatory=True)

    # -- the wire -------------------------------------------------------------

    def _call(self, method, args, namespace, version, timeout, mandatory):
        """Send ``method`` and wait for its answer, sent again while the
        broker returns it (mandatory), within ``timeout`` seconds from the
        first return, as numamig.rpc.sent_until_taken."""
        try:
            return self._call_once_taken(method, args, namespace, version,
                                         timeout, mandatory)
        except (OSError, self._amqp.exceptions.AMQPError) as exc:
            # A broken connection or a channel the broker closed: the
            # full client retries or words it.
            raise Unserved(f"{method}: {type(exc).__name__}: {exc}") \
                from exc

    def _call_once_taken(self, method, args, namespace, version, timeout,
                         mandatory):
        deadline = None
        pause = RETURNED_PAUSE_S
        wait = timeout
        while True:
            msg_id = self._publish(method, args, namespace, version, wait,
                                   mandatory)
            answer = self._answer(msg_id, wait)
            if answer is not _RETURNED:
                return answer
            now = time.monotonic()
            if deadline is None:
                deadline = now + timeout
            if now + pause >= deadline:
                raise CallTimeout(f"no queue of the conductor took {method}")
            time.sleep(pause)
            pause = min(pause * 2, RETURNED_PAUSE_MAX_S)
            wait = max(1, int(deadline - time.monotonic() + 0.999))

    def _publish(self, method, args, namespace, version, timeout,
                 mandatory):
        if not self._declared:
            # As oslo.messaging's topic_send: the control exchange,
            # [oslo_messaging_rabbit] amqp_durable_queues and
            # amqp_auto_delete at their defaults.
            self.channel.exchange_declare(self.exchange, 'topic',
                                          durable=False, auto_delete=False)
            self._declared = True
        msg_id = uuid.uuid4().hex
        message = {'method': method, 'args': args}
        if namespace is not None:
            message['namespace'] = namespace
        message['version'] = version
        message.update({'_msg_id': msg_id, '_reply_q': self.reply_q,
                        '_timeout': None,
                        '_unique_id': uuid.uuid4().hex})
        message.update((f'_context_{key}', value)
                       for key, value in self._context().items())
        body = json.dumps({'oslo.version': ENVELOPE_VERSION,
                           'oslo.message': json.dumps(message)})
        self._returned.clear()
        self.channel.basic_publish(
            self._amqp.Message(
                body, content_type='application/json',
                content_encoding='utf-8', application_headers={},
                delivery_mode=2, priority=0,
                expiration=str(int(timeout * 1000))),
            exchange=self.exchange, routing_key=self.topic,
            mandatory=mandatory)
        return msg_id

    def _answer(self, msg_id, timeout):
        """The result of ``msg_id``; _RETURNED if the broker returned the
        request. Replies may come in several messages (a result, then
        one saying ``ending``); the last result given is the answer."""
        deadline = time.monotonic() + timeout
        result = None
        while True:
            while self._replies:
                reply = _unwrap(self._replies.pop(0))
                if reply.get('_msg_id') != msg_id:
                    continue        # an earlier, abandoned request's
                if reply.get('failure'):
                    raise remote_error(reply['failure'])
                if reply.get('result') is not None:
                    result = reply['result']
                if reply.get('ending'):
                    return result
            if self._returned:
                return _RETURNED
            left = deadline - time.monotonic()
            if left <= 0:
                raise CallTimeout(
                    f"Timed out waiting for a reply to message ID {msg_id}")
            try:
                self.link.drain_events(timeout=left)
            except TimeoutError:
                pass


_RETURNED = object()


def _unwrap(message):
    envelope = json.loads(message.body)
    if envelope.get('oslo.version') != ENVELOPE_VERSION:
        raise Unserved("a reply in another envelope")
    return json.loads(envelope['oslo.message'])


def remote_error(failure):
    """The conductor's error as numamig.rpc's client raises it: rebuilt
    as oslo.messaging rebuilds an error of an allowed module (a
    ``Name_Remote`` class whose text is the message and the peer's
    traceback), then trimmed to its message
    (numamig.exception.keep_remote_message).

    :raises Unserved: from another module, or not rebuilt: oslo.messaging
        words those (RemoteError, builtins) its own way.
    """
    failure = json.loads(failure)
    if failure.get('module') != exception.__name__:
        raise Unserved(f"a failure from {failure.get('module')}")
    klass = getattr(exception, failure.get('class') or '', None)
    if not (isinstance(klass, type) and issubclass(klass, Exception)):
        raise Unserved(f"an unknown error {failure.get('class')}")
    try:
        error = klass(*failure.get('args', []),
                      **failure.get('kwargs', {}))
    except (AttributeError, TypeError) as exc:
        raise Unserved(f"{failure.get('class')} not rebuilt") from exc
    text = failure.get('message', '') + '\n' + '\n'.join(
        failure.get('tb', []))
    remote = type(klass.__name__ + '_Remote', (klass,),
                  {'__str__': lambda self: text})
    remote.__module__ = exception.__name__ + '_Remote'
    error.__class__ = remote
    return exception.keep_remote_message(error)


class MigrationRecord:
    """A Migration (or MigrationStatusChange) as the command's views read
    the object: attributes, and ``get(name, default)``."""

    def __init__(self, values):
        self.__dict__.update(values)

    def get(self, name, default=None):
        return self.__dict__.get(name, default)


def migration_record(primitive):
    """The Migration primitive the conductor answered, as a record.

    :raises Unserved: not a Migration of a version read here.
    """
    data = _data(primitive, 'Migration', MIGRATION_VERSIONS)
    values = _times(data)
    values['history'] = [
        MigrationRecord(_times(_data(change, 'MigrationStatusChange',
                                     STATUS_CHANGE_VERSIONS)))
        for change in data.get('history') or ()]
    return MigrationRecord(values)


def _data(primitive, name, versions):
    if not isinstance(primitive, dict) or \
            primitive.get(_OBJ + 'name') != name or \
            primitive.get(_OBJ + 'namespace') != 'numamig' or \
            primitive.get(_OBJ + 'version') not in versions or \
            not isinstance(primitive.get(_OBJ + 'data'), dict):
        raise Unserved(f"an answer that is no {name} read here")
    return primitive[_OBJ + 'data']


def _times(data):
    values = dict(data)
    for name in _TIMES:
        if isinstance(values.get(name), str):
            values[name] = datetime.datetime.fromisoformat(
                values[name]).astimezone(datetime.UTC)
    return values
