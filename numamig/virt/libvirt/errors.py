"""libvirt errors -> numamig exceptions that say what failed where.

libvirt reports most migration failures with generic codes (38, "system
error", covers both a refused connection and a failed CPU affinity), so
the message is part of the classification. Each rule was observed on
libvirt 9.0 with QEMU 7.2 (see docs on real libvirt hosts).
"""

import libvirt

from numamig import exception

# (exception class, error codes or None for any, message fragments)
_MIGRATION_RULES = (
    (exception.MigrationAborted, (libvirt.VIR_ERR_OPERATION_ABORTED,), ()),
    (exception.NUMANodeUnavailable, None, ('NUMA node',)),
    (exception.CPUAffinityFailed, None, ('CPU affinity', 'cpuset')),
    (exception.HugepagesUnavailable, None, ('hugetlbfs', 'hugepage')),
    (exception.MigrationPeerUnreachable,
     (libvirt.VIR_ERR_NO_CONNECT, libvirt.VIR_ERR_RPC,
      libvirt.VIR_ERR_SYSTEM_ERROR, libvirt.VIR_ERR_OPERATION_FAILED),
     ('unable to connect', 'Connection refused', 'No route to host',
      'Name or service not known', 'Cannot recv data',
      'Failed to connect')),
)


def migration_error(exc, instance, host, dest, aborted_reason=None):
    """Return the numamig exception for a failed ``migrateToURI3``.

    :param exc: the libvirt.libvirtError raised.
    :param aborted_reason: why numamig aborted the job itself (a timeout
        or a caller's abort), if it did.
    """
    code = exc.get_error_code()
    message = exc.get_error_message() or str(exc)
    kwargs = {'instance': instance, 'host': host, 'dest': dest,
              'code': code, 'reason': message, 'action': 'live-migrate'}
    if aborted_reason and code == libvirt.VIR_ERR_OPERATION_ABORTED:
        kwargs['reason'] = aborted_reason
    for cls, codes, fragments in _MIGRATION_RULES:
        if codes is not None and code not in codes:
            continue
        if fragments and not any(f in message for f in fragments):
            continue
        return cls(**kwargs)
    return exception.LiveMigrationFailed(**kwargs)


def hypervisor_error(exc, host, action):
    """Return a HypervisorError for any other failed libvirt call."""
    return exception.HypervisorError(
        host=host, action=action,
        reason=f"libvirt error {exc.get_error_code()}: "
               f"{exc.get_error_message() or exc}")


def is_missing_domain(exc):
    return exc.get_error_code() == libvirt.VIR_ERR_NO_DOMAIN


def is_no_job(exc):
    """True when an abort or job query found no job to act on."""
    return exc.get_error_code() in (libvirt.VIR_ERR_OPERATION_INVALID,
                                    libvirt.VIR_ERR_NO_SUPPORT)
