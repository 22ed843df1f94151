"""The drain planner with guests that hold passed-through PCI devices,
held against an exhaustive search written here, apart from numamig's fit
and device choice.

Each small cloud: 2-3 destinations of 2, 3 or 4 cells (1-4 free
dedicated pCPUs and 1-4 GiB free each; the cells on one socket, split
in halves, alternating, some unknown, or none known) with up to 2 per
cell and 2 more plain PCI functions of two products, on one of the
host's nodes or of unknown node, some held by other guests already
(some destinations with the cells of another but functions of their
own); 2-4 guests, about half of them of two guest cells (1-2 pinned
pCPUs each, so they need two host cells), the others of one (1-3
pCPUs); some ask 1 device (or 2) of one product, a few of each product,
under the ``required``, ``legacy``, ``preferred`` or ``socket``
policy.

The rules (``allowed``): a guest's devices must be free functions of
the products asked that each policy allows on the guest's nodes, the
host cells its cells took (required: one of those nodes; legacy: one of
them or unknown; preferred: any; socket: one of those nodes, or another
node of the socket of one of them where every host cell reports its
socket), no function twice. A two-cell guest's devices may thus sit on
either of its nodes, or on both.

A plan is carried out by claims, each destination fitting the guest
again on what the moves before it left, so the truth is ``claimable``:
some destination per guest and some order of each destination's guests
in which every claim succeeds, each claim (``claim``) modelled from the
fit's rules here, not calling it. The planner must answer "no plan" only
where that finds none, and every plan it makes is replayed: each
placement is what its claim takes in the plan's order, and, by the rules
alone, the destination is allowed, each guest cell on a host cell of
its own, its pCPUs free and in that cell, its memory within the cell's,
each device of the product asked, free on that host before the plan,
used once by the whole plan, on a node its policy allows for the
guest's nodes, and given to the guest cell on its node (none when no
guest cell is there). ``exists`` searches with any host cells and
functions the rules allow: it must find a plan wherever the claims do;
the clouds where only it finds one (a plan no claim would make) are
counted.

``NUMAMIG_DRAIN_SEED`` (an integer) runs another series of clouds.
"""

import itertools
import os
import random

from numamig import objects
from numamig.numa import views
from numamig.scheduler import drain
from tests import base
from tests.unit.numa import hosts as numa_hosts
from tests.unit.scheduler import brute

CLOUDS = 5000
SEED = int(os.environ.get('NUMAMIG_DRAIN_SEED', '0'))
PRODUCTS = ('10fb', '1572')
POLICIES = ('required', 'legacy', 'preferred', 'socket')


def socket_layout(rng, count):
    """The sockets of a host's ``count`` cells (None: unknown): one
    socket, halves, alternating, each at random, none known."""
    shape = rng.choice(('one', 'halves', 'alternating', 'random', 'none'))
    if shape == 'one':
        return [0] * count
    if shape == 'halves':
        return [int(i >= count // 2) for i in range(count)]
    if shape == 'alternating':
        return [i % 2 for i in range(count)]
    if shape == 'random':
        return [rng.choice((0, 1, None)) for _ in range(count)]
    return [None] * count


def _device(host_index, index, node, product, held):
    return objects.HostPCIDevice(
        address=f'0000:{host_index:02x}:{index:02x}.0', vendor_id='8086',
        product_id=product, dev_type='type-PCI', numa_node=node,
        instance_uuid='held-by-another' if held else None)


def _host(rng, host_index, like=None):
    """A host; ``like``: a host whose cells it copies (its functions are
    its own), as identical servers differ only in their cards."""
    if like is None:
        count = rng.choice((2, 2, 3, 4))
        cells = []
        for cell_id in range(count):
            cell = numa_hosts.make_cell(cell_id, cores=4, threads=1,
                                        cells=count, memory_mb=4096)
            free = sorted(cell.pcpuset)
            cell.pinned_cpus = set(rng.sample(free, rng.randint(0, 3)))
            cell.memory_usage_mb = rng.choice((0, 1024, 2048, 3072))
            cells.append(cell)
        for cell, socket in zip(cells, socket_layout(rng, count),
                                strict=True):
            cell.socket = socket
    else:
        cells = [c.obj_clone() for c in like.cells]
    nodes = [c.id for c in cells] + [None]
    devices = [_device(host_index, i, rng.choice(nodes),
                       rng.choice(PRODUCTS), rng.random() < 0.15)
               for i in range(rng.randint(0, 2 * len(cells) + 2))]
    return objects.HostNUMATopology(cells=cells, pci_devices=devices)


def guest_cells(rng, two_cells=0.5):
    """(pinned pCPUs, MiB) per guest cell: two cells of 1-2 pCPUs, or
    one of 1-3."""
    if rng.random() < two_cells:
        return tuple((rng.randint(1, 2), rng.choice((512, 1024)))
                     for _ in range(2))
    return ((rng.randint(1, 3), rng.choice((512, 1024, 2048))),)


def requests(asks):
    return [objects.PCIRequest(alias=f'a-{product}', count=count,
                               vendor_id='8086', product_id=product,
                               numa_policy=policy)
            for product, count, policy in asks]


def make_guest(index, cells, asks, barred=frozenset()):
    request = numa_hosts.request([(pcpus, 0, memory, None, None)
                                  for pcpus, memory in cells])
    request.pci_requests = requests(asks)
    return drain.Guest(f'uuid-{index}', f'g{index}',
                       views.RequestView(request), None, exclude=barred)


def _guest(rng, index, names):
    cells = guest_cells(rng)
    asks = []
    if rng.random() < 0.6:
        products = (rng.sample(PRODUCTS, 2) if rng.random() < 0.15
                    else [rng.choice(PRODUCTS)])
        asks = [(product, rng.choice((1, 1, 2)), rng.choice(POLICIES))
                for product in products]
    barred = (frozenset(rng.sample(names, 1)) if rng.random() < 0.15
              else frozenset())
    return make_guest(index, cells, asks, barred), (cells, asks, barred)


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


def allowed(policy, device_node, cells, socket_of=None):
    """Whether ``policy`` lets a device on ``device_node`` serve a guest
    whose cells were placed on the host cells ``cells`` (its nodes;
    ``socket_of``: {host cell: socket or None}; none known without
    it)."""
    cells = set(cells)
    if policy == 'required':
        return device_node in cells
    if policy == 'legacy':
        return device_node is None or device_node in cells
    if policy == 'socket':
        # One of the guest's nodes; another of the socket of one of them
        # only where every host cell reports its socket (Nova's rule).
        socket_of = socket_of or {}
        if device_node in cells:
            return True
        if device_node is None or not socket_of or \
                None in socket_of.values():
            return False
        mine = {socket_of.get(cell) for cell in cells}
        return socket_of.get(device_node) in mine
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


def _device_choices(free, used, asks, cells, socket_of=None):
    """Every way (a tuple of addresses) of serving ``asks`` from the free
    functions not ``used``, for a guest on host cells ``cells`` (of a
    host whose cells' sockets are ``socket_of``)."""
    choices = [()]
    for product, count, policy in asks:
        grown = []
        for taken in choices:
            fitting = [a for a, p, node in free
                       if p == product and a not in used and
                       a not in taken and
                       allowed(policy, node, cells, socket_of)]
            for picked in _combinations(fitting, count):
                grown.append(taken + picked)
        choices = grown
    return choices


def _combinations(items, count):
    if count == 0:
        return [()]
    return [(items[i],) + rest for i in range(len(items))
            for rest in _combinations(items[i + 1:], count - 1)]


def cell_choices(room, cells):
    """Every tuple of distinct host cells (one per guest cell, in guest
    cell order) with room for the guest cells ``cells``."""
    return [chosen for chosen in itertools.permutations(room, len(cells))
            if all(room[host][0] >= pcpus and room[host][1] >= memory
                   for host, (pcpus, memory) in zip(chosen, cells,
                                                    strict=True))]


def exists(topologies, shapes):
    """{guest position: (host, host cells)} of some plan, or None."""
    room = {h: _room(t) for h, t in topologies.items()}
    free = {h: _free_devices(t) for h, t in topologies.items()}
    used = {h: set() for h in topologies}
    chosen = {}

    def take(host, cells, hosts, sign):
        for host_cell, (pcpus, memory) in zip(hosts, cells, strict=True):
            room[host][host_cell][0] -= sign * pcpus
            room[host][host_cell][1] -= sign * memory

    def place(position):
        if position == len(shapes):
            return True
        cells, asks, barred = shapes[position]
        for host in sorted(topologies):
            if host in barred:
                continue
            for hosts in cell_choices(room[host], cells):
                for picked in _device_choices(free[host], used[host], asks,
                                              hosts,
                                              _sockets(topologies[host])):
                    take(host, cells, hosts, 1)
                    used[host].update(picked)
                    chosen[position] = (host, hosts)
                    if place(position + 1):
                        return True
                    take(host, cells, hosts, -1)
                    used[host].difference_update(picked)
                    del chosen[position]
        return False

    return dict(chosen) if place(0) else None


# -- the claims, modelled -----------------------------------------------------
#
# A plan is carried out by claims: each destination fits the guest again
# on what the moves before it left (numamig.compute.claims), so a plan
# exists only where some order of each destination's guests has every
# claim take what the plan needs; a free choice of cells and functions
# (``exists``) may find one no claim would make. ``claim`` is that fit
# for these clouds, written from its rules (numamig/numa/fit.py and
# pci.py), not calling them: no shared CPUs, hugepages, thread policies
# or distances here, so
#
# * host cells are tried emptiest first (``spread``): most free pCPUs,
#   then most free memory, then the lowest id;
# * a guest without devices takes the lexicographically first tuple of
#   distinct host cells in that order (one per guest cell, in guest cell
#   order) with room;
# * a guest asking devices takes the first set of host cells (sets of
#   positions in that order, lexicographically) its cells fit with room,
#   whose nodes let every request have its functions, its cells in the
#   set's first tuple; each request in turn takes the functions its
#   policy allows, on the guest's nodes first, then of unknown node,
#   then the others, in address order within each (``preferred`` takes
#   any when too few are on its nodes or of unknown node). The
#   generator's requests of one guest are of distinct products, so no
#   other choice of functions can help a request left short.


def _rank(node, nodes):
    if node in nodes:
        return 0
    return 1 if node is None else 2


def _choose(free, asks, nodes, socket_of):
    """The addresses the claim takes for ``asks`` from ``free`` ((address,
    product, node) of the free functions) for a guest on host cells
    ``nodes``, in request order, or None."""
    taken = []
    for product, count, policy in asks:
        usable = [(a, n) for a, p, n in free if p == product and
                  a not in taken]
        if policy == 'preferred':
            fitting = [(a, n) for a, n in usable
                       if allowed('legacy', n, nodes)]
            if len(fitting) < count:
                fitting = usable
        else:
            fitting = [(a, n) for a, n in usable
                       if allowed(policy, n, nodes, socket_of)]
        if len(fitting) < count:
            return None
        fitting.sort(key=lambda item: (_rank(item[1], nodes), item[0]))
        taken.extend(a for a, _n in fitting[:count])
    return tuple(taken)


def claim(room, free, socket_of, cells, asks):
    """(host cell per guest cell, addresses taken) of the claim of a guest
    of ``cells`` asking ``asks`` on a host whose cells have ``room``
    ({cell: [free pCPUs, free MiB]}), ``free`` functions ((address,
    product, node)) and sockets ``socket_of``; None when it fails."""
    order = sorted(room, key=lambda c: (-room[c][0], -room[c][1], c))

    def fits(position, guest_cell):
        pcpus, memory = cells[guest_cell]
        host = room[order[position]]
        return host[0] >= pcpus and host[1] >= memory

    def tuples(positions):
        for chosen in itertools.permutations(positions, len(cells)):
            if all(fits(p, g) for g, p in enumerate(chosen)):
                yield tuple(order[p] for p in chosen)

    if not asks:
        return next(((chosen, ()) for chosen in
                     tuples(range(len(order)))), None)
    for positions in itertools.combinations(range(len(order)), len(cells)):
        chosen = next(tuples(positions), None)
        if chosen is None:
            continue
        picked = _choose(free, asks, set(chosen), socket_of)
        if picked is not None:
            return chosen, picked
    return None


class Claims:
    """A destination as its claims change it: room, free functions."""

    def __init__(self, topology):
        self.room = _room(topology)
        self.free = _free_devices(topology)
        self.socket_of = _sockets(topology)

    def take(self, cells, asks):
        """Claim for a guest; return (host cells, addresses) or None (then
        nothing changed)."""
        found = claim(self.room, self.free, self.socket_of, cells, asks)
        if found is None:
            return None
        for host_cell, (pcpus, memory) in zip(found[0], cells,
                                              strict=True):
            self.room[host_cell][0] -= pcpus
            self.room[host_cell][1] -= memory
        self.free = [d for d in self.free if d[0] not in found[1]]
        return found

    def state(self):
        return (tuple(sorted((c, tuple(r)) for c, r in self.room.items())),
                tuple(self.free))

    def copy(self):
        other = Claims.__new__(Claims)
        other.room = {c: list(r) for c, r in self.room.items()}
        other.free = list(self.free)
        other.socket_of = self.socket_of
        return other


def claim_shares(topology, shapes, allowed_guests):
    """{frozenset of guest positions: an order} of every share of
    ``allowed_guests`` whose claims on ``topology`` all succeed in some
    order."""
    found = {}
    seen = set()

    def grow(order, host):
        share = frozenset(order)
        key = (share, host.state())
        if key in seen:
            return
        seen.add(key)
        found.setdefault(share, order)
        for guest in allowed_guests:
            if guest in share:
                continue
            after = host.copy()
            cells, asks = shapes[guest][:2]
            if after.take(cells, asks) is not None:
                grow(order + (guest,), after)

    grow((), Claims(topology))
    return found


def claimable(topologies, shapes):
    """{guest position: host} of a plan whose claims all succeed, or
    None."""
    hosts = sorted(topologies)
    options = [[h for h in hosts if h not in shape[2]] for shape in shapes]
    tables = {h: claim_shares(topologies[h], shapes,
                              [g for g in range(len(shapes))
                               if h in options[g]])
              for h in hosts}
    return brute.first_assignment(options, tables)


def unclaimed(name, claims, cells, asks, placement):
    """What differs between ``placement`` and what the claim on
    ``claims`` (a Claims, updated) takes for the guest, or None."""
    found = claims.take(cells, asks)
    if found is None:
        return f"{name}: its claim would fail"
    on = {cell.guest.id: cell.host_cell for cell in placement.cells}
    planned = (tuple(on.get(g) for g in range(len(cells))),
               tuple(address for _a, address, _n, _g in
                     (placement.pci.devices if placement.pci else ())))
    if planned != found:
        return f"{name}: planned {planned}, its claim takes {found}"
    return None


def invalid_cells(name, host, topology, cells, placement, pinned, memory):
    """What is wrong with ``placement``'s cells (``cells``: the guest's
    (pCPUs, MiB) per guest cell) on ``topology`` whose cells have
    ``pinned`` pCPUs and ``memory`` MiB used ({cell: ...}, updated), or
    None; also {guest cell: host cell}."""
    by_id = {c.id: c for c in topology.cells}
    placed = {cell.guest.id: cell for cell in placement.cells}
    if sorted(placed) != list(range(len(cells))):
        return f"{name}: guest cells {sorted(placed)} placed", None
    hosts = [cell.host_cell for cell in placement.cells]
    if len(set(hosts)) != len(hosts) or not set(hosts) <= set(by_id):
        return f"{name}: host cells {hosts} on {host}", None
    for guest_cell, (pcpus, mib) in enumerate(cells):
        cell = placed[guest_cell]
        host_cell = by_id[cell.host_cell]
        pins = set(cell.pins.values())
        if len(pins) != pcpus or pins & pinned[cell.host_cell] or \
                not pins <= host_cell.pcpuset:
            return (f"{name}: pCPUs {sorted(pins)} on {host} cell "
                    f"{cell.host_cell} not free"), None
        pinned[cell.host_cell] |= pins
        memory[cell.host_cell] += mib
        if memory[cell.host_cell] > host_cell.memory_mb:
            return f"{name}: memory of {host} cell {cell.host_cell} over", \
                None
    return None, {g: c.host_cell for g, c in placed.items()}


def invalid_devices(name, host, devices, asks, on, free, socket_of):
    """What is wrong with the claimed ``devices`` (alias, address, node,
    guest cell) of a guest whose guest cells took the host cells ``on``
    ({guest cell: host cell}), asking ``asks``; ``free``: {address:
    (product, node)} of the host's functions it may take (the taken are
    removed)."""
    wanted = {f'a-{product}': (product, count, policy)
              for product, count, policy in asks}
    guest_on = {host_cell: guest for guest, host_cell in on.items()}
    got = {}
    for alias, address, node, guest_cell in devices:
        if address not in free:
            return f"{name}: {address} on {host} not free or used twice"
        product, real_node = free.pop(address)
        if alias not in wanted or wanted[alias][0] != product:
            return f"{name}: {address} is not of a product it asked"
        if node != real_node:
            return f"{name}: {address} said on node {node}, is {real_node}"
        if not allowed(wanted[alias][2], real_node, on.values(), socket_of):
            return (f"{name}: {address} on node {real_node} breaks "
                    f"{wanted[alias][2]} for host cells "
                    f"{sorted(on.values())}")
        if guest_cell != guest_on.get(real_node):
            return (f"{name}: {address} on node {real_node} given to "
                    f"guest cell {guest_cell}")
        got[alias] = got.get(alias, 0) + 1
    if got != {alias: w[1] for alias, w in wanted.items()}:
        return f"{name}: got devices {got}, asked {wanted}"
    return None


def invalid(topologies, shapes, guests, plan):
    """What is wrong with ``plan``, or None."""
    position = {g.uuid: i for i, g in enumerate(guests)}
    pinned = {h: {c.id: set(c.pinned_cpus) for c in t.cells}
              for h, t in topologies.items()}
    memory = {h: {c.id: c.memory_usage_mb for c in t.cells}
              for h, t in topologies.items()}
    free = {h: {a: (p, n) for a, p, n in _free_devices(t)}
            for h, t in topologies.items()}
    claims = {h: Claims(t) for h, t in topologies.items()}
    for move in plan.moves:
        cells, asks, barred = shapes[position[move.guest.uuid]]
        name, host = move.guest.name, move.host
        if host in barred:
            return f"{name} went to {host}, barred"
        problem, on = invalid_cells(name, host, topologies[host], cells,
                                    move.placement, pinned[host],
                                    memory[host])
        if problem:
            return problem
        devices = move.placement.pci.devices if move.placement.pci else ()
        problem = invalid_devices(name, host, devices, asks, on, free[host],
                                  _sockets(topologies[host])) or \
            unclaimed(name, claims[host], cells, asks, move.placement)
        if problem:
            return problem
    return None


def tally(counts, shapes, guests, found):
    """Count what a cloud's guests and plan cover (in ``counts``)."""
    position = {g.uuid: i for i, g in enumerate(guests)}
    for cells, asks, _barred in shapes:
        if asks:
            counts['device guests'] += 1
            counts['two-cell device guests'] += len(cells) == 2
    if not found.complete:
        return
    policies, spread = set(), False
    for move in found.moves:
        cells, asks, _barred = shapes[position[move.guest.uuid]]
        if not (move.placement.pci and move.placement.pci.devices):
            continue
        policies.update(policy for _p, _c, policy in asks)
        if len(cells) == 2:
            counts['plans moving a two-cell device guest'] += 1
            nodes = {node for _a, _ad, node, _g in move.placement.pci.devices}
            spread = spread or len(nodes) > 1
    counts['plans moving devices'] += bool(policies)
    counts['plans with socket devices'] += 'socket' in policies
    counts['plans with a two-cell guest devices on two nodes'] += spread


class DrainDevicesBruteForceTest(base.TestCase):

    def test_plans_valid_and_never_no_plan_where_one_exists(self):
        rng = random.Random(SEED)
        wrong = []
        counts = dict.fromkeys((drain.PLANNED, drain.NO_PLAN,
                                drain.NOT_FOUND), 0)
        counts.update(dict.fromkeys((
            'device guests', 'two-cell device guests',
            'plans moving devices', 'plans with socket devices',
            'plans moving a two-cell device guest',
            'plans with a two-cell guest devices on two nodes',
            'plans only a free choice makes'), 0))
        for number in range(CLOUDS):
            topologies, guests, shapes = cloud(rng)
            found = drain.plan(
                guests, [drain.Destination(h, views.HostView(t))
                         for h, t in topologies.items()])
            counts[found.outcome] += 1
            tally(counts, shapes, guests, found)
            truth = claimable(topologies, shapes)
            free_choice = exists(topologies, shapes)
            if truth is not None and free_choice is None:
                wrong.append((number, f"claims {truth}, yet no cells "
                                      f"and functions for them"))
            counts['plans only a free choice makes'] += \
                truth is None and free_choice is not None
            if found.complete:
                problem = invalid(topologies, shapes, guests, found)
                if problem:
                    wrong.append((number, problem))
            elif truth is not None:
                wrong.append((number, f"{found.outcome}: "
                                      f"{found.unplaced[0].reason}; but "
                                      f"{truth}"))
        if os.environ.get('NUMAMIG_BRUTE_COUNTS'):
            print(counts)
        self.assertEqual([], wrong[:5], f"{len(wrong)} clouds wrong")
        # The series covers both answers, and plans that move devices,
        # under the socket policy too, and of two-cell guests, some on
        # two nodes.
        self.assertGreater(counts[drain.PLANNED], CLOUDS // 5, counts)
        self.assertGreater(counts[drain.NO_PLAN], CLOUDS // 10, counts)
        self.assertGreater(counts['two-cell device guests'], CLOUDS // 2,
                           counts)
        self.assertGreater(counts['plans moving devices'], CLOUDS // 10,
                           counts)
        self.assertGreater(counts['plans with socket devices'],
                           CLOUDS // 50, counts)
        self.assertGreater(counts['plans moving a two-cell device guest'],
                           CLOUDS // 10, counts)
        self.assertGreater(
            counts['plans with a two-cell guest devices on two nodes'],
            CLOUDS // 100, counts)


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
        shapes = [(((3, 1024),), [('1572', 2, 'preferred')], frozenset()),
                  (((3, 1024),), [], frozenset())]
        guests = [make_guest(index, cells, asks)
                  for index, (cells, asks, _barred) in enumerate(shapes)]
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


class ClaimsTest(base.TestCase):
    """A plan a free choice of host cells and functions makes, and no
    claim would: the planner answers no plan, as ``claimable`` does.

    One destination: cell 0 (socket 1) with 2 free pCPUs, cells 1
    (socket 1) and 2 (socket 2) with 3; functions of node 1 (two)
    and of unknown node (one). g0 (3 pCPUs, 2 functions, legacy) fits
    cell 1 only, and its claim takes the two of node 1 (a guest's own
    nodes first); g1 (two cells, 1 function, socket) then finds only the
    one of unknown node. g1 first takes the emptiest cells 1 and 2,
    leaving g0 no cell. Given the unknown node's function and one of
    node 1, g0 would leave g1 the other on cells 0 and 2.
    """

    def test_a_plan_no_claim_makes_is_no_plan(self):
        cells = []
        for cell_id, free, socket in ((0, 2, 1), (1, 3, 1), (2, 3, 2)):
            cell = numa_hosts.make_cell(cell_id, cores=4, threads=1,
                                        cells=3, memory_mb=4096)
            cell.pinned_cpus = set(sorted(cell.pcpuset)[free:])
            cell.socket = socket
            cells.append(cell)
        topologies = {'h0': objects.HostNUMATopology(
            cells=cells,
            pci_devices=[_device(0, 0, None, '1572', False),
                         _device(0, 4, 1, '1572', False),
                         _device(0, 5, 1, '1572', False)])}
        shapes = [(((3, 512),), [('1572', 2, 'legacy')], frozenset()),
                  (((2, 512), (1, 1024)), [('1572', 1, 'socket')],
                   frozenset())]
        guests = [make_guest(index, cells, asks)
                  for index, (cells, asks, _barred) in enumerate(shapes)]
        self.assertEqual({0: ('h0', (1,)), 1: ('h0', (0, 2))},
                         exists(topologies, shapes))
        self.assertIsNone(claimable(topologies, shapes))
        found = drain.plan(guests, [drain.Destination(h, views.HostView(t))
                                    for h, t in topologies.items()])
        self.assertEqual(drain.NO_PLAN, found.outcome)


class OrdersTest(base.TestCase):
    """The cases the two-cell series found: a guest put before the
    others on a destination moves them to other cells or functions, and
    makes room; the search, which had planned the others without it and
    seen one not fit, answered "no plan exists".

    h0: cells 0-1 (socket 0) with 3 free pCPUs, cell 2 (socket 1) with
    2, cell 3 (socket 1) with 1 and 1 GiB; h1 takes g0 only. g1 (2 pCPUs,
    2 GiB, a 10fb) first takes cell 0 and the 10fb of unknown node, and
    g2 (two cells, two 10fb and two 1572, legacy) then finds too few. g0
    (two cells) first takes cells 0 and 1: g1 then goes to cell 2 and
    its node's 10fb, g2 to cells 0 and 3 with the rest.
    """

    def _topology(self, cells, devices):
        made = []
        for cell_id, socket, free, used in cells:
            cell = numa_hosts.make_cell(cell_id, cores=4, threads=1,
                                        cells=len(cells), memory_mb=4096)
            cell.pinned_cpus = set(sorted(cell.pcpuset)[free:])
            cell.memory_usage_mb = used
            cell.socket = socket
            made.append(cell)
        return objects.HostNUMATopology(cells=made, pci_devices=[
            _device(0, index, node, product, False)
            for index, node, product in devices])

    def test_a_guest_put_first_makes_room_for_the_others(self):
        topologies = {
            'h0': self._topology(
                [(0, 0, 3, 0), (1, 0, 3, 1024), (2, 1, 2, 0),
                 (3, 1, 1, 3072)],
                [(0, 3, '10fb'), (2, 0, '1572'), (4, None, '1572'),
                 (6, 2, '10fb'), (7, None, '10fb')]),
            'h1': self._topology([(0, 0, 2, 3072), (1, 1, 3, 2048)], [])}
        shapes = [(((1, 1024), (2, 512)), [], frozenset()),
                  (((2, 2048),), [('10fb', 1, 'legacy')], frozenset()),
                  (((1, 512), (1, 512)),
                   [('10fb', 2, 'legacy'), ('1572', 2, 'legacy')],
                   frozenset())]
        guests = [make_guest(index, cells, asks)
                  for index, (cells, asks, _barred) in enumerate(shapes)]
        self.assertEqual({0: 'h0', 1: 'h0', 2: 'h0'},
                         claimable(topologies, shapes))
        found = drain.plan(guests, [drain.Destination(h, views.HostView(t))
                                    for h, t in topologies.items()])
        self.assertEqual(drain.PLANNED, found.outcome)
        self.assertEqual(['g0', 'g1', 'g2'],
                         [m.guest.name for m in found.moves])
        self.assertIsNone(invalid(topologies, shapes, guests, found))

    def test_without_devices_too(self):
        # h0: cell 0 with 2 free pCPUs and 4 GiB, cell 1 with 3 and
        # 2 GiB. g0 (1 pCPU, 2 GiB) first takes cell 1 (most pCPUs free)
        # and all its memory: g2's 2-pCPU cell finds no room after it,
        # nor before it. g1 (1 GiB) first takes cell 1 instead, g0 then
        # cell 0 (more memory), and g2 has cells 0 and 1.
        topologies = {'h0': self._topology(
            [(0, None, 2, 0), (1, None, 3, 2048)], [])}
        shapes = [(((1, 2048),), [], frozenset()),
                  (((1, 1024),), [], frozenset()),
                  (((1, 1024), (2, 1024)), [], frozenset())]
        guests = [make_guest(index, cells, asks)
                  for index, (cells, asks, _barred) in enumerate(shapes)]
        self.assertIsNotNone(claimable(topologies, shapes))
        found = drain.plan(guests, [drain.Destination(h, views.HostView(t))
                                    for h, t in topologies.items()])
        self.assertEqual(drain.PLANNED, found.outcome)
        self.assertEqual(['g1', 'g0', 'g2'],
                         [m.guest.name for m in found.moves])
        self.assertIsNone(invalid(topologies, shapes, guests, found))
