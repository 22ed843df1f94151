"""Host filters: which hosts may receive a guest, and why the others not.

Each filter looks at one HostState and the RequestSpec and returns a
Verdict: passed, or refused with a reason an operator can read (the
conductor records the reasons of every refused host in the migration's
error). Filters are cheap checks first and the NUMA fit last, so a down
or excluded host never costs a fit.
"""

import abc
import dataclasses

from numamig import cpumodel
from numamig.numa import fit as numa_fit


@dataclasses.dataclass(frozen=True)
class RequestSpec:
    """What the scheduler is asked to place, and under which rules.

    :param request: the guest's unplaced InstanceNUMATopology, or None
        for a guest without NUMA characteristics.
    :param source_host: the host the guest runs on now (None for a new
        guest); never a destination.
    :param limits: NUMALimits every host cell must respect, or None.
    :param hypervisor_type: destinations must have this type; None
        accepts any.
    :param exclude: host names the caller refuses (e.g. already tried).
    :param disabled: {host name: the operator's reason} of the hosts
        disabled for maintenance (``numamig-manage host disable``).
    :param pagesize_kb: the page size the guest must keep (a migrating
        guest keeps its source's), or None to let the fit choose.
    :param strategy: ``'spread'`` or ``'pack'``, for the host cells.
    :param request_view: ``request`` as numa.views.RequestView, and
    :param limits_view: ``limits`` as numa.views.LimitsView, made once
        for every host's fit (None: the fit reads the objects).
    :param guest_cpu: the guest's numamig.cpumodel.GuestCPU, or None
        (not known: no CPU check).
    """

    request: object
    source_host: str = None
    limits: object = None
    hypervisor_type: str = None
    exclude: frozenset = frozenset()
    disabled: dict = dataclasses.field(default_factory=dict)
    pagesize_kb: int = None
    strategy: str = 'spread'
    request_view: object = None
    limits_view: object = None
    guest_cpu: object = None


@dataclasses.dataclass(frozen=True)
class Verdict:
    """A filter's answer: ``reason`` is None when the host passed.

    ``fit`` carries the NUMA filter's FitResult so the placement it
    found is kept with the candidate.
    """

    reason: str = None
    fit: object = None

    @property
    def passed(self):
        return self.reason is None


PASS = Verdict()


class HostFilter(abc.ABC):
    """Base class: ``check(state, spec)`` returns a Verdict."""

    name = 'HostFilter'

    @abc.abstractmethod
    def check(self, state, spec):
        """Judge one host; subclasses define it."""


class HostUpFilter(HostFilter):
    """Refuse hosts whose last report is older than service_down_time."""

    name = 'HostUp'

    def check(self, state, spec):
        if state.is_up:
            return PASS
        return Verdict(
            f"host is down: its last report is "
            f"{int(state.age.total_seconds())} s old (service_down_time is "
            f"{state.service_down_time} s)")


class HostEnabledFilter(HostFilter):
    """Refuse hosts an operator disabled, giving the operator's reason."""

    name = 'HostEnabled'

    def check(self, state, spec):
        if state.host not in spec.disabled:
            return PASS
        return Verdict(f"disabled for maintenance: "
                       f"{spec.disabled[state.host]}")


class HypervisorTypeFilter(HostFilter):
    """Refuse hosts whose hypervisor type differs from the requested one.

    A guest defined for one hypervisor cannot be live-migrated to
    another (qemu to kvm changes the emulator and the CPU model).
    """

    name = 'HypervisorType'

    def check(self, state, spec):
        wanted = spec.hypervisor_type
        if wanted is None or state.hypervisor_type == wanted:
            return PASS
        return Verdict(f"hypervisor type is {state.hypervisor_type!r}, the "
                       f"guest needs {wanted!r}")


class ExcludedHostFilter(HostFilter):
    """Refuse the source host and the hosts the caller excluded."""

    name = 'ExcludedHost'

    def check(self, state, spec):
        if state.host == spec.source_host:
            return Verdict("it is the source host of the guest")
        if state.host in spec.exclude:
            return Verdict("excluded by the caller")
        return PASS


class CPUModelFilter(HostFilter):
    """Refuse hosts whose CPU cannot run the guest's, naming what it
    lacks (numamig.cpumodel: exact for host-passthrough; for a custom or
    host-model guest it refuses only what is certain, the destination's
    libvirt judges the rest).

    A host that reported no CPU (a release-1 agent) passes: unknown is
    never refused.
    """

    name = 'CPUModel'

    def check(self, state, spec):
        if spec.guest_cpu is None:
            return PASS
        answer = cpumodel.compatibility(spec.guest_cpu,
                                        state.report.get('cpu'))
        if answer.refused:
            return Verdict(f"CPU cannot run the guest's "
                           f"({spec.guest_cpu.describe()}): "
                           f"{answer.reason}")
        return PASS


class NUMATopologyFilter(HostFilter):
    """Refuse hosts whose free NUMA resources cannot hold the guest.

    The fit runs against the host's last reported topology with every
    in-flight reservation applied, with the request's limits and page
    size, and its placement travels with the candidate. It reads the
    views of the host state and the spec where they are given, so that
    a pass over many hosts reads each object once; the placed topology
    is built only for the candidate whose placement is read.
    """

    name = 'NUMATopology'

    def check(self, state, spec):
        if spec.request is None:
            return PASS
        result = numa_fit.fit(state.numa_view or state.topology,
                              spec.request_view or spec.request,
                              limits=spec.limits_view or spec.limits,
                              strategy=spec.strategy,
                              pagesize_kb=spec.pagesize_kb)
        if not result.fits:
            return Verdict(f"NUMA topology does not fit: {result.reason}",
                           result)
        return Verdict(None, result)


def default_filters():
    """Return the filters the scheduler runs, cheapest first."""
    return (HostUpFilter(), HostEnabledFilter(), ExcludedHostFilter(),
            HypervisorTypeFilter(), CPUModelFilter(), NUMATopologyFilter())
