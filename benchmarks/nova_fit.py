"""Run Nova's numa_fit_instance_to_host on a corpus bench_fit.py wrote.

Runs under the Python of a virtualenv where Nova is installed (it is not a
numamig requirement):  NOVA_PYTHON nova_fit.py CORPUS.json MAX_PERMUTATIONS
Prints one JSON line per case: {"fits": bool | null, "us": median}.
Cases whose host-cell permutation count exceeds MAX_PERMUTATIONS are not
run (Nova tries permutations one by one): "fits" is null, "skipped" says
how many permutations there were.
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


def _run(case, repeats, max_permutations):
    cells, nodes = len(case['host']['cells']), len(case['request']['cells'])
    permutations = math.perm(cells, nodes)
    if permutations > max_permutations:
        return {'fits': None, 'skipped': permutations}
    host, request = _host(case['host']), _request(case['request'])
    limits = None
    if case.get('limits'):
        limits = objects.NUMATopologyLimits(**case['limits'])
    times, fits = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        placed = hardware.numa_fit_instance_to_host(
            host, request.obj_clone(), None, limits=limits)
        times.append((time.perf_counter() - start) * 1e6)
        fits = placed is not None
    return {'fits': fits, 'us': statistics.median(times)}


def main():
    with open(sys.argv[1]) as handle:
        corpus = json.load(handle)
    max_permutations = int(sys.argv[2])
    for case in corpus['cases']:
        print(json.dumps(_run(case, corpus['repeats'], max_permutations)),
              flush=True)


if __name__ == '__main__':
    main()
