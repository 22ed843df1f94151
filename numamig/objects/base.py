"""numamig's versioned object base, registry and validation hook.

Objects cross RPC between services of different releases, so every object
carries a VERSION and can be backported (``obj_make_compatible``). Field
coercion in oslo.versionedobjects is lenient, so each object also declares
``_validate()`` for the invariants that matter to placement (pins inside the
cell, no negative sizes); ``validate()`` runs it over the whole object tree
and is called on every object received from the wire.
"""

import copy
import datetime
import functools
import keyword
import operator

from oslo_utils import versionutils
from oslo_versionedobjects import base as ovo_base
from oslo_versionedobjects import exception as ovo_exception
from oslo_versionedobjects import fields as ovo_fields

from numamig import exception
from numamig.objects import _coerce


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
        if not kwargs.keys() <= self.fields.keys():
            unknown = sorted(set(kwargs) - set(self.fields))
            raise exception.ObjectValidationError(
                objname=self.obj_name(),
                reason=f"unknown fields {unknown}; it has "
                       f"{sorted(self.fields)}")
        super().__init__(context)
        # What OVO's property setter does on a new object (coerce, store,
        # mark changed), without its frame, for every value given.
        stored, coerce = vars(self), _coerce.from_values(type(self))
        for name, value in kwargs.items():
            stored[_ATTR_PREFIX + name] = coerce[name](self, name, value)
        self._changed_fields.update(kwargs)
        # Fields with a default are always set, so readers never meet an
        # unset attribute, and a field an older sender did not know (see
        # obj_make_compatible) arrives as its default.
        for name in _defaulted(type(self)):
            if not hasattr(self, _ATTR_PREFIX + name):
                self.obj_set_defaults(name)

    # Enum values added after this object's first version: field name ->
    # {object version: values it added}. Sent to a peer reading an older
    # version, each is mapped or refused as its enum says
    # (fields_enums.BackportableEnum); a unit test fails while an enum
    # value is neither in the first version nor declared here.
    obj_enum_values = {}

    def obj_make_compatible(self, primitive, target_version):
        super().obj_make_compatible(primitive, target_version)
        _backport_enum_values(type(self), primitive, target_version)

    # obj_from_coerced(**values): see _FromCoerced.
    obj_from_coerced = None  # replaced below, once the class exists

    def obj_attr_is_set(self, attrname):
        # The same answer as OVO's, which builds the list of every field
        # name on each call: with hundreds of thousands of calls per
        # second of control-plane work that list was its largest cost.
        if attrname not in self.fields and \
                attrname not in self.obj_extra_fields:
            raise AttributeError(
                f"{self.obj_name()} object has no attribute '{attrname}'")
        return hasattr(self, _ATTR_PREFIX + attrname)

    def obj_to_primitive(self, target_version=None, version_manifest=None):
        # OVO's answer, reading the stored values directly and parsing
        # each version string once per process: OVO re-parses both
        # versions with a regular expression for every object of every
        # message (a fifth of an Instance's serialization) and reaches
        # each field through its property twice.
        if target_version is None:
            target_version = self.VERSION
        if _version_tuple(target_version) > _version_tuple(self.VERSION):
            raise ovo_exception.InvalidTargetVersion(version=target_version)
        return self.obj_primitive_at(target_version, version_manifest)

    def obj_primitive_at(self, target_version, version_manifest=None):
        """``obj_to_primitive`` up to the class's VERSION whatever the
        object's own: one received from an older peer keeps that peer's
        version, and what it carries now is described by the class's
        fields, backported here to ``target_version`` (numamig.rpc's
        primitive_for; OVO's way is a deep copy with the version raised).
        """
        stored = vars(self)
        primitive = {}
        for name, field in self.fields.items():
            value = stored.get(_ATTR_PREFIX + name, _UNSET)
            if value is not _UNSET:
                primitive[name] = field.to_primitive(self, name, value)
        if target_version != type(self).VERSION or version_manifest:
            self.obj_make_compatible_from_manifest(
                primitive, target_version, version_manifest)
        prefix = self.OBJ_SERIAL_NAMESPACE
        result = {f'{prefix}.name': self.obj_name(),
                  f'{prefix}.namespace': self.OBJ_PROJECT_NAMESPACE,
                  f'{prefix}.version': target_version,
                  f'{prefix}.data': primitive}
        changes = [name for name in self.obj_what_changed()
                   if name in primitive]
        if changes:
            result[f'{prefix}.changes'] = changes
        return result

    @classmethod
    def _obj_from_primitive(cls, context, objver, primitive):
        # Coercion errors from OVO name neither the object nor the field
        # ("invalid literal for int()"); an operator reading the RPC error
        # needs both. Children raise their own, more precise, error first.
        try:
            return cls._hydrate(context, objver, primitive)
        except (ValueError, TypeError, KeyError) as exc:
            problem = _describe_bad_field(cls, primitive, exc)
            raise exception.ObjectValidationError(
                objname=cls.obj_name(),
                reason=f"malformed primitive: {problem}")

    @classmethod
    def _hydrate(cls, context, objver, primitive):
        """Build the object a primitive describes, as OVO does, except that
        a field the primitive carries is set once, from the primitive, and
        only the absent ones get their default: construction would first
        coerce every default only to overwrite most of them."""
        data = cls._obj_primitive_field(primitive, 'data')
        obj = cls.__new__(cls)
        ovo_base.VersionedObject.__init__(obj, context)
        obj.VERSION = objver
        stored, coerce = vars(obj), _coerce.from_primitives(cls)
        for name, field in cls.fields.items():
            if name in data:
                # What OVO's property setter stores, without its frame: on
                # a fresh object it only coerces (no read-only value to
                # compare yet) and marks the field changed, which the
                # primitive's own list of changes replaces below.
                stored[_ATTR_PREFIX + name] = coerce[name](
                    obj, name, data[name])
            elif field.default != ovo_fields.UnspecifiedDefault:
                obj.obj_set_defaults(name)
        changes = cls._obj_primitive_field(primitive, 'changes', [])
        obj._changed_fields = {name for name in changes if name in cls.fields}
        return obj

    def __deepcopy__(self, memo):
        # OVO's copy first constructs a default object (every default
        # coerced) and deep-copies OVO's coercing collections through
        # pickling's reduce protocol; the setter coerces each copied value
        # again anyway, so plain copies of the values are what it needs.
        cls = type(self)
        clone = cls.__new__(cls)
        ovo_base.VersionedObject.__init__(clone, self._context)
        memo[id(self)] = clone
        for name in self.fields:
            value = getattr(self, _ATTR_PREFIX + name, _UNSET)
            if value is not _UNSET:
                setattr(clone, name, _copied(value, memo))
        clone._changed_fields = set(self._changed_fields)
        return clone

    def obj_what_changed(self):
        # OVO's answer (changed fields, and fields holding an object with
        # changes), looking only at the fields that can hold objects: it is
        # asked once per object per serialization, recursively.
        changed = {name for name in self._changed_fields
                   if name in self.fields}
        for name in object_fields(type(self)):
            child = getattr(self, _ATTR_PREFIX + name, None)
            if isinstance(child, ovo_base.VersionedObject) and \
                    child.obj_what_changed():
                changed.add(name)
        return changed

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
        cls = type(self)
        missing = [name for name in _required(cls)
                   if not hasattr(self, _ATTR_PREFIX + name)]
        if missing:
            raise self.invalid(f"required fields {missing} are not set")
        for name in object_fields(cls):
            value = getattr(self, _ATTR_PREFIX + name, None)
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

    def obj_version_needed(self):
        """The lowest version that holds everything this object carries.

        A client sends a message at the lowest API version whose manifest
        carries each object in the version it needs (compute rpcapi's
        _version_for): an object whose newest fields are unset needs no
        newer peer. By default, its VERSION.
        """
        return self.VERSION

    def get(self, name, default=None):
        """Return a field's value, or ``default`` when it is not set."""
        # The stored value, as OVO's property returns it, without the
        # property and obj_attr_is_set frames (validation calls this for
        # every field of every object received).
        value = vars(self).get(_ATTR_PREFIX + name, _UNSET)
        if value is not _UNSET:
            return value
        if name not in self.fields and name not in self.obj_extra_fields:
            raise AttributeError(
                f"{self.obj_name()} object has no attribute '{name}'")
        return default


# Where OVO stores a field's value (``ovo_base._get_attrname``); a unit
# test fails if OVO changes it. Reading it directly is what OVO's own
# property getter does.
_ATTR_PREFIX = '_obj_'


_UNSET = object()


@functools.lru_cache(maxsize=256)
def version_tuple(version):
    """OVO's parse of a version string, remembered (few distinct ones)."""
    return versionutils.convert_version_to_tuple(version)


_version_tuple = version_tuple

_IMMUTABLE = (int, str, float, bool, type(None), datetime.datetime,
              datetime.timedelta)


def _copied(value, memo):
    """A deep copy of a field value, in plain containers (the field's
    setter coerces it into OVO's types)."""
    if isinstance(value, _IMMUTABLE):
        return value
    if isinstance(value, (set, frozenset)) and all(
            isinstance(item, _IMMUTABLE) for item in value):
        return set(value)
    if isinstance(value, list):
        return [_copied(item, memo) for item in value]
    if isinstance(value, dict):
        return {key: _copied(item, memo) for key, item in value.items()}
    return copy.deepcopy(value, memo)


def field_reader(names):
    """Return a function reading the named fields of an object as a tuple.

    Reads the stored values directly, skipping OVO's property machinery
    (the views of the NUMA engine read every host this way). If one is
    unset, every field is read the normal way, which raises the usual
    error for an unset field without a default.
    """
    direct = operator.itemgetter(*(_ATTR_PREFIX + name for name in names))

    def read(obj):
        try:
            return direct(vars(obj))
        except KeyError:
            return tuple(getattr(obj, name) for name in names)
    return read


class _Coercing:
    """Makes OVO's coercing collection of a field from plain items, as
    the field's ``coerce`` would (the attributes are the ones
    CoercedCollectionMixin.enable_coercing sets)."""

    def __init__(self, collection, base, element_type):
        self.collection = collection
        self.base = base
        self.element_type = element_type

    def __call__(self, obj, name, items):
        result = self.base.__new__(self.collection)
        self.base.__init__(result, items)
        result.__dict__ = {'_element_type': self.element_type, '_obj': obj,
                           '_field': name}
        return result


_COLLECTIONS = ((ovo_fields.Set, ovo_fields.CoercedSet, set),
                (ovo_fields.List, ovo_fields.CoercedList, list))


def _unsupported(reason, *args, **kwargs):
    raise TypeError(reason)


class _FromCoerced:
    """``cls.obj_from_coerced(**values)``: build an object from values of
    exactly its fields' types.

    What the constructor leaves behind, without its per-field coercion
    (tens of microseconds per object, more than a NUMA fit takes): every
    field set and marked changed; sets and lists copied into OVO's
    coercing collections, which still coerce what is added later. For hot
    paths whose values are already coerced (a fit's placement); anything
    else uses the constructor. A hot caller keeps
    ``cls.obj_from_coerced`` once and calls it.

    Raises TypeError unless every field, and nothing else, is given: a
    field added to the class must be carried by every caller, or the
    build fails where it is written.
    """

    def __get__(self, obj, cls):
        return functools.partial(_builder(cls), cls)


NumamigObject.obj_from_coerced = _FromCoerced()


@functools.cache
def _builder(cls):
    """The function behind ``cls.obj_from_coerced``, generated from the
    field definitions: one keyword-only parameter per field (so Python
    itself refuses a missing or unknown one) and one dict display of the
    stored attributes, as fast as a hand-written builder."""
    makers, stored = {}, []
    for name, field in cls.fields.items():
        if isinstance(field._type, ovo_fields.Dict) or \
                not name.isidentifier() or keyword.iskeyword(name):
            # No hot path builds one yet; its test would come with it.
            # Refused when called: class inspection (OVO's fingerprints)
            # reads every attribute.
            return functools.partial(
                _unsupported, f"{cls.obj_name()}.obj_from_coerced: field "
                f"{name} ({type(field._type).__name__}) is not supported")
        for kind, collection, base in _COLLECTIONS:
            if isinstance(field._type, kind):
                makers[name] = _Coercing(collection, base,
                                         field._type._element_type)
                stored.append(f"'{_ATTR_PREFIX}{name}': None if {name} is "
                              f"None else _m_{name}(obj, '{name}', {name})")
                break
        else:
            stored.append(f"'{_ATTR_PREFIX}{name}': {name}")
    source = (
        f"def build(cls, *, {', '.join(cls.fields)}):\n"
        f"    obj = cls.__new__(cls)\n"
        f"    vars(obj).update({{'_context': None, "
        f"'_changed_fields': set(_names), {', '.join(stored)}}})\n"
        f"    return obj\n")
    namespace = {'_names': tuple(cls.fields)}
    namespace.update((f'_m_{name}', make) for name, make in makers.items())
    exec(compile(source, f'<{cls.obj_name()}.obj_from_coerced>',  # noqa: S102
                 'exec'), namespace)
    return namespace['build']


@functools.cache
def _defaulted(cls):
    """The names of ``cls``'s fields that have a default."""
    return tuple(name for name, field in cls.fields.items()
                 if field.default != ovo_fields.UnspecifiedDefault)


@functools.cache
def quick_getters(cls):
    """Give a registered class field getters that read the stored value
    directly (apply above ``register``, which makes OVO's).

    OVO's getter asks ``hasattr`` and then ``getattr`` for the attribute
    it stores a field in, about a microsecond a read. A host cache
    reading a new report's topology (validation, weights, capacity)
    makes some 450 reads of its cells' fields: a fifth of the work.
    A field not set still goes to ``obj_load_attr``, as with OVO's.
    """
    for name in cls.fields:
        made = vars(cls)[name]
        setattr(cls, name, property(_quick_getter(name), made.fset,
                                    made.fdel))
    return cls


def _quick_getter(name):
    key = _ATTR_PREFIX + name

    def getter(self):
        try:
            return self.__dict__[key]
        except KeyError:
            self.obj_load_attr(name)
            return getattr(self, key)
    return getter


def _required(cls):
    """The names of ``cls``'s fields that have no default, sorted."""
    return tuple(sorted(name for name, field in cls.fields.items()
                        if field.default == ovo_fields.UnspecifiedDefault))


@functools.cache
def object_fields(cls):
    """The names of ``cls``'s fields that hold an object or a list of them:
    the only ones ``validate()`` has children in."""
    return tuple(name for name, field in cls.fields.items()
                 if _holds_objects(field))


def _holds_objects(field):
    kind = getattr(field, '_type', None)
    if isinstance(kind, ovo_fields.List):
        kind = getattr(kind._element_type, '_type', None)
    return isinstance(kind, ovo_fields.Object)


def _backport_enum_values(cls, primitive, target_version):
    """Map or refuse, in ``primitive``, enum values newer than the target.

    Newest additions first, so a value mapped to one added in between is
    mapped again.

    :raises EnumValueTooNew: a value has no older equivalent.
    """
    as_tuple = versionutils.convert_version_to_tuple
    target = as_tuple(target_version)
    for name, history in cls.obj_enum_values.items():
        for version in sorted(history, key=as_tuple, reverse=True):
            value = primitive.get(name)
            if target >= as_tuple(version) or value not in history[version]:
                continue
            older = cls.fields[name]._type.older_value(value)
            if older is None:
                raise exception.EnumValueTooNew(
                    objname=cls.obj_name(), field=name, value=value,
                    version=target_version)
            primitive[name] = older


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
