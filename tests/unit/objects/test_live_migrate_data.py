"""Tests of LiveMigrateData: the 1.1 -> 1.0 backport and validation."""

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
    """An old (1.0) peer must receive none of the NUMA fields.

    One test per field: an old peer that received either support flag
    would believe its partner speaks a protocol it cannot.
    """

    scenarios = [(name, {'field': name})
                 for name in live_migrate_data.NUMA_FIELDS]

    def test_field_dropped_for_1_0(self):
        data = _data(samples.live_migrate_data(), target_version='1.0')
        self.assertNotIn(self.field, data)

    def test_field_dropped_from_changes(self):
        primitive = samples.live_migrate_data().obj_to_primitive(
            target_version='1.0')
        self.assertNotIn(self.field, primitive['numamig_object.changes'])

    def test_field_kept_for_1_1(self):
        data = _data(samples.live_migrate_data(), target_version='1.1')
        self.assertIn(self.field, data)

    def test_old_sender_arrives_as_default(self):
        # A 1.0 sender never sets the field; the receiver sees its default
        # (None or False), which selects the legacy path.
        primitive = samples.live_migrate_data().obj_to_primitive(
            target_version='1.0')
        received = obj_base.NumamigObject.obj_from_primitive(primitive)
        self.assertEqual('1.0', received.VERSION)
        self.assertFalse(getattr(received, self.field))


class BackportTest(base.TestCase):

    def test_1_0_keeps_the_other_fields(self):
        full = _data(samples.live_migrate_data())
        old = _data(samples.live_migrate_data(), target_version='1.0')
        self.assertEqual(
            {k: v for k, v in full.items()
             if k not in live_migrate_data.NUMA_FIELDS + (
                 'migration_context', 'convergence_policy')}, old)

    def test_1_2_drops_only_the_policy(self):
        lmd = samples.live_migrate_data()
        lmd.convergence_policy = 'nfv'
        full = _data(lmd)
        old = _data(lmd, target_version='1.2')
        self.assertEqual('nfv', full['convergence_policy'])
        self.assertEqual({k: v for k, v in full.items()
                          if k != 'convergence_policy'}, old)

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


    def test_1_1_drops_the_claim_only(self):
        lmd = samples.live_migrate_data()
        lmd.migration_context = samples.migration_context()
        data = _data(lmd, target_version='1.1')
        self.assertNotIn('migration_context', data)
        self.assertIn('dst_numa_info', data)
        self.assertTrue(data['src_supports_numa_live_migration'])

    def test_1_2_carries_the_claim(self):
        lmd = samples.live_migrate_data()
        lmd.migration_context = samples.migration_context()
        received = obj_base.NumamigObject.obj_from_primitive(
            jsonutils.loads(jsonutils.dumps(lmd.obj_to_primitive())))
        self.assertEqual(samples.uuids.migration,
                         received.migration_context.migration_uuid)
        self.assertEqual('dst', received.migration_context.dest_host)


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
