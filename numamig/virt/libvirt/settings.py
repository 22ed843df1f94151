"""The settings one LibvirtDriver runs with, frozen and explicit.

Several compute agents (each with its own host name, URI, capabilities
file and CPU sets) share one process in the embedded tier and in tests,
while oslo.config's CONF is global. A driver therefore takes these values
once, at construction, and never reads CONF afterwards; ``from_conf`` is
the one place that maps options to settings.
"""

import dataclasses

from numamig import cpuspec
from numamig import exception
from numamig.convergence import policy as convergence
from numamig.convergence import recovery
from numamig.numa import pci
from numamig.virt.libvirt import guard

VIRT_TYPES = ('kvm', 'qemu')
TIMEOUT_ACTIONS = ('abort', 'force_complete')
COMPRESSION_METHODS = ('none', 'zlib', 'zstd')


@dataclasses.dataclass(frozen=True)
class ReservedPages:
    """``count`` pages of ``size_kb`` on host ``node`` no guest may take."""

    node: int
    size_kb: int
    count: int


@dataclasses.dataclass(frozen=True)
class MigrationSettings:
    """How this host live-migrates guests away (the [libvirt] knobs).

    No defaults here: ``migration_from_conf`` fills every field from the
    options, where the defaults live."""

    scheme: str
    inbound_addr: str | None
    libvirtd_port: int | None
    downtime_ms: int
    downtime_steps: int
    downtime_delay_s: float
    completion_timeout_s: float
    timeout_action: str
    bandwidth_mib: int
    permit_post_copy: bool
    permit_auto_converge: bool
    native_tls: bool
    parallel_connections: int
    progress_interval_s: float
    # Convergence policies: the default's name, the operator's lines
    # (numamig.convergence.policy format) and whether they only log.
    policy: str
    policies: tuple
    observe_only: bool
    # The modelled pre-copy of test-driver hosts (MiB/s, MiB; bandwidth
    # 0: none). See numamig.convergence.emulated.
    emulated_bandwidth_mib: int
    emulated_dirty_rate_mib: int
    emulated_working_set_mib: int
    # Seconds a dirty-rate measurement may take (pre-flight prediction).
    dirty_rate_deadline_s: float
    # Compression of the parallel (multifd) stream: none, zlib or zstd.
    compression: str
    # pCPUs QEMU's migration threads are pinned to (None: left where
    # they start, on the emulator threads' pCPUs).
    thread_cpus: frozenset | None
    # Resuming a post-copy migration whose connection dropped.
    postcopy_recovery: recovery.Settings

    def __post_init__(self):
        try:
            known = convergence.catalog(self.policies)
        except exception.InvalidMigrationPolicy as exc:
            raise _invalid('[libvirt] live_migration_policies', str(exc))
        if self.policy not in known:
            raise _invalid('[libvirt] live_migration_policy',
                           f"{self.policy!r} is not a known policy "
                           f"({', '.join(sorted(known))})")
        if self.compression not in COMPRESSION_METHODS:
            raise _invalid('[libvirt] live_migration_compression',
                           f"{self.compression!r} is not one of "
                           f"{', '.join(COMPRESSION_METHODS)}")
        if self.compression != 'none' and self.parallel_connections < 2:
            raise _invalid('[libvirt] live_migration_compression',
                           f"{self.compression} compresses parallel "
                           f"connections only: set "
                           f"live_migration_parallel_connections to 2 or "
                           f"more")
        if self.timeout_action not in TIMEOUT_ACTIONS:
            raise _invalid('live_migration_timeout_action',
                           f"{self.timeout_action!r} is not one of "
                           f"{', '.join(TIMEOUT_ACTIONS)}")
        for name in ('downtime_ms', 'downtime_steps', 'bandwidth_mib',
                     'parallel_connections', 'completion_timeout_s',
                     'emulated_bandwidth_mib', 'emulated_dirty_rate_mib',
                     'emulated_working_set_mib'):
            if getattr(self, name) < 0:
                raise _invalid(name, f"must not be negative, got "
                                     f"{getattr(self, name)}")
        if self.progress_interval_s <= 0:
            raise _invalid('live_migration_progress_interval',
                           f"must be positive, got "
                           f"{self.progress_interval_s}")

    def catalog(self):
        """{name: Policy} of the shipped and configured policies."""
        return convergence.catalog(self.policies)

    def select_policy(self, requested=None, flavor=None, image=None):
        """The convergence policy of one migration and where its name
        came from; see numamig.convergence.policy.select.

        :raises UnknownMigrationPolicy:
        """
        return convergence.select(self.catalog(), requested, flavor, image,
                                  self.policy)


@dataclasses.dataclass(frozen=True)
class LibvirtSettings:
    """Everything a LibvirtDriver needs to know about its host.

    ``cpu_dedicated_set`` / ``cpu_shared_set`` are frozensets of pCPU ids,
    or None when the option is unset (see host_topology for what unset
    means). ``reserved_huge_pages`` is a tuple of ReservedPages. No
    defaults here: ``from_conf`` fills every field from the options.
    """

    host: str
    uri: str
    virt_type: str
    capabilities_file: str | None
    cpu_dedicated_set: frozenset | None
    cpu_shared_set: frozenset | None
    reserved_host_memory_mb: int
    reserved_huge_pages: tuple
    realtime_priority: int
    migration: MigrationSettings
    # The destination-side migration guard (guard.GuardSettings), None:
    # not installed.
    migration_guard: guard.GuardSettings | None
    # The [pci] device_spec allow-list (numa.pci.parse_device_spec); ():
    # the host offers no PCI device.
    pci_device_spec: tuple

    def __post_init__(self):
        if self.virt_type not in VIRT_TYPES:
            raise _invalid('[libvirt] virt_type',
                           f"{self.virt_type!r} is not one of "
                           f"{', '.join(VIRT_TYPES)}")
        if self.reserved_host_memory_mb < 0:
            raise _invalid('[compute] reserved_host_memory_mb',
                           f"must not be negative, got "
                           f"{self.reserved_host_memory_mb}")
        if not 1 <= self.realtime_priority <= 99:
            raise _invalid('[libvirt] realtime_scheduler_priority',
                           f"must be within 1-99, got "
                           f"{self.realtime_priority}")
        both = (self.cpu_dedicated_set or set()) & (
            self.cpu_shared_set or set())
        if both:
            raise _invalid(
                '[compute] cpu_dedicated_set',
                f"CPUs {cpuspec.format_cpu_spec(both)} are also in "
                f"cpu_shared_set; a CPU is either dedicated or shared")

    @property
    def is_test_driver(self):
        """True for the libvirt test driver (the embedded tier), in this
        process (``test:///...``) or served by a libvirtd
        (``test+unix:///default?socket=...``), whose guests outlive their
        agent's process (the fault suite kills agents)."""
        driver_name = self.uri.split(':', 1)[0].split('+', 1)[0]
        return driver_name == 'test'

    @classmethod
    def from_conf(cls, conf):
        """Build settings from a parsed oslo.config CONF (the daemon's)."""
        compute, lv = conf.compute, conf.libvirt
        return cls(
            host=conf.host,
            uri=lv.connection_uri,
            virt_type=lv.virt_type,
            capabilities_file=lv.capabilities_file,
            cpu_dedicated_set=_cpu_set(compute.cpu_dedicated_set),
            cpu_shared_set=_cpu_set(compute.cpu_shared_set),
            reserved_host_memory_mb=compute.reserved_host_memory_mb,
            reserved_huge_pages=tuple(
                ReservedPages(node=r['node'], size_kb=r['size'],
                              count=r['count'])
                for r in compute.reserved_huge_pages or ()),
            realtime_priority=lv.realtime_scheduler_priority,
            migration=migration_from_conf(lv),
            migration_guard=_guard_from_conf(lv),
            pci_device_spec=pci.parse_device_spec(conf.pci.device_spec))


def _guard_from_conf(lv):
    if not lv.migration_guard:
        return None
    return guard_from_conf(lv)


def guard_from_conf(lv):
    """The GuardSettings of the [libvirt] group ``lv``, whether or not
    ``migration_guard`` turns the guard on."""
    return guard.GuardSettings(
        hook_path=lv.migration_guard_hook_path,
        claims_file=lv.migration_guard_claims_file,
        max_age_s=lv.migration_guard_claims_max_age,
        when_unknown=lv.migration_guard_when_unknown,
        log_file=lv.migration_guard_log_file,
        deadline_s=lv.migration_guard_deadline)


def migration_from_conf(lv):
    """The MigrationSettings of the [libvirt] group ``lv``."""
    return MigrationSettings(
        scheme=lv.live_migration_scheme,
        inbound_addr=lv.live_migration_inbound_addr,
        libvirtd_port=lv.live_migration_libvirtd_port,
        downtime_ms=lv.live_migration_downtime,
        downtime_steps=lv.live_migration_downtime_steps,
        downtime_delay_s=lv.live_migration_downtime_delay,
        completion_timeout_s=lv.live_migration_completion_timeout,
        timeout_action=lv.live_migration_timeout_action,
        bandwidth_mib=lv.live_migration_bandwidth,
        permit_post_copy=lv.live_migration_permit_post_copy,
        permit_auto_converge=lv.live_migration_permit_auto_converge,
        native_tls=lv.live_migration_with_native_tls,
        parallel_connections=lv.live_migration_parallel_connections,
        progress_interval_s=lv.live_migration_progress_interval,
        policy=lv.live_migration_policy,
        policies=tuple(lv.live_migration_policies),
        observe_only=lv.live_migration_policy_observe_only,
        emulated_bandwidth_mib=lv.emulated_migration_bandwidth,
        emulated_dirty_rate_mib=lv.emulated_migration_dirty_rate,
        emulated_working_set_mib=lv.emulated_migration_working_set,
        dirty_rate_deadline_s=lv.live_migration_dirty_rate_deadline,
        compression=lv.live_migration_compression,
        thread_cpus=_cpu_set(lv.migration_thread_cpus),
        postcopy_recovery=recovery.Settings(
            timeout_s=lv.live_migration_postcopy_recovery_timeout,
            max_attempts=lv.live_migration_postcopy_recovery_attempts,
            attempt_timeout_s=(
                lv.live_migration_postcopy_resume_attempt_timeout)))


def _cpu_set(spec):
    if spec is None:
        return None
    return frozenset(cpuspec.parse_cpu_spec(spec))


def _invalid(option, reason):
    return exception.InvalidConfiguration(option=option, reason=reason)
