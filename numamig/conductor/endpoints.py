"""What a conductor serves: answers in object versions each caller reads.

Conductor API 1.2 (release 2) answers with today's Migration (1.1, with
the run's result, the admission queue's fields and the rest release 2
added). A caller of an older API (a service of release 1, or one capped
by ``[upgrade_levels] conductor``) cannot read it, and says which
objects it reads only through the version of its message. The RPC
dispatcher hands a message to the first endpoint whose version accepts
it, so one endpoint per older set of objects comes first, oldest first,
each backporting every answer to the objects of its version (1.0-1.1:
release 1's, Migration 1.0); messages at 1.2 pass it and reach the
manager itself.
"""

import functools

import oslo_messaging as messaging
from oslo_utils import versionutils

from numamig import rpc
from numamig.conductor import rpcapi
from numamig.objects import base as obj_base

_tuple = versionutils.convert_version_to_tuple


class OlderAPIEndpoint:
    """The manager's endpoints as an older conductor API served them."""

    # What the manager declares (wire.args) is all it dispatches to.
    wire_declared = True

    def __init__(self, manager, api_version):
        self._manager = manager
        self._objects = rpcapi.OBJECT_VERSIONS[api_version]
        self.target = messaging.Target(version=api_version)

    def __getattr__(self, name):
        if name.startswith('_'):
            raise AttributeError(name)
        method = getattr(self._manager, name)
        if not callable(method):
            raise AttributeError(name)

        @functools.wraps(method)
        def answer(ctxt, **kwargs):
            return backported(method(ctxt, **kwargs), self._objects)
        return answer


def for_api_version(manager, api_version=None):
    """The endpoints of a conductor serving up to ``api_version``.

    :param api_version: the newest API the conductor serves (that of the
        release it runs as); None: this release's.
    """
    newest = rpcapi.ConductorAPI.VERSION
    served = _tuple(api_version or newest)
    versions = sorted((v for v in rpcapi.OBJECT_VERSIONS
                       if _tuple(v) <= served), key=_tuple)
    endpoints = []
    for version, after in zip(versions, versions[1:] + [None], strict=True):
        if after is not None and \
                rpcapi.OBJECT_VERSIONS[after] == \
                rpcapi.OBJECT_VERSIONS[version]:
            continue  # the next endpoint answers it in the same objects
        if after is None and version == newest:
            endpoints.append(manager)
        else:
            endpoints.append(OlderAPIEndpoint(manager, version))
    return endpoints


def backported(value, object_versions):
    """``value`` with every object in it at most at ``object_versions``.

    Lists and dict values are walked; anything else is returned as is.
    """
    if isinstance(value, obj_base.NumamigObject):
        # Through a primitive even at the same version: its children may
        # be newer than the caller reads.
        target = min(object_versions.get(value.obj_name(), value.VERSION),
                     value.VERSION, key=_tuple)
        return type(value).obj_from_primitive(
            rpc.primitive_for(value, target, object_versions))
    if isinstance(value, (list, tuple)):
        return type(value)(backported(v, object_versions) for v in value)
    if isinstance(value, dict):
        return {k: backported(v, object_versions) for k, v in value.items()}
    return value
