"""The conductor's notifier: one notification per committed status, each
equal to its sample, never a wait for the broker."""

import datetime
import json
import os
import threading

import fixtures
from oslo_versionedobjects import fixture as ovo_fixture

from numamig import exception
from numamig import objects
from numamig.db import instances
from numamig.db import migrations
from numamig.notifications import notifier
from numamig.notifications import payloads
from numamig.objects import fields as nm_fields
from tests import base
from tests.fixtures import database
from tests.unit.db import base as dbase

STATUS = nm_fields.MigrationStatus
SAMPLES = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'doc',
                       'source', 'notification_samples')
# Fingerprints of the payloads: change one only with its version.
FINGERPRINTS = {
    'MigrationPayload': '1.0-9bb3864750ec4e853f3ed2afbab6ab3a',
}


class Captured:
    """A stand-in for oslo_messaging.Notifier: keeps what it is given."""

    def __init__(self, block=None):
        self.sent = []
        self.block = block
        self.arrived = threading.Event()

    def _send(self, priority, ctxt, event_type, payload):
        if self.block is not None:
            self.block.wait(10)
        self.sent.append({'priority': priority, 'event_type': event_type,
                          'payload': payload})
        self.arrived.set()

    def info(self, ctxt, event_type, payload):
        self._send('INFO', ctxt, event_type, payload)

    def warn(self, ctxt, event_type, payload):
        self._send('WARN', ctxt, event_type, payload)

    def error(self, ctxt, event_type, payload):
        self._send('ERROR', ctxt, event_type, payload)


def sample_migration(status):
    """The migration every sample shows, at ``status``."""
    at = datetime.datetime(2026, 11, 28, 9, 30, 0, tzinfo=datetime.UTC)
    ended = status == STATUS.COMPLETED
    return objects.Migration(
        uuid='6f1d7c8e-2a4b-4c3d-9e5f-0a1b2c3d4e5f',
        instance_uuid='0c9d8e7f-6a5b-4c3d-8e2f-1a0b9c8d7e6f',
        source_host='compute-1', dest_host='compute-2',
        requested_host=None, status=status,
        error=('destination compute-2 refused: no free 1 GiB page on '
               'host cell 1') if status in STATUS.UNSUCCESSFUL else None,
        priority=0, convergence_policy='balanced',
        convergence_actions=['auto-converge'] if ended else None,
        prediction='converges', memory_total=4294967296,
        memory_processed=4294967296 if ended else 0,
        memory_remaining=0 if ended else 4294967296,
        elapsed_ms=8412 if ended else None,
        downtime_ms=37 if ended else None, post_copy=False if ended else None,
        created_at=at, updated_at=at)


def render(sent):
    return json.loads(json.dumps(sent, default=str))


class SamplesTest(base.TestCase):
    """Every migration status has a sample, equal to what is sent."""

    def emitted(self, status):
        captured = Captured()
        sender = notifier.Notifier(captured)
        sender.start()
        self.addCleanup(sender.stop)
        sender.migration_status_changes(
            [(sample_migration(status), f'sample detail for {status}')])
        self.assertTrue(captured.arrived.wait(10))
        return render(captured.sent[0])

    def test_each_status_equals_its_sample(self):
        for status in STATUS.ALL:
            path = os.path.join(SAMPLES, f'migration-{status}.json')
            self.assertTrue(os.path.exists(path),
                            f"no sample {path} for migration.{status}")
            with open(path) as f:
                sample = json.load(f)
            self.assertEqual(sample, self.emitted(status), path)

    def test_no_sample_without_an_event(self):
        names = {f'migration-{s}.json' for s in STATUS.ALL}
        self.assertEqual(names, set(os.listdir(SAMPLES)))


class PayloadVersionTest(base.TestCase):

    def test_fingerprints(self):
        checker = ovo_fixture.ObjectVersionChecker(
            payloads.payload_classes())
        expected, actual = checker.test_hashes(FINGERPRINTS)
        self.assertEqual(expected, actual,
                         'a payload changed: bump its version and update '
                         'FINGERPRINTS and its samples')
        self.assertEqual(set(FINGERPRINTS), set(payloads.payload_classes()))


class DatabaseHandOverTest(base.TestCase):
    """The database hands over committed changes only."""

    def setUp(self):
        super().setUp()
        self.db = self.useFixture(database.SQLiteDatabase()).db
        self.heard = []
        self.db.status_listeners.append(self.heard.extend)
        self.instance = instances.create(
            self.db, dbase.make_instance()).instance.uuid

    def test_creation_and_each_status_change(self):
        made = migrations.create(self.db, dbase.make_migration(
            self.instance))
        migrations.set_status(self.db, made.uuid, STATUS.QUEUED,
                              detail='claimed on dst')
        migrations.set_status(self.db, made.uuid, STATUS.PREPARING)
        self.assertEqual(
            [(made.uuid, STATUS.ACCEPTED, 'created'),
             (made.uuid, STATUS.QUEUED, 'claimed on dst'),
             (made.uuid, STATUS.PREPARING, None)],
            [(m.uuid, m.status, d) for m, d in self.heard])

    def test_nothing_from_a_refused_or_rolled_back_change(self):
        made = migrations.create(self.db, dbase.make_migration(
            self.instance))
        del self.heard[:]
        self.assertRaises(exception.InvalidStatusTransition,
                          migrations.set_status, self.db,
                          made.uuid, STATUS.COMPLETED)

        class Abort(Exception):
            pass
        try:
            with self.db.writer() as session:
                migrations.set_status_in(session, made.uuid, STATUS.QUEUED)
                raise Abort()
        except Abort:
            pass
        self.assertEqual([], self.heard)
        self.assertEqual(STATUS.ACCEPTED,
                         migrations.get(self.db, made.uuid).status)


class NeverWaitsTest(base.TestCase):

    def test_a_stuck_broker_never_holds_the_recorder(self):
        logs = self.useFixture(fixtures.FakeLogger(
            name='numamig.notifications.notifier'))
        release = threading.Event()
        self.addCleanup(release.set)
        captured = Captured(block=release)
        self.patch(notifier, 'MAX_QUEUED', 3)
        sender = notifier.Notifier(captured)
        sender.start()
        for status in (STATUS.ACCEPTED, STATUS.QUEUED, STATUS.PREPARING,
                       STATUS.RUNNING, STATUS.COMPLETED, STATUS.FAILED):
            sender.migration_status_changes([(sample_migration(status),
                                              None)])
        self.assertIn('notifications dropped so far', logs.output)
        self.assertEqual(1, logs.output.count('dropped so far'))
        release.set()
        sender.stop(flush_s=5)
        self.assertLessEqual(len(captured.sent), 4)
        self.assertEqual('migration.accepted', captured.sent[0]['event_type'])


class FromConfTest(base.TestCase):

    def setUp(self):
        super().setUp()
        from numamig import rpc
        from numamig.conf import CONF
        self.cfg = CONF
        self.factory = rpc.get_notification_transport
        self.addCleanup(rpc.cleanup)

    def test_off_unless_a_driver_is_named(self):
        self.assertIsNone(notifier.Notifier.from_conf(
            self.cfg, self.factory, 'cond-1'))
        self.flags(driver=['noop'], group='oslo_messaging_notifications')
        self.assertIsNone(notifier.Notifier.from_conf(
            self.cfg, self.factory, 'cond-1'))

    def test_on_with_a_driver(self):
        self.flags(driver=['log'], group='oslo_messaging_notifications')
        found = notifier.Notifier.from_conf(self.cfg, self.factory,
                                            'cond-1')
        self.assertIsInstance(found, notifier.Notifier)
        self.assertEqual('numamig-conductor:cond-1',
                         found._notifier.publisher_id)
