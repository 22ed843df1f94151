"""The drain planner with guests that hold passed-through PCI devices,
held against an exhaustive search written here, apart from numamig's fit
and device choice.

Each small cloud: 2-3 destinations of 2 cells (1-4 free dedicated pCPUs
and 1-4 GiB free each; both cells on one socket, one each, or some
unknown) with 0-4 plain PCI functions of two products, on
node 0, node 1 or of unknown node, some held by other guests already
(some destinations with the cells of another but functions of their
own); 2-4 one-cell guests pinning 1-3 pCPUs, some asking 1-2 devices of
one product under the ``required``, ``legacy``, ``preferred`` or
``socket`` policy.

The search (``exists``) gives every guest a destination and a host cell
with room, and every requested device a free function of the product
that the policy allows on that cell's node (required: that node;
legacy: that node or unknown; preferred: any; socket: that node, or
another of its socket where both cells report theirs), no function
twice. The
planner must answer "no plan" only where the search finds none, and
every plan it makes is checked here: the destination allowed, each
placement's pCPUs free and in its cell, its memory within the cell's,
each device of the product asked, free on that host before the plan,
used once by the whole plan, and on a node its policy allows for the
host cell the guest's cell took.

``NUMAMIG_DRAIN_SEED`` (an integer) runs another series of clouds.
"""

import os
import random

from numamig import objects
from numamig.numa import views
from numamig.scheduler import drain
from tests import base
from tests.unit.numa import hosts as numa_hosts

CLOUDS = 3000
SEED = int(os.environ.get('NUMAMIG_DRAIN_SEED', '0'))
PRODUCTS = ('10fb', '1572')
POLICIES = ('required', 'legacy', 'preferred', 'socket')
# The sockets of a host's two cells: one socket, one each, one unknown.
SOCKETS = ((0, 0), (0, 1), (0, None), (None, None))


def _device(host_index, index, node, product, held):
    return objects.HostPCIDevice(
        address=f'0000:{host_index:02x}:{index:02x}.0', vendor_id='8086',
        product_id=product, dev_type='type-PCI', numa_node=node,
        instance_uuid='held-by-another' if held else None)


def _host(rng, host_index, like=None):
    """A host; ``like``: a host whose cells it copies (its functions are
    its own), as identical servers differ only in their cards."""
    cells = [] if like is None else [c.obj_clone() for c in like.cells]
    for cell_id in range(2 if like is None else 0):
        cores = 4
        cell = numa_hosts.make_cell(cell_id, cores=cores, threads=1,
                                    cells=2, memory_mb=4096)
        free = sorted(cell.pcpuset)
        cell.pinned_cpus = set(rng.sample(free, rng.randint(0, 3)))
        cell.memory_usage_mb = rng.choice((0, 1024, 2048, 3072))
        cells.append(cell)
    if like is None:
        for cell, socket in zip(cells, rng.choice(SOCKETS), strict=True):
            cell.socket = socket
    devices = [_device(host_index, i, rng.choice((0, 1, None)),
                       rng.choice(PRODUCTS), rng.random() < 0.15)
               for i in range(rng.randint(0, 4))]
    return objects.HostNUMATopology(cells=cells, pci_devices=devices)


def _guest(rng, index, names):
    pcpus = rng.randint(1, 3)
    memory = rng.choice((512, 1024, 2048))
    request = numa_hosts.request([(pcpus, 0, memory, None, None)])
    asks = []
    if rng.random() < 0.6:
        asks = [(rng.choice(PRODUCTS), rng.randint(1, 2),
                 rng.choice(POLICIES))]
    request.pci_requests = [
        objects.PCIRequest(alias=f'a-{product}', count=count,
                           vendor_id='8086', product_id=product,
                           numa_policy=policy)
        for product, count, policy in asks]
    barred = (frozenset(rng.sample(names, 1)) if rng.random() < 0.15
              else frozenset())
    guest = drain.Guest(f'uuid-{index}', f'g{index}',
                        views.RequestView(request), None, exclude=barred)
    return guest, (pcpus, memory, asks, barred)


def cloud(rng):
    names = [f'h{i}' for i in range(rng.randint(2, 3))]
    topologies = {}
    for i, name in enumerate(names):
        like = topologies['h0'] if i and rng.random() < 0.4 else None
        topologies[name] = _host(rng, i, like)
    guests, shapes = zip(*(_guest(rng, i, names)
                           for i in range(rng.randint(2, 4))), strict=True)
    return topologies, list(guests), list(shapes)


# -- the exhaustive search, numamig's fit left out ---------------------------


def allowed(policy, device_node, cell, socket_of=None):
    """Whether ``policy`` lets a device on ``device_node`` serve a guest
    cell placed on host cell ``cell`` (``socket_of``: {host cell:
    socket or None}; none known without it)."""
    if policy == 'required':
        return device_node == cell
    if policy == 'legacy':
        return device_node in (cell, None)
    if policy == 'socket':
        # The guest cell's own node; another of its socket only where
        # every host cell reports one.
        socket_of = socket_of or {}
        if device_node == cell:
            return True
        if device_node is None or not socket_of or \
                None in socket_of.values():
            return False
        return socket_of.get(device_node) == socket_of.get(cell)
    return True


def _sockets(topology):
    return {c.id: c.get('socket') for c in topology.cells}


def _free_devices(topology):
    return [(d.address, d.product_id, d.numa_node)
            for d in topology.pci_devices if d.instance_uuid is None]


def _room(topology):
    return {c.id: [len(c.pcpuset - c.pinned_cpus),
                   c.memory_mb - c.memory_usage_mb]
            for c in topology.cells}


def _device_choices(free, used, asks, cell, socket_of=None):
    """Every way (a tuple of addresses) of serving ``asks`` from the free
    functions not ``used``, on host cell ``cell`` (of a host whose cells'
    sockets are ``socket_of``)."""
    choices = [()]
    for product, count, policy in asks:
        grown = []
        for taken in choices:
            fitting = [a for a, p, node in free
                       if p == product and a not in used and
                       a not in taken and
                       allowed(policy, node, cell, socket_of)]
            for picked in _combinations(fitting, count):
                grown.append(taken + picked)
        choices = grown
    return choices


def _combinations(items, count):
    if count == 0:
        return [()]
    return [(items[i],) + rest for i in range(len(items))
            for rest in _combinations(items[i + 1:], count - 1)]


def exists(topologies, shapes):
    """{guest position: (host, cell)} of some plan, or None."""
    room = {h: _room(t) for h, t in topologies.items()}
    free = {h: _free_devices(t) for h, t in topologies.items()}
    used = {h: set() for h in topologies}
    chosen = {}

    def place(position):
        if position == len(shapes):
            return True
        pcpus, memory, asks, barred = shapes[position]
        for host in sorted(topologies):
            if host in barred:
                continue
            for cell, left in room[host].items():
                if left[0] < pcpus or left[1] < memory:
                    continue
                for picked in _device_choices(free[host], used[host], asks,
                                              cell,
                                              _sockets(topologies[host])):
                    left[0] -= pcpus
                    left[1] -= memory
                    used[host].update(picked)
                    chosen[position] = (host, cell)
                    if place(position + 1):
                        return True
                    left[0] += pcpus
                    left[1] += memory
                    used[host].difference_update(picked)
                    del chosen[position]
        return False

    return dict(chosen) if place(0) else None


def invalid(topologies, shapes, guests, plan):
    """What is wrong with ``plan``, or None."""
    position = {g.uuid: i for i, g in enumerate(guests)}
    pinned = {h: {c.id: set(c.pinned_cpus) for c in t.cells}
              for h, t in topologies.items()}
    memory = {h: {c.id: c.memory_usage_mb for c in t.cells}
              for h, t in topologies.items()}
    free = {h: {a: (p, n) for a, p, n in _free_devices(t)}
            for h, t in topologies.items()}
    used = set()
    for move in plan.moves:
        pcpus, mem, asks, barred = shapes[position[move.guest.uuid]]
        name, host = move.guest.name, move.host
        if host in barred:
            return f"{name} went to {host}, barred"
        (cell,) = move.placement.cells
        host_cell = next(c for c in topologies[host].cells
                         if c.id == cell.host_cell)
        pins = set(cell.pins.values())
        if len(pins) != pcpus or pins & pinned[host][cell.host_cell] or \
                not pins <= host_cell.pcpuset:
            return f"{name}: pCPUs {sorted(pins)} on {host} not free"
        pinned[host][cell.host_cell] |= pins
        memory[host][cell.host_cell] += mem
        if memory[host][cell.host_cell] > host_cell.memory_mb:
            return f"{name}: memory of {host} cell {cell.host_cell} over"
        devices = move.placement.pci.devices if move.placement.pci else ()
        wanted = {f'a-{product}': (product, count, policy)
                  for product, count, policy in asks}
        got = {}
        for alias, address, _node, _guest_cell in devices:
            if (host, address) in used:
                return f"{name}: {address} on {host} used twice"
            used.add((host, address))
            if address not in free[host]:
                return f"{name}: {address} on {host} was not free"
            product, node = free[host][address]
            if alias not in wanted or wanted[alias][0] != product:
                return f"{name}: {address} is not of a product it asked"
            if not allowed(wanted[alias][2], node, cell.host_cell,
                           _sockets(topologies[host])):
                return (f"{name}: {address} on node {node} breaks "
                        f"{wanted[alias][2]} for cell {cell.host_cell}")
            got[alias] = got.get(alias, 0) + 1
        if got != {alias: w[1] for alias, w in wanted.items()}:
            return f"{name}: got devices {got}, asked {wanted}"
    return None


class DrainDevicesBruteForceTest(base.TestCase):

    def test_plans_valid_and_never_no_plan_where_one_exists(self):
        rng = random.Random(SEED)
        wrong, counts = [], {drain.PLANNED: 0, drain.NO_PLAN: 0,
                             drain.NOT_FOUND: 0}
        with_devices = with_socket = 0
        for number in range(CLOUDS):
            topologies, guests, shapes = cloud(rng)
            position = {g.uuid: i for i, g in enumerate(guests)}
            found = drain.plan(
                guests, [drain.Destination(h, views.HostView(t))
                         for h, t in topologies.items()])
            counts[found.outcome] += 1
            truth = exists(topologies, shapes)
            if found.complete:
                problem = invalid(topologies, shapes, guests, found)
                if problem:
                    wrong.append((number, problem))
                if any(move.placement.pci for move in found.moves):
                    with_devices += 1
                policies = {shapes[position[m.guest.uuid]][2][0][2]
                            for m in found.moves if m.placement.pci}
                with_socket += 'socket' in policies
            elif truth is not None:
                wrong.append((number, f"{found.outcome}: "
                                      f"{found.unplaced[0].reason}; but "
                                      f"{truth}"))
        self.assertEqual([], wrong[:5], f"{len(wrong)} clouds wrong")
        # The series covers both answers, and plans that move devices.
        self.assertGreater(counts[drain.PLANNED], CLOUDS // 5)
        self.assertGreater(counts[drain.NO_PLAN], CLOUDS // 10)
        self.assertGreater(with_devices, CLOUDS // 10)
        # ... and devices taken under the socket policy.
        self.assertGreater(with_socket, CLOUDS // 50)


class DeviceKindTest(base.TestCase):
    """The case the series found: two guests of equal CPUs and memory,
    one asking devices only one destination has, were taken for one kind
    (the device-less guest given the other's destinations)."""

    def _topology(self, devices, free_cell_0, free_cell_1):
        cells = []
        for cell_id, free in ((0, free_cell_0), (1, free_cell_1)):
            cell = numa_hosts.make_cell(cell_id, cores=4, threads=1,
                                        cells=2, memory_mb=4096)
            cell.pinned_cpus = set(sorted(cell.pcpuset)[free:])
            cells.append(cell)
        return objects.HostNUMATopology(cells=cells, pci_devices=devices)

    def test_guests_asking_different_devices_are_planned_apart(self):
        topologies = {
            'h0': self._topology([_device(0, 0, 1, '1572', False),
                                  _device(0, 2, None, '1572', False)],
                                 4, 1),
            'h1': self._topology([], 1, 3)}
        shapes = [(3, 1024, [('1572', 2, 'preferred')], frozenset()),
                  (3, 1024, [], frozenset())]
        guests = []
        for index, (pcpus, memory, asks, _barred) in enumerate(shapes):
            request = numa_hosts.request([(pcpus, 0, memory, None, None)])
            request.pci_requests = [objects.PCIRequest(
                alias=f'a-{p}', count=c, vendor_id='8086', product_id=p,
                numa_policy=pol) for p, c, pol in asks]
            guests.append(drain.Guest(f'uuid-{index}', f'g{index}',
                                      views.RequestView(request), None))
        self.assertIsNotNone(exists(topologies, shapes))
        found = drain.plan(guests, [drain.Destination(h, views.HostView(t))
                                    for h, t in topologies.items()])
        self.assertEqual(drain.PLANNED, found.outcome)
        self.assertEqual({'g0': 'h0', 'g1': 'h1'},
                         {m.guest.name: m.host for m in found.moves})
        self.assertIsNone(invalid(topologies, shapes, guests, found))

    def test_hosts_differing_in_functions_are_not_one_class(self):
        same_cells = self._topology([], 2, 2)
        with_device = self._topology([_device(1, 0, 0, '10fb', False)],
                                     2, 2)
        request = numa_hosts.request([(1, 0, 512, None, None)])
        search = drain._Search(
            [drain.Guest('u', 'g', views.RequestView(request), None)],
            {'h0': views.HostView(same_cells),
             'h1': views.HostView(with_device)}, ['h0', 'h1'], None,
            'spread', 100, None)
        self.assertNotEqual(search._class('h0'), search._class('h1'))
