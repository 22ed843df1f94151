"""What must hold after each main-job migration, as named checks.

A check is ``(label, passed, detail)``. The common checks apply to every
scenario (the migration completed, the XML on the destination is what
numamig recorded, nothing stays claimed, no pCPU is pinned twice); each
scenario kind adds two: that its problem was really set up before the
migration, and that numamig avoided it.
"""

import collections

from numamig.audit import pins as audit_pins
from numamig.audit import placement
from numamig.virt.libvirt import guest_parse

Check = collections.namedtuple('Check', 'label passed detail')
PAGE_1G_KB = 1048576


def evaluate(outcome):
    """Return every Check of a finished scenario's Outcome."""
    specific = {'pins': _pins, 'hugepages': _hugepages,
                'missing-node': _missing_node}[outcome.scenario.kind]
    return specific(outcome) + _common(outcome)


def _common(outcome):
    scenario, migration = outcome.scenario, outcome.migration
    after = outcome.after
    diffs = placement.differences(
        after.get('numa_topology'),
        guest_parse.parse_guest_topology(outcome.xml_after)) \
        if outcome.xml_after else ['no domain XML on the destination']
    leftovers = {h: s.claims for h, s in outcome.hosts_after.items()
                 if s.claims}
    findings = audit_pins.audit_host(
        scenario.dest, outcome.hosts_after[scenario.dest].topology,
        outcome.dest_guests)
    return [
        Check("migration completed", migration.status == 'completed',
              migration.status + (f": {migration.error}"
                                  if migration.get('error') else '')),
        Check(f"recorded on {scenario.dest}", after.host == scenario.dest,
              f"recorded on {after.host}"),
        Check("domain XML on the destination = numamig's records",
              not diffs, '; '.join(diffs) or 'identical placement'),
        Check(f"guest gone from {outcome.before.host}",
              after.uuid not in outcome.source_guests_after,
              f"not among the {len(outcome.source_guests_after)} guest(s) "
              f"{outcome.before.host} still runs"),
        Check("no claim left on any host",
              not leftovers and after.get('migration_context') is None,
              ', '.join(f"{h}: {c}" for h, c in leftovers.items())
              or 'none'),
        Check(f"audit of {scenario.dest}: no pCPU pinned twice, no stray "
              f"pin", not findings,
              '; '.join(f.detail for f in findings) or 'clean'),
    ]


def _pins(outcome):
    resident = set(outcome.resident.numa_topology.cpu_pinning.values())
    before = set(outcome.before.numa_topology.cpu_pinning.values())
    after = set(outcome.after.numa_topology.cpu_pinning.values())
    return [
        Check("problem set up: same pCPUs as the resident",
              bool(before & resident),
              f"mover on {_cpus(before)}, resident on {_cpus(resident)}"),
        Check("re-pinned clear of the resident", not after & resident,
              f"now on {_cpus(after)}"),
    ]


def _hugepages(outcome):
    before_cell = outcome.before.numa_topology.cells[0]
    after_cell = outcome.after.numa_topology.cells[0]
    needed = before_cell.memory_mb // 1024
    dest = outcome.hosts_before[outcome.scenario.dest].topology
    pool = dest.cell(before_cell.host_cell).pages_of(PAGE_1G_KB)
    free = pool.free if pool is not None else 0
    return [
        Check(f"problem set up: node {before_cell.host_cell} of "
              f"{outcome.scenario.dest} has too few free 1G pages",
              free < needed, f"{free} free, {needed} needed"),
        Check("lands on a node with free 1G pages, backed by 1G pages",
              after_cell.host_cell != before_cell.host_cell
              and after_cell.pagesize == PAGE_1G_KB,
              f"node {after_cell.host_cell}, page size "
              f"{after_cell.pagesize} KiB"),
    ]


def _missing_node(outcome):
    before = {c.host_cell for c in outcome.before.numa_topology.cells}
    after = {c.host_cell for c in outcome.after.numa_topology.cells}
    dest = outcome.hosts_before[outcome.scenario.dest].topology
    nodes = {c.id for c in dest.cells}
    return [
        Check(f"problem set up: {outcome.scenario.dest} lacks node(s) "
              f"{_cpus(before)}", not before <= nodes,
              f"{outcome.scenario.dest} has nodes {_cpus(nodes)}"),
        Check("bound to nodes the destination has", after <= nodes,
              f"node(s) {_cpus(after)}"),
    ]


def _cpus(cpus):
    from numamig import cpuspec
    return cpuspec.format_cpu_spec(cpus) if cpus else 'none'
