"""Version pinning and wire round trips of every registered numamig object.

``OBJECT_DATA`` pins each class as 'VERSION-hash'. A change to an object's
fields changes its hash and fails ``test_versions``: bump the VERSION, add
a history line and an ``obj_make_compatible`` step, then update the hash
here. Never update only the hash. An object has one version per release
(``test_one_version_per_release``): the shipped release's, and one minor
above it for everything the release in development adds.
"""

import inspect
import re

from oslo_serialization import jsonutils
from oslo_utils import versionutils
from oslo_versionedobjects import exception as ovo_exc
from oslo_versionedobjects import fields as ovo_fields
from oslo_versionedobjects import fixture
import testscenarios

from numamig import exception
from numamig import objects
from numamig.compute import rpcapi as compute_rpcapi
from numamig.conductor import api_versions
from numamig.objects import base as obj_base
from tests import base
from tests.unit.objects import samples

load_tests = testscenarios.load_tests_apply_scenarios

OBJECT_DATA = {
    'CPUPowerCell': '1.0-ed4c0d1bbe5539a7af55b7e273724f4f',
    'CPUPowerState': '1.0-137140145ef085142e53ef93af79f81e',
    # 1.1 is release 2's, unreleased: cpu (HostCPU) and cpu_power
    # (CPUPowerState) joined migration_guard in place (issue 40), then
    # locality (HostLocality, issue 39), no new version; its topology
    # became HostNUMATopology 1.1 in place (issue 41); guest_cpus
    # (InstanceCPU) joined in place (issue 40).
    'ComputeNodeReport': '1.1-2aba3e18a470f5d65c0422c4070e9898',
    'GuestLocality': '1.0-a38741f78dd585b63946e3d751d0321e',
    'HostCPU': '1.0-fae81309717b5ad76608d0a7ca682268',
    'HostLocality': '1.0-2bfae4c745ada0fe04211ebbd975675a',
    'HostNUMACell': '1.1-4321bbe34fd79a5e22d356f6aa0c3eef',
    'HostNUMATopology': '1.1-11faf3b0c4657faa9e196e166e96323a',
    'HostPCIDevice': '1.0-4eea3979844a2bdf3f02cec56585cc7a',
    'Instance': '1.1-f5b3572fa251d6fa5e2476a27f63a8dd',
    'InstanceCPU': '1.0-e06afb44b279cf91966750e7d9ef19c3',
    'InstanceNUMACell': '1.1-cb66a6f23c69d02d82416434b5b57b38',
    # 1.1 is release 2's, unreleased: the pci_* fields joined the
    # virtio-mem cells in place (issue 41).
    'InstanceNUMATopology': '1.1-1f902f75f2695e022c3d396f67f39a33',
    'InstancePCIDevice': '1.0-1593c27bafdf41bd4f19d318d495d12f',
    # 1.1 is release 2's, unreleased: the guest_cpu_* fields joined it in
    # place (issue 40).
    'LiveMigrateData': '1.1-b761b0475e2cb6c706ff9c853def3516',
    # 1.1 is release 2's, unreleased: its fields changed in place when
    # memory_reclaim and migration_threads, then the prediction's four
    # fields, then the convergence and post-copy recovery fields became
    # objects of their own (issue 35), no new version (one version per
    # release).
    'Migration': '1.1-291db27e79d5b0c049a0f1222ee7b014',
    'MigrationContext': '1.1-26d330cb0b3335895f050fd23a8c02d5',
    'MigrationConvergence': '1.0-f0d7cd8316115f521fb6904d6d3fdfe8',
    'MigrationPrediction': '1.0-db6efa5b70996bdbf03765e540128e01',
    'MigrationReclaim': '1.0-638fd7d8eacfebb35f3448c15d7e0743',
    'MigrationDevices': '1.0-2f3ce7758b680387085e07fa6a9122fa',
    'MigrationRecovery': '1.0-45d288731c5cdcd23027ec5e36a223bb',
    'MigrationStatusChange': '1.1-6c2e715e864c95dcb46b484863216b5b',
    'MigrationThreads': '1.0-256db58123dff4c36e21a84b2b2c58c0',
    'NUMALimits': '1.0-50f3092fed2eb389287a8f12e7d61dda',
    'NUMAMigrateInfo': '1.0-f965bacef664cf78f77394d39e7128f6',
    'NUMAPagesTopology': '1.0-edab9fa2dc43c117a38d600be54b4542',
    'PCIRequest': '1.0-a1975351f4eac329ba4b0d8773e0280f',
}

# Parent object -> {child object: child VERSION}, for ObjectField children
# (what ObjectVersionChecker.test_relationships tracks).
OBJECT_RELATIONSHIPS = {
    'ComputeNodeReport': {'CPUPowerState': '1.0', 'HostCPU': '1.0',
                          'HostLocality': '1.0',
                          'HostNUMATopology': '1.1'},
    'Instance': {'InstanceNUMATopology': '1.1', 'MigrationContext': '1.1'},
    'LiveMigrateData': {'MigrationContext': '1.1', 'NUMAMigrateInfo': '1.0'},
    'MigrationContext': {'InstanceNUMATopology': '1.1'},
}



def _history(cls):
    """Version -> the release its history line names ('' where none):
    the ``# Version X.Y[ - Release N]:`` comments in ``cls``'s source."""
    return {m.group(1): m.group(2) or ''
            for m in _HISTORY_LINE.finditer(inspect.getsource(cls))}


_HISTORY_LINE = re.compile(r"# Version (\d+\.\d+)(?: - (Release \d+))?:")


def numamig_classes():
    """Registered numamig classes by name (the registry is process-wide)."""
    return {name: classes
            for name, classes in
            obj_base.NumamigObjectRegistry.obj_classes().items()
            if classes[0].OBJ_PROJECT_NAMESPACE == 'numamig'}


def _child_fields(cls):
    for name, field in cls.fields.items():
        if isinstance(field, (ovo_fields.ObjectField,
                              ovo_fields.ListOfObjectsField)):
            yield name, field


def _child_name(field):
    if isinstance(field, ovo_fields.ObjectField):
        return field._type._obj_name
    return field._type._element_type._type._obj_name


class VersionsTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.checker = fixture.ObjectVersionChecker(numamig_classes())

    def test_versions(self):
        expected, actual = self.checker.test_hashes(OBJECT_DATA)
        self.assertEqual(expected, actual,
                         "object fields changed: bump VERSION, add history "
                         "and obj_make_compatible, then update OBJECT_DATA")

    def test_every_object_is_pinned_and_sampled(self):
        self.assertEqual(sorted(OBJECT_DATA), sorted(numamig_classes()))
        self.assertEqual(sorted(OBJECT_DATA), sorted(samples.BUILDERS))

    def test_relationships(self):
        expected, actual = self.checker.test_relationships(
            OBJECT_RELATIONSHIPS)
        self.assertEqual(expected, actual,
                         "a child object changed version: bump the parent")

    def test_compatibility_routines(self):
        # Backports every object from its VERSION down to x.0.
        self.checker.test_compatibility_routines()

    def test_obj_relationships_end_at_current_versions(self):
        # Every child field needs a relationship rule (or a backport fails
        # with "No rule for <field>"), and its last entry must pair this
        # VERSION with the child's VERSION.
        for name, (cls,) in sorted(numamig_classes().items()):
            for field_name, field in _child_fields(cls):
                rules = cls.obj_relationships.get(field_name)
                self.assertTrue(rules, f"{name}.{field_name} has no rule")
                child = numamig_classes()[_child_name(field)][0]
                self.assertEqual((cls.VERSION, child.VERSION), rules[-1],
                                 f"{name}.{field_name}")

    def test_history_comment_above_every_version(self):
        # The "# Version X.Y - Release N: change" history is how reviewers
        # see what a backport must undo; each VERSION must have its line.
        for name, (cls,) in sorted(numamig_classes().items()):
            self.assertIn(cls.VERSION, _history(cls), name)

    def test_one_version_per_release(self):
        # Each object has the version release 1 shipped and, where
        # release 2 changed it, one more minor: development steps of a
        # release are not versions (issue 35). Release 1's version is
        # what the release-1 manifests name (compute API 1.0, conductor
        # API 1.0 and 1.1).
        release_1_manifests = [
            compute_rpcapi.OBJECT_VERSIONS[compute_rpcapi.RELEASE_1],
            api_versions.OBJECT_VERSIONS['1.0'],
            api_versions.OBJECT_VERSIONS[api_versions.RELEASE_1]]
        for name, (cls,) in sorted(numamig_classes().items()):
            shipped = {manifest.get(name) for manifest in
                       release_1_manifests}
            self.assertEqual(1, len(shipped), f"{name}: {shipped}")
            if shipped == {None}:
                # New in release 2 (a migration's satellite records):
                # its first version, and no other.
                self.assertEqual('1.0', cls.VERSION, name)
                self.assertEqual({'1.0': 'Release 2'}, _history(cls), name)
                continue
            release_1 = shipped.pop()
            major, minor = versionutils.convert_version_to_tuple(release_1)
            expected = {release_1: 'Release 1'}
            if cls.VERSION != release_1:
                self.assertEqual(f'{major}.{minor + 1}', cls.VERSION, name)
                expected[cls.VERSION] = 'Release 2'
            history = _history(cls)
            self.assertEqual(sorted(expected), sorted(history), name)
            if len(expected) > 1:
                self.assertEqual(expected, history, name)


class RoundTripTest(base.TestCase):
    """Every object survives primitives and JSON with every field intact."""

    scenarios = [(name, {'build': builder})
                 for name, builder in sorted(samples.BUILDERS.items())]

    def test_primitive_round_trip(self):
        obj = self.build()
        back = obj_base.NumamigObject.obj_from_primitive(
            obj.obj_to_primitive())
        self.assertEqual(obj, back)
        self.assertIsInstance(back, type(obj))

    def test_json_round_trip(self):
        obj = self.build()
        wire = jsonutils.dumps(obj.obj_to_primitive())
        back = obj_base.NumamigObject.obj_from_primitive(
            jsonutils.loads(wire))
        self.assertEqual(obj, back)
        back.validate()

    def test_every_field_is_set_and_survives(self):
        obj = self.build()
        back = obj_base.NumamigObject.obj_from_primitive(
            jsonutils.loads(jsonutils.dumps(obj.obj_to_primitive())))
        for name in obj.fields:
            self.assertTrue(obj.obj_attr_is_set(name), name)
            self.assertEqual(getattr(obj, name), getattr(back, name), name)

    def test_valid_sample_validates(self):
        obj = self.build()
        self.assertIs(obj, obj.validate())


class DefaultsTest(base.TestCase):
    """Construction sets every field that has a default (and only those)."""

    scenarios = [(name, {'cls': classes[0]})
                 for name, classes in sorted(numamig_classes().items())]

    def test_defaults_applied_on_construction(self):
        obj = self.cls()
        for name, field in self.cls.fields.items():
            has_default = field.default != ovo_fields.UnspecifiedDefault
            self.assertEqual(has_default, obj.obj_attr_is_set(name), name)
            if has_default:
                self.assertEqual(field.default, getattr(obj, name), name)

    def test_mutable_defaults_are_not_shared(self):
        first, second = self.cls(), self.cls()
        for name in first.fields:
            value = first.get(name)
            if isinstance(value, (set, list, dict)):
                self.assertIsNot(value, second.get(name), name)

    def test_unknown_field_refused(self):
        exc = self.assertRaises(exception.ObjectValidationError, self.cls,
                                no_such_field=1)
        self.assertIn('no_such_field', str(exc))
        self.assertIn(self.cls.obj_name(), str(exc))

    def test_required_fields_named_by_validate(self):
        required = sorted(
            name for name, field in self.cls.fields.items()
            if field.default == ovo_fields.UnspecifiedDefault)
        if not required:
            self.assertIs(self.cls().validate().__class__, self.cls)
            return
        exc = self.assertRaises(exception.ObjectValidationError,
                                self.cls().validate)
        self.assertIn(f"required fields {required} are not set", str(exc))


class BackportBoundsTest(base.TestCase):

    def test_target_above_version_refused(self):
        self.assertRaises(ovo_exc.InvalidTargetVersion,
                          samples.pages().obj_to_primitive,
                          target_version='1.5')

    def test_every_version_parses(self):
        for name, (cls,) in numamig_classes().items():
            self.assertEqual(
                2, len(versionutils.convert_version_to_tuple(cls.VERSION)),
                name)

    def test_objects_package_exports_every_class(self):
        for name in numamig_classes():
            self.assertTrue(hasattr(objects, name), name)


class ComputeNodeReportGuardTest(base.TestCase):
    """ComputeNodeReport 1.1: the migration guard's state."""

    def _report(self, **overrides):
        from tests.unit.db import base as db_base
        return db_base.make_report(**overrides)

    def test_backport_to_1_0_drops_the_state(self):
        primitive = self._report(migration_guard='failed').obj_to_primitive(
            target_version='1.0')
        self.assertNotIn('migration_guard', primitive['numamig_object.data'])

    def test_states_are_the_guards(self):
        from numamig.objects import compute_node_report
        from numamig.virt.libvirt import guard_install
        self.assertEqual(
            guard_install.STATES,
            compute_node_report.ComputeNodeReport.GUARD_STATES)

    def test_unknown_state_is_refused(self):
        self.assertRaisesMessage(
            exception.ObjectValidationError, "migration_guard must be one "
            "of off, on, failed, got 'maybe'",
            self._report(migration_guard='maybe').validate)

    def test_older_agents_report_none(self):
        self._report().validate()
