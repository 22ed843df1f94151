"""Exceptions numamig raises, and the one base class that formats them.

Every message names the thing, the value and the limit, so that an operator
reading a log line or a CLI error knows what to change. The tree::

    NumamigException
    +-- Invalid                         bad input; nothing was changed
    |   +-- ObjectValidationError       a versioned object holds nonsense
    |   +-- EnumValueTooNew             a value an older peer cannot parse
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


def _log():
    # oslo.log is imported when first needed (a format error): the
    # libvirt migration guard imports this module inside libvirtd's
    # incoming migration, and oslo.log alone costs ~100 ms to import.
    from oslo_log import log as logging
    return logging.getLogger(__name__)


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
                _log().exception("Cannot format %s with %s",
                              type(self).__name__, kwargs)
                message = self.msg_fmt
        self.message = message
        # oslo.messaging sends ``kwargs`` in the JSON of a remote error:
        # a value JSON cannot carry (a timedelta, a set) would lose the
        # whole reply and leave the caller waiting for its timeout.
        self.kwargs = {key: _wire_safe(value)
                       for key, value in kwargs.items()}
        super().__init__(message)

    def __str__(self):
        return self.message


def one_line(text):
    """A driver's message on one line.

    With a multi-host URL libpq tells of every host it tried, each on
    lines of its own with a hint below (found by the failover fault,
    tests/functional/faults/test_failover.py); an operator's error is one
    line wherever it is shown (the ORM's path, numamig.db.api, and the
    commands' direct reads, numamig.db.direct), each host's part kept and
    the repeats dropped.
    """
    parts = []
    for line in str(text).splitlines():
        line = line.strip()
        if line and line not in parts:
            parts.append(line)
    return '; '.join(parts)


def brief(exc):
    """An error's own message, without the traceback a peer appended.

    oslo.messaging rebuilds an error raised on the other side of an RPC
    call with that side's whole traceback after its message, in its str
    (a ``Name_Remote`` class, or RemoteError for errors it cannot
    rebuild). An operator's terminal, a migration record or the log of
    an expected refusal needs the message alone.
    """
    if type(exc).__name__.endswith('_Remote'):
        text = str(exc).split('\n', 1)[0]
    elif hasattr(exc, 'exc_type') and hasattr(exc, 'value'):
        text = f"{exc.exc_type}: {exc.value}"  # oslo.messaging RemoteError
    else:
        text = str(exc)
    return text.strip() or type(exc).__name__


# What oslo.messaging puts between a peer's message and its traceback.
_REMOTE_TRACEBACK = '\nTraceback (most recent call last):'


def keep_remote_message(exc):
    """Make an error a peer raised say its message alone, in place.

    oslo.messaging appends the peer's whole traceback to the ``str`` of
    the error it rebuilds (numamig.exception.brief). Every operator
    message, record and log line that names such an error then carries
    dozens of lines of another process's stack: a migration's ``error``,
    a memory change's refusal, ``instance show``'s comparison. The RPC
    clients (numamig.rpc) call this on every error a call raises, so
    that its ``str`` is what the peer said; the traceback stays in
    ``remote_traceback`` (and in the peer's log, for an unexpected
    error). Idempotent; a local error is left as it is.

    :returns: ``exc``.
    """
    if getattr(exc, 'remote_traceback', None) is not None:
        return exc
    if hasattr(exc, 'exc_type') and hasattr(exc, 'value') and \
            hasattr(exc, 'traceback'):
        # oslo.messaging's RemoteError: a peer error it cannot rebuild.
        trace = exc.traceback
        exc.remote_traceback = trace if isinstance(trace, str) else \
            ''.join(trace or ())
        exc.msg = f"{exc.exc_type}: {exc.value}"
        exc.args = (exc.msg,)
        return exc
    if type(exc).__name__.endswith('_Remote'):
        # A class oslo.messaging made for this one error: its __str__
        # returns the message and the traceback.
        message, trace = _split_remote(str(exc))
        type(exc).__str__ = lambda self: message
        exc.remote_traceback = trace
    elif exc.args and isinstance(exc.args[0], str) and \
            _REMOTE_TRACEBACK in exc.args[0]:
        # A builtin error (ValueError...): rebuilt with the traceback in
        # its first argument.
        message, trace = _split_remote(exc.args[0])
        exc.args = (message,) + exc.args[1:]
        exc.remote_traceback = trace
    return exc


def _split_remote(text):
    message, found, trace = text.partition(_REMOTE_TRACEBACK)
    if not found:
        return text.rstrip('\n'), ''
    return message, found.lstrip('\n') + trace


def _wire_safe(value):
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


# ---- common ---------------------------------------------------------------

class Invalid(NumamigException):
    msg_fmt = "Invalid input: %(reason)s"
    code = 400


class ObjectValidationError(Invalid):
    msg_fmt = "Invalid %(objname)s: %(reason)s"


class EnumValueTooNew(Invalid):
    """Raised when an object to send holds an enum value the receiver's
    version of it cannot parse and that has no older equivalent."""

    msg_fmt = ("%(objname)s.%(field)s is %(value)r, which a peer reading "
               "%(objname)s %(version)s cannot parse and which has no older "
               "equivalent: not sent. Upgrade that peer, or use a value it "
               "knows")


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


class DomainNotFound(InstanceNotFound):
    """The instance is recorded on a host whose hypervisor has no domain
    for it: not an unknown instance. A libvirt test-driver host, whose
    domains live in its agent's memory, says so after every restart of
    its agent."""

    msg_fmt = ("Instance %(instance_uuid)s is recorded on %(host)s, but "
               "the hypervisor of %(host)s has no domain for it.")


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


class InvalidNUMASpec(InvalidNUMARequest):
    """One flavor extra spec or image property has an unusable value."""
    msg_fmt = "Invalid NUMA request: %(key)s=%(value)r: %(reason)s"


class InvalidMemoryChange(Invalid):
    """A virtio-mem memory change that cannot be made as asked."""
    msg_fmt = "Memory change refused: %(reason)s"


class HostInUse(Invalid):
    """A host record an operator asked to delete is still in use."""
    msg_fmt = "Compute host %(host)s cannot be deleted: %(reason)s"
    code = 409


class BrokerUnreachable(NumamigException):
    """A command could not reach the message broker in its bound."""
    msg_fmt = ("Cannot reach the message broker %(url)s after %(attempts)s "
               "attempts: %(reason)s; check [DEFAULT] transport_url and "
               "that the broker runs")


class ConductorUnreachable(NumamigException):
    """No conductor answered a command's ping: nothing was asked of it."""
    msg_fmt = ("No conductor answered on topic %(topic)s of %(url)s within "
               "%(timeout)s s ([DEFAULT] cli_conductor_timeout); nothing was "
               "asked of it. Is numamig-conductor running (its log, "
               "'systemctl status numamig-conductor'), and are [DEFAULT] "
               "transport_url and control_exchange the ones it uses?")


class BrokerRefused(BrokerUnreachable):
    """The message broker answered but refused this client's login
    (TLS handshake, certificate, credentials or vhost)."""
    msg_fmt = "The message broker %(url)s refused this client: %(reason)s"


class UnknownNUMASpec(InvalidNUMARequest):
    """A flavor key of the hw: namespace (or an image property hw_*)
    numamig does not read: most often a typo that would leave the guest
    unpinned."""
    msg_fmt = ("Unknown %(where)s %(key)s%(hint)s: numamig does not read "
               "it; a key that another service reads goes in [DEFAULT] "
               "foreign_numa_specs")


class NUMASpecConflict(InvalidNUMARequest):
    """Two specs (flavor, image or both) contradict each other."""
    msg_fmt = ("Invalid NUMA request: %(key)s=%(value)r conflicts with "
               "%(other_key)s=%(other_value)r: %(reason)s")


class ImageSpecForbidden(NUMASpecConflict):
    """An image property asks for more than the flavor allows."""
    msg_fmt = ("Invalid NUMA request: image property %(key)s=%(value)r is "
               "not allowed by flavor %(other_key)s=%(other_value)r: "
               "%(reason)s")


class InvalidNUMASplit(InvalidNUMARequest):
    """The guest's vCPUs or memory cannot be split over its NUMA nodes."""
    msg_fmt = "Invalid NUMA request: %(keys)s: %(reason)s"


class PageSizeMemoryMismatch(InvalidNUMARequest):
    """A guest cell's memory is not a whole number of its pages."""
    msg_fmt = ("Invalid NUMA request: guest cell %(cell)s has %(memory_mb)s "
               "MiB, not a multiple of the %(pagesize_kb)s KiB page size "
               "(%(key)s)")


class InvalidNUMAJSON(Invalid):
    """A host topology or request in the JSON formats of numa/hostjson."""
    msg_fmt = "Invalid %(what)s JSON at %(where)s: %(reason)s"


class InvalidFitParameter(Invalid):
    """numa.fit was called with a strategy or page size it cannot use."""
    msg_fmt = "Invalid NUMA fit parameter %(name)s=%(value)r: %(reason)s"


class UsageConflict(Invalid):
    """Applying or releasing a placed topology clashes with host usage."""
    msg_fmt = "Host cell %(cell)s usage conflict: %(reason)s"


class UnknownHostCell(UsageConflict):
    msg_fmt = ("Host cell %(cell)s usage conflict: the host has no such "
               "cell (guest cell %(guest_cell)s is placed on it)")


class CPUAlreadyPinned(UsageConflict):
    msg_fmt = ("Host cell %(cell)s usage conflict: pCPUs %(pcpus)s are "
               "already pinned")


class CPUNotDedicated(UsageConflict):
    msg_fmt = ("Host cell %(cell)s usage conflict: pCPUs %(pcpus)s are not "
               "in its dedicated set %(dedicated)s")


class PagesExhausted(UsageConflict):
    msg_fmt = ("Host cell %(cell)s usage conflict: %(needed)s pages of "
               "%(size_kb)s KiB needed, %(free)s free")


class UsageNotHeld(UsageConflict):
    """Releasing usage the host cell does not record as taken."""
    msg_fmt = ("Host cell %(cell)s usage conflict: cannot release "
               "%(what)s: %(reason)s")


# ---- virt/ (hypervisor) ----------------------------------------------------

class DomainXMLError(Invalid):
    msg_fmt = "Domain XML of %(domain)s: %(reason)s"


class HypervisorError(NumamigException):
    msg_fmt = "Hypervisor on %(host)s failed to %(action)s: %(reason)s"


class DeviceDetachFailed(HypervisorError):
    """A passed-through device could not be unplugged before a migration
    (libvirt refused, or the guest did not release it in time)."""
    msg_fmt = ("Host %(host)s could not unplug PCI device %(address)s from "
               "instance %(instance)s before its migration: %(reason)s")


class DeviceAttachFailed(HypervisorError):
    """A device could not be plugged into a guest (a destination's claimed
    one after the migration, or a source's back after a failed one)."""
    msg_fmt = ("Host %(host)s could not plug PCI device %(address)s into "
               "instance %(instance)s: %(reason)s")


class CapabilitiesError(Invalid):
    """A host's capabilities XML cannot describe a NUMA host."""
    msg_fmt = "Capabilities of host %(host)s (%(source)s): %(reason)s"


class MigrationNotSupported(HypervisorError):
    """The hypervisor cannot do what the caller asked of a migration."""
    msg_fmt = ("Host %(host)s (%(uri)s) cannot %(action)s: %(reason)s")


class LiveMigrationFailed(HypervisorError):
    """libvirt ended a live migration with an error; guest stays put."""
    msg_fmt = ("Live migration of %(instance)s from %(host)s to %(dest)s "
               "failed (libvirt error %(code)s): %(reason)s")


class NUMANodeUnavailable(LiveMigrationFailed):
    msg_fmt = ("Live migration of %(instance)s from %(host)s to %(dest)s "
               "failed: the destination XML names a NUMA node %(dest)s "
               "lacks (libvirt error %(code)s: %(reason)s)")


class CPUAffinityFailed(LiveMigrationFailed):
    msg_fmt = ("Live migration of %(instance)s from %(host)s to %(dest)s "
               "failed: %(dest)s cannot pin the guest to the pCPUs of the "
               "destination XML (libvirt error %(code)s: %(reason)s)")


class HugepagesUnavailable(LiveMigrationFailed):
    msg_fmt = ("Live migration of %(instance)s from %(host)s to %(dest)s "
               "failed: %(dest)s cannot back the guest with huge pages "
               "(libvirt error %(code)s: %(reason)s)")


class MigrationPeerUnreachable(LiveMigrationFailed):
    msg_fmt = ("Live migration of %(instance)s from %(host)s to %(dest)s "
               "failed: %(host)s cannot reach %(dest)s's libvirtd "
               "(libvirt error %(code)s: %(reason)s)")


class MigrationAborted(LiveMigrationFailed):
    msg_fmt = ("Live migration of %(instance)s from %(host)s to %(dest)s "
               "was aborted (%(reason)s); the guest stays on %(host)s")


class PostCopyPaused(HypervisorError):
    """A post-copy migration lost its connection and numamig could not
    resume it: the guest runs on neither host. Nothing may be rolled
    back (the destination holds the guest's CPU state and every page
    sent, the source the pages not yet sent); the migration waits
    ``postcopy-paused`` with both hosts' claims kept."""
    msg_fmt = ("Post-copy migration of %(instance)s from %(host)s to "
               "%(dest)s lost its connection and was not resumed "
               "(%(reason)s): the guest is PAUSED, its CPU state and the "
               "pages sent on %(dest)s, the rest of its memory on "
               "%(host)s; it runs on neither. Both hosts keep its "
               "placement; once the link works, resume it with "
               "'numamig-manage migration resume MIGRATION'")


class NoRunningMigration(HypervisorError):
    msg_fmt = ("Instance %(instance)s on %(host)s has no running migration "
               "to %(action)s")


# ---- db/ (persistence) ----------------------------------------------------

class DatabaseError(NumamigException):
    """The database cannot be used at all (unreachable, wrong schema)."""
    msg_fmt = "Database %(url)s: %(reason)s"


class DatabaseNotSynced(DatabaseError):
    msg_fmt = ("Database %(url)s has schema revision %(current)s but this "
               "numamig needs %(head)s: run 'numamig-manage db sync'.")


class UnknownSchemaRevision(Invalid):
    msg_fmt = ("Unknown database schema revision %(revision)r; known "
               "revisions: %(known)s")


class StoredRecordInvalid(NumamigException):
    """A row holds something that no longer loads as a valid object."""
    msg_fmt = ("Stored %(table)s record %(key)s cannot be loaded from "
               "column %(column)s: %(reason)s")


class RecordExists(Invalid):
    msg_fmt = "%(what)s %(key)s already exists."
    code = 409


class ConcurrentUpdate(NumamigException):
    """Another worker changed a record between our read and our write."""
    msg_fmt = ("%(what)s %(key)s was changed by another worker: expected "
               "revision %(expected)s, found %(actual)s. Re-read it and "
               "retry.")
    code = 409


class MigrationContextConflict(ConcurrentUpdate):
    """A claim (migration context) is held by another migration."""
    msg_fmt = ("Instance %(instance_uuid)s: its migration context is held "
               "by migration %(holder)s, expected %(expected)s; the claim "
               "of migration %(migration_uuid)s was not recorded.")


class InvalidStatusTransition(Invalid):
    """A migration status change that ALLOWED_TRANSITIONS does not allow."""
    msg_fmt = ("Migration %(migration_uuid)s cannot go from status "
               "%(current)s to %(requested)s (allowed from %(current)s: "
               "%(allowed)s).")
    code = 409


class MigrationNotInProgress(Invalid):
    msg_fmt = ("Migration %(migration_uuid)s is %(status)s, no longer in "
               "progress: cannot %(action)s.")
    code = 409


class InvalidMigrationResult(Invalid):
    """A run's result that does not fit the Migration record."""
    msg_fmt = ("Result of migration %(migration_uuid)s not recorded: "
               "%(reason)s")


# ---- scheduler/ (destination choice) ---------------------------------------

class InvalidHostReport(Invalid):
    """A compute node report the scheduler's host cache cannot use."""
    msg_fmt = "Report of compute host %(host)s rejected: %(reason)s"


class ReservationConflict(Invalid):
    """A placement no longer fits what the host cache holds free."""
    msg_fmt = ("Cannot reserve instance %(instance_uuid)s on host "
               "%(host)s: %(reason)s")
    code = 409


class UnknownSchedulingStrategy(Invalid):
    msg_fmt = ("Unknown scheduling strategy %(strategy)r; choose one of "
               "%(choices)s.")


# ---- compute/ and conductor/ (migration flow) ------------------------------

class MigrationError(NumamigException):
    msg_fmt = "Migration failed: %(reason)s"


class AgentDidNotAnswer(MigrationError):
    """A compute agent sent no answer within the call's deadline: it
    stopped or restarted holding the request (which died with it), or
    is stuck. Raised as numamig.compute.rpcapi.AgentCallTimeout, which is
    also oslo.messaging's MessagingTimeout."""
    msg_fmt = ("Compute host %(host)s did not answer %(method)s within "
               "%(timeout)s s (%(option)s): its agent stopped or restarted "
               "while it held the request, or is stuck")


class CPUPowerError(NumamigException):
    """A pCPU could not be powered up or down (numamig.compute.cpu_power):
    its sysfs control is missing, refused the write or lacks the
    governor asked for."""
    msg_fmt = "%(reason)s"


class InvalidRPCArgument(Invalid):
    """A message whose argument does not fit what the method declares
    (numamig.wire); refused before the method runs."""
    msg_fmt = "%(method)s: argument %(argument)s %(reason)s"


class GuestNotArrived(MigrationError):
    """The destination was asked to adopt a guest its hypervisor lacks.

    Recording the claim as the guest's placement would record the
    migration ``completed`` on a host where the guest does not run.
    """
    msg_fmt = ("Instance %(instance_uuid)s does not run on destination "
               "%(host)s: migration %(migration_uuid)s did not bring it "
               "there")


class MigrationPreCheckError(MigrationError):
    """A destination refused the migration; the conductor tries another."""
    msg_fmt = "Migration pre-check error: %(reason)s"


class BuildRefused(MigrationPreCheckError):
    """A host refused to build a new guest; the conductor tries another,
    as after a destination's refusal. The reason names the host."""
    msg_fmt = "%(reason)s"


class DestinationBusy(MigrationPreCheckError):
    """The destination has as many incoming migrations as allowed."""
    msg_fmt = ("Host %(host)s already has %(count)s incoming migrations in "
               "flight ([conductor] max_incoming_migrations_per_host is "
               "%(limit)s).")


class DestinationsBusy(MigrationPreCheckError):
    """Every destination left to try filled its incoming slots after the
    choice; the migration goes back to the queue rather than failing."""
    msg_fmt = ("Every destination that could take instance "
               "%(instance_uuid)s reached its incoming limit since it was "
               "chosen (%(hosts)s); the migration waits in the queue.")


class MigrationQueueFull(Invalid):
    """The admission queue holds as many migrations as allowed."""
    msg_fmt = ("Migration of instance %(instance_uuid)s refused: "
               "%(count)s migrations already wait for admission "
               "([conductor] max_queued_migrations is %(limit)s); retry "
               "once some have started, or abort queued ones.")
    code = 409


class NoValidHost(MigrationError):
    msg_fmt = "No valid host was found: %(reason)s"


class ComputeHostDown(MigrationError):
    msg_fmt = ("Compute host %(host)s is down: its last report is "
               "%(age)s s old ([DEFAULT] service_down_time is %(limit)s s); "
               "is its numamig-compute running?")


class NUMALiveMigrationUnsupported(MigrationError):
    """Old compute hosts would copy a NUMA guest's pins verbatim."""
    msg_fmt = ("Instance %(instance_uuid)s has a NUMA topology, and compute "
               "hosts %(hosts)s run a release older than NUMA-aware live "
               "migration (service version below %(version)s): its pins "
               "and page nodes would be copied verbatim and could overlap "
               "other guests'. Upgrade those hosts first, or set "
               "[workarounds] enable_numa_live_migration = true to take "
               "the old path anyway.")
    code = 409


class InvalidDestination(MigrationError):
    """A requested destination cannot take the guest by definition."""
    msg_fmt = ("Host %(host)s cannot be the destination of instance "
               "%(instance_uuid)s: %(reason)s")
    code = 400


class InstanceBuildError(NumamigException):
    """No host could create a requested instance."""
    msg_fmt = ("Instance %(instance_uuid)s could not be created: "
               "%(reason)s")


class MigrationNotAbortable(Invalid):
    msg_fmt = ("Migration %(migration_uuid)s is %(status)s: %(reason)s")
    code = 409


class MigrationNotResumable(Invalid):
    """A resume asked of a migration that is not postcopy-paused, or of
    a host that cannot resume it; nothing changed."""
    msg_fmt = ("Migration %(migration_uuid)s (%(status)s) cannot be "
               "resumed: %(reason)s")
    code = 409


class InstanceBusy(Invalid):
    """Raised when an instance cannot be changed while something runs."""
    msg_fmt = ("Instance %(instance_uuid)s cannot be %(action)s now: "
               "%(reason)s")
    code = 409


class DrainRefused(MigrationError):
    """A drain that cannot empty its host, refused before anything
    moved (the host's maintenance state unchanged)."""
    msg_fmt = "Host %(host)s cannot be drained: %(reason)s"


class DefragmentRefused(MigrationError):
    """A defragmentation with no plan within its limits, refused before
    anything moved."""
    msg_fmt = "No room can be made for the guest: %(reason)s"


class DrainNotFound(NotFound):
    msg_fmt = "No drain of %(what)s is recorded."


class DrainInProgress(Invalid):
    msg_fmt = ("Host %(host)s is being drained already by drain "
               "%(drain_uuid)s (%(status)s); follow it with "
               "'numamig-manage host drain show %(host)s'")
    code = 409


class UnknownMigrationPolicy(Invalid):
    msg_fmt = ("Unknown live-migration policy %(name)s (%(where)s); known "
               "policies: %(known)s")


class InvalidMigrationPolicy(Invalid):
    msg_fmt = "Invalid live-migration policy %(name)s: %(reason)s"


class MigrationWillNotConverge(Invalid):
    msg_fmt = ("Migration %(migration_uuid)s of %(instance_uuid)s is "
               "predicted not to converge under policy %(policy)s "
               "([conductor] convergence_prediction = refuse): %(reason)s")
