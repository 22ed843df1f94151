"""Host topologies for NUMA engine tests, built from integers.

``make_host(cells=2, cores=4, threads=2)`` gives cells whose pCPUs are
numbered Linux-style: core c of cell n has threads n*cores + c + t*total
(``0,16``-style siblings); every pCPU dedicated unless ``shared`` says how
many cores per cell are shared.
"""

from numamig import objects


def make_cell(cell_id, cores=4, threads=2, cells=1, shared=0,
              memory_mb=8192, pages=None, pinned=(), cpu_usage=0,
              memory_usage_mb=0):
    total = cells * cores
    siblings = []
    for core in range(cores):
        first = cell_id * cores + core
        siblings.append({first + t * total for t in range(threads)})
    cpus = set().union(*siblings)
    shared_cpus = set().union(set(), *siblings[:shared])
    pools = pages if pages is not None else [(4, memory_mb * 256, 0, 0)]
    return objects.HostNUMACell(
        id=cell_id, cpuset=shared_cpus, pcpuset=cpus - shared_cpus,
        pinned_cpus=set(pinned),
        siblings=siblings if threads > 1 else [],
        memory_mb=memory_mb, memory_usage_mb=memory_usage_mb,
        cpu_usage=cpu_usage,
        mempages=[objects.NUMAPagesTopology(size_kb=s, total=t, used=u,
                                            reserved=r)
                  for s, t, u, r in pools])


def make_host(cells=2, cores=4, threads=2, **kwargs):
    return objects.HostNUMATopology(cells=[
        make_cell(i, cores=cores, threads=threads, cells=cells, **kwargs)
        for i in range(cells)])


def hugepage_pools(memory_mb, pages_2m=0, pages_1g=0, used_2m=0,
                   reserved_2m=0):
    """Small pages for what the huge pools leave, then 2M and 1G pools."""
    small = memory_mb * 256 - pages_2m * 512 - pages_1g * 262144
    return [(4, small, 0, 0), (2048, pages_2m, used_2m, reserved_2m),
            (1048576, pages_1g, 0, 0)]


def request(cells, emulator=None):
    """An unplaced request from (pinned vCPUs, floating vCPUs, memory,
    page size, thread policy) tuples, vCPUs numbered in order."""
    result, next_vcpu = [], 0
    for index, (pinned, floating, memory, pagesize, threads) in \
            enumerate(cells):
        pcpus = set(range(next_vcpu, next_vcpu + pinned))
        fcpus = set(range(next_vcpu + pinned,
                          next_vcpu + pinned + floating))
        next_vcpu += pinned + floating
        result.append(objects.InstanceNUMACell(
            id=index, pcpuset=pcpus, cpuset=fcpus, memory_mb=memory,
            pagesize=pagesize, cpu_thread_policy=threads if pinned else None,
            cpu_policy=('dedicated' if pinned and not floating else
                        'mixed' if pinned else None)))
    return objects.InstanceNUMATopology(cells=result,
                                        emulator_threads_policy=emulator)
