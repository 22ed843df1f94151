"""numamig.conductor.direct_rpc on the wire, against oslo.messaging itself
over the real RabbitMQ.

* It calls an oslo.messaging RPC server (numamig.rpc.get_server, as the
  conductor serves) in the operations namespace and at release 1's ping
  version, and reads its answers and its refusals as numamig.rpc's
  client does.
* What it publishes carries the same keys, properties and envelope as
  what oslo.messaging publishes for the same call (read back from a
  queue of the test's own).
* A request no queue takes (mandatory, returned) is sent again until
  its deadline, then ends as an unanswered call; a server that does not
  answer ends the call at its deadline.
* Every request has a message id and unique id of its own: a request
  sent again is a new message carrying the same arguments (the
  migration uuid the conductor keys its records on).
"""

import datetime
import json
import threading
import time
import uuid

import amqp
import oslo_messaging as messaging

from numamig import exception
from numamig import objects
from numamig import rpc
from numamig.conductor import direct_rpc
from tests import base
from tests.fixtures import rpc as rpc_fixture

INSTANCE = '7d3c1a7e-0c6c-4b8e-9f64-2d2a4a1b0c11'
MIGRATION = '2b1e5d1e-3a4f-4e0a-9d5c-6f7a8b9c0d1e'
UNKNOWN = '00000000-0000-4000-8000-00000000dead'
AT = datetime.datetime(2026, 11, 28, 17, 0, tzinfo=datetime.UTC)


class Operations:
    """An operations endpoint as the conductor's, answering from memory
    (the calls direct_rpc makes)."""

    target = messaging.Target(namespace='operations', version='2.0')

    def __init__(self):
        self.requests = []

    def live_migrate_instance(self, ctxt, instance_uuid, dest_host=None,
                              migration_uuid=None, priority=None,
                              policy=None):
        self.requests.append((instance_uuid, migration_uuid,
                              ctxt.is_admin))
        if instance_uuid == UNKNOWN:
            raise exception.InstanceNotFound(instance_uuid=instance_uuid)
        return objects.Migration(
            uuid=migration_uuid, instance_uuid=instance_uuid,
            source_host='host-a', requested_host=dest_host,
            status='accepted', priority=priority or 0, created_at=AT,
            updated_at=AT, history=[objects.MigrationStatusChange(
                status='accepted', changed_at=AT, detail='created')])

    def migration_wait(self, ctxt, migration_uuid, status,
                       memory_processed, timeout):
        time.sleep(timeout)
        return objects.Migration(
            uuid=migration_uuid, instance_uuid=INSTANCE,
            source_host='host-a', status='completed', created_at=AT)


class Legacy:
    """Release 1's API, where every release answers ``ping``."""

    target = messaging.Target(version='1.1')

    def __init__(self, service_version=2):
        self.service_version = service_version

    def ping(self, ctxt):
        return {'service_version': self.service_version}


class WireTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.rpc = self.useFixture(rpc_fixture.RPCFixture('rabbit'))
        self.topic = self.rpc.topic('conductor')
        self.url = direct_rpc.parse_url(self.rpc.url)

    def client(self, timeout=10):
        host = self.url.hosts[0]
        link = direct_rpc._open(
            hostname=host.hostname, port=host.port or 5672,
            userid=host.username, password=host.password,
            virtual_host=self.url.virtual_host or '/', ssl=False,
            connect_timeout=5)
        client = direct_rpc.Client(link, self.url, self.rpc.exchange,
                                   self.topic, timeout)
        self.addCleanup(client.close)
        return client

    def serve(self, *endpoints):
        self.rpc.start_server(list(endpoints), self.topic)

    def test_calls_an_oslo_messaging_server(self):
        operations = Operations()
        self.serve(operations, Legacy())
        client = self.client()
        self.assertEqual(2, client.ping(5))
        found = client.live_migrate_instance(INSTANCE, 'host-b', 50, None,
                                             MIGRATION)
        self.assertEqual((MIGRATION, INSTANCE, 'host-b', 'accepted', 50, AT),
                         (found.uuid, found.instance_uuid,
                          found.requested_host, found.status,
                          found.priority, found.created_at))
        self.assertEqual([('accepted', AT, 'created')],
                         [(h.status, h.changed_at, h.detail)
                          for h in found.history])
        # An admin context crossed the wire as oslo.messaging packs it.
        self.assertEqual([(INSTANCE, MIGRATION, True)], operations.requests)
        waited = client.migration_wait(None, found, 0.2)
        self.assertEqual('completed', waited.status)

    def test_a_refusal_as_numamig_rpc_raises_it(self):
        self.serve(Operations(), Legacy())
        ours = self.assertRaises(
            exception.InstanceNotFound, self.client().live_migrate_instance,
            UNKNOWN, None, None, None, MIGRATION)
        theirs = self.assertRaises(
            exception.InstanceNotFound, rpc.get_client(
                self.rpc.transport, messaging.Target(
                    exchange=self.rpc.exchange, topic=self.topic,
                    namespace='operations', version='2.0')).prepare(
                timeout=10).call,
            self.rpc.context, 'live_migrate_instance',
            instance_uuid=UNKNOWN, migration_uuid=MIGRATION)
        self.assertEqual(type(theirs).__name__, type(ours).__name__)
        self.assertEqual(str(theirs), str(ours))

    def test_an_older_conductor_is_not_served(self):
        self.serve(Operations(), Legacy(service_version=1))
        self.assertRaises(direct_rpc.Unserved, self.client().ping, 5)

    def test_no_conductor_is_a_timeout_at_the_deadline(self):
        client = self.client()
        began = time.monotonic()
        self.assertRaises(direct_rpc.CallTimeout, client.ping, 0.5)
        self.assertLess(time.monotonic() - began, 3)

    def test_a_request_no_queue_takes_is_sent_again_until_its_deadline(self):
        client = self.client(timeout=1)
        sent = []
        real = client._publish

        def counted(*args):
            sent.append(args[0])
            return real(*args)
        client._publish = counted
        began = time.monotonic()
        error = self.assertRaises(direct_rpc.CallTimeout,
                                  client.live_migrate_instance, INSTANCE, None,
                                  None, None, MIGRATION)
        self.assertIn('no queue of the conductor took', str(error))
        self.assertLess(time.monotonic() - began, 3)
        self.assertGreater(len(sent), 1)

    def test_the_message_oslo_messaging_sends(self):
        """The same envelope, keys and properties as oslo.messaging's own
        call of the same method; every send a new message id."""
        catch = amqp.Connection('127.0.0.1:5672', userid='guest',
                                password='guest')
        catch.connect()
        self.addCleanup(catch.close)
        channel = catch.channel()
        channel.exchange_declare(self.rpc.exchange, 'topic', durable=False,
                                 auto_delete=False)
        queue, _, _ = channel.queue_declare('', exclusive=True)
        channel.queue_bind(queue, self.rpc.exchange, self.topic)
        got = []

        def read_one():
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                message = channel.basic_get(queue, no_ack=True)
                if message is not None:
                    got.append(message)
                    return
                time.sleep(0.02)

        def caught(send):
            reader = threading.Thread(target=read_one)
            reader.start()
            try:
                send()
            except (direct_rpc.CallTimeout, messaging.MessagingTimeout):
                pass
            reader.join()
            return got.pop()

        client = self.client(timeout=1)
        ours = [caught(lambda: client.live_migrate_instance(
            INSTANCE, 'h', None, None, MIGRATION)) for _ in range(2)]
        theirs = caught(lambda: rpc.get_client(
            self.rpc.transport, messaging.Target(
                exchange=self.rpc.exchange, topic=self.topic,
                namespace='operations', version='2.0')).prepare(
            timeout=1, transport_options=rpc.MANDATORY).call(
            self.rpc.context, 'live_migrate_instance', instance_uuid=INSTANCE,
            dest_host='h', migration_uuid=MIGRATION))
        self.assertEqual(theirs.properties, ours[0].properties)
        self.assertEqual(
            {k: v for k, v in theirs.delivery_info.items()
             if k != 'delivery_tag'},
            {k: v for k, v in ours[0].delivery_info.items()
             if k != 'delivery_tag'})
        envelopes = [json.loads(m.body) for m in ours + [theirs]]
        self.assertEqual([['oslo.message', 'oslo.version']] * 3,
                         [sorted(e) for e in envelopes])
        self.assertEqual({'2.0'}, {e['oslo.version'] for e in envelopes})
        ours_sent, again, theirs_sent = (json.loads(e['oslo.message'])
                                         for e in envelopes)
        self.assertEqual(sorted(theirs_sent), sorted(ours_sent))
        for key in ('method', 'args', 'namespace', 'version', '_timeout'):
            self.assertEqual(theirs_sent[key], ours_sent[key], key)
        self.assertTrue(ours_sent['_reply_q'].startswith('reply_'))
        uuid.UUID(ours_sent['_msg_id'])
        # Sent again: a new message with the same request.
        for key in ('_msg_id', '_unique_id'):
            self.assertNotEqual(ours_sent[key], again[key])
        self.assertEqual(ours_sent['args'], again['args'])
