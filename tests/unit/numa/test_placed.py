"""The cheap builders of placed objects match the normal constructors.

If oslo.versionedobjects ever stores or tracks fields differently, these
comparisons fail before a placement built the fast way crosses the wire.
"""

from numamig import objects
from numamig.numa import placed
from numamig.numa import views
from tests import base

UUID = '5a1e0000-0000-4000-8000-00000000abcd'


def _guest(**overrides):
    values = {'id': 1, 'cpuset': {4}, 'pcpuset': {2, 3}, 'memory_mb': 1024,
              'pagesize': -2, 'cpu_policy': 'mixed',
              'cpu_thread_policy': 'isolate', 'realtime_vcpus': {3}}
    values.update(overrides)
    return objects.InstanceNUMACell(**values)


def _primitive(obj):
    """The object's primitive, its list of changes (made from a set, in
    no particular order) sorted."""
    primitive = obj.obj_to_primitive()
    changes = 'numamig_object.changes'
    primitive[changes] = sorted(primitive[changes])
    return primitive


class PlacedBuilderTest(base.TestCase):

    def _assert_same(self, expected, built):
        self.assertEqual(expected, built)
        self.assertEqual(_primitive(expected), _primitive(built))
        self.assertEqual(expected.obj_what_changed(),
                         built.obj_what_changed())
        self.assertEqual(sorted(vars(expected)), sorted(vars(built)))
        for name in expected.fields:
            self.assertIs(type(getattr(expected, name)),
                          type(getattr(built, name)), name)

    def _expected_cell(self, guest, reserved):
        return objects.InstanceNUMACell(
            id=guest.id, host_cell=3, cpuset=set(guest.cpuset),
            pcpuset=set(guest.pcpuset), memory_mb=guest.memory_mb,
            pagesize=2048, cpu_pinning={2: 8, 3: 10},
            cpuset_reserved=reserved, cpu_policy=guest.cpu_policy,
            cpu_thread_policy=guest.cpu_thread_policy,
            realtime_vcpus=set(guest.realtime_vcpus))

    def test_cell_equals_constructed_cell(self):
        for reserved in (None, {12}):
            guest = _guest()
            built = placed.instance_cell(guest, 3, 2048, {2: 8, 3: 10},
                                         None if reserved is None
                                         else set(reserved))
            self._assert_same(self._expected_cell(guest, reserved), built)
            built.validate()

    def test_cell_from_snapshot_equals_constructed_cell(self):
        guest = _guest(cpu_policy=None, cpu_thread_policy=None,
                       realtime_vcpus=set())
        built = placed.instance_cell(views.GuestView(guest), 3, 2048,
                                     {2: 8, 3: 10}, None)
        self._assert_same(self._expected_cell(guest, None), built)

    def test_cell_shares_no_set_with_the_request(self):
        guest = _guest()
        built = placed.instance_cell(guest, 3, 2048, {2: 8, 3: 10}, None)
        built.cpuset.add(99)
        built.pcpuset.add(99)
        built.realtime_vcpus.add(99)
        self.assertEqual(_guest(), guest)

    def test_cell_sets_still_coerce_what_is_added(self):
        built = placed.instance_cell(_guest(), 3, 2048, {2: 8, 3: 10}, {5})
        built.cpuset.add('7')
        built.cpuset_reserved.add('6')
        self.assertEqual({4, 7}, built.cpuset)
        self.assertEqual({5, 6}, built.cpuset_reserved)
        self.assertRaises(ValueError, built.pcpuset.add, 'x')

    def test_topology_equals_constructed_topology(self):
        cell = placed.instance_cell(_guest(), 3, 2048, {2: 8, 3: 10}, None)
        for uuid, policy in ((None, None), (UUID, 'isolate')):
            expected = objects.InstanceNUMATopology(
                instance_uuid=uuid, cells=[cell],
                emulator_threads_policy=policy)
            built = placed.instance_topology(uuid, [cell], policy)
            self._assert_same(expected, built)
            round_trip = objects.InstanceNUMATopology.obj_from_primitive(
                built.obj_to_primitive())
            self.assertEqual(expected, round_trip)
