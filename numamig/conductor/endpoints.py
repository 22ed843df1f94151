"""What a conductor serves, on which topic, in which objects.

A conductor of release 2 serves the agents' records API (namespace
``records``) on the agents' topic, and on the conductor topic the
operators' operations API (namespace ``operations``), the records API
again (for a records client given no agents' topic) and release 1's one
API (no namespace, 1.0-1.1), which services of release 1 and clients
capped at release 1 speak. That API's answers are backported to release
1's objects (Migration 1.0 ...): a caller of release 1 says which
objects it reads only through the version of its message. A conductor
running as release 1 (a testing aid) serves release 1's API alone.
"""

import functools

import oslo_messaging as messaging
from oslo_utils import versionutils

from numamig import rpc
from numamig.conductor import api_versions
from numamig.objects import base as obj_base
from numamig.objects import service as service_obj

_tuple = versionutils.convert_version_to_tuple

# Release 1's API: each method and the endpoint of this release serving
# it now (an agent's call, or an operator's).
RELEASE_1_RECORDS = frozenset({
    'report_compute_node', 'compute_node_get_all', 'instance_get',
    'instance_get_all', 'instance_get_claims_on_host',
    'instance_set_placement', 'instance_update', 'migration_get',
    'migration_get_in_progress_by_host', 'migration_set_status',
    'migration_update_progress', 'migration_context_set',
    'migration_context_drop', 'migration_context_apply',
})
RELEASE_1_OPERATIONS = frozenset({
    'ping', 'live_migrate_instance', 'live_migration_dry_run',
    'migration_abort', 'migration_force_complete', 'migration_get_all',
    'instance_create', 'instance_adopt', 'get_domain_xml',
    'instance_delete', 'heal_claims', 'host_domains',
})


class ReleaseOneEndpoint:
    """Release 1's API (no namespace), served by this release's
    endpoints: only its methods, each answer backported to the objects
    of release 1."""

    # What the managers declare (wire.args) is all it dispatches to.
    wire_declared = True

    def __init__(self, manager):
        self._manager = manager
        self._objects = api_versions.OBJECT_VERSIONS[api_versions.RELEASE_1]
        self.target = messaging.Target(
            version=api_versions.RELEASE_1_API.version)

    def __getattr__(self, name):
        if name in RELEASE_1_RECORDS:
            method = getattr(self._manager.records, name)
        elif name in RELEASE_1_OPERATIONS:
            method = getattr(self._manager, name)
        else:
            raise AttributeError(name)

        @functools.wraps(method)
        def answer(ctxt, **kwargs):
            return backported(method(ctxt, **kwargs), self._objects)
        return answer


def served(manager, release):
    """The endpoints a conductor's RPC servers dispatch to.

    :param release: the numamig.releases.Release it runs as.
    :returns: (on the conductor topic, on the agents' topic or None when
        the release has no such topic).
    """
    release_1 = ReleaseOneEndpoint(manager)
    if service_obj.api_version_for(release.service_version,
                                   api_versions.RECORDS.service_key) is None:
        return [release_1], None
    return [release_1, manager, manager.records], [manager.records]


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
