"""The host CPUs a live migration's own threads may run on.

QEMU's migration threads (``live_migration``, ``multifdsend_N`` on the
source; ``multifdrecv_N`` and the post-copy threads on the destination)
start with the affinity of the thread that creates them: the guest's
emulator pCPUs. Measured on the real tier, that is the guest's own pCPU
when its emulator is pinned, and every host CPU (another guest's
dedicated ones included) when it floats. They copy the guest's memory,
so the CPUs that suit them are the ones no dedicated guest owns on the
NUMA nodes that hold that memory.

``place`` chooses them, in this order:

1. the operator's housekeeping set ([libvirt] migration_thread_cpus),
   less any CPU a guest has pinned: the explicit set wins;
2. the host's shared CPUs ([compute] cpu_shared_set) on the nodes
   holding the guest's memory, less pinned ones;
3. the host's shared CPUs on any node, less pinned ones;
4. none: the threads stay where they start.

It never returns a CPU a dedicated guest is pinned to (the migrating
guest's own included: its vCPUs run there until the switch-over). Pure:
it reads the host's usage topology (HostNUMATopology with every guest
and claim applied) and changes nothing.
"""

import dataclasses

from numamig.objects import migration_threads as record

# Where the CPUs came from, as recorded on the Migration.
HOUSEKEEPING = record.HOUSEKEEPING
GUEST_NODES = record.GUEST_NODES
SHARED = record.SHARED
NONE = record.NONE


@dataclasses.dataclass(frozen=True)
class ThreadCpus:
    """The CPUs chosen for one migration's threads on one host.

    :param cpus: frozenset of pCPU ids (empty with basis NONE).
    :param basis: one of BASES.
    :param nodes: the host nodes holding the guest's memory (sorted
        tuple; empty where the guest has no NUMA placement).
    """

    cpus: frozenset
    basis: str
    nodes: tuple = ()

    def describe(self):
        """One line for logs."""
        if self.basis == NONE:
            return "none free of dedicated guests: threads left where " \
                   "they start"
        cpus = ','.join(str(c) for c in sorted(self.cpus))
        where = {HOUSEKEEPING: "the housekeeping set "
                               "([libvirt] migration_thread_cpus)",
                 GUEST_NODES: f"shared CPUs of host node(s) "
                              f"{','.join(map(str, self.nodes))}",
                 SHARED: "shared CPUs of any node (none free on the "
                         "guest's)"}[self.basis]
        return f"CPUs {cpus} from {where}"


def guest_nodes(topology):
    """The host nodes holding a placed guest's memory: the host cells of
    its InstanceNUMATopology (None, or no placed cell: empty)."""
    if topology is None:
        return frozenset()
    return frozenset(cell.host_cell for cell in topology.cells
                     if cell.host_cell is not None)


def pinned(host):
    """Every pCPU a dedicated guest (or claim) holds on ``host``."""
    found = set()
    for cell in host.cells:
        found |= cell.pinned_cpus
    return frozenset(found)


def place(host, nodes, housekeeping=None):
    """Choose the CPUs for a migration's threads; see the module.

    :param host: the host's usage HostNUMATopology (cells' ``cpuset``
        is the shared set, ``pinned_cpus`` what dedicated guests hold).
    :param nodes: host node ids holding the guest's memory (empty: not
        known, every node counts).
    :param housekeeping: the operator's set (frozenset), or None.
    :returns: ThreadCpus.
    """
    taken = pinned(host)
    ordered = tuple(sorted(nodes))
    if housekeeping:
        free = frozenset(housekeeping) - taken
        if free:
            return ThreadCpus(free, HOUSEKEEPING, ordered)
    local = _shared(host, nodes) - taken
    if local:
        return ThreadCpus(local, GUEST_NODES if nodes else SHARED, ordered)
    anywhere = _shared(host, ()) - taken
    if anywhere:
        return ThreadCpus(anywhere, SHARED, ordered)
    return ThreadCpus(frozenset(), NONE, ordered)


def _shared(host, nodes):
    found = set()
    for cell in host.cells:
        if not nodes or cell.id in nodes:
            found |= cell.cpuset
    return frozenset(found)
