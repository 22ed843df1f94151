"""How ``migration show`` words where a migration's own threads ran
(MigrationThreads.sides, numamig.objects.migration_threads)."""

from numamig import cpuspec
from numamig.cmd.manage_commands import _names


def view(record):
    """The JSON-able record ({side: {host, basis, cpus, connections,
    threads}}) of a MigrationThreads' ``sides``, or None where no host
    recorded it."""
    if not record:
        return None
    return {side: {'host': r['host'], 'basis': r['basis'],
                   'cpus': list(r['cpus']),
                   'connections': r['connections'],
                   'threads': {n: list(c) for n, c in
                               sorted(r['threads'].items())}}
            for side, r in record.items()}


def lines(data):
    """``migration show`` lines of ``view``'s data: per host, the CPUs
    chosen and why, then each thread and where it was allowed to run."""
    if not data:
        return []
    found = ["migration threads:"]
    for side in _names.THREAD_SIDES:
        record = data.get(side)
        if record is None:
            continue
        connections = '' if record['connections'] is None else \
            f", {record['connections']} parallel connection(s)"
        found.append(f"  {side} {record['host']}: CPUs "
                     f"{_cpus(record['cpus'])} ({record['basis']})"
                     f"{connections}")
        for name, cpus in record['threads'].items():
            found.append(f"    {name}: {_cpus(cpus)}")
    return found


def _cpus(cpus):
    return cpuspec.format_cpu_spec(cpus) or 'none'
