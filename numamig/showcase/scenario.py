"""The main job's world: three hosts, and guests that hit the spec's bugs.

The NUMA-aware live migration spec describes three ways a verbatim copy
of the domain XML breaks a NUMA guest on its destination. Each scenario
below sets one of them up on an embedded deployment (libvirt test-driver
hosts with the shipped multi-cell capabilities) and names what must hold
after numamig migrated the guest::

    host-a, host-b  2 cells x 4 cores x 2 threads, pCPUs 0,8 and 4,12
                    shared, 4 x 1 GiB pages per cell (numa-2cell-*.xml)
    host-c          4 cells x 4 cores x 2 threads, all dedicated,
                    2 x 1 GiB pages per cell (numa-4cell.xml)

Guests are created in a fixed order, so that the deterministic fit puts
them where the scenarios need them; each scenario then checks that its
problem really is set up before the migration, and says so if not.
"""

import dataclasses

from numamig import embedded

SHARED = frozenset({0, 8, 4, 12})
HOSTS = (
    embedded.HostDefinition('host-a', 'numa-2cell-a.xml',
                            cpu_shared_set=SHARED),
    embedded.HostDefinition('host-b', 'numa-2cell-b.xml',
                            cpu_shared_set=SHARED),
    embedded.HostDefinition('host-c', 'numa-4cell.xml'),
)

PINNED = {'hw:cpu_policy': 'dedicated'}
HUGE_1G = {'hw:mem_page_size': '1GB', 'hw:numa_nodes': '1'}
ONE_NODE = {'hw:cpu_policy': 'dedicated', 'hw:numa_nodes': '1'}


@dataclasses.dataclass(frozen=True)
class GuestSpec:
    """A guest to create: where, how big, with which hw: extra specs."""

    name: str
    host: str
    vcpus: int
    memory_mb: int
    specs: dict


@dataclasses.dataclass(frozen=True)
class Scenario:
    """One problem of the spec: who moves where, and what must hold.

    :param kind: 'pins', 'hugepages' or 'missing-node' (selects the
        problem-specific checks in numamig.showcase.checks).
    :param resident: the guest on the destination the mover must not
        collide with (None when the destination's shape is the problem).
    """

    number: int
    kind: str
    title: str
    problem: str
    mover: str
    dest: str
    resident: str = None


# Creation order matters: see the module docstring.
GUESTS = (
    GuestSpec('pinned-mover', 'host-a', 2, 1024, PINNED),
    GuestSpec('pinned-resident', 'host-b', 2, 1024, PINNED),
    GuestSpec('hugepage-mover', 'host-a', 2, 4096, HUGE_1G),
    GuestSpec('hugepage-resident', 'host-b', 2, 4096, HUGE_1G),
    GuestSpec('filler-0', 'host-c', 2, 1024, ONE_NODE),
    GuestSpec('filler-1', 'host-c', 2, 1024, ONE_NODE),
    GuestSpec('node2-mover', 'host-c', 2, 1024, ONE_NODE),
)

SCENARIOS = (
    Scenario(1, 'pins', "Overlapping pins",
             "pinned-mover (host-a) and pinned-resident (host-b) are "
             "pinned to the same pCPUs; copied verbatim, the mover would "
             "share them with the resident on host-b.",
             mover='pinned-mover', dest='host-b',
             resident='pinned-resident'),
    Scenario(2, 'hugepages', "A full 1 GiB hugepage node",
             "hugepage-mover uses every 1 GiB page of its node on host-a; "
             "hugepage-resident uses every 1 GiB page of the same node on "
             "host-b: copied verbatim, the mover would find no pages there.",
             mover='hugepage-mover', dest='host-b',
             resident='hugepage-resident'),
    Scenario(3, 'missing-node', "A NUMA node the destination lacks",
             "node2-mover runs on node 2 of the 4-node host-c; host-a has "
             "nodes 0 and 1 only: copied verbatim, its memory would be "
             "bound to a node that does not exist there.",
             mover='node2-mover', dest='host-a'),
)
