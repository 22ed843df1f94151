"""What each numamig release speaks, so a service can run as an older one.

A rolling upgrade puts services of two releases side by side. To test
that (and only for that), a compute agent or a conductor can be told to
behave as an older release: it then serves and sends only that release's
compute RPC API, sends and accepts only that release's object versions,
and its flows take that release's steps (numamig.compute.flows chooses
them once per agent). This module is the table of releases and the
helpers the services use to honour it.

Every decision a NEW service takes to follow the old path (because a
peer or the conductor cannot take part) is logged through
``log_old_path`` with one of the ``OLD_PATH_*`` items, so operators can
grep a rolling upgrade for them; a service running as an older release
never logs them (that code did not exist then).
"""

import dataclasses

from oslo_log import log as logging
from oslo_utils import versionutils

from numamig import exception
from numamig import rpc
from numamig.compute import rpcapi as compute_rpcapi
from numamig.conductor import api_versions as conductor_api
from numamig.objects import service as service_obj

LOG = logging.getLogger(__name__)

# The compute endpoints of the release before NUMA-aware live migration;
# a message naming any other gets NoSuchMethod from it, as it would have.
_API_1_0_METHODS = frozenset({
    'check_can_live_migrate_destination', 'check_can_live_migrate_source',
    'pre_live_migration', 'live_migration',
    'post_live_migration_at_destination',
    'rollback_live_migration_at_destination', 'live_migration_abort',
    'live_migration_force_complete', 'build_instance',
    'accept_emulated_migration', 'adopt_guests', 'get_domain_xml',
})

# The parts of a migration the spec's upgrade table names, as logged.
OLD_PATH_NUMA_INFO = 'destination NUMA objects and claim'
OLD_PATH_XML = 'source XML'
OLD_PATH_SOURCE_DROP = 'source usage drop'
OLD_PATH_DEST_DROP = 'destination claim drop'
# A destination whose migration guard places the guest of an older
# source claims, but cannot send that source the NUMA objects.
OLD_PATH_NUMA_OBJECTS = 'destination NUMA objects (guarded claim)'


@dataclasses.dataclass(frozen=True)
class Release:
    """One release as its peers see it.

    :param service_version: what its agents report.
    :param compute_api_version: the newest compute RPC API version it
        serves and sends.
    :param compute_methods: its compute endpoints (None: all of today's).
    :param conductor_api_version: the newest conductor RPC API version
        it serves and sends (release 1's one API, or the namespaced
        APIs' version, numamig.conductor.api_versions).
    """

    service_version: int
    compute_api_version: str
    compute_methods: frozenset = None
    conductor_api_version: str = conductor_api.RELEASE_2

    @property
    def is_current(self):
        return self.service_version == service_obj.SERVICE_VERSION

    @property
    def numa_live_migration(self):
        """Whether this release has NUMA-aware live migration at all."""
        return (self.service_version >=
                service_obj.NUMA_LIVE_MIGRATION_VERSION)

    @property
    def object_versions(self):
        """Object name -> newest version this release sends and reads.

        None for the current release: the registry's own versions.
        """
        if self.is_current:
            return None
        return dict(compute_rpcapi.OBJECT_VERSIONS[self.compute_api_version])

    def compute_version_cap(self, configured_cap=None):
        """The cap of this release's compute client.

        An older release cannot send above its own API version, whatever
        ``[upgrade_levels] compute`` says; the current one obeys it.
        """
        return self._capped(self.compute_api_version,
                            compute_rpcapi.VERSION_ALIASES.get(
                                configured_cap, configured_cap))

    def conductor_version_cap(self, configured_cap=None):
        """The cap of this release's conductor client (as above)."""
        return self._capped(self.conductor_api_version,
                            conductor_api.VERSION_ALIASES.get(
                                configured_cap, configured_cap))

    def _capped(self, own_version, configured_cap):
        if self.is_current:
            return configured_cap
        if configured_cap is None:
            return own_version
        return min(configured_cap, own_version,
                   key=versionutils.convert_version_to_tuple)


# Release 1 serves compute API 1.0 and conductor API 1.1; what it must
# never see is release 2's compute 1.1, its conductor namespaces and the
# objects they carry.
RELEASES = {
    1: Release(1, compute_rpcapi.RELEASE_1, _API_1_0_METHODS,
               conductor_api_version=conductor_api.RELEASE_1),
    2: Release(2, compute_rpcapi.RELEASE_2),
}


def for_service_version(service_version):
    """The Release behind a service version.

    :raises InvalidConfiguration: naming the version and the known ones.
    """
    try:
        return RELEASES[service_version]
    except (KeyError, TypeError):
        raise exception.InvalidConfiguration(
            option='[testing] pretend_service_version',
            reason=f"service version {service_version!r} is not one of "
                   f"this release's known versions {sorted(RELEASES)}")


class ReleaseEndpoints:
    """A manager's endpoints as an older release served them.

    The RPC dispatcher sees only that release's methods and API version,
    so newer messages get UnsupportedVersion or NoSuchMethod from it
    exactly as they did from the old code.
    """

    # What the manager declares (wire.args) is all it dispatches to.
    wire_declared = True

    def __init__(self, manager, release):
        self._manager = manager
        self._methods = release.compute_methods
        self.target = type(manager.target)(
            version=release.compute_api_version)

    def __getattr__(self, name):
        if name.startswith('_') or name not in self._methods:
            raise AttributeError(name)
        return getattr(self._manager, name)


def endpoints_for(manager, release):
    """The objects the manager's RPC server dispatches to."""
    if release.compute_methods is None:
        return [manager]
    return [ReleaseEndpoints(manager, release)]


def backported(obj, version):
    """A copy of ``obj`` holding only what ``version`` of it can carry.

    The copy also reports ``version``, so it is sent (or returned) in that
    version: the way to answer a peer in the version it spoke.
    """
    primitive = rpc.primitive_for(obj, version)
    return type(obj).obj_from_primitive(primitive)


def lmd_version_for_api(api_version):
    """The LiveMigrateData version a compute API version carries."""
    return compute_rpcapi.OBJECT_VERSIONS[api_version]['LiveMigrateData']


def log_old_path(host, migration_uuid, item, reason, level=logging.INFO):
    """Record a new service's decision to take the old path for ``item``."""
    LOG.log(level, "%s: migration %s: old path for the %s: %s", host,
            migration_uuid, item, reason)
