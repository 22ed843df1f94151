"""What an agent reports it uses, against what the records say it holds.

An agent counts exactly the guests recorded on its host and the claims
held there (numamig.compute.resource_tracker); its report carries the
result (pinned pCPUs, pages used, memory per host cell) and a
fingerprint of the guests and claims counted. Between the agent's
recomputes the two can part: a claim the conductor never recorded
(a crash between a destination's answer and its record), a record
removed or changed behind the agent's back. Usage no record owns keeps
pCPUs and pages from every new guest; recorded usage the agent does not
count lets a new claim take pCPUs a guest holds.

``compare`` rebuilds the usage the records imply on the reported host
(its topology with the usage taken out) and names each difference per
host cell; it reads nothing itself.
"""

from numamig import cpuspec
from numamig import fingerprint
from numamig.audit import pins
from numamig.numa import usage


def compare(report, recorded, claims):
    """Return the Findings where ``report`` differs from the records.

    :param report: the host's ComputeNodeReport.
    :param recorded: the Instances recorded on the host.
    :param claims: the Instances holding a claim there (their
        migration_context's dest_host is the host).
    """
    placed = [(i, i.numa_topology) for i in recorded
              if i.get('numa_topology') is not None]
    placed += [(i, i.migration_context.new_numa_topology) for i in claims
               if i.migration_context.get('new_numa_topology') is not None
               and i.uuid not in {r.uuid for r in recorded}]
    expected = usage.host_with_usage(
        without_usage(report.topology), [t for _i, t in placed],
        on_conflict=lambda *_args: None)  # the XML audit reports overlaps
    owners = _pcpu_owners(placed)
    found = []
    for have, want in zip(report.topology.cells, expected.cells,
                          strict=True):
        found += _cpu_findings(report.host, have, want, owners)
        found += _page_findings(report.host, have, want)
    if not found:
        found += _guest_set_finding(report, recorded, claims)
    return found


def of_host(db, report):
    """``compare`` with the records of ``report``'s host read from ``db``
    now (after the report: a guest recorded since may show as missing
    until the agent's next report; ``heal claims`` compares again)."""
    from numamig.db import instances
    recorded = [r.instance for r in instances.get_all(db, host=report.host)]
    claims = [r.instance for r in instances.get_claims_on_host(
        db, report.host)]
    return compare(report, recorded, claims)


def heal(api, ctxt, db, findings):
    """Have each host with usage findings recompute from the records.

    Safe because the agent's recompute is the one it runs every
    ``[compute] update_resources_interval``: it counts what the records
    hold and drops what they do not, except a claim of a migration still
    in progress; it never records anything. What the fresh report still
    shows is left for the operator.

    :param api: a conductor client (host_refresh_usage, operations API).
    :returns: (healed, remaining) Findings.
    """
    healed, remaining = [], []
    for host in sorted({f.host for f in findings}):
        before = [f for f in findings if f.host == host]
        try:
            after = of_host(db, api.host_refresh_usage(ctxt, host))
        except Exception as exc:  # noqa: BLE001 - reported per host
            from numamig import exception
            remaining += [pins.Finding(
                f.kind, host, f"{f.detail} (not healed: "
                              f"{exception.brief(exc)})", f.instance_uuids)
                for f in before]
            continue
        healed += [f for f in before if f not in after]
        remaining += after
    return healed, remaining


def without_usage(topology):
    """A copy of a host topology as its driver describes it: no usage."""
    cells = []
    for cell in topology.cells:
        bare = cell.obj_clone()
        bare.pinned_cpus = set()
        bare.cpu_usage = 0
        bare.memory_usage_mb = 0
        for pool in bare.mempages:
            pool.used = 0
        cells.append(bare)
    return type(topology)(cells=cells)


def _pcpu_owners(placed):
    owners = {}
    for instance, topology in placed:
        for cell in topology.cells:
            for pcpu in (cell.get('cpu_pinning') or {}).values():
                owners[pcpu] = instance
    return owners


def _cpu_findings(host, have, want, owners):
    found = []
    unowned = have.pinned_cpus - want.pinned_cpus
    if unowned:
        found.append(pins.Finding(
            pins.USAGE_UNOWNED, host,
            f"host cell {have.id}: pCPUs {_cpus(unowned)} reported pinned, "
            f"no guest or claim recorded here holds them"))
    missing = want.pinned_cpus - have.pinned_cpus
    if missing:
        holders = sorted({owners[p].uuid for p in missing if p in owners})
        by = ', '.join(holders) or 'isolated threads or emulator threads'
        found.append(pins.Finding(
            pins.USAGE_UNREPORTED, host,
            f"host cell {have.id}: pCPUs {_cpus(missing)} recorded as "
            f"held (by {by}), reported free", tuple(holders)))
    return found


def _page_findings(host, have, want):
    found = []
    wanted = {p.size_kb: p.used for p in want.mempages}
    for pool in have.mempages:
        used = wanted.get(pool.size_kb, 0)
        if pool.used == used:
            continue
        kind = pins.USAGE_UNOWNED if pool.used > used \
            else pins.USAGE_UNREPORTED
        found.append(pins.Finding(
            kind, host,
            f"host cell {have.id}: {pool.used} page(s) of {pool.size_kb} "
            f"KiB reported used, the records hold {used}"))
    return found


def _guest_set_finding(report, recorded, claims):
    """Same usage, other guests: the fingerprint tells (a guest without
    pins or pages, counted or not)."""
    pairs = {(i.project_id, i.uuid) for i in [*recorded, *claims]}
    if fingerprint.compute(sorted(pairs)) == report.fingerprint:
        return []
    return [pins.Finding(
        pins.USAGE_UNOWNED, report.host,
        f"the guests and claims the agent counts differ from the "
        f"{len(pairs)} recorded here (fingerprint {report.fingerprint})")]


def _cpus(cpus):
    return cpuspec.format_cpu_spec(cpus)
