"""Check a placement numamig returned against the fit rules, from scratch.

The differential fuzzer (fuzz_fit.py) asks this of every placement: it
reads the plain host of the case and the placed topology, and recomputes
each rule of doc/source/numa-fit.rst without numamig's fit code: pins
inside the host cell's dedicated set and free, one pin per pCPU, the
emulator pCPU, sibling threads per thread policy, floating vCPUs and the
allocation ratio, memory, page size and free pages per cell. It returns
what is broken, as text; an empty list means the placement is valid.
"""

PINNED_POLICIES = ('dedicated', 'mixed')


def flaws(host, request, placed, limits):
    """Return the rules ``placed`` breaks (list of text).

    :param host: the case's plain host ({'cells': [...]}).
    :param request: the unplaced InstanceNUMATopology numamig fitted.
    :param placed: the placed InstanceNUMATopology.
    :param limits: the case's plain limits, or None.
    """
    cells = {cell['id']: cell for cell in host['cells']}
    found = []
    if len(placed.cells) != len(request.cells):
        return [f"{len(placed.cells)} cells placed of {len(request.cells)}"]
    host_ids = [cell.host_cell for cell in placed.cells]
    if len(set(host_ids)) != len(host_ids):
        found.append(f"guest cells share host cells {host_ids}")
    taken = set()
    for wanted, cell in zip(request.cells, placed.cells, strict=True):
        host_cell = cells.get(cell.host_cell)
        if host_cell is None:
            found.append(f"guest cell {cell.id} on missing host cell")
            continue
        where = f"guest cell {cell.id} on host cell {host_cell['id']}"
        for check in (_pins, _threads, _floating, _memory):
            found += [f"{where}: {text}" for text in
                      check(host_cell, wanted, cell, limits, taken)]
    found += _emulator(request, placed, cells)
    return found


def _pins(host_cell, wanted, cell, limits, taken):
    pins = dict(cell.cpu_pinning or {})
    if set(pins) != set(wanted.pcpuset):
        yield f"pins vCPUs {sorted(pins)}, pinned vCPUs are " \
              f"{sorted(wanted.pcpuset)}"
    pcpus = list(pins.values()) + sorted(cell.cpuset_reserved or ())
    if len(set(pcpus)) != len(pcpus) or taken & set(pcpus):
        yield f"a pCPU is given twice: {pcpus}"
    taken |= set(pcpus)
    outside = set(pcpus) - set(host_cell['dedicated'])
    if outside:
        yield f"pCPUs {sorted(outside)} outside the dedicated set"
    busy = set(pcpus) & set(host_cell['pinned'])
    if busy:
        yield f"pCPUs {sorted(busy)} already pinned"


def _cores(host_cell):
    """{pCPU: the threads of its core}; a pCPU in no sibling group is a
    core of one."""
    cores = {}
    for group in host_cell['siblings']:
        for cpu in group:
            cores[cpu] = frozenset(group)
    for cpu in host_cell['dedicated'] + host_cell['shared']:
        cores.setdefault(cpu, frozenset({cpu}))
    return cores


def _threads(host_cell, wanted, cell, limits, taken):
    policy = wanted.cpu_thread_policy
    if policy not in ('isolate', 'require') or not wanted.pcpuset:
        return
    cores = _cores(host_cell)
    free = set(host_cell['dedicated']) - set(host_cell['pinned'])
    used = [cores[cpu] for cpu in cell.cpu_pinning.values()]
    for core in used:
        if not core <= free:
            yield f"{policy}: core {sorted(core)} is not wholly free"
        if policy == 'require' and len(core) < 2:
            yield f"require: core {sorted(core)} has no sibling thread"
    if policy == 'isolate' and len(set(used)) != len(used):
        yield "isolate: two vCPUs on one core"


def _floating(host_cell, wanted, cell, limits, taken):
    count, shared = len(wanted.cpuset), len(host_cell['shared'])
    if count > shared:
        yield f"{count} floating vCPUs on {shared} shared pCPUs"
    if count and limits:
        limit = shared * limits['cpu_allocation_ratio']
        if host_cell['cpu_usage'] + count > limit:
            yield f"floating vCPUs beyond cpu_allocation_ratio ({limit})"


def _small_pool(host_cell):
    """(capacity MiB, used MiB) of the smallest pool, or None."""
    pools = sorted(host_cell['pools'], key=lambda pool: pool['size_kb'])
    if not pools:
        return None
    small = pools[0]
    in_huge = sum(p['used'] * p['size_kb'] for p in pools[1:]) // 1024
    capacity = (small['total'] - small['reserved']) * small['size_kb'] // 1024
    return capacity, max(0, host_cell['memory_usage_mb'] - in_huge)


def _memory(host_cell, wanted, cell, limits, taken):
    if wanted.pagesize is None:
        if cell.pagesize is not None:
            yield f"page size {cell.pagesize} chosen, none was asked"
        yield from _unsized_memory(host_cell, wanted, limits)
    else:
        yield from _paged_memory(host_cell, wanted, cell)


def _unsized_memory(host_cell, wanted, limits):
    memory, small = wanted.memory_mb, _small_pool(host_cell)
    if memory > host_cell['memory_mb']:
        yield f"{memory} MiB on a {host_cell['memory_mb']} MiB cell"
    if small and memory > small[0]:
        yield f"{memory} MiB on {small[0]} MiB of small pages"
    usage = host_cell['memory_usage_mb']
    if wanted.cpu_policy in PINNED_POLICIES:
        if small is None and usage + memory > host_cell['memory_mb']:
            yield f"pinned: {memory} MiB with {usage} used, overcommitted"
        if small and small[1] + memory > small[0]:
            yield f"pinned: {memory} MiB with {small[1]} MiB of small " \
                  f"pages used, overcommitted"
    if limits:
        ratio = limits['ram_allocation_ratio']
        if usage + memory > host_cell['memory_mb'] * ratio:
            yield "memory beyond ram_allocation_ratio"
        if small and small[1] + memory > small[0] * ratio:
            yield "small pages beyond ram_allocation_ratio"


def _paged_memory(host_cell, wanted, cell):
    pools = sorted(host_cell['pools'], key=lambda pool: pool['size_kb'])
    sizes = [pool['size_kb'] for pool in pools]
    size = cell.pagesize
    allowed = {-1: sizes[:1], -2: sizes[1:], -3: sizes}.get(
        wanted.pagesize, [wanted.pagesize])
    if size not in allowed:
        yield f"page size {size} for a request of {wanted.pagesize}"
        return
    if (wanted.memory_mb * 1024) % size:
        yield f"{wanted.memory_mb} MiB is not a whole number of {size} KiB"
    pool = pools[sizes.index(size)]
    free = pool['total'] - pool['used'] - pool['reserved']
    if size == sizes[0]:
        capacity, used = _small_pool(host_cell)
        free = min(free, max(0, capacity - used) * 1024 // size)
    if wanted.memory_mb * 1024 // size > free:
        yield f"{wanted.memory_mb} MiB of {size} KiB pages, {free} free"


def _emulator(request, placed, cells):
    isolate = request.emulator_threads_policy == 'isolate'
    found = []
    for cell in placed.cells:
        reserved = cell.cpuset_reserved or set()
        expected = 1 if isolate and cell.id == 0 else 0
        if len(reserved) != expected:
            found.append(f"guest cell {cell.id}: {len(reserved)} emulator "
                         f"pCPUs, expected {expected}")
    return found
