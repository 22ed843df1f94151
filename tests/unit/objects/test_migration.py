"""Tests of Migration, its status machine and MigrationStatusChange."""

import testscenarios

from numamig import exception
from numamig.objects import migration
from tests import base
from tests.unit.objects import samples

load_tests = testscenarios.load_tests_apply_scenarios

STATUS = migration.STATUS


class NegativeProgressTest(base.TestCase):

    scenarios = [(name, {'field': name}) for name in (
        'memory_total', 'memory_processed', 'memory_remaining',
        'disk_total', 'disk_processed', 'disk_remaining')]

    def test_rejected(self):
        record = samples.migration()
        setattr(record, self.field, -1)
        self.assertRaisesMessage(
            exception.ObjectValidationError,
            f'Invalid Migration: {self.field} must not be negative, got -1',
            record.validate)


class MigrationTest(base.TestCase):

    def test_same_source_and_destination(self):
        record = samples.migration()
        record.dest_host = 'src'
        self.assertRaisesMessage(exception.ObjectValidationError,
                                 'source and destination are both src',
                                 record.validate)

    def test_no_destination_yet_is_valid(self):
        record = samples.migration()
        record.dest_host = None
        record.validate()

    def test_new_migration_is_accepted(self):
        fresh = migration.Migration(uuid=samples.uuids.migration,
                                    instance_uuid=samples.uuids.instance,
                                    source_host='src')
        self.assertEqual(STATUS.ACCEPTED, fresh.status)
        self.assertTrue(fresh.in_progress)

    def test_unknown_status_refused(self):
        record = samples.migration()
        self.assertRaises(ValueError, setattr, record, 'status', 'paused')
        self.assertEqual('running', record.status)

    def test_in_progress(self):
        record = samples.migration()
        for status in STATUS.ALL:
            record.status = status
            self.assertEqual(status in STATUS.IN_PROGRESS,
                             record.in_progress, status)


class TransitionTest(base.TestCase):

    def test_happy_path_is_allowed(self):
        path = [STATUS.ACCEPTED, STATUS.QUEUED, STATUS.PREPARING,
                STATUS.RUNNING, STATUS.POST_MIGRATING, STATUS.COMPLETED]
        for old, new in zip(path[:-1], path[1:], strict=True):
            self.assertTrue(migration.can_transition(old, new),
                            f'{old} -> {new}')

    def test_short_path_is_allowed(self):
        # A source of compute API 1.3 skips preparing and post-migrating.
        path = [STATUS.ACCEPTED, STATUS.QUEUED, STATUS.RUNNING,
                STATUS.COMPLETED]
        for old, new in zip(path[:-1], path[1:], strict=True):
            self.assertTrue(migration.can_transition(old, new),
                            f'{old} -> {new}')
        self.assertFalse(migration.can_transition(STATUS.QUEUED,
                                                  STATUS.COMPLETED))
        self.assertFalse(migration.can_transition(STATUS.PREPARING,
                                                  STATUS.COMPLETED))

    def test_final_states_are_final(self):
        for old in STATUS.FINAL:
            for new in STATUS.ALL:
                self.assertFalse(migration.can_transition(old, new),
                                 f'{old} -> {new}')

    def test_no_going_back(self):
        self.assertFalse(migration.can_transition(STATUS.RUNNING,
                                                  STATUS.QUEUED))
        self.assertFalse(migration.can_transition('bogus', STATUS.QUEUED))

    def test_every_status_has_a_rule(self):
        self.assertEqual(set(STATUS.ALL),
                         set(migration.ALLOWED_TRANSITIONS))
        self.assertEqual(set(STATUS.ALL),
                         set(STATUS.IN_PROGRESS) | set(STATUS.FINAL))


# What release 1's Migration (1.0) carries: all a release-1 peer is ever
# sent, whatever release 2 recorded.
RELEASE_1_FIELDS = (
    'uuid', 'instance_uuid', 'source_host', 'dest_host', 'requested_host',
    'status', 'memory_total', 'memory_processed', 'memory_remaining',
    'disk_total', 'disk_processed', 'disk_remaining', 'created_at',
    'updated_at', 'error', 'refused_hosts', 'history')


def _paused():
    record = samples.migration()
    record.status = STATUS.POSTCOPY_PAUSED
    record.history = record.history + [samples.status_change()]
    record.history[-1].status = STATUS.POSTCOPY_PAUSED
    return record


class PausedStatusBackportTest(base.TestCase):
    """Migration 1.1 (release 2): a postcopy-paused migration reaches a
    release-1 peer as ``running`` (in progress, both claims held: what
    it is), its history entries too; a release-2 peer reads it as it
    is."""

    def test_release_1_peer_reads_running(self):
        data = _paused().obj_to_primitive(
            target_version='1.0')['numamig_object.data']
        self.assertEqual('running', data['status'])
        self.assertEqual(
            ['1.0'], sorted({h['numamig_object.version']
                             for h in data['history']}))
        self.assertEqual(
            'running', data['history'][-1]['numamig_object.data']['status'])

    def test_release_2_peer_reads_postcopy_paused(self):
        primitive = _paused().obj_to_primitive()
        data = primitive['numamig_object.data']
        self.assertEqual(migration.RELEASE_2_VERSION,
                         primitive['numamig_object.version'])
        self.assertEqual('postcopy-paused', data['status'])
        self.assertEqual(['1.1'], sorted({h['numamig_object.version']
                                          for h in data['history']}))
        self.assertEqual('postcopy-paused', data['history'][-1][
            'numamig_object.data']['status'])

    def test_other_statuses_pass_unchanged(self):
        data = samples.migration().obj_to_primitive(
            target_version='1.0')['numamig_object.data']
        self.assertEqual('running', data['status'])
        self.assertEqual(
            ['accepted', 'running'],
            [h['numamig_object.data']['status'] for h in data['history']])

class StatusChangeTest(base.TestCase):

    def test_timestamps_keep_their_zone(self):
        change = samples.status_change()
        self.assertEqual(samples.NOW, change.changed_at)
        self.assertIsNotNone(change.changed_at.tzinfo)


class Release2FieldsBackportTest(base.TestCase):
    """A release-1 peer (Migration 1.0) gets none of what release 2's
    version added, a release-2 peer (1.1) all of it.

    One test per field: a 1.0 receiver would refuse the whole object for
    any one of them left in.
    """

    scenarios = [(name, {'field': name})
                 for name in migration.RELEASE_2_FIELDS]

    def test_dropped_for_release_1(self):
        primitive = samples.migration().obj_to_primitive(
            target_version='1.0')
        self.assertNotIn(self.field, primitive['numamig_object.data'])
        self.assertNotIn(self.field, primitive.get('numamig_object.changes',
                                                   []))
        self.assertEqual('1.0', primitive['numamig_object.version'])

    def test_kept_for_release_2(self):
        record = samples.migration()
        record.priority = 50
        record.admitted_at = samples.NOW
        record.queue_position = 3
        received = migration.Migration.obj_from_primitive(
            record.obj_to_primitive(
                target_version=migration.RELEASE_2_VERSION))
        self.assertIsNotNone(getattr(record, self.field))
        self.assertEqual(getattr(record, self.field),
                         getattr(received, self.field))

    def test_release_1_sender_arrives_as_the_default(self):
        primitive = samples.migration().obj_to_primitive(
            target_version='1.0')
        received = migration.Migration.obj_from_primitive(primitive)
        self.assertEqual(migration.Migration.fields[self.field].default,
                         getattr(received, self.field))


class ResultTest(base.TestCase):

    def test_release_1_fields_are_what_release_1_shipped(self):
        self.assertEqual(
            set(migration.Migration.fields),
            set(RELEASE_1_FIELDS) | set(migration.RELEASE_2_FIELDS))
        self.assertFalse(set(RELEASE_1_FIELDS) &
                         set(migration.RELEASE_2_FIELDS))

    def test_backport_keeps_everything_else(self):
        full = samples.migration().obj_to_primitive()['numamig_object.data']
        old = samples.migration().obj_to_primitive(
            target_version='1.0')['numamig_object.data']
        self.assertEqual(sorted(RELEASE_1_FIELDS), sorted(old))
        self.assertEqual({k: v for k, v in full.items()
                          if k in RELEASE_1_FIELDS and k != 'history'},
                         {k: v for k, v in old.items() if k != 'history'})
        # The history's entries: the same, as MigrationStatusChange 1.0.
        self.assertEqual(
            [h['numamig_object.data'] for h in full['history']],
            [h['numamig_object.data'] for h in old['history']])
        self.assertEqual(['1.0', '1.0'], [h['numamig_object.version']
                                          for h in old['history']])


class ValidationTest(base.TestCase):

    def test_priority_outside_its_range_rejected(self):
        for value in (-1, migration.MAX_PRIORITY + 1):
            record = samples.migration()
            record.priority = value
            self.assertRaisesMessage(exception.ObjectValidationError,
                                     'priority', record.validate)

    def test_waiting_until_admitted(self):
        record = samples.migration()
        record.status = 'accepted'
        self.assertTrue(record.waiting)
        record.admitted_at = samples.NOW
        self.assertFalse(record.waiting)

    def test_has_result(self):
        record = samples.migration()
        self.assertTrue(record.has_result)
        for name in migration.RESULT_FIELDS:
            setattr(record, name, None)
        self.assertFalse(record.has_result)
        record.emulated = False
        self.assertTrue(record.has_result)

    def test_negative_timings_rejected(self):
        for name in ('elapsed_ms', 'downtime_ms'):
            record = samples.migration()
            setattr(record, name, -5)
            self.assertRaisesMessage(
                exception.ObjectValidationError,
                f'{name} must not be negative, got -5', record.validate)
