"""Field coercion without OVO's frames for values already of the type.

A received or loaded object has every field coerced: OVO's path for one
value is the field's ``from_primitive`` and ``coerce``, then the type's,
and for a UUID a ``warnings.catch_warnings`` block around a parse, about
ten microseconds an Instance field. Most values already are what the
field would store (a str for a String or a UUID, an int for an Integer):
for those the answer is the value itself, and only the others take
OVO's path, which then stores and warns exactly as before.
"""

import functools
import re

from oslo_versionedobjects import fields as ovo_fields

# The canonical spelling uuid.UUID accepts; others (braces, urn:, no
# dashes) take OVO's path, which returns them as they are too.
_UUID = re.compile(r'[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}')

# Field types whose coerce returns a value of exactly this Python type
# unchanged; subclasses (enums, patterns) check more and are not here.
_PLAIN = {ovo_fields.String: str, ovo_fields.Integer: int,
          ovo_fields.Boolean: bool}


@functools.cache
def from_primitives(cls):
    """Field name -> ``coerce(obj, name, primitive)`` of ``cls``: what
    ``field.coerce(obj, name, field.from_primitive(obj, name, p))``
    returns (hydrating a received object)."""
    return {name: _coercer(field, field.from_primitive)
            for name, field in cls.fields.items()}


@functools.cache
def from_values(cls):
    """Field name -> ``coerce(obj, name, value)`` of ``cls``: what
    ``field.coerce(obj, name, value)`` returns (OVO's property setter
    on a new object)."""
    return {name: _coercer(field, None) for name, field in cls.fields.items()}


def _coercer(field, from_primitive):
    slow = field.coerce if from_primitive is None else \
        lambda obj, name, value: field.coerce(
            obj, name, from_primitive(obj, name, value))
    kind = type(getattr(field, '_type', None))
    if kind is ovo_fields.UUID:
        def plain(value):
            return type(value) is str and _UUID.fullmatch(value)
    elif kind in _PLAIN:
        python_type = _PLAIN[kind]

        def plain(value):
            return type(value) is python_type
    else:
        return slow
    nullable = field.nullable

    def coerce(obj, name, value):
        # The identity from_primitive of these types, then coerce's
        # answer for a value it would store as it is.
        if plain(value) or (value is None and nullable):
            return value
        return slow(obj, name, value)
    return coerce
