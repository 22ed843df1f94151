"""An older peer never receives an enum value it cannot parse.

OVO's enum coercion refuses a value it does not know, so an object
holding a newer value would fail at the older peer, or worse be read
with a stand-in nobody chose. Each enum says what an older peer gets
(numamig.objects.fields_enums.BackportableEnum); each object says in
which of its versions a value arrived (``obj_enum_values``).

The tests add a value to each enum field of each registered object, in
a test-local registry, as a developer would (the object bumped, the
value declared), and send it to a peer reading the version before.
"""

from oslo_utils import versionutils
from oslo_versionedobjects import fields as ovo_fields
from oslo_versionedobjects import fixture as ovo_fixture
import testscenarios

from numamig import exception
from numamig.objects import base as obj_base
from numamig.objects import fields
from tests import base
from tests.unit.objects import samples
from tests.unit.objects import test_objects

load_tests = testscenarios.load_tests_apply_scenarios

NEW = 'x-added-in-test'

# Each enum's values in the first version of every object holding it:
# any other value must be declared in those objects' obj_enum_values.
FIRST_VALUES = {
    'CPUAllocationPolicy': {'shared', 'dedicated', 'mixed'},
    'CPUThreadAllocationPolicy': {'prefer', 'isolate', 'require'},
    'CPUEmulatorThreadsPolicy': {'share', 'isolate'},
    'MigrationStatus': {'accepted', 'queued', 'preparing', 'running',
                        'post-migrating', 'completed', 'failed', 'error',
                        'cancelled'},
    'PowerState': {'running', 'paused', 'shutdown', 'crashed', 'unknown'},
}

# What each enum does with a value an older peer lacks (decided in
# fields_enums, where each says why): the value it is mapped to when a
# test adds one, or None when it is refused. MigrationStatus maps each
# new status to the one it refines, named with it (here: running).
ON_OLDER_PEER = {
    'CPUAllocationPolicy': None,
    'CPUThreadAllocationPolicy': None,
    'CPUEmulatorThreadsPolicy': None,
    'MigrationStatus': 'running',
    'PowerState': 'unknown',
}
OLDER_DECLARED = {'MigrationStatus': {NEW: 'running'}}


def enum_fields():
    """(object class, field name, enum) of every enum field registered."""
    found = []
    for _name, (cls,) in sorted(test_objects.numamig_classes().items()):
        for field, kind in sorted(cls.fields.items()):
            if isinstance(getattr(kind, '_type', None), ovo_fields.Enum):
                found.append((cls, field, kind._type))
    return found


def _next_version(version):
    major, minor = versionutils.convert_version_to_tuple(version)
    return f'{major}.{minor + 1}'


def with_new_value(cls, field, older=None):
    """``cls`` bumped one minor version, its enum ``field`` gaining NEW.

    :param older: what the enum maps NEW to (default: OLDER_DECLARED).
    """
    enum_cls = type(cls.fields[field]._type)
    if older is None:
        older = OLDER_DECLARED.get(enum_cls.__name__, {})
    enum = type(enum_cls.__name__, (enum_cls,), {
        'ALL': enum_cls.ALL + (NEW,), 'OLDER': dict(enum_cls.OLDER, **older)})
    old = cls.fields[field]
    new_field = type('Field', (ovo_fields.BaseEnumField,),
                     {'AUTO_TYPE': enum()})(nullable=old.nullable,
                                            default=old.default)
    version = _next_version(cls.VERSION)
    return type(cls.obj_name(), (cls,), {
        'VERSION': version,
        'fields': dict(cls.fields, **{field: new_field}),
        'obj_enum_values': dict(cls.obj_enum_values,
                                **{field: {version: (NEW,)}})})


class EveryEnumDecidesTest(base.TestCase):

    def test_every_enum_field_is_backportable(self):
        for cls, field, enum in enum_fields():
            self.assertIsInstance(enum, fields.BackportableEnum,
                                  f"{cls.obj_name()}.{field}")

    def test_every_enum_has_a_decision_here(self):
        self.assertEqual(set(ON_OLDER_PEER),
                         {type(enum).__name__ for _, _, enum in
                          enum_fields()})

    def test_values_beyond_the_first_version_are_declared(self):
        for cls, field, enum in enum_fields():
            declared = set().union(
                *cls.obj_enum_values.get(field, {}).values())
            self.assertEqual(
                set(enum.ALL), FIRST_VALUES[type(enum).__name__] | declared,
                f"{cls.obj_name()}.{field}: declare each added value in "
                f"obj_enum_values under the version that added it")

    def test_added_statuses_name_the_status_they_refine(self):
        first = FIRST_VALUES['MigrationStatus']
        for added, older in fields.MigrationStatus.OLDER.items():
            self.assertIn(added, fields.MigrationStatus.ALL)
            self.assertIn(older, first | set(fields.MigrationStatus.OLDER))
        declared = set()
        for cls, field, enum in enum_fields():
            if isinstance(enum, fields.MigrationStatus):
                declared.update(*cls.obj_enum_values.get(field,
                                                         {}).values())
        self.assertLessEqual(declared, set(fields.MigrationStatus.OLDER))


class NewValueToAnOlderPeerTest(base.TestCase):
    """One scenario per enum field of every registered object."""

    scenarios = [(f'{cls.obj_name()}.{field}',
                  {'cls': cls, 'field': field,
                   'expected': ON_OLDER_PEER[type(enum).__name__]})
                 for cls, field, enum in enum_fields()]

    def setUp(self):
        super().setUp()
        self.useFixture(ovo_fixture.VersionedObjectRegistryFixture())
        self.bumped = with_new_value(self.cls, self.field)
        obj_base.NumamigObjectRegistry.register(self.bumped)
        sample = samples.BUILDERS[self.cls.obj_name()]()
        self.obj = self.bumped(**{name: getattr(sample, name)
                                  for name in sample.fields
                                  if sample.obj_attr_is_set(name)})
        setattr(self.obj, self.field, NEW)

    def _data(self, version):
        primitive = self.obj.obj_to_primitive(target_version=version)
        return primitive['numamig_object.data']

    def test_older_peer_gets_a_value_it_parses_or_nothing(self):
        if self.expected is None:
            exc = self.assertRaises(exception.EnumValueTooNew, self._data,
                                    self.cls.VERSION)
            self.assertIn(f"{self.cls.obj_name()}.{self.field} is "
                          f"'{NEW}', which a peer reading "
                          f"{self.cls.obj_name()} {self.cls.VERSION} "
                          f"cannot parse", str(exc))
            return
        sent = self._data(self.cls.VERSION)[self.field]
        self.assertEqual(self.expected, sent)
        # The older peer's own field type accepts it.
        self.assertEqual(sent, self.cls.fields[self.field].coerce(
            None, self.field, sent))

    def test_peer_of_the_new_version_gets_the_value(self):
        self.assertEqual(NEW, self._data(self.bumped.VERSION)[self.field])

    def test_older_values_pass_unchanged(self):
        setattr(self.obj, self.field, sorted(FIRST_VALUES[
            type(self.cls.fields[self.field]._type).__name__])[0])
        self.assertEqual(getattr(self.obj, self.field),
                         self._data(self.cls.VERSION)[self.field])


class UnnamedStatusRefusedTest(base.TestCase):
    """A status added without naming the one it refines is refused, not
    guessed (and EveryEnumDecidesTest fails until it is named)."""

    def test_refused(self):
        self.useFixture(ovo_fixture.VersionedObjectRegistryFixture())
        sample = samples.migration()
        bumped = with_new_value(type(sample), 'status', older={})
        obj_base.NumamigObjectRegistry.register(bumped)
        obj = bumped(**{name: getattr(sample, name) for name in sample.fields
                        if sample.obj_attr_is_set(name)})
        obj.status = NEW
        self.assertRaises(exception.EnumValueTooNew, obj.obj_to_primitive,
                          target_version=sample.VERSION)
