"""Service versions: what each release of a numamig service can do.

A service reports SERVICE_VERSION; peers compare it with the named
constants below instead of bare numbers.
"""

# Version history:
#   1: the release before NUMA-aware live migration (XML copied verbatim)
#   2: NUMA-aware live migration: destination move claims, dst_numa_info,
#      source XML regeneration, claim convergence
SERVICE_VERSION_HISTORY = {
    1: 'Initial version, before NUMA-aware live migration',
    2: 'NUMA-aware live migration',
}
SERVICE_VERSION = max(SERVICE_VERSION_HISTORY)

NUMA_LIVE_MIGRATION_VERSION = 2
