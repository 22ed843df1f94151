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
from numamig.compute import events
from numamig.compute import locality
from numamig.db import _rows
from numamig.db import compute_nodes
from numamig.db import instances
from numamig.db import migration_satellites
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
    'DeviceLateReleasePayload': '1.0-8bf9632f69e648f7c146c04542dd4ab1',
    'DevicesVerifiedPayload': '1.0-1420c3f247937158fcae47c91590c066',
    'DrainMovePayload': '1.0-8ef68662386d337e89ecb5a0b6404642',
    'DrainPayload': '1.0-0f248ff4b20b959542cede20c84fa1f2',
    'GuardDecisionPayload': '1.0-f4aa3638318967d059b0cdc650aa04fc',
    'HostMaintenancePayload': '1.0-2301f115f309333ac4068ea950132be0',
    'LiveMigratablePayload': '1.0-f50d8dd6d62eba1943effa1e558a0b93',
    'LocalityMovePayload': '1.0-5680e7440718cc42f9f8b2b47b894ef6',
    'MemoryChangePayload': '1.0-90696f9f373e0a494c87cfc8d4588a29',
    'MigrationPayload': '1.0-9bb3864750ec4e853f3ed2afbab6ab3a',
    'PolicyActionPayload': '1.0-ff8bd4098a8451bca21223c2f3040af0',
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
        priority=0,
        memory_total=4294967296,
        memory_processed=4294967296 if ended else 0,
        memory_remaining=0 if ended else 4294967296,
        elapsed_ms=8412 if ended else None,
        downtime_ms=37 if ended else None, post_copy=False if ended else None,
        created_at=at, updated_at=at)


def sample_satellites(status):
    """The satellite records a migration's change carries, read from the
    row: its prediction (MigrationPayload.prediction) and how it
    converged (convergence_policy and convergence_actions)."""
    uuid = '6f1d7c8e-2a4b-4c3d-9e5f-0a1b2c3d4e5f'
    return {'prediction': objects.MigrationPrediction(
        migration_uuid=uuid, prediction='converges'),
        'convergence': objects.MigrationConvergence(
            migration_uuid=uuid, policy='balanced',
            actions=['auto-converge'] if status == STATUS.COMPLETED
            else None)}


AT = datetime.datetime(2026, 11, 28, 9, 30, 0, tzinfo=datetime.UTC)
DRAIN_UUID = '3a2b1c0d-9e8f-4a7b-8c6d-5e4f3a2b1c0d'


def sample_drain(kind, status):
    """The drain every drain sample shows, at ``status``."""
    moves = [sample_move(kind, s)
             for s in ('completed', 'completed', 'migrating', 'pending')]
    return {'uuid': DRAIN_UUID, 'host': 'compute-1', 'kind': kind,
            'status': status, 'parallel': 2, 'priority': 80,
            'error': ('guest-3 fits on no other host' if status == 'failed'
                      else None),
            'moves': moves, 'created_at': AT,
            'ended_at': AT if status in ('completed', 'failed', 'aborted')
            else None}


def sample_move(kind, status):
    """The move every move sample shows, at ``status``."""
    return {'drain_uuid': DRAIN_UUID, 'drain_host': 'compute-1',
            'drain_kind': kind,
            'instance_uuid': '0c9d8e7f-6a5b-4c3d-8e2f-1a0b9c8d7e6f',
            'name': 'guest-1', 'status': status,
            'source_host': 'compute-3' if kind == 'defragment' else None,
            'planned_host': 'compute-2',
            'dest_host': 'compute-2' if status == 'completed' else None,
            'migration_uuid': (None if status in ('pending', 'cancelled')
                               else '6f1d7c8e-2a4b-4c3d-9e5f-0a1b2c3d4e5f'),
            'attempts': 0 if status in ('pending', 'cancelled') else 1,
            'error': ('the drain was aborted' if status == 'cancelled'
                      else 'destination refused: no free pCPU'
                      if status == 'failed' else None)}


def sample_memory_change(status):
    """The memory change every memory sample shows, at ``status``."""
    ended = status != 'running'
    guests = [{'instance': '0c9d8e7f-6a5b-4c3d-8e2f-1a0b9c8d7e6f',
               'reached': status in ('done', 'partial')},
              {'instance': '1d0e9f8a-7b6c-4d5e-9f3a-2b1c0d9e8f7a',
               'reached': status == 'done'}]
    return {'uuid': '5b4a3c2d-1e0f-4a9b-8c7d-6e5f4a3b2c1d',
            'host': 'compute-1', 'status': status,
            'request': {'host': 'compute-1', 'node': 1, 'size_mb': 2048,
                        'exact': False},
            'plan': None,
            'result': (None if not ended else
                       {'error': 'compute-1 did not answer'}
                       if status == 'failed' else
                       {'guests': guests,
                        'all_reached': status == 'done'})}


def sample_policy_action():
    """The policy action the sample shows: a stalled copy's second
    escalation tier."""
    migration = sample_migration(STATUS.RUNNING)
    return events.PolicyAction(
        migration_uuid=migration.uuid,
        instance_uuid=migration.instance_uuid,
        source_host=migration.source_host, dest_host=migration.dest_host,
        policy='finish', kind='post_copy', outcome='applied',
        line='post-copy (stalled for 3 passes)')


def sample_guard_decision(decision):
    """The guard's decision the samples show, on a release-1 source's
    verbatim XML."""
    reason = {
        'rewritten': 'rewritten to the claim of migration '
                     '0f0c9e3a-4b2d-4c8e-9a51-3d6f1c2b7e10 on compute-2 '
                     '(vcpupin 0: cpuset=2 -> cpuset=6; vcpupin 1: '
                     'cpuset=3 -> cpuset=7)',
        'refused': 'cannot be reconciled with the claim of migration '
                   '0f0c9e3a-4b2d-4c8e-9a51-3d6f1c2b7e10 on compute-2: '
                   'guest cell 0 is backed by 4 KiB pages, the claim '
                   'took 2048 KiB pages'}[decision]
    return events.GuardDecision(
        'compute-2', 'instance-00000001',
        '6b0e7c8a-1f4e-4d2b-8a3c-5e9f0d1c2b3a', decision, reason,
        '2026-11-28 09:30:00')


def sample_locality_move(outcome):
    """The locality watch's move the samples show."""
    reason = {
        'moved': 'remote share 100% above 50% for 3 intervals: memory to '
                 'node 0',
        'failed': 'libvirt refused the move to node 0: Hypervisor on '
                  'compute-2 failed to move the memory of '
                  '6b0e7c8a-1f4e-4d2b-8a3c-5e9f0d1c2b3a to node 0: '
                  'change of nodeset for running domain requires strict '
                  'numa mode',
        'flapping': 'moved 2 times within 30 intervals: left alone (its '
                    'vCPUs keep moving)'}[outcome]
    return locality.Move('compute-2', '6b0e7c8a-1f4e-4d2b-8a3c-5e9f0d1c2b3a',
                         outcome, 0, 65536, 1.0, reason)


def sample_devices(local=False):
    """The devices verification the sample shows: a NIC on its guest
    cell's node and, unless ``local``, a GPU plugged on the other."""
    nic = {'alias': 'nic', 'address': '0000:82:00.0', 'guest_cell': '1',
           'cell_nodes': '1', 'device_node': '1', 'plugged': 'yes',
           'local': 'yes'}
    gpu = {'alias': 'gpu', 'address': '0000:03:00.0', 'guest_cell': '0',
           'cell_nodes': '0', 'device_node': '0' if local else '1',
           'plugged': 'yes', 'local': 'yes' if local else 'no'}
    return {'migration_uuid': '0f0c9e3a-4b2d-4c8e-9a51-3d6f1c2b7e10',
            'instance_uuid': '6b0e7c8a-1f4e-4d2b-8a3c-5e9f0d1c2b3a',
            'host': 'compute-2', 'devices': [nic, gpu]}


def sample_late_release(outcome):
    """A NIC released after its migration's unplug timed out."""
    reason = ("released after the unplug's deadline; plugged back"
              if outcome == 'replugged' else
              "released after the unplug's deadline; not plugged back: "
              "Hypervisor error on compute-1 (plug 0000:82:00.0 back): "
              "internal error: unable to reserve PCI address")
    return events.DeviceLateRelease(
        'compute-1', '6b0e7c8a-1f4e-4d2b-8a3c-5e9f0d1c2b3a',
        '0f0c9e3a-4b2d-4c8e-9a51-3d6f1c2b7e10', '0000:82:00.0',
        'hostdev0', outcome, reason)


def sample_change(event_type):
    """The committed change whose notification is ``event_type``."""
    parts = event_type.split('.')
    if event_type == 'migration.policy-action':
        return events.Event(events.POLICY_ACTION, sample_policy_action(),
                            None)
    if event_type == 'instance.live-migratable.changed':
        return _rows.Change(_rows.LIVE_MIGRATABLE, {
            'instance_uuid': '6b0e7c8a-1f4e-4d2b-8a3c-5e9f0d1c2b3a',
            'status': 'no', 'previous_status': 'yes',
            'reasons': [{'kind': 'no-host-fits',
                         'detail': 'closest: compute-2: NUMA topology does '
                                   'not fit: guest cell 0 fits on no host '
                                   'cell (and 3 other hosts refused)'}],
            'witness': None})
    if event_type == 'instance.devices.verified':
        return _rows.Change(_rows.DEVICES_VERIFIED, sample_devices())
    if parts[0] == 'device':
        return events.Event(events.DEVICE_LATE_RELEASE,
                            sample_late_release(parts[1]), None)
    if parts[0] == 'locality':
        return events.Event(events.LOCALITY_MOVE,
                            sample_locality_move(parts[1]), None)
    if parts[0] == 'guard':
        return events.Event(events.GUARD_DECISION,
                            sample_guard_decision(parts[1]), None)
    if parts[0] == 'memory-change':
        status = 'running' if parts[1] == 'started' else parts[1]
        return _rows.Change(_rows.MEMORY_CHANGE,
                            sample_memory_change(status))
    if parts[0] == 'migration':
        return _rows.Change(_rows.MIGRATION, sample_migration(parts[1]),
                            f'sample detail for {parts[1]}',
                            sample_satellites(parts[1]))
    if parts[0] == 'host':
        disabled = parts[1] == 'disabled'
        return _rows.Change(_rows.HOST, compute_nodes.Maintenance(
            'compute-1', AT if disabled else None,
            'firmware upgrade' if disabled else None))
    kind = parts[0]
    if parts[1] == 'move':
        event = parts[2]
        status = 'pending' if event == 'replanned' else event
        return _rows.Change(_rows.DRAIN_MOVE, sample_move(kind, status),
                            'replanned' if event == 'replanned' else None)
    status = 'running' if parts[1] == 'started' else parts[1]
    return _rows.Change(_rows.DRAIN, sample_drain(kind, status))


def sample_path(event_type):
    return os.path.join(SAMPLES, event_type.replace('.', '-') + '.json')


def render(sent):
    return json.loads(json.dumps(sent, default=str))


class SamplesTest(base.TestCase):
    """Every event has a sample, equal to what is sent."""

    def emitted(self, event_type):
        captured = Captured()
        sender = notifier.Notifier(captured)
        sender.start()
        self.addCleanup(sender.stop)
        sender.changes([sample_change(event_type)])
        self.assertTrue(captured.arrived.wait(10))
        return render(captured.sent[0])

    def test_each_event_equals_its_sample(self):
        for event_type in notifier.EVENT_TYPES:
            path = sample_path(event_type)
            self.assertTrue(os.path.exists(path),
                            f"no sample {path} for {event_type}")
            with open(path) as f:
                sample = json.load(f)
            self.assertEqual(sample, self.emitted(event_type), path)

    def test_no_sample_without_an_event(self):
        names = {os.path.basename(sample_path(e))
                 for e in notifier.EVENT_TYPES}
        self.assertEqual(names, set(os.listdir(SAMPLES)))

    def test_every_migration_status_has_an_event(self):
        for status in STATUS.ALL:
            self.assertIn(f'migration.{status}', notifier.EVENT_TYPES)


class DevicesVerifiedTest(base.TestCase):
    """The priority says whether every device is where it belongs."""

    def test_all_local_is_info_without_problems(self):
        priority, event, payload = notifier.notification_of(
            _rows.Change(_rows.DEVICES_VERIFIED,
                         sample_devices(local=True)))
        self.assertEqual(('info', 'instance.devices.verified'),
                         (priority, event))
        self.assertEqual((True, []), (payload.all_local, payload.problems))

    def test_an_unplugged_device_warns_and_says_so(self):
        record = sample_devices(local=True)
        record['devices'][0].update(plugged='no', local='no',
                                    device_node=None)
        priority, _event, payload = notifier.notification_of(
            _rows.Change(_rows.DEVICES_VERIFIED, record))
        self.assertEqual('warn', priority)
        self.assertFalse(payload.all_local)
        self.assertEqual(['device nic 0000:82:00.0 of guest cell 1 (host '
                          'nodes 1): not plugged'], payload.problems)


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
        self.db.change_listeners.append(self.heard.extend)
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
            [(c.record.uuid, c.record.status, c.detail)
             for c in self.heard if c.kind == _rows.MIGRATION])

    def test_the_prediction_is_read_from_the_row_changed(self):
        # MigrationPayload.prediction is MigrationPrediction's (a
        # satellite record, not a Migration field), read with the row
        # the status change wrote: none before it was predicted, the
        # one recorded after.
        made = migrations.create(self.db, dbase.make_migration(
            self.instance))
        migration_satellites.set_prediction(
            self.db, made.uuid, {'prediction': 'needs-post-copy'})
        migrations.set_status(self.db, made.uuid, STATUS.QUEUED)
        payloads_sent = [notifier.notification_of(c)[2]
                         for c in self.heard if c.kind == _rows.MIGRATION]
        self.assertEqual(
            [(STATUS.ACCEPTED, None), (STATUS.QUEUED, 'needs-post-copy')],
            [(p.status, p.prediction) for p in payloads_sent])

    def test_the_convergence_is_read_from_the_row_changed(self):
        # convergence_policy and convergence_actions are
        # MigrationConvergence's (a satellite record), read with the row
        # the status change wrote: the policy chosen when it was
        # recorded, then what the run reported with its result.
        made = migrations.create(self.db, dbase.make_migration(
            self.instance, dest_host='dst'), policy='nfv')
        for status in (STATUS.QUEUED, STATUS.PREPARING, STATUS.RUNNING):
            migrations.set_status(self.db, made.uuid, status)
        migrations.set_status(self.db, made.uuid, STATUS.POST_MIGRATING,
                              result={'convergence_policy': 'finish',
                                      'convergence_actions': ['post-copy']})
        payloads_sent = [notifier.notification_of(c)[2]
                         for c in self.heard if c.kind == _rows.MIGRATION]
        self.assertEqual(
            [(STATUS.ACCEPTED, 'nfv', None), (STATUS.QUEUED, 'nfv', None),
             (STATUS.PREPARING, 'nfv', None), (STATUS.RUNNING, 'nfv', None),
             (STATUS.POST_MIGRATING, 'finish', ['post-copy'])],
            [(p.status, p.convergence_policy, p.convergence_actions)
             for p in payloads_sent])

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
            sender.changes([_rows.Change(_rows.MIGRATION,
                                         sample_migration(status))])
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
        # Registers [oslo_messaging_notifications], as a conductor's
        # start does before reading it.
        self.factory(self.cfg)

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


class DrainAndHostHandOverTest(base.TestCase):
    """Drains, their moves and host maintenance reach the listeners,
    each change once, and only when something changed."""

    def setUp(self):
        super().setUp()
        self.db = self.useFixture(database.SQLiteDatabase()).db
        self.heard = []
        self.db.change_listeners.append(self.heard.extend)

    def events(self):
        found = []
        for change in self.heard:
            _, kind, payload = notifier.notification_of(change)
            found.append((kind, payload.obj_to_primitive()[
                'numamig_object.data'].get('status')))
        del self.heard[:]
        return found

    def test_a_drain_and_its_moves(self):
        from numamig.db import drains
        uuid = dbase.new_uuid()
        guest = dbase.new_uuid()
        drains.create(self.db, {
            'uuid': uuid, 'host': 'src', 'parallel': 1, 'priority': 80,
            'was_disabled': False, 'options': {}},
            [{'instance_uuid': guest, 'name': 'g', 'planned_host': 'dst',
              'planned_topology': None}])
        self.assertEqual([('drain.started', 'running')], self.events())
        started, = drains.start_moves(self.db, uuid, dbase.new_uuid)
        self.assertEqual([('drain.move.migrating', 'migrating')],
                         self.events())
        self.assertTrue(drains.end_move(
            self.db, uuid, guest, started['migration_uuid'],
            drains.COMPLETED, dest_host='dst'))
        self.assertFalse(drains.end_move(
            self.db, uuid, guest, started['migration_uuid'],
            drains.COMPLETED, dest_host='dst'))
        self.assertEqual([('drain.move.completed', 'completed')],
                         self.events())
        drains.set_status(self.db, uuid, drains.COMPLETED, drains.ACTIVE)
        self.assertFalse(drains.set_status(self.db, uuid, drains.COMPLETED,
                                           drains.ACTIVE))
        self.assertEqual([('drain.completed', 'completed')], self.events())

    def test_host_maintenance_only_when_it_changes(self):
        compute_nodes.save_report(self.db, dbase.make_report('h1'))
        compute_nodes.set_disabled(self.db, 'h1', 'firmware')
        compute_nodes.set_disabled(self.db, 'h1', 'firmware')
        compute_nodes.set_disabled(self.db, 'h1', 'firmware, then BIOS')
        compute_nodes.set_enabled(self.db, 'h1')
        compute_nodes.set_enabled(self.db, 'h1')
        kinds = [notifier.notification_of(c)[1] for c in self.heard]
        self.assertEqual(['host.disabled', 'host.disabled', 'host.enabled'],
                         kinds)


class MemoryChangeHandOverTest(base.TestCase):

    def test_started_then_ended_once(self):
        from numamig.db import memory_changes
        db = self.useFixture(database.SQLiteDatabase()).db
        heard = []
        db.change_listeners.append(heard.extend)
        uuid = dbase.new_uuid()
        request = {'host': 'h1', 'node': 0, 'size_mb': 512, 'exact': True}
        memory_changes.start(db, uuid, 'h1', request)
        memory_changes.start(db, uuid, 'h1', request)
        memory_changes.finish(db, uuid, memory_changes.DONE, {}, {
            'guests': [{'reached': True}], 'all_reached': True})
        found = [notifier.notification_of(c) for c in heard]
        self.assertEqual(['memory-change.started', 'memory-change.done'],
                         [kind for _, kind, _ in found])
        done = found[-1][2]
        self.assertEqual(('host-reclaim', 1, 1, '512'),
                         (done.operation, done.guests, done.guests_reached,
                          done.request['size_mb']))
