"""numamig's versioned object base, registry and validation hook.

Objects cross RPC between services of different releases, so every object
carries a VERSION and can be backported (``obj_make_compatible``). Field
coercion in oslo.versionedobjects is lenient, so each object also declares
``_validate()`` for the invariants that matter to placement (pins inside the
cell, no negative sizes); ``validate()`` runs it over the whole object tree
and is called on every object received from the wire.
"""

from oslo_versionedobjects import base as ovo_base
from oslo_versionedobjects import fields as ovo_fields

from numamig import exception


class NumamigObjectRegistry(ovo_base.VersionedObjectRegistry):
    """The registry every numamig object class is added to."""


register = NumamigObjectRegistry.register


class NumamigObject(ovo_base.VersionedObject,
                    ovo_base.ComparableVersionedObject):
    """Base class of all numamig objects."""

    OBJ_PROJECT_NAMESPACE = 'numamig'
    OBJ_SERIAL_NAMESPACE = 'numamig_object'

    def __init__(self, context=None, **kwargs):
        # OVO keeps an unknown keyword as a plain attribute that never
        # crosses the wire: a misspelt field would vanish silently.
        unknown = sorted(set(kwargs) - set(self.fields))
        if unknown:
            raise exception.ObjectValidationError(
                objname=self.obj_name(),
                reason=f"unknown fields {unknown}; it has "
                       f"{sorted(self.fields)}")
        super().__init__(context, **kwargs)
        # Fields with a default are always set, so readers never meet an
        # unset attribute, and a field an older sender did not know (see
        # obj_make_compatible) arrives as its default.
        for name, field in self.fields.items():
            if field.default != ovo_fields.UnspecifiedDefault and \
                    not self.obj_attr_is_set(name):
                self.obj_set_defaults(name)

    @classmethod
    def _obj_from_primitive(cls, context, objver, primitive):
        # Coercion errors from OVO name neither the object nor the field
        # ("invalid literal for int()"); an operator reading the RPC error
        # needs both. Children raise their own, more precise, error first.
        try:
            return super()._obj_from_primitive(context, objver, primitive)
        except (ValueError, TypeError, KeyError) as exc:
            problem = _describe_bad_field(cls, primitive, exc)
            raise exception.ObjectValidationError(
                objname=cls.obj_name(),
                reason=f"malformed primitive: {problem}")

    def __eq__(self, other):
        # OVO compares whole primitives, whose list of changed fields comes
        # from a set: equal objects then compare unequal depending on the
        # order the set happens to iterate in. Compare what is held.
        if not isinstance(other, NumamigObject):
            return NotImplemented
        return (type(self) is type(other) and
                self._comparable() == other._comparable())

    def __ne__(self, other):
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    # Defining __eq__ would otherwise make objects unhashable.
    __hash__ = ovo_base.ComparableVersionedObject.__hash__

    def _comparable(self):
        return self.VERSION, {name: getattr(self, name)
                              for name in self.fields
                              if self.obj_attr_is_set(name)}

    def _validate(self):
        """Raise ObjectValidationError if this object (alone) is nonsense.

        Subclasses check their own fields; children are visited by
        ``validate()``.
        """

    def validate(self):
        """Validate this object and every child object it holds.

        :returns: self, so calls can be chained.
        :raises ObjectValidationError: naming the object and the problem.
        """
        missing = sorted(
            name for name, field in self.fields.items()
            if field.default == ovo_fields.UnspecifiedDefault and
            not self.obj_attr_is_set(name))
        if missing:
            raise self.invalid(f"required fields {missing} are not set")
        for name in self.fields:
            if not self.obj_attr_is_set(name):
                continue
            value = getattr(self, name)
            children = value if isinstance(value, list) else [value]
            for child in children:
                if isinstance(child, NumamigObject):
                    child.validate()
        self._validate()
        return self

    def invalid(self, reason):
        """Return the validation error for this object, for ``raise``."""
        return exception.ObjectValidationError(
            objname=self.obj_name(), reason=reason)

    def get(self, name, default=None):
        """Return a field's value, or ``default`` when it is not set."""
        if self.obj_attr_is_set(name):
            return getattr(self, name)
        return default


def require_nonnegative(obj, *names):
    """Raise if any of the named set integer fields is negative."""
    for name in names:
        value = obj.get(name)
        if value is not None and value < 0:
            raise obj.invalid(f"{name} must not be negative, got {value}")


def _describe_bad_field(cls, primitive, exc):
    """Name the field of ``primitive`` that ``cls`` cannot coerce, if any."""
    data = primitive.get(f'{cls.OBJ_SERIAL_NAMESPACE}.data')
    if not isinstance(data, dict):
        return f"no {cls.OBJ_SERIAL_NAMESPACE}.data dict ({exc})"
    probe = cls()
    for name, field in cls.fields.items():
        if name not in data:
            continue
        try:
            field.coerce(probe, name,
                         field.from_primitive(probe, name, data[name]))
        except (ValueError, TypeError, KeyError) as field_exc:
            return f"field {name} = {data[name]!r}: {field_exc}"
    return str(exc)
