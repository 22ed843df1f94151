"""Nova's answer for the differential fuzzer's cases (fuzz_fit.py).

Runs under the Python of a virtualenv where Nova is installed (it is not
a numamig requirement):  NOVA_PYTHON nova_oracle.py CASES.jsonl
and prints one JSON line per case.

For each case, Nova's own code reads the flavor and image
(``hardware.numa_get_constraints`` and ``get_realtime_cpu_constraint``)
and, when it accepts them, decides whether the guest fits the host. The
decision is built on Nova's per-cell rule, ``_numa_fit_instance_cell``
(memory, pages, CPUs, limits, the thread policies' packing onto cores),
asked for every (host cell, guest cell) pair on fresh copies, and a
bipartite matching of guest cells to distinct host cells: the question
Nova's permutation search asks, without its cost on 16-cell hosts nor
its verdict cache, which can reuse one guest cell's verdict for another
(doc/source/numa-fit.rst, "Comparing with Nova"). Nova's own search
also runs where it tries few permutations, so the two can be compared.

Output per case: ``{"error": "<Nova exception>"}`` when Nova refuses the
flavor or image, else ``{"request": ..., "realtime": [...], "table":
[[host cell positions]] per guest cell, "fits": bool, "search_fits": bool
| null}``.
"""

import json
import math
import sys
import warnings

warnings.simplefilter('ignore')

from nova import exception  # noqa: E402
from nova import objects  # noqa: E402
from nova.virt import hardware  # noqa: E402

objects.register_all()

# Nova's permutation search runs only where it tries at most this many.
SEARCH_LIMIT = 720


def _pools(cell):
    """Nova's page pools: guests without a page size are charged to the
    smallest pool's ``used`` (numamig charges them to memory usage only;
    the case gives their memory as ``nopage_mb``)."""
    pools = sorted(cell['pools'], key=lambda pool: pool['size_kb'])
    result = []
    for index, pool in enumerate(pools):
        used = pool['used']
        if index == 0:
            used += cell['nopage_mb'] * 1024 // pool['size_kb']
        result.append(objects.NUMAPagesTopology(
            size_kb=pool['size_kb'], total=pool['total'], used=used,
            reserved=pool['reserved']))
    return result


def _siblings(cell):
    """Nova's sibling sets: a pCPU without SMT siblings is a set of one
    (as its libvirt driver reports it; numamig's hosts leave it out)."""
    if cell['siblings']:
        return [set(group) for group in cell['siblings']]
    return [{cpu} for cpu in sorted(cell['shared'] + cell['dedicated'])]


def host(data):
    return objects.NUMATopology(cells=[objects.NUMACell(
        id=cell['id'], cpuset=set(cell['shared']),
        pcpuset=set(cell['dedicated']), memory=cell['memory_mb'],
        cpu_usage=cell['cpu_usage'], memory_usage=cell['memory_usage_mb'],
        pinned_cpus=set(cell['pinned']),
        siblings=_siblings(cell), mempages=_pools(cell),
        network_metadata=objects.NetworkMetadata(physnets=set(),
                                                 tunneled=False),
        socket=None) for cell in data['cells']])


def read_request(case):
    """Return (Nova's InstanceNUMATopology or None, realtime vCPUs)."""
    request = case['request']
    flavor = objects.Flavor(
        name='fuzz', vcpus=request['vcpus'],
        memory_mb=request['memory_mb'],
        extra_specs=dict(request['extra_specs']))
    image = objects.ImageMeta.from_dict(
        {'name': 'fuzz', 'properties': dict(request['image_properties'])})
    topology = hardware.numa_get_constraints(flavor, image)
    realtime = hardware.get_realtime_cpu_constraint(flavor, image)
    return topology, sorted(realtime or ())


def plain_request(topology):
    if topology is None:
        return None
    return {'emulator_threads_policy': topology.emulator_threads_policy,
            'cells': [{'pcpuset': sorted(cell.pcpuset),
                       'cpuset': sorted(cell.cpuset),
                       'memory_mb': cell.memory,
                       'pagesize': cell.pagesize,
                       'cpu_policy': cell.cpu_policy,
                       'cpu_thread_policy': cell.cpu_thread_policy}
                      for cell in topology.cells]}


def _cell_fits(host_cell, guest_cell, limits, reserved):
    try:
        placed = hardware._numa_fit_instance_cell(
            host_cell, guest_cell.obj_clone(), limits, reserved)
    except exception.MemoryPageSizeNotSupported:
        return False
    return placed is not None


def _has_matching(table, hosts):
    """Whether every guest cell gets a distinct host cell it fits
    (augmenting paths)."""
    owner = [None] * hosts

    def place(guest, seen):
        for position in table[guest]:
            if position in seen:
                continue
            seen.add(position)
            if owner[position] is None or place(owner[position], seen):
                owner[position] = guest
                return True
        return False

    return all(place(guest, set()) for guest in range(len(table)))


def fit_table(host_topology, topology, limits):
    """[host cell positions guest cell i fits, by Nova's rule] per i."""
    isolated = topology.emulator_threads_isolated
    return [[position for position, host_cell in
             enumerate(host_topology.cells)
             if _cell_fits(host_cell, guest_cell, limits,
                           int(isolated and index == 0))]
            for index, guest_cell in enumerate(topology.cells)]


def decide(host_topology, table):
    """Whether the guest cells get distinct host cells they fit."""
    if len(host_topology.cells) < len(table) or not all(table):
        return False
    return _has_matching(table, len(host_topology.cells))


def search(host_topology, topology, limits):
    """Nova's own numa_fit_instance_to_host, or None where it would try
    more than SEARCH_LIMIT permutations."""
    if math.perm(len(host_topology.cells), len(topology.cells)) > \
            SEARCH_LIMIT:
        return None
    placed = hardware.numa_fit_instance_to_host(
        host_topology, topology.obj_clone(), None, limits=limits)
    return placed is not None


def run(case):
    try:
        topology, realtime = read_request(case)
    except (exception.NovaException, ValueError) as exc:
        return {'error': type(exc).__name__}
    answer = {'request': plain_request(topology), 'realtime': realtime}
    if topology is None:
        return answer
    host_topology = host(case['host'])
    limits = None
    if case.get('limits'):
        limits = objects.NUMATopologyLimits(**case['limits'])
    answer['table'] = fit_table(host_topology, topology, limits)
    answer['fits'] = decide(host_topology, answer['table'])
    answer['search_fits'] = search(host_topology, topology, limits)
    return answer


def main():
    with open(sys.argv[1]) as handle:
        for line in handle:
            print(json.dumps(run(json.loads(line))), flush=True)


if __name__ == '__main__':
    main()
