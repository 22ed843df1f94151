"""A real consumer on RabbitMQ hears a migration's notifications.

numamig-conductor and two numamig-compute daemons as processes over
RabbitMQ and PostgreSQL (test_multiprocess's deployment), the conductor
told to notify (``[oslo_messaging_notifications] driver = messagingv2``,
on a topic of the test's own). An oslo.messaging notification listener,
as a consumer of an operator's tooling would run it, must hear the
migration walk from ``accepted`` to ``completed`` in order, each payload
a MigrationPayload of its status, then an operator's host maintenance
told once each way; and the sample of each event must have the shape of
what was heard.
"""

import json
import os
import threading
import time
import uuid

import oslo_messaging as messaging

from numamig.conf import CONF
from tests.functional import test_multiprocess

SAMPLES = os.path.join(os.path.dirname(__file__), '..', '..', 'doc',
                       'source', 'notification_samples')
HEARD_S = 60


class Heard:
    """A notification endpoint keeping every notification in order."""

    def __init__(self):
        self.events = []
        self.lock = threading.Condition()

    def _keep(self, priority, publisher_id, event_type, payload):
        with self.lock:
            self.events.append({'priority': priority,
                                'publisher_id': publisher_id,
                                'event_type': event_type,
                                'payload': payload})
            self.lock.notify_all()

    def info(self, ctxt, publisher_id, event_type, payload, metadata):
        self._keep('INFO', publisher_id, event_type, payload)

    def warn(self, ctxt, publisher_id, event_type, payload, metadata):
        self._keep('WARN', publisher_id, event_type, payload)

    def error(self, ctxt, publisher_id, event_type, payload, metadata):
        self._keep('ERROR', publisher_id, event_type, payload)

    def wait_for(self, event_type, migration_uuid):
        deadline = time.monotonic() + HEARD_S
        with self.lock:
            while not any(self._is(e, event_type, migration_uuid)
                          for e in self.events):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        f"{event_type} of {migration_uuid} not heard within "
                        f"{HEARD_S} s; heard: "
                        f"{[e['event_type'] for e in self.events]}")
                self.lock.wait(left)

    def wait_for_host(self, event_type, host):
        deadline = time.monotonic() + HEARD_S
        with self.lock:
            while not any(e['event_type'] == event_type and e['payload'][
                    'numamig_object.data'].get('host') == host
                    for e in self.events):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{event_type} of {host} not "
                                         f"heard within {HEARD_S} s")
                self.lock.wait(left)

    @staticmethod
    def _is(event, event_type, migration_uuid):
        data = event['payload'].get('numamig_object.data', {})
        return event['event_type'] == event_type and \
            data.get('uuid') == migration_uuid


class _Listening(test_multiprocess.MultiProcessTestBase):
    """The daemons notify on a topic of the test's own; ``listen``
    hears it."""

    def setUp(self):
        self.topic = f'numamig-test-notifications-{uuid.uuid4().hex[:8]}'
        super().setUp()

    def write_config(self, host, caps=None):
        path = super().write_config(host, caps)
        if caps is None:  # the conductor
            with open(path, 'a') as f:
                f.write('[oslo_messaging_notifications]\n'
                        'driver = messagingv2\n'
                        f'topics = {self.topic}\n')
        return path

    def listen(self):
        heard = Heard()
        transport = messaging.get_notification_transport(
            CONF, url=self.rpc.url)
        # Deleted with the test's other queues at clean-up.
        self.rpc._queues.update(f'{self.topic}.{priority}'
                                for priority in ('info', 'warn', 'error'))
        self.addCleanup(transport.cleanup)
        listener = messaging.get_notification_listener(
            transport, [messaging.Target(topic=self.topic,
                                         exchange=self.rpc.exchange)],
            [heard], executor='threading')
        listener.start()
        self.addCleanup(listener.wait)
        self.addCleanup(listener.stop)
        return heard


class NotificationsTest(_Listening):

    def test_a_consumer_hears_the_migration_walk(self):
        heard = self.listen()
        source, dest = sorted(self.hosts)
        instance = self.create(source, 'notified-guest')
        migration = self.wait_for_end(self.api.live_migrate_instance(
            self.rpc.context, instance.uuid, dest))
        self.assertEqual('completed', migration.status, migration.error)
        heard.wait_for('migration.completed', migration.uuid)
        mine = [e for e in heard.events if e['payload'].get(
            'numamig_object.data', {}).get('uuid') == migration.uuid]
        walk = [e['event_type'] for e in mine]
        self.assertEqual('migration.accepted', walk[0])
        self.assertEqual('migration.completed', walk[-1])
        self.assertIn('migration.running', walk)
        self.assertLess(walk.index('migration.queued'),
                        walk.index('migration.running'))
        for event in mine:
            status = event['event_type'].split('.', 1)[1]
            self.assertEqual(f'numamig-conductor:{self.conductor_host}',
                             event['publisher_id'])
            payload = event['payload']
            self.assertEqual('MigrationPayload',
                             payload['numamig_object.name'])
            self.assertEqual(status, payload['numamig_object.data'][
                'status'])
            with open(os.path.join(SAMPLES,
                                   f'migration-{status}.json')) as f:
                sample = json.load(f)
            # The sample shows what a consumer gets: same event, object,
            # version and fields.
            self.assertEqual(sample['event_type'], event['event_type'])
            self.assertEqual(sample['priority'], event['priority'])
            for key in ('numamig_object.name', 'numamig_object.version',
                        'numamig_object.namespace'):
                self.assertEqual(sample['payload'][key], payload[key])
            self.assertEqual(set(sample['payload']['numamig_object.data']),
                             set(payload['numamig_object.data']))
        completed = mine[-1]['payload']['numamig_object.data']
        self.assertEqual(dest, completed['dest_host'])
        self.assertEqual(instance.uuid, completed['instance_uuid'])

        # An operator's maintenance, told once each way.
        self.api.host_set_disabled(self.rpc.context, source, True,
                                   reason='firmware upgrade')
        self.api.host_set_disabled(self.rpc.context, source, False)
        heard.wait_for_host('host.enabled', source)
        maintenance = [(e['event_type'],
                        e['payload']['numamig_object.data']['reason'])
                       for e in heard.events
                       if e['event_type'].startswith('host.')]
        self.assertEqual([('host.disabled', 'firmware upgrade'),
                          ('host.enabled', None)], maintenance)
        self.stop_daemons()


class DevicesVerifiedNotificationTest(_Listening):
    """A destination's device verification, recorded through the real
    conductor over RabbitMQ (the records API an agent uses), is heard
    once as ``instance.devices.verified``, WARN for a device off its
    guest cell's node, even when the record is sent twice (a
    redelivered arrival), in the shape of its sample."""

    def test_a_consumer_hears_the_verification_once(self):
        heard = self.listen()
        source, dest = sorted(self.hosts)
        instance = self.create(source, 'devices-guest')
        migration = self.wait_for_end(self.api.live_migrate_instance(
            self.rpc.context, instance.uuid, dest))
        agent = self.names.records_api(self.rpc.transport, timeout=30)
        astray = {'alias': 'gpu', 'address': '0000:03:00.0',
                  'guest_cell': '0', 'cell_nodes': '0', 'device_node': '1',
                  'plugged': 'yes', 'local': 'no'}
        for _ in range(2):
            self.assertTrue(agent.migration_record_devices(
                self.rpc.context, migration.uuid, dest, [astray]))
        # Recorded (the casts were consumed) before counting what was
        # heard: the second changes nothing and tells nothing.
        deadline = time.monotonic() + HEARD_S
        while time.monotonic() < deadline:
            read = self.api.migration_get_satellites(
                self.rpc.context, migration.uuid, ['devices'])
            if read['devices'].devices:
                break
            time.sleep(0.1)
        with heard.lock:
            while not any(e['event_type'] == 'instance.devices.verified'
                          for e in heard.events):
                left = deadline - time.monotonic()
                self.assertGreater(left, 0, 'instance.devices.verified '
                                            'not heard')
                heard.lock.wait(left)
        time.sleep(1)  # room for a second, wrong, notification
        told = [e for e in heard.events
                if e['event_type'] == 'instance.devices.verified']
        self.assertEqual(1, len(told), told)
        (event,) = told
        data = event['payload']['numamig_object.data']
        self.assertEqual(('WARN', migration.uuid, instance.uuid, dest,
                          False),
                         (event['priority'], data['migration_uuid'],
                          data['instance_uuid'], data['host'],
                          data['all_local']))
        with open(os.path.join(SAMPLES,
                               'instance-devices-verified.json')) as f:
            sample = json.load(f)
        self.assertEqual(sample['event_type'], event['event_type'])
        self.assertEqual(sample['priority'], event['priority'])
        for key in ('numamig_object.name', 'numamig_object.version',
                    'numamig_object.namespace'):
            self.assertEqual(sample['payload'][key], event['payload'][key])
        self.assertEqual(set(sample['payload']['numamig_object.data']),
                         set(data))
        self.stop_daemons()


class AgentNotificationsTest(_Listening):
    """What only an agent sees, told by the agent itself over RabbitMQ:
    a convergence policy's actions while its emulated copy runs, and its
    migration guard's decision on a release-1 source's verbatim XML."""

    # Whether the source runs as release 1 (it copies the XML verbatim,
    # and the destination's guard rewrites it).
    OLD_SOURCE = False

    def write_config(self, host, caps=None):
        path = super().write_config(host, caps)
        if caps is None:
            if self.OLD_SOURCE:
                # As an operator upgrading with the guard on does.
                with open(path, 'a') as f:
                    f.write('[workarounds]\n'
                            'enable_numa_live_migration = true\n')
            return path
        source, dest = sorted(self.hosts)
        lines = ['[oslo_messaging_notifications]', 'driver = messagingv2',
                 f'topics = {self.topic}', '[libvirt]']
        if host == dest:
            lines += ['migration_guard = true',
                      f'migration_guard_claims_file = '
                      f'{os.path.join(self.dir, host + "-claims.json")}',
                      f'migration_guard_log_file = '
                      f'{os.path.join(self.dir, host + "-guard.log")}']
        elif self.OLD_SOURCE:
            lines += ['[testing]', 'pretend_service_version = 1']
        else:
            # The guest dirties faster than the link sends: the policy
            # escalates.
            lines += ['emulated_migration_bandwidth = 100',
                      'emulated_migration_dirty_rate = 150']
        with open(path, 'a') as f:
            f.write('\n'.join(lines) + '\n')
        return path

    def test_a_consumer_hears_what_only_an_agent_sees(self):
        heard = self.listen()
        source, dest = sorted(self.hosts)
        instance = self.create(source, 'policy-guest')
        migration = self.wait_for_end(self.api.live_migrate_instance(
            self.rpc.context, instance.uuid, dest, policy='nfv'))
        heard.wait_for('migration.completed', migration.uuid)
        actions = [e for e in heard.events
                   if e['event_type'] == 'migration.policy-action']
        self.assertTrue(actions, [e['event_type'] for e in heard.events])
        # What the record lists: MigrationConvergence's actions.
        recorded = self.api.migration_get_satellites(
            self.rpc.context, migration.uuid,
            ['convergence'])['convergence'].actions
        told = [a['payload']['numamig_object.data'] for a in actions]
        # Each action the record lists, told by the source as it
        # happened, before the migration's end was notified.
        self.assertEqual(recorded, [t['description'] for t in told])
        for event, data in zip(actions, told, strict=True):
            self.assertEqual(f'numamig-compute:{source}',
                             event['publisher_id'])
            self.assertEqual((migration.uuid, 'nfv', 'applied'),
                             (data['migration_uuid'], data['policy'],
                              data['outcome']))
        order = [e['event_type'] for e in heard.events]
        self.assertLess(order.index('migration.policy-action'),
                        order.index('migration.completed'))


class GuardNotificationsTest(AgentNotificationsTest):
    """A release-1 source copies the XML verbatim; the destination's
    guard rewrites it to the claim and its agent tells so."""

    OLD_SOURCE = True

    def test_a_consumer_hears_what_only_an_agent_sees(self):
        heard = self.listen()
        source, dest = sorted(self.hosts)
        # The destination's first pCPUs are taken: the claim differs
        # from the source's pins, which the verbatim XML carries.
        self.create(dest, 'occupier')
        instance = self.create(source, 'guarded-guest')
        migration = self.wait_for_end(self.api.live_migrate_instance(
            self.rpc.context, instance.uuid, dest))
        self.assertEqual('completed', migration.status, migration.error)
        deadline = time.monotonic() + HEARD_S
        with heard.lock:
            while not any(e['event_type'].startswith('guard.')
                          for e in heard.events):
                left = deadline - time.monotonic()
                self.assertGreater(left, 0, "no guard notification heard: "
                                   f"{self.log_of(dest)[-2000:]}")
                heard.lock.wait(left)
            guard = [e for e in heard.events
                     if e['event_type'].startswith('guard.')]
        self.assertEqual(['guard.rewritten'],
                         [e['event_type'] for e in guard])
        self.assertEqual(f'numamig-compute:{dest}', guard[0]['publisher_id'])
        data = guard[0]['payload']['numamig_object.data']
        self.assertEqual((dest, instance.uuid, 'rewritten'),
                         (data['host'], data['instance_uuid'],
                          data['decision']))
        self.assertIn(f'rewritten to the claim of migration '
                      f'{migration.uuid} on {dest}', data['reason'])
