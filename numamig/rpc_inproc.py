"""``inproc://``: an in-process oslo.messaging transport that wakes on
messages and carries them as a broker does.

Why not oslo.messaging's ``fake://``: its listeners look for messages
every 50 ms, so each call of an embedded deployment waits ~50 ms for
nothing (65% of a migration's time); and it hands requests, replies and
exceptions over as Python objects, so an error whose details JSON cannot
carry passes every in-process test and loses its reply on RabbitMQ.

Here a listener sleeps on its topic's condition until a message is
delivered or it is stopped; requests and replies cross as JSON text, and
a failure as oslo.messaging's AMQP drivers send it
(``serialize_remote_exception``), so it arrives as it would from
RabbitMQ: the ``<Name>_Remote`` subclass when its module is allowed,
``RemoteError`` otherwise. A reply that cannot be serialized is logged
and never sent, and the caller times out, as on a broker.

Queues live in the process, per exchange, and outlive transports: a
conductor and its agents in one process share them. As on RabbitMQ,
several servers on one topic share its queue (each message goes to one
of them), a server also has a queue of its own, and a fanout message
goes to every server of the topic.
"""

import collections
import queue
import threading

from oslo_log import log as logging
import oslo_messaging
from oslo_messaging._drivers import base
from oslo_messaging._drivers import common as rpc_common
from oslo_serialization import jsonutils

LOG = logging.getLogger(__name__)


class _Topic:
    """The queues of one topic, and the condition their listeners wait on."""

    def __init__(self):
        self.cond = threading.Condition()
        self.shared = collections.deque()
        self.servers = {}            # server name -> deque

    def server_queue(self, server):
        return self.servers.setdefault(server, collections.deque())


class _Exchange:
    """Every topic of one exchange in this process."""

    _lock = threading.Lock()
    _exchanges = {}

    @classmethod
    def named(cls, name):
        with cls._lock:
            return cls._exchanges.setdefault(name, cls())

    def __init__(self):
        self._topics = {}
        self._topics_lock = threading.Lock()

    def topic(self, name):
        with self._topics_lock:
            return self._topics.setdefault(name, _Topic())

    def deliver(self, target, envelope):
        topic = self.topic(target.topic)
        with topic.cond:
            if target.fanout:
                queues = list(topic.servers.values())
            elif target.server:
                queues = [topic.server_queue(target.server)]
            else:
                queues = [topic.shared]
            for pending in queues:
                pending.append(envelope)
            topic.cond.notify_all()


class _Incoming(base.RpcIncomingMessage):

    def __init__(self, listener, ctxt, message, reply_q):
        super().__init__(ctxt, message)
        self._reply_q = reply_q

    def reply(self, reply=None, failure=None):
        if self._reply_q is None:
            return
        try:
            if failure is not None:
                answer = ('failure', jsonutils.dumps(
                    rpc_common.serialize_remote_exception(failure)))
            else:
                answer = ('reply', jsonutils.dumps(reply))
        except (TypeError, ValueError) as exc:
            # A broker could not carry it either: the caller times out.
            LOG.error("Reply to %s cannot be serialized, not sent: %s",
                      self.message.get('method'), exc)
            return
        self._reply_q.put(answer)

    def acknowledge(self):
        """Taken off the queue when polled: nothing to acknowledge."""

    def requeue(self):
        """Never asked for: the driver does not offer requeue."""

    def heartbeat(self):
        """No heartbeat: the caller's own timeout applies."""


class _Listener(base.PollStyleListener):

    def __init__(self, exchange, topic, server):
        super().__init__()
        self._topic = exchange.topic(topic)
        with self._topic.cond:
            self._queues = [self._topic.shared]
            if server:
                self._queues.insert(0, self._topic.server_queue(server))
        self._stopped = False

    @base.batch_poll_helper
    def poll(self, timeout=None):
        with self._topic.cond:
            found = self._topic.cond.wait_for(
                lambda: self._stopped or any(self._queues), timeout)
            if not found or self._stopped:
                return None
            pending = next(q for q in self._queues if q)
            ctxt, message, reply_q = pending.popleft()
        return _Incoming(self, jsonutils.loads(ctxt),
                         jsonutils.loads(message), reply_q)

    def stop(self):
        with self._topic.cond:
            self._stopped = True
            self._topic.cond.notify_all()


class InProcDriver(base.BaseDriver):
    """The ``inproc://`` transport driver (see the module docstring)."""

    def __init__(self, conf, url, default_exchange=None,
                 allowed_remote_exmods=None):
        super().__init__(conf, url, default_exchange, allowed_remote_exmods)

    def _exchange(self, target):
        return _Exchange.named(target.exchange or self._default_exchange)

    def require_features(self, requeue=True):
        """Nothing to check: numamig's servers never ask for requeue."""

    def send(self, target, ctxt, message, wait_for_reply=None, timeout=None,
             call_monitor_timeout=None, retry=None, transport_options=None):
        reply_q = queue.Queue() if wait_for_reply else None
        self._exchange(target).deliver(target, (
            jsonutils.dumps(ctxt), jsonutils.dumps(message), reply_q))
        if reply_q is None:
            return None
        try:
            kind, payload = reply_q.get(timeout=timeout)
        except queue.Empty:
            raise oslo_messaging.MessagingTimeout(
                f"No reply on topic {target.topic} within {timeout} s")
        if kind == 'failure':
            raise rpc_common.deserialize_remote_exception(
                jsonutils.loads(payload), self._allowed_remote_exmods)
        return jsonutils.loads(payload)

    def send_notification(self, target, ctxt, message, version, retry=None):
        self.send(target, ctxt, message)

    def listen(self, target, batch_size, batch_timeout):
        listener = _Listener(self._exchange(target), target.topic,
                             target.server)
        return base.PollStyleListenerAdapter(listener, batch_size,
                                             batch_timeout)

    def listen_for_notifications(self, targets_and_priorities, pool,
                                 batch_size, batch_timeout):
        raise NotImplementedError("inproc:// carries RPC only")

    def cleanup(self):
        """Queues belong to the process, not to one transport."""
