"""Versioned objects to and from the JSON stored in the database.

Nested objects are stored as their versioned primitive (name, namespace,
version, data), not as bare field values: a row written before a version
bump then loads through the object's own compatibility rules. Everything
loaded is validated, so a corrupt or hand-edited row is reported with its
table, key and column instead of surfacing later as a wrong placement.
"""

from oslo_versionedobjects import exception as ovo_exception

from numamig import exception
from numamig import objects  # noqa: F401 - registers every object class
from numamig.objects import base


def dump(obj):
    """Return the JSON-ready primitive of ``obj`` (None stays None).

    :raises ObjectValidationError: if ``obj`` is invalid; nothing is
        stored then.
    """
    if obj is None:
        return None
    obj.validate()
    return obj.obj_to_primitive()


def load(primitive, expected_class, table, key, column):
    """Rebuild and validate the object stored in one column of one row.

    :param expected_class: the NumamigObject subclass the column holds.
    :param table, key, column: where the value came from, for the error.
    :returns: the object, or None for a NULL column.
    :raises StoredRecordInvalid: naming the row if the value does not
        load, is of another class, or fails validation.
    """
    if primitive is None:
        return None
    try:
        obj = base.NumamigObject.obj_from_primitive(primitive)
    except (ovo_exception.VersionedObjectsException, KeyError, TypeError,
            ValueError) as exc:
        raise _invalid(table, key, column, exc) from exc
    if not isinstance(obj, expected_class):
        raise _invalid(table, key, column,
                       f"holds a {type(obj).__name__}, expected a "
                       f"{expected_class.__name__}")
    try:
        obj.validate()
    except exception.ObjectValidationError as exc:
        raise _invalid(table, key, column, exc) from exc
    obj.obj_reset_changes(recursive=True)
    return obj


def _invalid(table, key, column, reason):
    return exception.StoredRecordInvalid(
        table=table, key=key, column=column, reason=str(reason))
