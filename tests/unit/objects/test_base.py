"""Tests of the numamig object base: validation hook, equality, decoding."""

import copy

from numamig import exception
from numamig import objects
from numamig.objects import base as obj_base
from tests import base
from tests.unit.objects import samples

DATA = 'numamig_object.data'


def _decode(primitive):
    return obj_base.NumamigObject.obj_from_primitive(primitive)


class MalformedPrimitiveTest(base.TestCase):
    """A primitive OVO cannot coerce is refused naming object and field."""

    def test_bad_set_element_names_cell_and_field(self):
        primitive = samples.host_topology().obj_to_primitive()
        primitive[DATA]['cells'][1][DATA]['pcpuset'] = ['x']
        self.assertRaisesMessage(
            exception.ObjectValidationError,
            "Invalid HostNUMACell: malformed primitive: field pcpuset = "
            "['x']", _decode, primitive)

    def test_bad_pin_key_names_field(self):
        primitive = samples.migrate_info().obj_to_primitive()
        primitive[DATA]['cpu_pins'] = {'one': [1]}
        self.assertRaisesMessage(
            exception.ObjectValidationError,
            "Invalid NUMAMigrateInfo: malformed primitive: field cpu_pins",
            _decode, primitive)

    def test_bad_enum_value(self):
        primitive = samples.migration().obj_to_primitive()
        primitive[DATA]['status'] = 'teleported'
        self.assertRaisesMessage(
            exception.ObjectValidationError,
            "Invalid Migration: malformed primitive: field status = "
            "'teleported'", _decode, primitive)

    def test_missing_data(self):
        primitive = samples.limits().obj_to_primitive()
        del primitive[DATA]
        self.assertRaisesMessage(
            exception.ObjectValidationError,
            'Invalid NUMALimits: malformed primitive: no '
            'numamig_object.data dict', _decode, primitive)


class ValidateTest(base.TestCase):

    def test_returns_self(self):
        limits = samples.limits()
        self.assertIs(limits, limits.validate())

    def test_missing_required_field_named(self):
        lmd = samples.live_migrate_data()
        del lmd.source_host
        self.assertRaisesMessage(
            exception.ObjectValidationError,
            "Invalid LiveMigrateData: required fields ['source_host'] are "
            "not set", lmd.validate)

    def test_children_in_lists_are_visited(self):
        record = samples.migration()
        del record.history[1].changed_at
        self.assertRaisesMessage(
            exception.ObjectValidationError,
            "Invalid MigrationStatusChange: required fields ['changed_at']",
            record.validate)

    def test_get_returns_default_for_unset(self):
        pool = objects.NUMAPagesTopology(size_kb=4)
        self.assertIsNone(pool.get('total'))
        self.assertEqual(7, pool.get('total', 7))
        self.assertEqual(0, pool.get('used'))


class EqualityTest(base.TestCase):

    def test_equal_regardless_of_change_tracking(self):
        first = samples.instance_topology()
        second = samples.instance_topology()
        second.obj_reset_changes(recursive=True)
        self.assertEqual(first, second)

    def test_field_difference_is_unequal(self):
        first, second = samples.host_cell(), samples.host_cell()
        second.pinned_cpus = set()
        self.assertNotEqual(first, second)
        self.assertTrue(first != second)

    def test_unset_differs_from_set(self):
        first, second = samples.limits(), samples.limits()
        del second.cpu_allocation_ratio
        self.assertNotEqual(first, second)

    def test_different_classes_are_unequal(self):
        self.assertNotEqual(objects.HostNUMATopology(),
                            objects.InstanceNUMATopology(cells=[]))
        self.assertNotEqual(samples.limits(), 'limits')

    def test_version_matters(self):
        first = samples.live_migrate_data()
        second = samples.live_migrate_data()
        second.VERSION = '1.0'
        self.assertNotEqual(first, second)

    def test_objects_stay_hashable(self):
        pool = samples.pages()
        self.assertIn(pool, {pool})

    def test_deepcopy_is_equal_and_independent(self):
        cell = samples.host_cell()
        clone = copy.deepcopy(cell)
        self.assertEqual(cell, clone)
        clone.pinned_cpus.add(4)
        self.assertEqual({2, 3}, cell.pinned_cpus)
