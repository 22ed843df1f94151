"""Free-capacity summaries: which hosts cannot possibly take a guest.

The scheduler's index. At 10,000 hosts a NUMA fit per host per request is
far too slow, but most hosts can be ruled out from a handful of numbers
kept per host and refreshed only when its topology changes: its cell
count, and per kind of resource the most any ONE of its cells has free.
A guest cell goes to one host cell, so a host whose best cell has fewer
free dedicated pCPUs than a guest cell pins cannot take the guest.

Every test here is a NECESSARY condition of the NUMA fit
(numa/cellfit.check) and nothing more: a host it skips is one the exact
filter would refuse; a host it lets through is fitted exactly. Where a
condition of the fit depends on more than these numbers (thread policies,
the small-page budget, page sizes chosen among several), the index says
nothing and the fit decides.
"""

import dataclasses

from numamig.numa import pages

#: The capacities a host may be short of, in the order they are tested;
#: the names are what NoValidHost tells an operator.
CELLS = 'NUMA cells'
PCPUS = 'free dedicated pCPUs on one cell'
SHARED = 'shared pCPUs on one cell'
MEMORY = 'memory on one cell'
PAGES = 'free huge pages on one cell'

# Memory limits are floats (allocation ratios); the index adds this much
# slack so that rounding can never make it skip a host the fit accepts.
_SLACK_MB = 1.0


class HostCapacity:
    """The most any one cell of a host has of each resource.

    :param topology: a HostNUMATopology (with usage); not modified.
    """

    __slots__ = ('cells', 'pcpus', 'shared', 'memory', 'free_memory',
                 'pages')

    def __init__(self, topology):
        cells = topology.cells
        self.cells = len(cells)
        self.pcpus = self.shared = self.memory = self.free_memory = 0
        self.pages = {}
        for cell in cells:
            self.pcpus = max(self.pcpus,
                             len(cell.pcpuset) - len(cell.pinned_cpus
                                                     & cell.pcpuset))
            self.shared = max(self.shared, len(cell.cpuset))
            self.memory = max(self.memory, cell.memory_mb)
            self.free_memory = max(self.free_memory,
                                   cell.memory_mb - cell.memory_usage_mb)
            pools = sorted((p.size_kb, p.total, p.used, p.reserved)
                           for p in cell.mempages)
            for size, free in pages.budget(pools,
                                           cell.memory_usage_mb)[1].items():
                self.pages[size] = max(self.pages.get(size, free), free)


@dataclasses.dataclass(frozen=True)
class Needs:
    """What the best cell of a host must have for a request to fit.

    Built once per request by ``of``; ``short(capacity)`` tells which
    capacity a host lacks (None: it may fit, run the fit).
    """

    cells: int = 0
    pcpus: int = 0
    shared: int = 0
    memory: float = 0        # MiB, limits applied by memory_limit()
    ram_ratio: float = None  # None: no limits
    pages: tuple = ()        # (size_kb, pages needed or None), explicit

    @classmethod
    def of(cls, request_view, limits_view, pagesize_kb):
        """Return the Needs of a request (views.RequestView), or None
        for a guest without a NUMA request (any host may take it)."""
        if request_view is None:
            return None
        demands = request_view.demands(pagesize_kb)
        pages_wanted = {}
        for demand in demands:
            if demand.pagesize is not None and demand.pagesize > 0:
                needed = pages.pages_needed(demand.memory_mb,
                                            demand.pagesize)
                old = pages_wanted.get(demand.pagesize, 0)
                pages_wanted[demand.pagesize] = (
                    None if needed is None or old is None
                    else max(old, needed))
        return cls(
            cells=len(demands),
            pcpus=max(d.pinned for d in demands),
            shared=max(d.floating for d in demands),
            memory=max((d.memory_mb for d in demands
                        if d.pagesize is None), default=0),
            ram_ratio=None if limits_view is None else limits_view.ram_ratio,
            pages=tuple(sorted(pages_wanted.items())))

    def short(self, cap):
        """Return the capacity ``cap`` (a HostCapacity) lacks, or None."""
        if cap.cells < self.cells:
            return CELLS
        if cap.pcpus < self.pcpus:
            return PCPUS
        if cap.shared < self.shared:
            return SHARED
        if self.memory and self.memory > self._memory_limit(cap):
            return MEMORY
        for size, needed in self.pages:
            free = cap.pages.get(size)
            if needed is None or free is None or free < needed:
                return PAGES
        return None

    def reclaim_gap_mb(self, cap):
        """What memory (MiB) ``cap``'s best cell lacks for the request,
        as far as these numbers tell: an estimate (a lower bound) of what
        a reclaim on one node would have to free, for ranking hosts
        cheaply (scheduler.reclaim_prospects). None: the host lacks
        something no memory reclaim gives (cells, pCPUs, a page size it
        has no pool of).
        """
        if cap.cells < self.cells or cap.pcpus < self.pcpus or \
                cap.shared < self.shared:
            return None
        gap = 0.0
        if self.memory:
            # The best cell's free memory, plus the overcommit a ratio
            # allows a floating guest cell (a pinned one gets none): the
            # most room any cell can offer, so the gap is a lower bound.
            room = cap.free_memory + cap.memory * max(
                0.0, (self.ram_ratio or 1.0) - 1)
            gap = max(gap, self.memory - room)
        for size, needed in self.pages:
            free = cap.pages.get(size)
            if needed is None or free is None:
                return None
            gap = max(gap, (needed - free) * size / 1024)
        return max(0, int(-(-gap // 1)))

    def _memory_limit(self, cap):
        """The most memory a guest cell without a page size may take on
        the host's best cell: its size without limits, else (for any
        cell) memory_mb * ratio - usage, which is below the bound
        returned, plus slack for float rounding."""
        if self.ram_ratio is None:
            return cap.memory
        return (cap.free_memory + cap.memory * max(0.0, self.ram_ratio - 1)
                + _SLACK_MB)

    def describe(self, capacity):
        """Return what the request needs of ``capacity``, for operators."""
        if capacity == CELLS:
            return f"the guest has {self.cells} NUMA nodes"
        if capacity == PCPUS:
            return f"a guest node pins {self.pcpus} pCPUs"
        if capacity == SHARED:
            return f"a guest node has {self.shared} floating vCPUs"
        if capacity == MEMORY:
            return f"a guest node needs {self.memory} MiB"
        return "a guest node needs " + ", ".join(
            f"{needed} free {size} KiB pages" if needed is not None else
            f"memory that is a whole number of {size} KiB pages"
            for size, needed in self.pages)
