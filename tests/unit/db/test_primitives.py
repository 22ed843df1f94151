"""Stored objects: primitives survive version changes, corruption is named."""

import copy

from numamig import exception
from numamig import objects
from numamig.db import primitives
from tests.unit.db import base


def _load(primitive, cls=objects.InstanceNUMATopology):
    return primitives.load(primitive, cls, 'instances', 'key-1',
                           'numa_topology')


class PrimitivesTestCase(base.base.TestCase):

    def setUp(self):
        super().setUp()
        self.topology = base.make_topology(base.new_uuid(), pins={0: 1,
                                                                   1: 2})

    def test_round_trip(self):
        loaded = _load(primitives.dump(self.topology))
        self.assertEqual(self.topology, loaded)
        self.assertEqual(set(), loaded.obj_what_changed())

    def test_none_stays_none(self):
        self.assertIsNone(primitives.dump(None))
        self.assertIsNone(_load(None))

    def test_dump_refuses_invalid_objects(self):
        self.topology.cells[0].cpu_pinning = {0: 1, 1: 1}
        self.assertRaises(exception.ObjectValidationError, primitives.dump,
                          self.topology)

    def test_record_without_a_later_field_gets_its_default(self):
        # A row written before a field existed lacks it in its data.
        primitive = primitives.dump(self.topology)
        del primitive['numamig_object.data']['emulator_threads_policy']
        self.assertIsNone(_load(primitive).emulator_threads_policy)

    def test_record_from_a_newer_release_is_named(self):
        primitive = primitives.dump(self.topology)
        primitive['numamig_object.version'] = '1.99'
        exc = self.assertRaises(exception.StoredRecordInvalid, _load,
                                primitive)
        self.assertIn('instances record key-1', str(exc))
        self.assertIn('numa_topology', str(exc))

    def test_wrong_class_is_refused(self):
        context = objects.MigrationContext(
            instance_uuid=base.new_uuid(), migration_uuid=base.new_uuid(),
            source_host='a', dest_host='b')
        self.assertRaisesMessage(
            exception.StoredRecordInvalid, 'holds a MigrationContext',
            _load, primitives.dump(context))

    def test_invalid_stored_value_is_refused(self):
        primitive = copy.deepcopy(primitives.dump(self.topology))
        cell = primitive['numamig_object.data']['cells'][0]
        cell['numamig_object.data']['cpu_pinning'] = {'0': 1, '1': 1}
        self.assertRaisesMessage(exception.StoredRecordInvalid,
                                 'two vCPUs pinned to one pCPU', _load,
                                 primitive)

    def test_garbage_is_refused(self):
        for garbage in ('text', [1, 2], {'no': 'keys'}):
            self.assertRaises(exception.StoredRecordInvalid, _load, garbage)
