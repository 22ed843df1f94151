"""The migration stream's options, checked against the hypervisor first.

Compression, native TLS and parallel connections are flags and typed
parameters of ``migrateToURI3``; a libvirt too old for one rejects the
call only after the destination has been prepared, or (compression on
parallel connections before 9.4) ignores what it does not know. numamig
checks them when a migration starts, before anything moves, and refuses
in one line naming the option, the version it needs and the version the
host runs.
"""

import libvirt

from numamig import exception

COMPRESSION_METHODS = ('none', 'zlib', 'zstd')
# (what, libvirt version needed as major * 1e6 + minor * 1e3 + micro).
NEEDS = {
    'parallel': ('parallel connections (VIR_MIGRATE_PARALLEL)', 5002000),
    'compression': ('compression of parallel connections (multifd zlib or '
                    'zstd)', 9004000),
    'tls': ('native TLS (VIR_MIGRATE_TLS)', 3002000),
}
# The largest bandwidth libvirt takes, in MiB/s (an unsigned long long of
# bytes per second, given in MiB).
MAX_BANDWIDTH_MIB = (2 ** 64 - 1) >> 20


def check(settings, lib_version, host, uri, bandwidth_mib=None):
    """Refuse a migration whose stream options this libvirt lacks.

    :param settings: the MigrationSettings.
    :param lib_version: ``virConnectGetLibVersion()`` of the source.
    :raises MigrationNotSupported: naming the first option it lacks.
    """
    wanted = []
    if settings.parallel_connections > 1:
        wanted.append(('parallel', '[libvirt] '
                       'live_migration_parallel_connections'))
    if settings.compression != 'none':
        wanted.append(('compression', '[libvirt] '
                       'live_migration_compression'))
    if settings.native_tls:
        wanted.append(('tls', '[libvirt] live_migration_with_native_tls'))
    for key, option in wanted:
        what, needed = NEEDS[key]
        if lib_version < needed:
            raise exception.MigrationNotSupported(
                host=host, uri=uri, action=f"migrate with {option}",
                reason=f"{what} needs libvirt {_version(needed)} or later; "
                       f"this host runs {_version(lib_version)}; nothing "
                       f"was migrated")
    bandwidth = bandwidth_mib or settings.bandwidth_mib
    if not 0 <= bandwidth <= MAX_BANDWIDTH_MIB:
        raise exception.MigrationNotSupported(
            host=host, uri=uri, action=f"migrate at {bandwidth} MiB/s",
            reason=f"the bandwidth must be 0 (unlimited) to "
                   f"{MAX_BANDWIDTH_MIB} MiB/s")


def connections_for(settings, cpus):
    """The parallel connections one migration uses, given ``cpus`` CPUs
    for its threads on the source (0: none chosen, nothing changes).

    Each multifd channel is a thread; more channels than CPUs only makes
    them take turns. So without compression the configured number is cut
    to the CPUs there are, never below 2 (the operator chose parallel
    migration). Compressed channels are left as configured: the operator
    sized them for the compression the link needs.
    """
    configured = settings.parallel_connections
    if configured < 2 or not cpus or settings.compression != 'none':
        return configured
    return max(min(configured, cpus), 2)


def flags_and_params(settings):
    """(flags, params) the stream options add to a migration."""
    if settings.compression == 'none':
        return 0, {}
    return libvirt.VIR_MIGRATE_COMPRESSED, {
        libvirt.VIR_MIGRATE_PARAM_COMPRESSION: settings.compression}


def _version(number):
    return f"{number // 1000000}.{number // 1000 % 1000}.{number % 1000}"
