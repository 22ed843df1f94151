"""Service versions: what each release of a numamig service can do.

A service reports SERVICE_VERSION (compute agents in their reports, the
conductor in its answer to ``ping``); peers compare it with the named
constants below instead of bare numbers, and cap the RPC API versions
they send a service at what its version serves (SERVICE_VERSION_HISTORY,
as nova's ``_determine_version_cap`` does): a peer is never sent a
version it would refuse, so no call waits for a refusal to learn it.
"""

# Version history: service version -> what a service of it serves.
#   1: the release before NUMA-aware live migration (XML copied verbatim)
#   2: NUMA-aware live migration: destination move claims, dst_numa_info,
#      source XML regeneration, claim convergence
# ``compute_rpc`` is the newest compute RPC API version a service of that
# version serves; ``conductor_rpc`` the newest of the conductor's API of
# release 1 (no namespace, frozen since), ``conductor_records_rpc`` and
# ``conductor_operations_rpc`` those of the agents' and the operators'
# APIs (numamig.conductor.api_versions); a key a version lacks is an API
# it does not serve.
SERVICE_VERSION_HISTORY = {
    1: {'description': 'Initial version, before NUMA-aware live migration',
        'compute_rpc': '1.0', 'conductor_rpc': '1.1'},
    2: {'description': 'NUMA-aware live migration; the conductor serves '
                       'one API per audience',
        'compute_rpc': '1.1', 'conductor_rpc': '1.1',
        'conductor_records_rpc': '2.0', 'conductor_operations_rpc': '2.0'},
}
SERVICE_VERSION = max(SERVICE_VERSION_HISTORY)

NUMA_LIVE_MIGRATION_VERSION = 2


def api_version_for(service_version, api):
    """The newest ``api`` (a key of SERVICE_VERSION_HISTORY: 'compute_rpc',
    'conductor_rpc', ...) version a service reporting ``service_version``
    serves.

    A version newer than this release knows (a peer upgraded first) is
    served at least what this release's newest serves; None (unknown,
    or an API that version does not serve) gives None.
    """
    if service_version is None:
        return None
    known = min(service_version, SERVICE_VERSION)
    if known < min(SERVICE_VERSION_HISTORY):
        known = min(SERVICE_VERSION_HISTORY)
    return SERVICE_VERSION_HISTORY[known].get(api)
