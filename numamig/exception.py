"""Exceptions numamig raises, and the one base class that formats them.

Every message names the thing, the value and the limit, so that an operator
reading a log line or a CLI error knows what to change. The tree::

    NumamigException
    +-- Invalid                         bad input; nothing was changed
    |   +-- ObjectValidationError       a versioned object holds nonsense
    |   +-- InvalidCPUSpec              a CPU list cannot be parsed
    |   +-- InvalidConfiguration        an option value is unusable
    |   +-- InvalidNUMARequest          flavor/image specs (numa/constraints)
    |   +-- UsageConflict               applying/releasing usage that clashes
    |   +-- DomainXMLError              domain XML shape does not match
    +-- NotFound
    |   +-- HostNotFound / InstanceNotFound / MigrationNotFound
    +-- MigrationError
    |   +-- MigrationPreCheckError      a destination refused (try the next)
    |   +-- NoValidHost                 every candidate refused
    |   +-- ComputeHostDown             source or destination is not up
    +-- HypervisorError                 libvirt said no (virt/libvirt)
    +-- IncompatibleService             a peer is too old for the request

Sections below are owned by the package named in their heading; add new
exceptions to the section of the package that raises them.
"""

import logging

LOG = logging.getLogger(__name__)


class NumamigException(Exception):
    """Base class: formats ``msg_fmt`` with the keyword arguments given.

    A message that does not match its keyword arguments is a programming
    error. Tests set ``FATAL_FORMAT_ERRORS`` so it fails loudly there; in
    production the raw format string is used and the mismatch logged, so
    that the original error is never hidden by a formatting one.
    """

    msg_fmt = "An unknown exception occurred."
    code = 500
    FATAL_FORMAT_ERRORS = False

    def __init__(self, message=None, **kwargs):
        self.kwargs = kwargs
        if not message:
            try:
                message = self.msg_fmt % kwargs
            except (KeyError, TypeError, ValueError):
                if self.FATAL_FORMAT_ERRORS:
                    raise
                LOG.exception("Cannot format %s with %s",
                              type(self).__name__, kwargs)
                message = self.msg_fmt
        self.message = message
        super().__init__(message)

    def __str__(self):
        return self.message


# ---- common ---------------------------------------------------------------

class Invalid(NumamigException):
    msg_fmt = "Invalid input: %(reason)s"
    code = 400


class ObjectValidationError(Invalid):
    msg_fmt = "Invalid %(objname)s: %(reason)s"


class InvalidCPUSpec(Invalid):
    msg_fmt = "Invalid CPU specification %(spec)r: %(reason)s"


class InvalidConfiguration(Invalid):
    msg_fmt = "Invalid configuration option %(option)s: %(reason)s"


class NotFound(NumamigException):
    msg_fmt = "Resource could not be found: %(reason)s"
    code = 404


class HostNotFound(NotFound):
    msg_fmt = "Compute host %(host)s is not known to the conductor."


class InstanceNotFound(NotFound):
    msg_fmt = "Instance %(instance_uuid)s could not be found."


class MigrationNotFound(NotFound):
    msg_fmt = "Migration %(migration_uuid)s could not be found."


class IncompatibleService(NumamigException):
    msg_fmt = ("Service %(service)s on %(host)s is too old for %(what)s: "
               "%(reason)s")
    code = 409


# ---- numa/ (request parsing, fit, usage accounting) ------------------------

class InvalidNUMARequest(Invalid):
    """Flavor extra specs or image properties make no valid NUMA request."""
    msg_fmt = "Invalid NUMA request: %(reason)s"


class UsageConflict(Invalid):
    """Applying or releasing a placed topology clashes with host usage."""
    msg_fmt = "Host cell %(cell)s usage conflict: %(reason)s"


# ---- virt/ (hypervisor) ----------------------------------------------------

class DomainXMLError(Invalid):
    msg_fmt = "Domain XML of %(domain)s: %(reason)s"


class HypervisorError(NumamigException):
    msg_fmt = "Hypervisor on %(host)s failed to %(action)s: %(reason)s"


# ---- compute/ and conductor/ (migration flow) ------------------------------

class MigrationError(NumamigException):
    msg_fmt = "Migration failed: %(reason)s"


class MigrationPreCheckError(MigrationError):
    """A destination refused the migration; the conductor tries another."""
    msg_fmt = "Migration pre-check error: %(reason)s"


class NoValidHost(MigrationError):
    msg_fmt = "No valid host was found: %(reason)s"


class ComputeHostDown(MigrationError):
    msg_fmt = ("Compute host %(host)s is down: its last report is "
               "%(age)s old (service_down_time is %(limit)s s).")
