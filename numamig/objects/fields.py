"""Field types numamig needs beyond oslo.versionedobjects' own.

Pin maps are keyed by integers (vCPU ids, guest cell ids). OVO's dict
fields key by strings, which would make every consumer convert and makes
``{0: 3}`` and ``{'0': 3}`` compare unequal; these fields keep integer keys
in Python and use string keys only on the wire, where JSON requires them.
"""

from oslo_versionedobjects import fields

from numamig.objects import migration_threads
from numamig.objects.fields_enums import *  # noqa: F401,F403


class _IntKeyedDict(fields.FieldType):
    """A dict with non-negative integer keys; values typed by subclasses."""

    # Subclasses define ``_coerce_value(obj, attr, value)`` for the values.
    value_kind = 'integer'

    def coerce(self, obj, attr, value):
        if not isinstance(value, dict):
            raise ValueError(f"{attr} must be a dict, got {value!r}")
        result = {}
        for key, item in value.items():
            try:
                if isinstance(key, bool):
                    raise TypeError(key)
                int_key = int(key)
            except (TypeError, ValueError):
                raise ValueError(f"{attr} key {key!r} is not an integer")
            if int_key < 0:
                raise ValueError(f"{attr} key {key!r} is negative")
            result[int_key] = self._coerce_value(obj, attr, item)
        return result

    def to_primitive(self, obj, attr, value):
        return {str(k): self._value_to_primitive(v) for k, v in value.items()}

    def from_primitive(self, obj, attr, value):
        return self.coerce(obj, attr, value)

    def _value_to_primitive(self, value):
        return value

    def stringify(self, value):
        return repr(dict(sorted(value.items())))

    def get_schema(self):
        return {'type': ['object'],
                'additionalProperties': {'type': self.value_kind}}


class IntToInt(_IntKeyedDict):
    def _coerce_value(self, obj, attr, value):
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise ValueError(f"{attr} value {value!r} is not an integer")
        try:
            return int(value)
        except ValueError:
            raise ValueError(f"{attr} value {value!r} is not an integer")


class IntToIntSet(_IntKeyedDict):
    value_kind = 'array'

    def _coerce_value(self, obj, attr, value):
        if isinstance(value, (str, bytes)) or not hasattr(value, '__iter__'):
            raise ValueError(f"{attr} value {value!r} is not a set of ints")
        return {IntToInt._coerce_value(self, obj, attr, v) for v in value}

    def _value_to_primitive(self, value):
        return sorted(value)


class IntToIntMap(_IntKeyedDict):
    """{int: {int: int}}: a table, such as distances between cells."""

    value_kind = 'object'

    def _coerce_value(self, obj, attr, value):
        return IntToInt().coerce(obj, attr, value)

    def _value_to_primitive(self, value):
        return {str(k): v for k, v in value.items()}

    def stringify(self, value):
        return repr({k: dict(sorted(v.items()))
                     for k, v in sorted(value.items())})


class IntToIntField(fields.AutoTypedField):
    AUTO_TYPE = IntToInt()


class IntToIntSetField(fields.AutoTypedField):
    AUTO_TYPE = IntToIntSet()


class IntToIntMapField(fields.AutoTypedField):
    AUTO_TYPE = IntToIntMap()


class MigrationThreads(fields.FieldType):
    """Where a migration's threads ran, per host
    (numamig.objects.migration_threads): a bounded dict, refused whole
    when its shape or size is wrong."""

    def coerce(self, obj, attr, value):
        problem = migration_threads.problem(value)
        if problem:
            raise ValueError(f"{attr}: {problem}")
        return {side: migration_threads.side(
            record['host'], record['basis'], record['cpus'],
            record['threads'], record['connections'])
            for side, record in value.items()}

    def to_primitive(self, obj, attr, value):
        return value

    def from_primitive(self, obj, attr, value):
        return self.coerce(obj, attr, value)

    def stringify(self, value):
        return repr(value)

    def get_schema(self):
        return {'type': ['object']}


class MigrationThreadsField(fields.AutoTypedField):
    AUTO_TYPE = MigrationThreads()
