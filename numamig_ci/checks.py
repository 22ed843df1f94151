"""Whitebox checks: domain XML, numamig's records and host usage agree.

Each check compares what a host really runs (its domain XML, read live
and persistent) with what numamig recorded and with the host's
configured dedicated and shared pCPU sets, and returns a list of
results.Failure (empty when all holds). The expected values are derived
here from the record and the host's configuration, never from numamig's
own XML writer, so a writer that copies the source XML cannot pass.
Pure: no I/O, inputs are not modified.
"""

import dataclasses

from numamig_ci import domain
from numamig_ci.domain import fmt
from numamig_ci.results import Failure

SMALL_PAGE_KB = 4


@dataclasses.dataclass(frozen=True)
class HostConfig:
    """What a host was configured with, as the harness knows it.

    :param cells: host NUMA node -> all its pCPUs (from its topology).
    """

    name: str
    dedicated: frozenset
    shared: frozenset
    cells: dict

    def cell_of(self, pcpu):
        for node, cpus in self.cells.items():
            if pcpu in cpus:
                return node
        return None

    def shared_in(self, node):
        return self.shared & self.cells.get(node, frozenset())


def check_guest(record, host, xml_text, which):
    """Check one guest's domain XML against its record and its host.

    :param record: the guest's Instance as numamig recorded it.
    :param host: the HostConfig of the host the XML was read on.
    :param which: 'live' or 'persistent', named in failures.
    """
    placement = domain.parse(xml_text)
    topology = record.numa_topology
    if topology is None or not topology.cells:
        return []
    ctx = _Context(record.name, host, which)
    for cell in topology.cells:
        ctx.fail.extend(_check_cell(ctx, cell, placement))
    ctx.fail.extend(_check_vcpu_cpuset(ctx, topology, placement))
    ctx.fail.extend(_check_emulator(ctx, topology, placement))
    ctx.fail.extend(_check_memory(ctx, topology, placement))
    return ctx.fail


@dataclasses.dataclass
class _Context:
    guest: str
    host: HostConfig
    which: str
    fail: list = dataclasses.field(default_factory=list)

    def failure(self, element, expected, actual, note=''):
        return Failure(self.guest, self.host.name,
                       f"{self.which} {element}", expected, actual, note)


def _check_cell(ctx, cell, placement):
    failures = []
    pinning = cell.get('cpu_pinning') or {}
    for vcpu in sorted(cell.pcpuset):
        element = f"<vcpupin vcpu='{vcpu}'>"
        actual = placement.pins.get(vcpu)
        expected = frozenset({pinning[vcpu]}) if vcpu in pinning else None
        if actual != expected:
            failures.append(ctx.failure(element, fmt(expected), fmt(actual),
                                        "numamig's record pins it so"))
        if actual and not actual <= ctx.host.dedicated:
            failures.append(ctx.failure(
                element, f"within the dedicated set "
                f"{fmt(ctx.host.dedicated)}", fmt(actual)))
        node = ctx.host.cell_of(min(actual)) if actual else None
        if actual and node != cell.host_cell:
            failures.append(ctx.failure(
                element, f"a pCPU of host node {cell.host_cell}",
                f"{fmt(actual)} (node {node})"))
    shared = ctx.host.shared_in(cell.host_cell)
    for vcpu in sorted(cell.cpuset):
        actual = placement.pins.get(vcpu)
        if actual != shared:
            failures.append(ctx.failure(
                f"<vcpupin vcpu='{vcpu}'> (floating)",
                f"the shared set of host node {cell.host_cell}: "
                f"{fmt(shared)}", fmt(actual)))
    return failures


def _check_vcpu_cpuset(ctx, topology, placement):
    floating = any(c.cpuset for c in topology.cells)
    expected = ctx.host.shared or None
    if placement.vcpu_cpuset == expected:
        return []
    if not floating and placement.vcpu_cpuset is None:
        return []
    return [ctx.failure("<vcpu cpuset>",
                        f"the host's shared set {fmt(expected)}",
                        fmt(placement.vcpu_cpuset))]


def expected_emulator_pins(topology, host):
    """Where a guest's emulator (and I/O) threads belong on ``host``.

    ``isolate``: its reserved dedicated pCPU(s); otherwise the host's
    shared set, or the guest's own pins on a host without one.
    """
    reserved = topology.cpuset_reserved
    if topology.get('emulator_threads_policy') == 'isolate' or reserved:
        return frozenset(reserved)
    if host.shared:
        return host.shared
    return frozenset(topology.cpu_pinning.values())


def _check_emulator(ctx, topology, placement):
    failures = []
    expected = expected_emulator_pins(topology, ctx.host)
    if placement.emulator_pins != expected:
        failures.append(ctx.failure("<emulatorpin>", fmt(expected),
                                    fmt(placement.emulator_pins)))
    reserved = frozenset(topology.cpuset_reserved)
    if reserved and not reserved <= ctx.host.dedicated:
        failures.append(ctx.failure(
            "<emulatorpin> (isolate)",
            f"within the dedicated set {fmt(ctx.host.dedicated)}",
            fmt(reserved)))
    if reserved & frozenset(topology.cpu_pinning.values()):
        failures.append(ctx.failure(
            "<emulatorpin> (isolate)", "a pCPU outside the vCPU pins",
            fmt(reserved)))
    for thread, pins in sorted(placement.iothread_pins.items()):
        if pins != expected:
            failures.append(ctx.failure(
                f"<iothreadpin iothread='{thread}'>",
                f"the emulator threads' pCPUs {fmt(expected)}", fmt(pins)))
    return failures


def _check_memory(ctx, topology, placement):
    failures = []
    for cell in topology.cells:
        expected = frozenset({cell.host_cell})
        actual = placement.memnodes.get(cell.id)
        if actual != expected:
            failures.append(ctx.failure(
                f"<memnode cellid='{cell.id}'> nodeset", fmt(expected),
                fmt(actual)))
        size = cell.get('pagesize')
        size = None if size in (None, SMALL_PAGE_KB) else size
        if placement.pagesizes.get(cell.id) != size:
            failures.append(ctx.failure(
                f"<hugepages><page nodeset='{cell.id}'> size",
                f"{size} KiB" if size else "no huge pages",
                f"{placement.pagesizes.get(cell.id)} KiB"
                if placement.pagesizes.get(cell.id) else "no huge pages"))
    nodes = frozenset(c.host_cell for c in topology.cells)
    if placement.memory_nodeset != nodes:
        failures.append(ctx.failure("<numatune><memory> nodeset", fmt(nodes),
                                    fmt(placement.memory_nodeset)))
    return failures


def check_disjoint(host, placements):
    """No two guests of a host share a dedicated pCPU, none uses shared.

    :param placements: {guest name: DomainPlacement} of the guests on
        ``host`` (a HostConfig) with pinned vCPUs.
    """
    failures, owner = [], {}
    for guest, placement in sorted(placements.items()):
        dedicated = _dedicated_pcpus(placement, host)
        for pcpu in sorted(dedicated):
            if pcpu in owner:
                failures.append(Failure(
                    guest, host.name, f"<vcpupin>/<emulatorpin> pCPU {pcpu}",
                    "a pCPU no other guest is pinned to",
                    f"also pinned by guest {owner[pcpu]}"))
            owner.setdefault(pcpu, guest)
    return failures


def _dedicated_pcpus(placement, host):
    single = [p for p in placement.pins.values() if len(p) == 1]
    pcpus = frozenset().union(*single) & host.dedicated
    emulator = placement.emulator_pins or frozenset()
    if emulator and emulator <= host.dedicated and not emulator & pcpus:
        pcpus |= emulator  # an isolated emulator thread owns its pCPU
    return pcpus


def check_usage(host, topology, records):
    """The host's reported usage is exactly its guests' records.

    :param topology: the HostNUMATopology the host last reported (usage
        applied).
    :param records: the Instances numamig records on this host.
    """
    failures = []
    for cell in topology.cells:
        expected = _recorded_pins(records, cell.id, cell.siblings)
        if frozenset(cell.pinned_cpus) != expected:
            failures.append(Failure(
                '(all guests)', host.name,
                f"reported usage: node {cell.id} pinned_cpus",
                f"the union of its guests' pins {fmt(expected)}",
                fmt(frozenset(cell.pinned_cpus))))
        failures.extend(_check_pages(host, cell, records))
    return failures


def _recorded_pins(records, node, siblings):
    """pCPUs the records say node ``node`` has taken: the pins, the
    isolated emulator pCPUs, and under the ``isolate`` thread policy the
    thread siblings of the pins (a whole core each)."""
    pins = set()
    for record in records:
        topology = record.get('numa_topology')
        for cell in (topology.cells if topology else ()):
            if cell.host_cell != node:
                continue
            taken = set(cell.cpu_pinning.values())
            if cell.get('cpu_thread_policy') == 'isolate':
                taken |= set().union(*(g for g in siblings if g & taken))
            pins |= taken | set(cell.get('cpuset_reserved') or ())
    return frozenset(pins)


def _check_pages(host, cell, records):
    failures = []
    for pool in cell.mempages:
        if pool.size_kb == SMALL_PAGE_KB:
            continue
        expected = sum(
            c.memory_mb * 1024 // pool.size_kb
            for r in records if r.get('numa_topology')
            for c in r.numa_topology.cells
            if c.host_cell == cell.id and c.get('pagesize') == pool.size_kb)
        if pool.used != expected:
            failures.append(Failure(
                '(all guests)', host.name,
                f"reported usage: node {cell.id} {pool.size_kb} KiB pages "
                f"used", str(expected), str(pool.used)))
    return failures


def check_topology(host, topology):
    """The host reports the dedicated and shared sets it was given."""
    failures = []
    for cell in topology.cells:
        cpus = host.cells.get(cell.id, frozenset())
        for name, reported, configured in (
                ('pcpuset (dedicated)', cell.pcpuset, host.dedicated),
                ('cpuset (shared)', cell.cpuset, host.shared)):
            if frozenset(reported) != configured & cpus:
                failures.append(Failure(
                    '(host)', host.name, f"reported node {cell.id} {name}",
                    fmt(configured & cpus), fmt(frozenset(reported))))
    return failures


def same_sets_warning(hosts):
    """Why this deployment cannot tell copying from recomputing, or None.

    Copying the source XML verbatim passes the set checks when every host
    has the same dedicated and shared sets; only scenarios with a
    conflicting resident guest can catch it then.
    """
    sets = {(h.dedicated, h.shared) for h in hosts}
    if len(hosts) > 1 and len(sets) == 1:
        return ("every host has the same dedicated and shared pCPU sets: a "
                "migration that copies the source XML verbatim passes the "
                "set checks; give the hosts different cpu_dedicated_set / "
                "cpu_shared_set values")
    return None
