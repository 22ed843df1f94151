"""A migration's satellite records read and written as their own objects
(numamig.db.migration_satellites), from the migration's row."""

import sqlalchemy as sa

from numamig import exception
from numamig import objects
from numamig.db import instances
from numamig.db import migration_satellites
from numamig.db import migration_threads
from numamig.db import migrations
from numamig.db import models
from tests.unit.db import base
from tests.unit.objects import samples

ENTRY = {'host': 'dst', 'host_node': 1, 'instance_uuid': None, 'cell': 0,
         'before_mb': 512, 'after_mb': 256, 'current_mb': None,
         'released_mb': 256, 'outcome': 'kept'}


class SatellitesTestCase(base.DBTestCase):

    def setUp(self):
        super().setUp()
        instance = instances.create(self.db, base.make_instance()).instance
        self.uuid = migrations.create(
            self.db, base.make_migration(instance.uuid)).uuid

    def _get(self, *names):
        return migration_satellites.get(self.db, self.uuid, names)

    def test_nothing_recorded_reads_as_empty_objects(self):
        found = self._get('reclaim', 'threads')
        self.assertEqual(objects.MigrationReclaim(migration_uuid=self.uuid),
                         found['reclaim'])
        self.assertEqual(objects.MigrationThreads(migration_uuid=self.uuid),
                         found['threads'])

    def test_only_what_is_asked(self):
        self.assertEqual(['threads'], list(self._get('threads')))
        self.assertEqual({}, self._get())

    def test_reclaim_replaced_and_stored_as_text(self):
        recorded = migration_satellites.set_reclaim(
            self.db, self.uuid, [ENTRY, dict(ENTRY, outcome='given back')])
        self.assertEqual(recorded, self._get('reclaim')['reclaim'])
        self.assertEqual(['1', '1'], [e['host_node']
                                      for e in recorded.entries])
        migration_satellites.set_reclaim(self.db, self.uuid, [ENTRY])
        (entry,) = self._get('reclaim')['reclaim'].entries
        self.assertEqual(('256', None, 'kept'), (
            entry['released_mb'], entry['current_mb'], entry['outcome']))

    def test_refused_reclaim_changes_nothing(self):
        migration_satellites.set_reclaim(self.db, self.uuid, [ENTRY])
        self.assertRaises(exception.ObjectValidationError,
                          migration_satellites.set_reclaim, self.db,
                          self.uuid, [dict(ENTRY, outcome='lost')])
        self.assertEqual(1, len(self._get('reclaim')['reclaim'].entries))

    def test_threads_read_as_recorded(self):
        migration_threads.record_threads(self.db, self.uuid, 'source',
                                         samples.THREADS['source'])
        self.assertEqual({'source': samples.THREADS['source']},
                         self._get('threads')['threads'].sides)

    def test_satellites_leave_the_migration_alone(self):
        before = migrations.get(self.db, self.uuid)
        migration_satellites.set_reclaim(self.db, self.uuid, [ENTRY])
        after = migrations.get(self.db, self.uuid)
        self.assertEqual(
            {name: before.get(name) for name in before.fields
             if name != 'updated_at'},
            {name: after.get(name) for name in after.fields
             if name != 'updated_at'})

    def test_prediction_recorded_and_read(self):
        self.assertEqual(objects.MigrationPrediction(
            migration_uuid=self.uuid), self._get('prediction')['prediction'])
        recorded = migration_satellites.set_prediction(
            self.db, self.uuid, {'prediction': 'converges',
                                 'predicted_elapsed_ms': 1280,
                                 'predicted_downtime_ms': 3,
                                 'sampled_dirty_rate': 1 << 20,
                                 'reason': 'not a field: ignored'})
        self.assertEqual(recorded, self._get('prediction')['prediction'])
        self.assertEqual((1280, 1 << 20), (recorded.predicted_elapsed_ms,
                                           recorded.sampled_dirty_rate))

    def test_refused_prediction_changes_nothing(self):
        for bad in ({'prediction': 'x' * 33}, {'sampled_dirty_rate': -1},
                    {'predicted_downtime_ms': 'soon'}):
            self.assertRaises(exception.Invalid,
                              migration_satellites.set_prediction, self.db,
                              self.uuid, bad)
        self.assertIsNone(self._get('prediction')['prediction'].prediction)
        self.assertRaises(exception.MigrationNotFound,
                          migration_satellites.set_prediction, self.db,
                          base.new_uuid(), {'prediction': 'converges'})

    def test_many_in_one_read(self):
        instance = instances.create(self.db, base.make_instance()).instance
        other = migrations.create(
            self.db, base.make_migration(instance.uuid)).uuid
        migration_satellites.set_prediction(
            self.db, other, {'sampled_dirty_rate': 5})
        unknown = base.new_uuid()
        found = migration_satellites.get_many(
            self.db, [self.uuid, other, unknown], ['prediction'])
        self.assertEqual({self.uuid: None, other: 5},
                         {uuid: read['prediction'].sampled_dirty_rate
                          for uuid, read in found.items()})
        self.assertEqual({}, migration_satellites.get_many(
            self.db, [], ['prediction']))
        self.assertRaises(exception.MigrationNotFound,
                          migration_satellites.get, self.db, unknown,
                          ['prediction'])

    def test_unknown_name_refused(self):
        exc = self.assertRaises(exception.Invalid, self._get, 'colour')
        self.assertIn('colour', str(exc))
        self.assertIn('convergence, devices, prediction, reclaim, '
                      'recovery, threads', str(exc))

    def test_unknown_migration(self):
        for call in (
                lambda: migration_satellites.get(
                    self.db, base.new_uuid(), ['reclaim']),
                lambda: migration_satellites.set_reclaim(
                    self.db, base.new_uuid(), [ENTRY])):
            self.assertRaises(exception.MigrationNotFound, call)

    def test_stored_value_the_object_refuses(self):
        table = models.Migration.__table__
        with self.db.writer() as session:
            session.execute(sa.update(table).where(
                table.c.uuid == self.uuid).values(
                memory_reclaim=[{'outcome': 'lost'}]))
        exc = self.assertRaises(exception.StoredRecordInvalid,
                                self._get, 'reclaim')
        self.assertIn('memory_reclaim', str(exc))


HISTORY = [{'event': 'link-lost', 'at': '2026-11-03T12:00:01+00:00',
            'attempt': None, 'detail': 'stream broke'},
           {'event': 'resume-failed', 'at': '2026-11-03T12:00:04+00:00',
            'attempt': 1, 'detail': 'refused'}]


DEVICE = {'alias': 'nic', 'address': '0000:82:00.0', 'guest_cell': '1',
          'cell_nodes': '1', 'device_node': '1', 'plugged': 'yes',
          'local': 'yes'}


class DevicesTestCase(base.DBTestCase):
    """The destination's verification of a guest's devices."""

    def setUp(self):
        super().setUp()
        instance = instances.create(self.db, base.make_instance()).instance
        self.instance_uuid = instance.uuid
        self.uuid = migrations.create(
            self.db, base.make_migration(instance.uuid)).uuid
        self.heard = []
        self.db.change_listeners.append(self.heard.extend)

    def _read(self):
        return migration_satellites.get(self.db, self.uuid,
                                        ['devices'])['devices']

    def test_nothing_verified_reads_as_empty(self):
        found = self._read()
        self.assertEqual((None, [], None),
                         (found.host, found.devices, found.all_local))

    def test_recorded_once_told_once(self):
        astray = dict(DEVICE, alias='gpu', address='0000:03:00.0',
                      device_node=None, plugged='no', local='no')
        for expected in (True, False):
            self.assertEqual(expected, migration_satellites.record_devices(
                self.db, self.uuid, 'dst', [DEVICE, astray]))
        found = self._read()
        self.assertEqual(('dst', [DEVICE, astray], False),
                         (found.host, found.devices, found.all_local))
        (change,) = self.heard
        self.assertEqual(('devices-verified', self.uuid, self.instance_uuid),
                         (change.kind, change.record['migration_uuid'],
                          change.record['instance_uuid']))

    def test_a_new_verification_replaces_the_old(self):
        migration_satellites.record_devices(
            self.db, self.uuid, 'dst', [dict(DEVICE, local='no')])
        self.assertTrue(migration_satellites.record_devices(
            self.db, self.uuid, 'dst', [DEVICE]))
        self.assertTrue(self._read().all_local)
        self.assertEqual(2, len(self.heard))

    def test_unusable_verification_changes_nothing(self):
        for host, devices in (('dst', []), ('', [DEVICE]),
                              ('dst', [dict(DEVICE, local='maybe')]),
                              ('dst', [dict(DEVICE, colour='red')]),
                              ('dst', [dict(DEVICE, alias='x' * 65)]),
                              ('dst', [DEVICE] * 65)):
            self.assertRaises(exception.InvalidMigrationResult,
                              migration_satellites.record_devices,
                              self.db, self.uuid, host, devices)
        self.assertEqual([], self._read().devices)
        self.assertEqual([], self.heard)

    def test_unknown_migration(self):
        self.assertRaises(exception.MigrationNotFound,
                          migration_satellites.record_devices, self.db,
                          '00000000-0000-4000-8000-000000000000', 'dst',
                          [DEVICE])


class ConvergenceAndRecoveryTestCase(base.DBTestCase):
    """MigrationConvergence and MigrationRecovery: the policy chosen when
    the migration was recorded, what a run reported with its status
    change, and a recovery history that only grows."""

    def setUp(self):
        super().setUp()
        instance = instances.create(self.db, base.make_instance()).instance
        self.uuid = migrations.create(
            self.db, base.make_migration(instance.uuid, dest_host='dst'),
            policy='nfv').uuid

    def _get(self, *names):
        return migration_satellites.get(self.db, self.uuid, names)

    def _running(self):
        for status in ('queued', 'preparing', 'running'):
            migrations.set_status(self.db, self.uuid, status)

    def test_policy_recorded_with_the_migration(self):
        self.assertEqual(objects.MigrationConvergence(
            migration_uuid=self.uuid, policy='nfv'),
            self._get('convergence')['convergence'])
        self.assertEqual(objects.MigrationRecovery(migration_uuid=self.uuid),
                         self._get('recovery')['recovery'])

    def test_policy_changed_before_the_run(self):
        recorded = migration_satellites.set_policy(self.db, self.uuid,
                                                   'finish')
        self.assertEqual('finish', recorded.policy)
        self.assertEqual(recorded, self._get('convergence')['convergence'])
        for bad in ('', 'x' * 65, None, 7):
            self.assertRaises(exception.Invalid,
                              migration_satellites.set_policy, self.db,
                              self.uuid, bad)
        self.assertEqual('finish', self._get('convergence')[
            'convergence'].policy)
        self.assertRaises(exception.MigrationNotFound,
                          migration_satellites.set_policy, self.db,
                          base.new_uuid(), 'nfv')

    def test_a_runs_result_writes_them_with_its_status_change(self):
        self._running()
        migrations.set_status(self.db, self.uuid, 'post-migrating', result={
            'convergence_policy': 'strict',
            'convergence_actions': ['allow 50 ms of downtime'],
            'postcopy_recovery': HISTORY})
        found = self._get('convergence', 'recovery')
        self.assertEqual(('strict', ['allow 50 ms of downtime']),
                         (found['convergence'].policy,
                          found['convergence'].actions))
        # Values as text, as the object holds them.
        self.assertEqual('1', found['recovery'].events[1]['attempt'])

    def test_a_result_they_do_not_fit_changes_nothing(self):
        self._running()
        for bad in ({'convergence_policy': 'x' * 65},
                    {'convergence_actions': ['a'] * 41},
                    {'postcopy_recovery': [{'event': 'x'}] * 41},
                    {'postcopy_recovery': 'broke'}):
            self.assertRaises(exception.InvalidMigrationResult,
                              migrations.set_status, self.db, self.uuid,
                              'post-migrating', result=bad)
        self.assertEqual('running', migrations.get(self.db,
                                                   self.uuid).status)
        self.assertEqual('nfv', self._get('convergence')[
            'convergence'].policy)

    def test_recovery_only_grows_while_in_progress(self):
        self._running()
        record = migration_satellites.record_recovery
        self.assertTrue(record(self.db, self.uuid, HISTORY[:1]))
        self.assertTrue(record(self.db, self.uuid, HISTORY))
        # A repeat, and a report overtaken by a later one.
        self.assertFalse(record(self.db, self.uuid, HISTORY))
        self.assertFalse(record(self.db, self.uuid, HISTORY[:1]))
        self.assertEqual(['link-lost', 'resume-failed'], [
            e['event'] for e in self._get('recovery')['recovery'].events])
        self.assertRaises(exception.InvalidMigrationResult, record,
                          self.db, self.uuid, [{'event': 'x' * 301}])
        migrations.set_status(self.db, self.uuid, 'failed')
        self.assertFalse(record(self.db, self.uuid, HISTORY + HISTORY))
        self.assertRaises(exception.MigrationNotFound, record, self.db,
                          base.new_uuid(), HISTORY)

    def test_read_with_the_migration_in_one_transaction(self):
        with self.db.reader() as session:
            migration = migrations.get_in(session, self.uuid)
            found = migration_satellites.get_in(
                session, self.uuid, ('convergence', 'recovery'))
        self.assertEqual(self.uuid, migration.uuid)
        self.assertEqual(['convergence', 'recovery'], list(found))
        with self.db.reader() as session:
            self.assertRaises(exception.MigrationNotFound,
                              migration_satellites.get_in, session,
                              base.new_uuid(), ('convergence',))
            self.assertRaises(exception.Invalid,
                              migration_satellites.get_in, session,
                              self.uuid, ('colour',))

    def test_fits(self):
        fits = migration_satellites.fits
        self.assertTrue(fits('convergence_policy', None))
        self.assertTrue(fits('postcopy_recovery', HISTORY))
        self.assertFalse(fits('postcopy_recovery', [{'a': True}]))
        self.assertFalse(fits('postcopy_recovery', [dict.fromkeys('abcde')]))
        self.assertFalse(fits('convergence_actions', 'not a list'))
        self.assertFalse(fits('elapsed_ms', 5))
