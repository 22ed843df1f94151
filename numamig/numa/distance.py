"""NUMA distances between host cells, and the distance cost of a placement.

The host's distance table (libvirt's ``<distances>``, the firmware's
SLIT) says how far each node's CPUs are from each node's memory, 10 being
local. A guest of several cells spread over host cells makes its vCPUs
reach the memory of its other cells, so the farther apart those host
cells are, the slower the guest. Where the table is missing or lacks an
entry, numamig assumes the kernel's own defaults, local 10 and remote 20
(LOCAL_DISTANCE and REMOTE_DISTANCE in Linux's topology.h): every remote
pair is then equally far and nothing is preferred over anything.

Pure: reads cells (HostNUMACells or views.CellViews, anything with ``id``
and a ``distances`` dict) and returns numbers.
"""

import itertools

LOCAL = 10
REMOTE = 20


def between(first, second):
    """The distance of a pair of host cells as the cost counts it.

    The larger of the two directions (a table may be asymmetric): guest
    memory traffic runs both ways between two guest cells, and the slower
    direction bounds it. A missing entry is LOCAL for a cell to itself,
    REMOTE otherwise.
    """
    if first.id == second.id:
        return first.distances.get(first.id, LOCAL)
    return max(first.distances.get(second.id, REMOTE),
               second.distances.get(first.id, REMOTE))


def cost(cells):
    """The distance cost of guest cells placed on the host ``cells``.

    The sum, over every unordered pair of guest cells, of the distance
    (``between``) of the host cells they are on. Why this measure: each
    guest cell's vCPUs touch the other guest cells' memory (a guest kernel
    spreads its allocations and its tasks), so every pair pays its
    distance, and a pair on the far socket pays more than a pair on the
    near sub-NUMA cluster. A guest of one cell costs 0. The cost depends
    only on the set of host cells, not on which guest cell is on which.
    """
    return sum(between(a, b) for a, b in itertools.combinations(cells, 2))


def nearest_remote(cells):
    """The smallest distance between two distinct of ``cells`` (REMOTE
    for fewer than two): the best any pair can do on this host."""
    return min((between(a, b) for a, b in itertools.combinations(cells, 2)),
               default=REMOTE)


def excess(cells, host_cells):
    """How much farther than the host's nearest pairs the guest cells on
    ``cells`` are: cost(cells) minus the number of pairs times
    nearest_remote(host_cells). 0 for one cell, for every placement on a
    host whose remote distances are all equal, and for a guest whose
    every pair is as near as the host allows: a measure hosts with
    different tables can be compared by, equal on equal-distance hosts.
    """
    pairs = len(cells) * (len(cells) - 1) // 2
    if not pairs:
        return 0
    return cost(cells) - pairs * nearest_remote(host_cells)


def uniform(cells):
    """Whether every pair of distinct ``cells`` is equally far (so every
    set of them costs the same for a given size)."""
    seen = {between(a, b) for a, b in itertools.combinations(cells, 2)}
    return len(seen) <= 1


def missing(cells):
    """The (cell, other cell) id pairs the cells' tables do not give,
    sorted: empty when the table is complete."""
    ids = [cell.id for cell in cells]
    return sorted((cell.id, other) for cell in cells for other in ids
                  if other not in cell.distances)


def assumed_table(cells):
    """The full table {cell id: {cell id: distance}} with the missing
    entries filled in as LOCAL/REMOTE."""
    ids = sorted(cell.id for cell in cells)
    return {cell.id: {other: cell.distances.get(
        other, LOCAL if other == cell.id else REMOTE) for other in ids}
        for cell in sorted(cells, key=lambda c: c.id)}


# What a guest's firmware table (ACPI SLIT, from libvirt's <distances>)
# takes between two distinct nodes: Linux ignores a whole SLIT with a
# remote entry of LOCAL or less, and a table entry is one byte.
GUEST_MAX = 255


def guest_table(placement, cells):
    """The distances between a guest's cells as placed on host ``cells``.

    :param placement: {guest cell id: host cell id}, distinct host cells.
    :param cells: the host's cells (with their reported ``distances``).
    :returns: {guest cell: {guest cell: distance}}: LOCAL to itself, the
        host's reported distance from one's host cell to the other's
        (each direction as reported); None when the host's table lacks
        an entry it needs (numamig would only be assuming it, and the
        guest kernel assumes the same without a table) or has one a
        guest's table cannot carry (remote outside LOCAL+1..GUEST_MAX),
        and for a guest of fewer than two cells (nothing to tell).
    """
    if len(placement) < 2:
        return None
    by_id = {cell.id: cell for cell in cells}
    table = {}
    for guest, host in placement.items():
        row = {}
        for other, other_host in placement.items():
            if other == guest:
                row[other] = LOCAL
                continue
            value = by_id[host].distances.get(other_host) \
                if host in by_id else None
            if value is None or not LOCAL < value <= GUEST_MAX:
                return None
            row[other] = value
        table[guest] = row
    return table
