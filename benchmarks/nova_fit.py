"""Run Nova's numa_fit_instance_to_host on a corpus bench_fit.py wrote.

Each case is timed as bench_fit.py times numamig: the median over
``repeats`` samples of the time per call of ``number`` back-to-back
calls.

Runs under the Python of a virtualenv where Nova is installed (it is not a
numamig requirement):  NOVA_PYTHON nova_fit.py CORPUS.json MAX_PERMUTATIONS
Prints one JSON line per case: {"fits": bool | null, "us": per call,
"flaw": str | null}. Cases whose host-cell permutation count exceeds
MAX_PERMUTATIONS are not run (Nova tries permutations one by one):
"fits" is null, "skipped" says how many permutations there were.

"flaw" describes what is wrong with a placement Nova returned, checked
against the request and the host: a dedicated guest cell without a pin
per vCPU, pins outside the host cell's dedicated pCPUs, two guest cells on
one host cell. Nova 34 returns such placements when its permutation
search caches a verdict under a guest cell id it has since overwritten
(doc/source/numa-fit.rst, "Comparing with Nova").
"""

import json
import math
import statistics
import sys
import time
import warnings

warnings.simplefilter('ignore')

from nova import objects  # noqa: E402
from nova.virt import hardware  # noqa: E402

objects.register_all()

CLOCKS = {'cpu': time.thread_time, 'wall': time.perf_counter}


def _host(data):
    cells = []
    for cell in data['cells']:
        cells.append(objects.NUMACell(
            id=cell['id'], cpuset=set(cell['shared']),
            pcpuset=set(cell['dedicated']), memory=cell['memory_mb'],
            cpu_usage=cell['cpu_usage'],
            memory_usage=cell['memory_usage_mb'],
            pinned_cpus=set(cell['pinned']),
            siblings=[set(s) for s in cell['siblings']],
            mempages=[objects.NUMAPagesTopology(**pool)
                      for pool in cell['pages']],
            network_metadata=objects.NetworkMetadata(physnets=set(),
                                                     tunneled=False),
            socket=None))
    return objects.NUMATopology(cells=cells)


def _request(data):
    cells = [objects.InstanceNUMACell(
        id=cell['id'], cpuset=set(cell['cpuset']),
        pcpuset=set(cell['pcpuset']), memory=cell['memory_mb'],
        pagesize=cell['pagesize'], cpu_policy=cell['cpu_policy'],
        cpu_thread_policy=cell['cpu_thread_policy'])
        for cell in data['cells']]
    return objects.InstanceNUMATopology(
        cells=cells, emulator_threads_policy=data['emulator_threads_policy'])


def flaw(placed, request, host):
    """Return what makes Nova's placement impossible, or None.

    Nova's placed cells carry the HOST cell id in ``id`` and keep the
    request's order, so the n-th placed cell is guest cell n.
    """
    dedicated = {cell['id']: set(cell['dedicated']) for cell in host['cells']}
    seen = set()
    for guest, cell in zip(request['cells'], placed.cells, strict=True):
        if cell.id in seen:
            return f"two guest cells on host cell {cell.id}"
        seen.add(cell.id)
        pins = cell.cpu_pinning or {}
        if guest['pcpuset'] and set(pins) != set(guest['pcpuset']):
            return (f"guest cell {guest['id']} ({len(guest['pcpuset'])} "
                    f"pinned vCPUs) placed on host cell {cell.id} with "
                    f"{len(pins)} pins; the host cell has "
                    f"{len(dedicated[cell.id])} dedicated pCPUs")
        stray = set(pins.values()) - dedicated[cell.id]
        if stray:
            return (f"guest cell {guest['id']} pinned to {sorted(stray)}, "
                    f"outside host cell {cell.id}'s dedicated pCPUs")
    return None


def _run(case, number, repeats, max_permutations, clock):
    cells, nodes = len(case['host']['cells']), len(case['request']['cells'])
    permutations = math.perm(cells, nodes)
    if permutations > max_permutations:
        return {'fits': None, 'skipped': permutations}
    host, request = _host(case['host']), _request(case['request'])
    limits = None
    if case.get('limits'):
        limits = objects.NUMATopologyLimits(**case['limits'])
    samples, placed = [], None
    for _ in range(repeats):
        # Nova rewrites the request's cells, so each call gets a fresh
        # copy, made outside the timed region.
        fresh = [request.obj_clone() for _ in range(number)]
        start = clock()
        for copy in fresh:
            placed = hardware.numa_fit_instance_to_host(host, copy, None,
                                                        limits=limits)
        samples.append((clock() - start) * 1e6 / number)
    return {'fits': placed is not None, 'us': statistics.median(samples),
            'flaw': placed and flaw(placed, case['request'], case['host'])}


def main():
    with open(sys.argv[1]) as handle:
        corpus = json.load(handle)
    max_permutations = int(sys.argv[2])
    clock = CLOCKS[corpus.get('clock', 'wall')]
    for case in corpus['cases']:
        print(json.dumps(_run(case, corpus['number'], corpus['repeats'],
                              max_permutations, clock)), flush=True)


if __name__ == '__main__':
    main()
