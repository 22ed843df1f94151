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

    def test_get_matches_reading_the_field(self):
        for name, build in samples.BUILDERS.items():
            obj = build()
            for field in obj.fields:
                expected = getattr(obj, field) \
                    if obj.obj_attr_is_set(field) else 'unset'
                self.assertEqual(expected, obj.get(field, 'unset'),
                                 (name, field))
        self.assertRaisesRegex(AttributeError, "no attribute 'nope'",
                               samples.pages().get, 'nope')


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


def _stored_types(obj):
    """Every stored attribute's type, recursively: what OVO's storage holds."""
    result = {}
    for name in obj.fields:
        if obj.obj_attr_is_set(name):
            value = getattr(obj, name)
            result[name] = type(value)
            if isinstance(value, obj_base.NumamigObject):
                result[name] = (type(value), _stored_types(value))
    return result


class FastPathTest(base.TestCase):
    """The base class's faster copies of OVO's methods give OVO's answers,
    for one object of every registered class."""

    def test_attribute_storage_is_where_ovo_keeps_it(self):
        self.assertEqual(obj_base._ATTR_PREFIX + 'x',
                         obj_base.ovo_base._get_attrname('x'))

    def test_object_fields_are_every_field_holding_objects(self):
        for name, build in samples.BUILDERS.items():
            obj = build()
            holding = {
                field for field in obj.fields if obj.obj_attr_is_set(field)
                and any(isinstance(item, obj_base.NumamigObject)
                        for item in _as_list(getattr(obj, field)))}
            self.assertLessEqual(
                holding, set(obj_base.object_fields(type(obj))), name)

    def test_unknown_attribute_raises_like_ovo(self):
        self.assertRaisesRegex(AttributeError, "no attribute 'nope'",
                               samples.pages().obj_attr_is_set, 'nope')

    def test_deepcopy_matches_ovo(self):
        for name, build in samples.BUILDERS.items():
            obj = build()
            ours = copy.deepcopy(obj)
            theirs = obj_base.ovo_base.VersionedObject.__deepcopy__(obj, {})
            self.assertEqual(theirs, ours, name)
            self.assertEqual(theirs.obj_what_changed(),
                             ours.obj_what_changed(), name)
            self.assertEqual(_stored_types(theirs), _stored_types(ours),
                             name)

    def test_decoding_matches_ovo(self):
        for name, build in samples.BUILDERS.items():
            primitive = build().obj_to_primitive()
            ours = _decode(primitive)
            cls = type(ours)
            theirs = super(obj_base.NumamigObject, cls)._obj_from_primitive(
                None, cls.VERSION, primitive)
            self.assertEqual(theirs, ours, name)
            self.assertEqual(theirs.obj_what_changed(),
                             ours.obj_what_changed(), name)
            self.assertEqual(_stored_types(theirs), _stored_types(ours),
                             name)

    def test_encoding_matches_ovo(self):
        from numamig.conductor import api_versions
        manifests = [None] + [api_versions.OBJECT_VERSIONS[v]
                              for v in ('1.0', max(
                                  api_versions.OBJECT_VERSIONS,
                                  key=lambda v: tuple(map(int,
                                                          v.split('.')))))]
        for name, build in samples.BUILDERS.items():
            obj = build()
            for manifest in manifests:
                target = (manifest or {}).get(obj.obj_name(), obj.VERSION)
                ours = obj.obj_to_primitive(target, manifest)
                theirs = obj_base.ovo_base.VersionedObject.obj_to_primitive(
                    obj, target, manifest)
                self.assertEqual(theirs, ours, (name, target))
            self.assertRaises(
                obj_base.ovo_exception.InvalidTargetVersion,
                obj.obj_to_primitive, '99.0')

    def test_absent_field_decodes_as_its_default(self):
        primitive = samples.pages().obj_to_primitive()
        del primitive[DATA]['reserved']
        self.assertEqual(0, _decode(primitive).reserved)

    def test_what_changed_matches_ovo(self):
        for name, build in samples.BUILDERS.items():
            obj = build()
            obj.obj_reset_changes(recursive=True)
            for child in obj_base.object_fields(type(obj)):
                value = getattr(obj, child, None)
                if isinstance(value, obj_base.NumamigObject):
                    value._changed_fields.add(next(iter(value.fields)))
            self.assertEqual(
                obj_base.ovo_base.VersionedObject.obj_what_changed(obj),
                obj.obj_what_changed(), name)


def _as_list(value):
    return value if isinstance(value, list) else [value]


class FromCoercedTest(base.TestCase):
    """obj_from_coerced: the constructor's result without coercion, and
    no build that leaves a field out."""

    VALUES = {'instance_uuid': None, 'cells': [],
              'emulator_threads_policy': 'share', 'pci_requests': [],
              'pci_numa_affinity_policy': None, 'pci_devices': []}

    def test_equals_the_constructed_object(self):
        built = objects.InstanceNUMATopology.obj_from_coerced(**self.VALUES)
        expected = objects.InstanceNUMATopology(**self.VALUES)
        self.assertEqual(expected, built)
        self.assertEqual(expected.obj_what_changed(),
                         built.obj_what_changed())
        self.assertIs(type(expected.cells), type(built.cells))

    def test_every_field_must_be_given(self):
        values = dict(self.VALUES)
        del values['cells']
        values['cell'] = []
        self.assertRaisesMessage(
            TypeError, "unexpected keyword argument 'cell'",
            objects.InstanceNUMATopology.obj_from_coerced, **values)
        del values['cell']
        self.assertRaisesMessage(
            TypeError, "missing 1 required keyword-only argument: 'cells'",
            objects.InstanceNUMATopology.obj_from_coerced, **values)

    def test_a_field_added_later_fails_the_build_that_omits_it(self):
        class Extended(objects.InstanceNUMATopology):
            fields = dict(objects.InstanceNUMATopology.fields,
                          cache_ways=obj_base.ovo_fields.IntegerField(
                              default=0))
        self.assertRaisesMessage(TypeError, "'cache_ways'",
                                 Extended.obj_from_coerced, **self.VALUES)

    def test_dict_fields_are_refused(self):
        self.assertRaisesMessage(
            TypeError, 'field refused_hosts (Dict) is not supported',
            lambda: objects.Migration.obj_from_coerced())

    def test_field_reader_reads_set_fields_and_raises_for_unset(self):
        read = obj_base.field_reader(('instance_uuid', 'cells'))
        topology = objects.InstanceNUMATopology(**self.VALUES)
        self.assertEqual((None, []), read(topology))
        migration = objects.Migration()
        self.assertRaises(NotImplementedError,
                          obj_base.field_reader(('uuid',)), migration)


class QuickGettersTest(base.TestCase):
    """The host topology objects' field getters read the stored value
    directly and behave as OVO's otherwise."""

    def test_reads_what_was_set_and_coerced(self):
        cell = objects.HostNUMACell(id=0, memory_mb=1024)
        cell.pcpuset = {1, 2}
        self.assertEqual({1, 2}, cell.pcpuset)
        self.assertEqual({'pcpuset'}, cell.obj_what_changed() & {'pcpuset'})
        cell.memory_mb = '2048'
        self.assertEqual(2048, cell.memory_mb)

    def test_unset_field_goes_to_obj_load_attr(self):
        pool = objects.NUMAPagesTopology(size_kb=4)
        self.assertRaises(NotImplementedError, getattr, pool, 'total')
        self.assertFalse(pool.obj_attr_is_set('total'))

    def test_setter_still_refuses_bad_values(self):
        topology = objects.HostNUMATopology()
        self.assertRaises(ValueError, setattr, topology, 'cells', ['x'])
        self.assertEqual([], topology.cells)
