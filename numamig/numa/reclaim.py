"""Planning a memory change on one host node: which devices, how much.

The seed's NUMA-aware ballooning (``pnid``, ``nodeexact``) on virtio-mem
devices: to change memory on host node P, translate P to the guest cells
whose device P backs (PNODE_TO_VNODE), change those first; without
``exact`` continue on the guest's (or other guests') other cells,
possibly short of the target with ``exact``. A guest cell backed by
several host nodes (one-to-many) can be changed, but what it frees or
takes cannot be placed on P: it is counted as best effort and reported.

Everything here is pure: it reads placed topologies and returns a Plan;
the conductor carries the plan out and records it. Amounts are whole
blocks of each device. Bounds:

* a shrink never takes a device below 0 nor, per guest, more than
  ``max_loss_mb`` in one change (the guest driver keeps no reserve for
  the guest: asking it for too much can run it out of memory);
* a growth never takes a device above its size, and never asks host
  node P (or, best effort, another node) for more than it has free.
"""

import dataclasses

from numamig import exception


@dataclasses.dataclass(frozen=True)
class Step:
    """One device's change: guest cell ``cell`` of ``instance_uuid``
    from ``before_mb`` to ``after_mb`` requested; ``nodes`` the host
    nodes backing it; ``on_target`` whether what it frees or takes is
    on the target node only (one-to-one)."""

    instance_uuid: str
    cell: int
    nodes: frozenset
    before_mb: int
    after_mb: int
    on_target: bool

    @property
    def change_mb(self):
        return self.after_mb - self.before_mb


@dataclasses.dataclass(frozen=True)
class Plan:
    """What a change will ask of the guests, and how far it gets.

    ``wanted_mb``: the change asked for (negative: reclaim).
    ``on_node_mb``: change on the target node (one-to-one devices);
    ``elsewhere_mb``: on other nodes (best effort without ``exact``);
    ``best_effort_mb``: on one-to-many devices (some of it may be on the
    target node, which cannot be known). ``short_mb``: what is missing to
    reach ``wanted_mb`` (0 when reached). ``notes``: one line each for
    what an operator should know (a bound reached, one-to-many cells).
    """

    node: int
    exact: bool
    wanted_mb: int
    steps: tuple
    notes: tuple

    @property
    def on_node_mb(self):
        return sum(s.change_mb for s in self.steps
                   if s.on_target and self.node in s.nodes)

    @property
    def best_effort_mb(self):
        return sum(s.change_mb for s in self.steps if not s.on_target and
                   self.node in s.nodes)

    @property
    def elsewhere_mb(self):
        return sum(s.change_mb for s in self.steps if self.node not in
                   s.nodes)

    @property
    def short_mb(self):
        done = sum(s.change_mb for s in self.steps)
        return abs(self.wanted_mb - done) if abs(done) < abs(
            self.wanted_mb) else 0

    def as_dict(self):
        """Plain values, for records and ``--format json``."""
        return {'node': self.node, 'exact': self.exact,
                'wanted_mb': self.wanted_mb,
                'on_node_mb': self.on_node_mb,
                'best_effort_mb': self.best_effort_mb,
                'elsewhere_mb': self.elsewhere_mb,
                'short_mb': self.short_mb,
                'steps': [dict(dataclasses.asdict(s),
                               nodes=sorted(s.nodes)) for s in self.steps],
                'notes': list(self.notes)}


@dataclasses.dataclass(frozen=True)
class Device:
    """A guest cell's device as planning reads it."""

    instance_uuid: str
    cell: int
    nodes: frozenset
    size_mb: int
    block_mb: int
    requested_mb: int


def devices_of(instance_uuid, topology, backing=None):
    """Return the Devices of a placed topology, guest cell order.

    :param backing: {guest cell: set of host nodes} read from the
        domain's ``<nodemask>``s, when they may differ from the cells'
        host cell (an adopted guest); default: each cell's host cell.
    """
    result = []
    for cell in sorted(topology.cells, key=lambda c: c.id):
        if not cell.has_virtio_mem:
            continue
        nodes = (backing or {}).get(cell.id)
        if nodes is None:
            nodes = {cell.host_cell} if cell.host_cell is not None \
                else set()
        result.append(Device(instance_uuid, cell.id, frozenset(nodes),
                             cell.virtio_mem_size_mb,
                             max(1, cell.virtio_mem_block_kb // 1024),
                             cell.virtio_mem_requested_mb))
    return result


def plan_guest(devices, node, target_mb, exact, free_mb=None,
               max_loss_mb=None):
    """Plan setting one guest's plugged device memory to ``target_mb``.

    The seed's ``mem-set -n node [-e] target``: the change (target minus
    what the devices have requested now) is made on the devices node
    backs first, then (without ``exact``) on the others.

    :param devices: the guest's Devices (devices_of).
    :param free_mb: {host node: MiB free}, bounding growth; None: no
        bound (the caller checks growth elsewhere).
    :param max_loss_mb: the most the guest may lose; None: no bound.
    :raises InvalidMemoryChange: no device, or a target beyond the
        devices' sizes.
    """
    if not devices:
        raise exception.InvalidMemoryChange(
            reason="the guest has no virtio-mem device")
    total = sum(d.size_mb for d in devices)
    if not 0 <= target_mb <= total:
        raise exception.InvalidMemoryChange(
            reason=f"--size {target_mb} MiB: the guest's devices hold 0 "
                   f"to {total} MiB")
    wanted = target_mb - sum(d.requested_mb for d in devices)
    return _plan(devices, node, wanted, exact, free_mb,
                 {devices[0].instance_uuid: max_loss_mb})


def plan_host(devices, node, amount_mb, exact, free_mb=None,
              max_loss_mb=None):
    """Plan freeing (``amount_mb`` < 0) or giving back (> 0) memory on
    host node ``node`` from the guests of one host.

    Guests are chosen by how much their devices on ``node`` can give
    (a shrink) or take (a growth), most first, instance uuid breaking
    ties; each is bounded by ``max_loss_mb`` (a shrink). Without
    ``exact``, what ``node`` cannot give comes from the same guests'
    other devices, in the same order.

    :param devices: every Device of the host's guests.
    :raises InvalidMemoryChange: a zero amount.
    """
    if amount_mb == 0:
        raise exception.InvalidMemoryChange(reason="--size must not be 0")
    bounds = dict.fromkeys({d.instance_uuid for d in devices}, max_loss_mb)
    return _plan(devices, node, amount_mb, exact, free_mb, bounds)


def _plan(devices, node, wanted, exact, free_mb, bounds):
    shrink = wanted < 0
    free = dict(free_mb) if free_mb is not None else None
    on_node = min(wanted, _room(devices, node, False))
    if not shrink and free is not None and free.get(node, 0) < on_node:
        raise exception.InvalidMemoryChange(
            reason=f"host node {node} has {free.get(node, 0)} MiB free, "
                   f"the growth needs {on_node} MiB there")
    loss = dict.fromkeys(bounds, 0)
    left, steps, notes = abs(wanted), [], []
    passes = [True] if exact else [True, False]
    for on_node in passes:
        for device in _ordered(devices, node, shrink, on_node):
            if left <= 0:
                break
            step = _step(device, node, shrink, left, free,
                         _loss_left(bounds, loss, device))
            if step is None:
                continue
            steps.append(step)
            left -= abs(step.change_mb)
            if shrink:
                loss[device.instance_uuid] += -step.change_mb
            elif free is not None:
                for n in step.nodes:
                    free[n] = free.get(n, 0) - step.change_mb
    notes.extend(_notes(devices, node, steps, bounds, loss, left))
    return Plan(node, exact, wanted, tuple(steps), tuple(notes))


def _room(devices, node, shrink):
    """What the devices ``node`` backs can give (shrink) or take."""
    return sum(d.requested_mb if shrink else d.size_mb - d.requested_mb
               for d in devices if node in d.nodes)


def _ordered(devices, node, shrink, on_node):
    """The devices of one pass: those ``node`` backs (one-to-one before
    one-to-many), or the others; most room first, then uuid and cell."""
    chosen = [d for d in devices if (node in d.nodes) == on_node]
    return sorted(chosen, key=lambda d: (
        len(d.nodes) > 1,
        -(d.requested_mb if shrink else d.size_mb - d.requested_mb),
        d.instance_uuid, d.cell))


def _loss_left(bounds, loss, device):
    bound = bounds.get(device.instance_uuid)
    return None if bound is None else bound - loss[device.instance_uuid]


def _step(device, node, shrink, left, free, loss_left):
    """The change of one device toward ``left``, in whole blocks."""
    room = device.requested_mb if shrink else \
        device.size_mb - device.requested_mb
    if shrink and loss_left is not None:
        room = min(room, loss_left)
    if not shrink and free is not None:
        room = min([room] + [free.get(n, 0) for n in device.nodes])
    block = device.block_mb
    # Round up to reach the target, but never past the room (in blocks).
    amount = min(-(-left // block) * block, room // block * block)
    if amount <= 0:
        return None
    after = device.requested_mb + (-amount if shrink else amount)
    return Step(device.instance_uuid, device.cell, device.nodes,
                device.requested_mb, after,
                on_target=device.nodes == frozenset({node}))


def _notes(devices, node, steps, bounds, loss, left):
    notes = []
    many = sorted({(s.instance_uuid, s.cell) for s in steps
                   if len(s.nodes) > 1})
    for uuid, cell in many:
        notes.append(f"guest cell {cell} of {uuid} is backed by several "
                     f"host nodes: its change is best effort, not known "
                     f"to be on node {node}")
    for uuid in sorted(u for u, b in bounds.items()
                       if b is not None and loss[u] >= b > 0):
        notes.append(f"{uuid} lost its bound of {bounds[uuid]} MiB")
    if left > 0:
        notes.append(f"{left} MiB short of the target")
    return notes
