"""Compact text pictures of host cells, guest placements and page pools.

Pure formatting of numamig objects: nothing here reads files, the
database or configuration. Every function returns lines (or a string)
instead of printing, so that the CLI and the main job decide where
output goes.

A host cell is drawn one SMT core per bracket, each CPU with a mark::

    cell 0  cores [0s 8s] [1P 9P] [2. 10.] [3. 11.]

    P  pinned by a guest       .  dedicated and free
    s  shared (floating vCPUs) -  not offered to guests
"""

from numamig import cpuspec
from numamig.numa import distance

LEGEND = ("P pinned  . dedicated, free  s shared (floating)  "
          "- not for guests")
_SMALL_PAGE_KB = 4


def cpu_mark(cell, cpu):
    """The one-character mark of a host CPU in its cell."""
    if cpu in cell.pinned_cpus:
        return 'P'
    if cpu in cell.pcpuset:
        return '.'
    if cpu in cell.cpuset:
        return 's'
    return '-'


def cores(cell):
    """The cell's CPUs grouped by SMT core, in order of their first CPU."""
    groups = [sorted(group) for group in cell.siblings if group]
    grouped = set().union(*map(set, groups)) if groups else set()
    groups += [[cpu] for cpu in sorted(cell.all_cpus - grouped)]
    return sorted(groups, key=lambda group: group[0])


def core_picture(cell):
    """``[0s 8s] [1P 9P] ...``: every core of the cell with its marks."""
    return ' '.join(
        '[' + ' '.join(f'{cpu}{cpu_mark(cell, cpu)}' for cpu in core) + ']'
        for core in cores(cell))


def page_pools(cell, small=False):
    """``2M 3/512 used, 1G 4/4 used``: the cell's page pools."""
    parts = []
    for pool in sorted(cell.mempages, key=lambda p: p.size_kb):
        if pool.size_kb <= _SMALL_PAGE_KB and not small:
            continue
        reserved = f" ({pool.reserved} reserved)" if pool.reserved else ''
        parts.append(f"{size_text(pool.size_kb)} "
                     f"{pool.used}/{pool.total} used{reserved}")
    return ', '.join(parts) or 'no huge pages'


def cell_lines(cell, assumed=None):
    """Lines describing one host cell: CPUs, memory, pages, distances.

    :param assumed: the cell's row of distance.assumed_table when the
        host's table lacks entries (drawn with the assumed ones marked
        ``*``), or None to draw the reported row.
    """
    lines = [f"cell {cell.id}  cores {core_picture(cell)}",
             f"        pCPUs dedicated {_cpus(cell.pcpuset)}, pinned "
             f"{_cpus(cell.pinned_cpus)}, free {_cpus(cell.free_pcpus)}; "
             f"shared {_cpus(cell.cpuset)} ({cell.cpu_usage} floating "
             f"vCPUs)",
             f"        memory {cell.memory_usage_mb}/{cell.memory_mb} MiB "
             f"used; pages {page_pools(cell)}"]
    if assumed is not None:
        lines.append("        distances " + ' '.join(
            f"{other}:{value}{'' if other in cell.distances else '*'}"
            for other, value in sorted(assumed.items())))
    elif cell.distances:
        lines.append("        distances " + ' '.join(
            f"{other}:{value}" for other, value in
            sorted(cell.distances.items())))
    return lines


def host_lines(topology):
    """Lines drawing every cell of a HostNUMATopology, then the legend.

    A host of several cells whose distance table lacks entries (libvirt
    gave none, or an incomplete one) says so: placement assumes local
    10, remote 20 for them (numa/distance.py), marked ``*``.
    """
    cells = sorted(topology.cells, key=lambda c: c.id)
    assumed = (distance.assumed_table(cells)
               if len(cells) > 1 and distance.missing(cells) else None)
    lines = []
    for cell in cells:
        lines += cell_lines(cell, assumed and assumed[cell.id])
    if assumed is not None:
        lines.append(f"        (distances marked * are assumed: libvirt "
                     f"reports no such entry; local {distance.LOCAL}, "
                     f"remote {distance.REMOTE})")
    lines.append(f"        ({LEGEND})")
    return lines


def cell_summary(cell):
    """``c0 6/6 pCPU 1G 4/4``: free of total, for one-line host lists."""
    parts = [f"c{cell.id} {len(cell.free_pcpus)}/{len(cell.pcpuset)} pCPU"]
    for pool in sorted(cell.mempages, key=lambda p: p.size_kb):
        if pool.size_kb > _SMALL_PAGE_KB:
            parts.append(f"{size_text(pool.size_kb)} "
                         f"{max(pool.free, 0)}/{pool.total}")
    return ' '.join(parts)


def placement_lines(topology):
    """Lines of a guest placement: guest cell -> host cell, pins, pages.

    :param topology: a placed InstanceNUMATopology, or None.
    """
    if topology is None or not topology.cells:
        return ["no NUMA placement (floating vCPUs, host's small pages)"]
    lines = []
    for cell in sorted(topology.cells, key=lambda c: c.id):
        lines.append(f"guest cell {cell.id} -> host cell {cell.host_cell}: "
                     f"{cell.memory_mb} MiB, {pages_text(cell.pagesize)}, "
                     f"{pins_text(cell)}")
    if topology.cpuset_reserved:
        lines.append(f"emulator threads on pCPUs "
                     f"{_cpus(topology.cpuset_reserved)}")
    for device in topology.get('pci_devices') or ():
        node = ('unknown node' if device.host_node is None
                else f"host node {device.host_node}")
        cell = ('no guest cell on that node' if device.guest_cell is None
                else f"guest cell {device.guest_cell}")
        lines.append(f"PCI {device.alias} {device.address} on {node} "
                     f"({cell})")
    return lines


def pins_text(cell):
    """``vCPU 0->2 1->10`` for pinned vCPUs, plus the floating ones."""
    pinning = cell.get('cpu_pinning') or {}
    parts = []
    if pinning:
        parts.append('vCPU ' + ' '.join(
            f"{vcpu}->{pcpu}" for vcpu, pcpu in sorted(pinning.items())))
    if cell.cpuset:
        parts.append(f"floating vCPUs {_cpus(cell.cpuset)}")
    return ', '.join(parts) or 'no vCPUs'


def pages_text(size_kb):
    """``1G pages`` / ``small pages`` for a guest cell's page size."""
    if not size_kb or size_kb <= _SMALL_PAGE_KB:
        return 'small pages'
    return f"{size_text(size_kb)} pages"


def size_text(size_kb):
    """``4K``, ``2M``, ``1G``: a page size in its largest whole unit."""
    for unit, factor in (('G', 1024 * 1024), ('M', 1024)):
        if size_kb % factor == 0:
            return f"{size_kb // factor}{unit}"
    return f"{size_kb}K"


def cpus_text(cpus):
    """``1-3,9`` or ``none``: a set of CPUs as operators write it."""
    return cpuspec.format_cpu_spec(cpus) if cpus else 'none'


def _cpus(cpus):
    return cpuspec.format_cpu_spec(cpus) if cpus else 'none'
