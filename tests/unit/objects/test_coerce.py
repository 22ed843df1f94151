"""numamig.objects._coerce answers what OVO's coercion answers."""

import datetime
import uuid
import warnings

from numamig import objects  # noqa: F401 - registers every class
from numamig.objects import _coerce
from numamig.objects import base as obj_base
from tests import base

VALUES = (None, 'text', '', 7, 0, -3, True, False, 2.5,
          str(uuid.uuid4()), str(uuid.uuid4()).upper(), 'not-a-uuid',
          uuid.uuid4().hex, datetime.datetime(2026, 11, 27, 9, 0))


def _ovo(coerce, *args):
    """(value, type) or the exception's type, warnings muted."""
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        try:
            result = coerce(*args)
        except Exception as exc:    # noqa: BLE001 - compared, not hidden
            return type(exc)
    return result, type(result)


def _from_primitive(field, obj, name, value):
    return field.coerce(obj, name, field.from_primitive(obj, name, value))


class CoercersTest(base.TestCase):

    def test_every_field_of_every_class_as_ovo(self):
        compared = 0
        for name, classes in obj_base.NumamigObjectRegistry.obj_classes(
                ).items():
            cls = classes[0]
            obj = cls.__new__(cls)
            from_primitive = _coerce.from_primitives(cls)
            from_value = _coerce.from_values(cls)
            for field_name, field in cls.fields.items():
                for value in VALUES:
                    args = (obj, field_name, value)
                    self.assertEqual(
                        _ovo(_from_primitive, field, *args),
                        _ovo(from_primitive[field_name], *args),
                        f"{name}.{field_name} from primitive {value!r}")
                    self.assertEqual(
                        _ovo(field.coerce, *args),
                        _ovo(from_value[field_name], *args),
                        f"{name}.{field_name} from value {value!r}")
                    compared += 1
        self.assertGreater(compared, 1000)
