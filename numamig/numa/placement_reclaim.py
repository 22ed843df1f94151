"""Making room for a guest on one host node by reclaiming virtio-mem slack.

A guest that does not fit a host only because one host node lacks
memory can fit once the guests on that node give some back: their
virtio-mem devices backed by the node have *slack*, what they have
requested above their floor (vmem.placement_floor_mb). This module
decides, without I/O, whether that is the case and how much to take
from whom:

* "only for lack of memory on node N" is decided by the fit itself: the
  guest does not fit the host as it is, and fits it once the slack of
  the devices on N (within the bounds) is taken back. A guest refused
  for pCPUs, for another node, or for more than the slack can give is
  left alone: no reclaim can place it.
* the amount is the least (in whole blocks) with which the fit passes,
  found by bisection: freeing more memory on a node never makes a fit
  fail, so the smallest amount that passes is well defined;
* the devices give in a fixed order, most slack first (then instance
  uuid and guest cell), each at most its slack, each guest at most
  ``max_loss_mb``, all of them together at most ``max_total_mb``;
* of several nodes that would do, the one asking least is chosen
  (then the lowest id).

Only one-to-one devices count (a device backed by several host nodes
frees memory the host cannot place on N). What the fit is given is the
host as its usage says now: the model assumes each guest gives back
what it is asked; the caller retries the real claim after the guests
answered, and gives the memory back when they fall short.
"""

import dataclasses

from numamig.numa import fit
from numamig.numa import reclaim
from numamig.numa import views
from numamig.numa import vmem


@dataclasses.dataclass(frozen=True)
class Slack:
    """A device that can give memory to place another guest.

    ``floor_mb``: what it keeps (whole blocks); ``held_mb``: what the
    host holds for it now (vmem.held_mb's device part);
    ``pagesize_kb``: the page size backing its guest cell (None: the
    host's default pages, no pool).
    """

    device: reclaim.Device
    floor_mb: int
    held_mb: int
    pagesize_kb: int | None

    @property
    def node(self):
        (node,) = self.device.nodes
        return node

    @property
    def room_mb(self):
        """What it can give: requested above the floor, whole blocks."""
        block = self.device.block_mb
        room = max(0, self.device.requested_mb - self.floor_mb)
        return room // block * block


def slack_of(instance_uuid, topology, floor_mb):
    """The Slacks of one placed guest, guest cell order.

    :param floor_mb: {guest cell: MiB it keeps} (vmem.placement_floor_mb).
    Devices without a host cell, or without room, are left out.
    """
    cells = {cell.id: cell for cell in topology.cells}
    result = []
    for device in reclaim.devices_of(instance_uuid, topology):
        if len(device.nodes) != 1:
            continue
        cell = cells[device.cell]
        entry = Slack(device, floor_mb.get(device.cell, device.size_mb),
                      vmem.held_mb(cell) - cell.memory_mb,
                      cell.get('pagesize'))
        if entry.room_mb > 0:
            result.append(entry)
    return result


@dataclasses.dataclass(frozen=True)
class Choice:
    """Reclaim ``plan`` (exact, on ``node``) and the guest fits: the
    model says it fits once ``freed_mb`` MiB are released on ``node``.
    ``refusal``: why it did not fit before."""

    node: int
    freed_mb: int
    plan: reclaim.Plan
    refusal: str


@dataclasses.dataclass(frozen=True)
class Decision:
    """``fits``: the guest fits without reclaim. ``choice``: the reclaim
    that makes it fit, or None. ``why``: one line for an operator."""

    fits: bool
    choice: Choice | None
    why: str


def choose(host_topology, request, slack, max_total_mb, max_loss_mb=None,
           limits=None, strategy='spread', pagesize_kb=None):
    """Decide whether, and how, reclaiming slack on one node places
    ``request`` on the host.

    :param host_topology: HostNUMATopology with its usage (or a
        views.HostView of one).
    :param request: the guest's InstanceNUMATopology request (or a
        views.RequestView).
    :param slack: the Slacks of the host's other guests (slack_of).
    :param max_total_mb: the most all devices together may give.
    :param max_loss_mb: the most one guest may give; None: no bound.
    :param limits, strategy, pagesize_kb: as numa.fit.fit.
    :returns: a Decision. Nothing given is modified.
    """
    host = views.HostView.of(host_topology)
    wanted = views.RequestView.of(request)
    args = {'limits': limits, 'strategy': strategy,
            'pagesize_kb': pagesize_kb}
    first = fit.fit(host, wanted, **args)
    if first.fits:
        return Decision(True, None, "fits without reclaim")
    if max_total_mb <= 0:
        return Decision(False, None, "reclaim is bounded to 0 MiB")
    by_node = {}
    for entry in slack:
        by_node.setdefault(entry.node, []).append(entry)
    if not by_node:
        return Decision(False, None,
                        "no guest on the host has virtio-mem slack above "
                        "its floor")
    found, misses = [], []
    for node in sorted(by_node):
        entries = _ordered(by_node[node])
        most = _steps(entries, max_total_mb, max_total_mb, max_loss_mb)
        most_freed = _freed(entries, most)
        if not most or not _fits_after(host, wanted, args, entries, most):
            misses.append(f"node {node}: its {most_freed} MiB of slack "
                          f"within the bounds would not do")
            continue
        steps = _least(host, wanted, args, entries, _change(most),
                       max_total_mb, max_loss_mb) or most
        found.append((_freed(entries, steps), node, steps))
    if not found:
        return Decision(False, None,
                        "no single host node can be freed enough: "
                        + "; ".join(misses))
    freed, node, steps = min(found, key=lambda item: item[:2])
    plan = reclaim.Plan(node, True, -_change(steps), tuple(steps), ())
    return Decision(False, Choice(node, freed, plan, first.reason),
                    f"reclaim {freed} MiB on host node {node}")


def _ordered(entries):
    return sorted(entries, key=lambda e: (-e.room_mb,
                                          e.device.instance_uuid,
                                          e.device.cell))


def _steps(entries, amount_mb, max_total_mb, max_loss_mb):
    """The Steps freeing at least ``amount_mb`` (whole blocks), within
    the bounds, in ``entries``' order; fewer where the bounds stop it."""
    left, total, loss, steps = amount_mb, 0, {}, []
    for entry in entries:
        if left <= 0:
            break
        device = entry.device
        block = device.block_mb
        room = entry.room_mb
        if max_loss_mb is not None:
            room = min(room, max_loss_mb - loss.get(device.instance_uuid,
                                                    0))
        room = min(room, max_total_mb - total) // block * block
        take = min(-(-left // block) * block, room)
        if take <= 0:
            continue
        steps.append(reclaim.Step(device.instance_uuid, device.cell,
                                  device.nodes, device.requested_mb,
                                  device.requested_mb - take,
                                  on_target=True))
        loss[device.instance_uuid] = loss.get(device.instance_uuid, 0) + take
        total += take
        left -= take
    return steps


def _change(steps):
    """MiB the steps take off the devices' requested sizes."""
    return sum(s.before_mb - s.after_mb for s in steps)


def _freed(entries, steps):
    """MiB the host stops holding on the node once ``steps`` are done:
    each device's held size down to its new requested size."""
    held = {(e.device.instance_uuid, e.device.cell): e.held_mb
            for e in entries}
    return sum(held[(s.instance_uuid, s.cell)] - s.after_mb for s in steps)


def _fits_after(host, wanted, args, entries, steps):
    pages = {}
    by_key = {(e.device.instance_uuid, e.device.cell): e for e in entries}
    freed = 0
    for step in steps:
        entry = by_key[(step.instance_uuid, step.cell)]
        mib = entry.held_mb - step.after_mb
        freed += mib
        if entry.pagesize_kb:
            pages[entry.pagesize_kb] = pages.get(entry.pagesize_kb, 0) - \
                mib * 1024 // entry.pagesize_kb
    node = entries[0].node
    cells = [cell.used(set(), -freed, 0, pages) if cell.id == node else cell
             for cell in host.cells]
    return fit.fit(views.HostView.of_cells(cells, host.pci), wanted,
                   **args).fits


def _least(host, wanted, args, entries, most_mb, max_total_mb, max_loss_mb):
    """The Steps of the least change with which the guest fits, by
    bisection over [1, ``most_mb``] MiB; None if none passes."""
    low, high, best = 1, most_mb, None
    while low <= high:
        middle = (low + high) // 2
        steps = _steps(entries, middle, max_total_mb, max_loss_mb)
        if steps and _fits_after(host, wanted, args, entries, steps):
            best, high = steps, middle - 1
        else:
            low = middle + 1
    return best


def rank(choices):
    """Order (prospect, Choice) pairs for trying: the least memory
    reclaimed first, then the prospect's ``order`` (the scheduler's
    weight order; scheduler.reclaim_hosts.Prospect).

    :returns: a new list.
    """
    return sorted(choices, key=lambda pair: (pair[1].freed_mb,
                                             pair[0].order))


@dataclasses.dataclass(frozen=True)
class Estimate:
    """What the host alone says a reclaim must free for the guest to
    fit: ``need_mb`` MiB on host node ``node`` (0 and None: it fits as
    it is)."""

    node: int | None
    need_mb: int


def estimate(host_topology, request, max_mb, limits=None, strategy='spread',
             pagesize_kb=None):
    """The least memory freed on one node with which ``request`` fits
    the host, from the host alone (no guest records): a scheduler's
    ranking of the hosts worth asking ``choose`` about.

    The model frees memory on the node as if any amount could be given
    back (in huge pages of the guest's page sizes too), so it is
    optimistic: ``choose``, which knows the devices, their blocks and
    floors, has the last word. The least amount is found by bisection
    over [1, ``max_mb``] MiB on each node (freeing more never makes a
    fit fail); of the nodes, the one needing least (then the lowest id).

    :returns: an Estimate, or None when no node freed of ``max_mb`` MiB
        lets the guest fit (it lacks something a reclaim cannot give,
        or more memory than ``max_mb``). Nothing given is modified.
    """
    host = views.HostView.of(host_topology)
    wanted = views.RequestView.of(request)
    args = {'limits': limits, 'strategy': strategy,
            'pagesize_kb': pagesize_kb}
    if fit.fit(host, wanted, **args).fits:
        return Estimate(None, 0)
    sizes = sorted({d.pagesize for d in wanted.demands(pagesize_kb)
                    if d.pagesize is not None and d.pagesize > 4})
    found = []
    for cell in host.cells:
        if not _fits_freed(host, wanted, args, cell.id, max_mb, sizes):
            continue
        low, high = 1, max_mb
        while low < high:
            middle = (low + high) // 2
            if _fits_freed(host, wanted, args, cell.id, middle, sizes):
                high = middle
            else:
                low = middle + 1
        found.append((low, cell.id))
    if not found:
        return None
    need, node = min(found)
    return Estimate(node, need)


def _fits_freed(host, wanted, args, node, mib, sizes):
    """Whether ``wanted`` fits once ``mib`` MiB are freed on ``node``
    (small pages, and as many pages of each of ``sizes``)."""
    pages = {size: -(mib * 1024 // size) for size in sizes}
    cells = [cell.used(set(), -mib, 0, pages) if cell.id == node else cell
             for cell in host.cells]
    return fit.fit(views.HostView.of_cells(cells, host.pci), wanted,
                   **args).fits
