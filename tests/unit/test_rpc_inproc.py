"""inproc://: wakes on messages, and carries them as a broker does."""

import threading
import time

import fixtures
import oslo_messaging as messaging
from oslo_utils import uuidutils

from numamig import context as nm_context
from numamig import exception
from numamig import rpc
from numamig import rpc_inproc
from numamig.conf import CONF
from tests import base

# Generous: a test passes in milliseconds; only a broken driver waits.
TIMEOUT = 10


class Endpoint:
    target = messaging.Target(version='1.0')

    def __init__(self, name):
        self.name = name
        self.seen = []
        self.cast_seen = threading.Event()

    def echo(self, ctxt, value):
        return value

    def whoami(self, ctxt):
        return self.name

    def note(self, ctxt, value):
        self.seen.append(value)
        self.cast_seen.set()

    def refuse(self, ctxt):
        raise exception.ComputeHostDown(host='h1', age=90, limit=60)

    def unsendable(self, ctxt):
        return object()


class InProcTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.transport = rpc.get_transport(CONF, url='inproc://')
        self.topic = f'inproc-test-{uuidutils.generate_uuid()[:8]}'
        self.ctxt = nm_context.get_admin_context()

    def serve(self, name):
        endpoint = Endpoint(name)
        server = rpc.get_server(self.transport, messaging.Target(
            topic=self.topic, server=name), [endpoint])
        server.start()
        self.addCleanup(server.wait)
        self.addCleanup(server.stop)
        return endpoint

    def client(self, **target):
        return rpc.get_client(self.transport, messaging.Target(
            topic=self.topic, **target)).prepare(timeout=TIMEOUT)

    def test_call_is_answered_at_once(self):
        self.serve('a')
        client = self.client()
        client.call(self.ctxt, 'echo', value=0)
        start = time.perf_counter()
        for n in range(20):
            self.assertEqual(n, client.call(self.ctxt, 'echo', value=n))
        # fake:// pays 50 ms per call; 20 calls stay far below one poll.
        self.assertLess((time.perf_counter() - start) / 20, 0.045)

    def test_values_cross_as_json(self):
        self.serve('a')
        answer = self.client().call(self.ctxt, 'echo',
                                    value={'k': (1, 2), 3: 'x'})
        self.assertEqual({'k': [1, 2], '3': 'x'}, answer)

    def test_cast_and_server_target(self):
        a, b = self.serve('a'), self.serve('b')
        self.client(server='b').cast(self.ctxt, 'note', value=7)
        self.assertTrue(b.cast_seen.wait(TIMEOUT))
        self.assertEqual(([], [7]), (a.seen, b.seen))
        self.assertEqual('a', self.client(server='a').call(self.ctxt,
                                                          'whoami'))

    def test_fanout_reaches_every_server(self):
        servers = [self.serve(name) for name in ('a', 'b', 'c')]
        self.client(fanout=True).cast(self.ctxt, 'note', value=1)
        for endpoint in servers:
            self.assertTrue(endpoint.cast_seen.wait(TIMEOUT))

    def test_servers_of_a_topic_share_its_queue(self):
        a, b = self.serve('a'), self.serve('b')
        client = self.client()
        for n in range(40):
            client.cast(self.ctxt, 'note', value=n)
        client.call(self.ctxt, 'echo', value='flush')
        deadline = time.monotonic() + TIMEOUT
        while len(a.seen) + len(b.seen) < 40 and \
                time.monotonic() < deadline:
            time.sleep(0.01)
        self.assertEqual(list(range(40)), sorted(a.seen + b.seen),
                         "each message handled once, by one server")

    def test_remote_error_arrives_as_from_a_broker(self):
        self.serve('a')
        exc = self.assertRaises(exception.ComputeHostDown,
                                self.client().call, self.ctxt, 'refuse')
        self.assertTrue(type(exc).__name__.endswith('_Remote'),
                        "rebuilt from the wire, not handed over")
        self.assertIn('90 s old', str(exc))

    def test_unsendable_reply_times_out_as_on_a_broker(self):
        self.serve('a')
        client = rpc.get_client(self.transport, messaging.Target(
            topic=self.topic)).prepare(timeout=0.5)
        self.assertRaises(messaging.MessagingTimeout, client.call,
                          self.ctxt, 'unsendable')

    def test_no_server_times_out(self):
        client = rpc.get_client(self.transport, messaging.Target(
            topic=self.topic)).prepare(timeout=0.2)
        self.assertRaises(messaging.MessagingTimeout, client.call,
                          self.ctxt, 'echo', value=1)

    def test_a_stopped_server_leaves_messages_for_the_next(self):
        endpoint = Endpoint('a')
        server = rpc.get_server(self.transport, messaging.Target(
            topic=self.topic, server='a'), [endpoint])
        server.start()
        server.stop()
        server.wait()
        self.client().cast(self.ctxt, 'note', value=5)
        later = self.serve('a')
        self.assertTrue(later.cast_seen.wait(TIMEOUT))
        self.assertEqual([5], later.seen)

    def test_a_message_wakes_only_the_listeners_that_can_take_it(self):
        """Twenty agents share the compute topic: a message for one of
        them must not wake the other nineteen (each wake is a thread
        switch under the GIL, for nothing)."""
        servers = {name: self.serve(name) for name in ('a', 'b', 'c')}
        topic = rpc_inproc._Exchange.named(
            self.transport._driver._default_exchange).topic(self.topic)
        self._wait_idle(topic, 3)
        idle_before = list(topic.idle)
        self.client(server='b').cast(self.ctxt, 'note', value=1)
        self.assertTrue(servers['b'].cast_seen.wait(TIMEOUT))
        self.assertEqual([w.server for w in idle_before
                          if w.server != 'b'],
                         [w.server for w in idle_before
                          if w in topic.idle and w.server != 'b'],
                         "a and c were left asleep")
        woken = []
        original = threading.Condition.notify
        self.useFixture(fixtures.MonkeyPatch(
            'threading.Condition.notify',
            lambda cond, n=1: (woken.append(cond), original(cond, n))))
        self._wait_idle(topic, 3)
        self.client().cast(self.ctxt, 'note', value=2)
        self.assertEqual(1, len([c for c in woken
                                 if any(w.cond is c for w in idle_before)]),
                         "one listener woken for the shared queue")

    @staticmethod
    def _wait_idle(topic, count):
        deadline = time.monotonic() + TIMEOUT
        while len(topic.idle) < count and time.monotonic() < deadline:
            time.sleep(0.005)
