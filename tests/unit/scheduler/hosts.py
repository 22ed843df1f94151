"""Host topologies and reports built from integers, for scheduler tests.

``host_topology(cells=2, pcpus=4)`` draws, for cell c::

    cell c: dedicated pCPUs c*N .. c*N+N-1 in SMT pairs, no shared CPUs,
            ``memory_mb`` MiB, a 4K pool of all that memory plus the
            given 2M / 1G pools (no pages used)
"""

import datetime

from numamig import fingerprint
from numamig import objects

T0 = datetime.datetime(2026, 11, 3, 12, 0, 0, tzinfo=datetime.UTC)


def host_cell(cell_id, pcpus=4, shared=0, memory_mb=4096, pages_2m=0,
              pages_1g=0, cells=2):
    first = cell_id * (pcpus + shared)
    dedicated = set(range(first, first + pcpus))
    floating = set(range(first + pcpus, first + pcpus + shared))
    mempages = [objects.NUMAPagesTopology(size_kb=4,
                                          total=memory_mb * 256)]
    if pages_2m:
        mempages.append(objects.NUMAPagesTopology(size_kb=2048,
                                                  total=pages_2m))
    if pages_1g:
        mempages.append(objects.NUMAPagesTopology(size_kb=1048576,
                                                  total=pages_1g))
    return objects.HostNUMACell(
        id=cell_id, cpuset=floating, pcpuset=dedicated,
        siblings=[{cpu, cpu + 1} for cpu in range(first, first + pcpus, 2)],
        memory_mb=memory_mb, mempages=mempages,
        distances={other: 10 if other == cell_id else 21
                   for other in range(cells)})


def host_topology(cells=2, **kwargs):
    return objects.HostNUMATopology(
        cells=[host_cell(c, cells=cells, **kwargs) for c in range(cells)])


class Clock:
    """A clock tests move by hand; returns aware UTC datetimes."""

    def __init__(self, now=T0):
        self.now = now

    def __call__(self):
        return self.now

    def advance(self, seconds):
        self.now += datetime.timedelta(seconds=seconds)


def report(host, topology=None, guests=(), reported_at=T0,
           hypervisor_type='qemu'):
    """A ComputeNodeReport whose fingerprint covers ``guests``."""
    return objects.ComputeNodeReport(
        host=host, hypervisor_uri=f'qemu+tcp://{host}/system',
        hypervisor_type=hypervisor_type,
        topology=topology if topology is not None else host_topology(),
        service_version=2, fingerprint=fingerprint.compute(guests),
        reported_at=reported_at)
