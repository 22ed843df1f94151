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
import time

from oslo_log import log as logging
import oslo_messaging
from oslo_messaging._drivers import base
from oslo_messaging._drivers import common as rpc_common
from oslo_serialization import jsonutils

LOG = logging.getLogger(__name__)


class _Topic:
    """The queues of one topic and the listeners waiting on them.

    A delivery wakes only the listeners that can take the message: the
    servers it is addressed to, or one idle listener for the shared
    queue. Waking every listener of the topic (twenty agents share the
    compute topic in an embedded cloud) made each message cost twenty
    thread switches under the GIL for one useful wake-up.
    """

    def __init__(self):
        self.lock = threading.Lock()
        self.shared = collections.deque()
        self.servers = {}            # server name -> deque
        self.idle = []               # listeners waiting in poll, oldest first

    def server_queue(self, server):
        return self.servers.setdefault(server, collections.deque())

    def wake(self, server=None, everyone=False):
        """Wake waiting listeners; the caller holds ``lock``."""
        if everyone:
            woken = list(self.idle)
        elif server is not None:
            woken = [w for w in self.idle if w.server == server]
        else:
            woken = self.idle[:1]
        for listener in woken:
            self.idle.remove(listener)
            listener.cond.notify()


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
        with topic.lock:
            if target.fanout:
                for pending in topic.servers.values():
                    pending.append(envelope)
                topic.wake(everyone=True)
            elif target.server:
                topic.server_queue(target.server).append(envelope)
                topic.wake(server=target.server)
            else:
                topic.shared.append(envelope)
                topic.wake()


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
        self.server = server
        self.cond = threading.Condition(self._topic.lock)
        with self._topic.lock:
            self._queues = [self._topic.shared]
            if server:
                self._queues.insert(0, self._topic.server_queue(server))
        self._stopped = False

    @base.batch_poll_helper
    def poll(self, timeout=None):
        with self._topic.lock:
            envelope = self._take(timeout)
        if envelope is None:
            return None
        ctxt, message, reply_q = envelope
        return _Incoming(self, jsonutils.loads(ctxt),
                         jsonutils.loads(message), reply_q)

    def _take(self, timeout):
        """The next message for this listener, or None once stopped or
        after ``timeout``; the caller holds the topic's lock."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._stopped:
            pending = next((q for q in self._queues if q), None)
            if pending is not None:
                return pending.popleft()
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return None
            self._topic.idle.append(self)
            try:
                self.cond.wait(left)
            finally:
                if self in self._topic.idle:
                    self._topic.idle.remove(self)
        return None

    def stop(self):
        with self._topic.lock:
            self._stopped = True
            self.cond.notify()


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
