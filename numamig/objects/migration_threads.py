"""Where a migration's own QEMU threads ran: the shape of the record.

``MigrationThreads.sides`` (numamig.objects.migration_satellites,
release 2) holds, per side (``source``, ``dest``), what that host's
agent chose and saw::

    {"source": {"host": "cmp1",
                "basis": "shared-guest-nodes",
                "cpus": [4, 5],
                "connections": 2,
                "threads": {"live_migration": [4, 5],
                            "multifdsend_0": [4, 5],
                            "multifdsend_1": [4, 5],
                            "return path": [4, 5]}},
     "dest": {"host": "cmp2", "basis": "none", "cpus": [],
              "connections": null,
              "threads": {"multifdrecv_0": [3], "multifdrecv_1": [3]}}}

``basis`` says where ``cpus`` came from (BASES, numamig.numa.
migration_cpus); ``threads`` maps each migration thread's name to the
CPUs it was allowed on after the agent acted (read back from
/proc/PID/task/TID/status), so a thread left where it started shows
where that was. ``connections`` is the number of parallel connections
the source used (None on the destination). A side is absent where its
agent recorded nothing (no native migration, an older release).

Everything is bounded (checked by ``problem`` wherever a record is
received or stored): at most MAX_THREADS threads, MAX_CPUS CPUs per
list, names of at most MAX_NAME characters.
"""

SIDES = ('source', 'dest')
HOUSEKEEPING = 'housekeeping'
GUEST_NODES = 'shared-guest-nodes'
SHARED = 'shared-any-node'
NONE = 'none'
BASES = (HOUSEKEEPING, GUEST_NODES, SHARED, NONE)
KEYS = ('host', 'basis', 'cpus', 'connections', 'threads')
MAX_THREADS = 64
MAX_CPUS = 1024
# Linux thread names are 15 characters; room for a longer platform.
MAX_NAME = 32
MAX_HOST = 255
MAX_CONNECTIONS = 255
# numamig.cpuspec's bound (objects sit below it).
MAX_CPU_ID = 65535


def problem(record):
    """Why ``record`` is not a migration_threads value, or None."""
    if not isinstance(record, dict):
        return f"must be a dict keyed by {' or '.join(SIDES)}"
    for side, value in record.items():
        if side not in SIDES:
            return f"side {side!r:.40} is not one of {', '.join(SIDES)}"
        why = side_problem(value)
        if why:
            return f"{side}: {why}"
    return None


def side_problem(side):
    """Why ``side`` is not one host's record, or None."""
    if not isinstance(side, dict) or set(side) != set(KEYS):
        return f"must be a dict of exactly {', '.join(KEYS)}"
    host = side['host']
    if not isinstance(host, str) or not 0 < len(host) <= MAX_HOST:
        return f"host must be a name of 1-{MAX_HOST} characters"
    if side['basis'] not in BASES:
        return f"basis must be one of {', '.join(BASES)}"
    connections = side['connections']
    if connections is not None and not (
            _is_int(connections) and 1 <= connections <= MAX_CONNECTIONS):
        return f"connections must be null or 1-{MAX_CONNECTIONS}"
    if not _cpu_list(side['cpus']):
        return _CPUS
    threads = side['threads']
    if not isinstance(threads, dict) or len(threads) > MAX_THREADS:
        return f"threads must map at most {MAX_THREADS} names to CPUs"
    for name, cpus in threads.items():
        if not isinstance(name, str) or not 0 < len(name) <= MAX_NAME:
            return f"thread names must have 1-{MAX_NAME} characters"
        if not _cpu_list(cpus):
            return f"thread {name}: {_CPUS}"
    return None


_CPUS = (f"CPUs must be a list of at most {MAX_CPUS} CPU ids within "
         f"0-{MAX_CPU_ID}")


def _cpu_list(cpus):
    return isinstance(cpus, list) and len(cpus) <= MAX_CPUS and all(
        _is_int(c) and 0 <= c <= MAX_CPU_ID for c in cpus)


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def side(host, basis, cpus, threads, connections=None):
    """One host's record, normalised (sorted CPU lists)."""
    return {'host': host, 'basis': basis, 'cpus': sorted(cpus),
            'connections': connections,
            'threads': {name: sorted(c) for name, c in threads.items()}}


def describe(side_record):
    """One line of a side's record for logs and ``migration show``."""
    cpus = ','.join(str(c) for c in side_record['cpus']) or '-'
    parts = [f"{side_record['host']}: CPUs {cpus} ({side_record['basis']})"]
    if side_record['connections'] is not None:
        parts.append(f"{side_record['connections']} connection(s)")
    return ', '.join(parts)
