"""Tests of LiveMigrateData: the release-2 (1.1) -> release-1 (1.0)
backport and validation."""

from oslo_serialization import jsonutils
import testscenarios

from numamig import exception
from numamig import objects
from numamig.objects import base as obj_base
from numamig.objects import live_migrate_data
from tests import base
from tests.unit.objects import samples

load_tests = testscenarios.load_tests_apply_scenarios

DATA = 'numamig_object.data'


def _data(obj, **kwargs):
    return obj.obj_to_primitive(**kwargs)[DATA]


class BackportTo10Test(base.TestCase):
    """A release-1 (1.0) peer must receive none of what release 2 added.

    One test per field: an old peer that received either support flag
    would believe its partner speaks a protocol it cannot.
    """

    scenarios = [(name, {'field': name})
                 for name in live_migrate_data.RELEASE_2_FIELDS]

    def _full(self):
        lmd = samples.live_migrate_data()
        lmd.migration_context = samples.migration_context()
        lmd.convergence_policy = 'nfv'
        return lmd

    def test_field_dropped_for_1_0(self):
        data = _data(self._full(), target_version='1.0')
        self.assertNotIn(self.field, data)

    def test_field_dropped_from_changes(self):
        primitive = self._full().obj_to_primitive(target_version='1.0')
        self.assertNotIn(self.field, primitive['numamig_object.changes'])

    def test_field_kept_for_1_1(self):
        data = _data(self._full(), target_version='1.1')
        self.assertIn(self.field, data)

    def test_old_sender_arrives_as_default(self):
        # A 1.0 sender never sets the field; the receiver sees its default
        # (None or False), which selects the legacy path.
        primitive = self._full().obj_to_primitive(target_version='1.0')
        received = obj_base.NumamigObject.obj_from_primitive(primitive)
        self.assertEqual('1.0', received.VERSION)
        self.assertFalse(getattr(received, self.field))


class BackportTest(base.TestCase):

    def test_1_0_keeps_the_other_fields(self):
        full = _data(samples.live_migrate_data())
        old = _data(samples.live_migrate_data(), target_version='1.0')
        self.assertEqual(
            {k: v for k, v in full.items()
             if k not in live_migrate_data.RELEASE_2_FIELDS}, old)

    def test_release_1_fields_are_what_release_1_shipped(self):
        release_1 = {'instance_uuid', 'source_host', 'dest_host',
                     'migration_uuid', 'dest_connect_uri', 'migration_uri',
                     'emulated', 'bandwidth_mib'}
        self.assertEqual(
            set(live_migrate_data.LiveMigrateData.fields),
            release_1 | set(live_migrate_data.RELEASE_2_FIELDS))
        self.assertFalse(release_1 & set(live_migrate_data.RELEASE_2_FIELDS))

    def test_backport_does_not_touch_the_object(self):
        lmd = samples.live_migrate_data()
        lmd.obj_to_primitive(target_version='1.0')
        self.assertIsNotNone(lmd.dst_numa_info)
        self.assertTrue(lmd.src_supports_numa_live_migration)

    def test_child_backported_through_relationships(self):
        lmd = samples.live_migrate_data()
        data = _data(lmd, target_version='1.1')
        self.assertEqual('1.0',
                         data['dst_numa_info']['numamig_object.version'])

    def test_child_backported_through_manifest(self):
        manifest = {'LiveMigrateData': '1.1', 'NUMAMigrateInfo': '1.0'}
        data = _data(samples.live_migrate_data(), target_version='1.1',
                     version_manifest=manifest)
        self.assertEqual('1.0',
                         data['dst_numa_info']['numamig_object.version'])

    def test_manifest_for_1_0_drops_numa_fields(self):
        manifest = {'LiveMigrateData': '1.0', 'NUMAMigrateInfo': '1.0'}
        data = _data(samples.live_migrate_data(), target_version='1.0',
                     version_manifest=manifest)
        for name in live_migrate_data.NUMA_FIELDS:
            self.assertNotIn(name, data)

    def test_backported_primitive_survives_json(self):
        wire = jsonutils.dumps(samples.live_migrate_data().obj_to_primitive(
            target_version='1.0'))
        received = obj_base.NumamigObject.obj_from_primitive(
            jsonutils.loads(wire))
        self.assertEqual('src', received.source_host)
        self.assertIsNone(received.dst_numa_info)
        received.validate()

    def test_unset_numa_info_backports(self):
        lmd = objects.LiveMigrateData(
            instance_uuid=samples.uuids.instance, source_host='a',
            dest_host='b', migration_uuid=samples.uuids.migration)
        self.assertNotIn('dst_numa_info',
                         _data(lmd, target_version='1.0'))

    def test_release_2_carries_the_claim_and_the_policy(self):
        lmd = samples.live_migrate_data()
        lmd.migration_context = samples.migration_context()
        lmd.convergence_policy = 'nfv'
        primitive = lmd.obj_to_primitive()
        self.assertEqual('1.1', primitive['numamig_object.version'])
        received = obj_base.NumamigObject.obj_from_primitive(
            jsonutils.loads(jsonutils.dumps(primitive)))
        self.assertEqual(samples.uuids.migration,
                         received.migration_context.migration_uuid)
        self.assertEqual('dst', received.migration_context.dest_host)
        self.assertEqual('nfv', received.convergence_policy)


class ValidationTest(base.TestCase):

    def test_negative_bandwidth(self):
        lmd = samples.live_migrate_data()
        lmd.bandwidth_mib = -1
        self.assertRaisesMessage(
            exception.ObjectValidationError,
            'Invalid LiveMigrateData: bandwidth_mib must not be negative, '
            'got -1', lmd.validate)

    def test_same_source_and_destination(self):
        lmd = samples.live_migrate_data()
        lmd.dest_host = 'src'
        self.assertRaisesMessage(
            exception.ObjectValidationError,
            'source and destination are both src', lmd.validate)

    def test_invalid_numa_info_child(self):
        lmd = samples.live_migrate_data()
        lmd.dst_numa_info.sched_priority = 120
        self.assertRaisesMessage(
            exception.ObjectValidationError,
            'Invalid NUMAMigrateInfo: sched_priority must be within 1-99',
            lmd.validate)
