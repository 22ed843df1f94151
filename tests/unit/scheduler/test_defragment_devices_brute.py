"""The defragmentation planner with guests that hold passed-through PCI
devices, held against an exhaustive search written here, apart from
numamig's fit and device choice.

Each small cloud: 3 hosts of 2, 3 or 4 cells (3 dedicated pCPUs and
4 GiB each, one thread per core; the cells on one socket, split in
halves, alternating, some unknown, or none known) with 0-5 plain PCI
functions of two products on one of the host's nodes or of unknown
node; 1-4 guests per host, placed by numamig's fit, about half of them
of two guest cells, some holding 1 device under the ``required``,
``legacy``, ``preferred`` or ``socket`` policy. The new guest pins 2-3
pCPUs of one cell, or of each of two, and may ask a device of its own.

The search (``optimum``) tries every set of up to MAX_MOVES guests,
every other host for each, the moves not waiting on each other in a
circle; each host, its departures gone, takes its arrivals in every
order, each by its claim (the drain test's model of the fit a
destination's claim runs, test_drain_devices_brute.claim: the host
cells and functions that fit gives, written from its rules); then the
new guest's claim must succeed on some host. The planner must never
say "no plan exists" where the search finds one, its plans must have
the fewest moves, and every plan is replayed here: each move's and the
new guest's placement is what its claim takes in the plan's order, and
by the rules themselves (not the model) its pCPUs are free, its memory
within the cell's, its guest cells on distinct host cells, each device
free when the guest arrives, of the product asked, on a node its policy
allows for the guest's nodes, used by one guest only.

``free_optimum`` is the same search with any host cells and functions
the rules allow instead of the claims' (what a planner choosing
placements itself could do); the clouds where it finds fewer moves are
counted, not failed: no claim would carry such a plan out.

``NUMAMIG_DEFRAG_SEED`` (an integer) runs another series of clouds.
"""

import itertools
import os
import random
import uuid as uuidlib

from numamig import objects
from numamig.numa import fit
from numamig.numa import usage
from numamig.numa import views
from numamig.scheduler import defragment as defrag
from numamig.scheduler import drain
from tests import base
from tests.unit.numa import hosts as numa_hosts
from tests.unit.scheduler import brute
from tests.unit.scheduler import test_drain_devices_brute as drain_brute

CLOUDS = 1500
MAX_MOVES = 2
SEED = int(os.environ.get('NUMAMIG_DEFRAG_SEED', '1'))
PRODUCTS = drain_brute.PRODUCTS
POLICIES = drain_brute.POLICIES
CORES = 3
MEMORY = 4096


def _request(rng, cells, asks):
    request = numa_hosts.request([(pcpus, 0, memory, None, None)
                                  for pcpus, memory in cells])
    request.instance_uuid = str(uuidlib.UUID(int=rng.getrandbits(128),
                                             version=4))
    request.pci_requests = drain_brute.requests(asks)
    return request


def _asks(rng, chance):
    if rng.random() >= chance:
        return []
    return [(rng.choice(PRODUCTS), 1, rng.choice(POLICIES))]


def _resident_cells(rng):
    if rng.random() < 0.5:
        return tuple((rng.randint(1, 2), rng.choice((512, 1024)))
                     for _ in range(2))
    return ((rng.randint(1, 2), rng.choice((512, 1024))),)


def _new_cells(rng):
    count = 2 if rng.random() < 0.35 else 1
    return tuple((rng.choice((2, CORES, CORES)), rng.choice((512, 1024)))
                 for _ in range(count))


def cloud(rng):
    """({host: (topology, [(uuid, request, placed)])}, new guest)."""
    state = {}
    for index in range(3):
        count = rng.choice((2, 2, 3, 4))
        cells = [numa_hosts.make_cell(c, cores=CORES, threads=1,
                                      cells=count, memory_mb=MEMORY)
                 for c in range(count)]
        for cell, socket in zip(cells, drain_brute.socket_layout(rng, count),
                                strict=True):
            cell.socket = socket
        nodes = list(range(count)) + [None]
        topology = objects.HostNUMATopology(
            cells=cells,
            pci_devices=[drain_brute._device(
                index, i, rng.choice(nodes), rng.choice(PRODUCTS), False)
                for i in range(rng.randint(0, count + 1))])
        guests = []
        for _number in range(rng.randint(count, 2 * count)):
            request = _request(rng, _resident_cells(rng), _asks(rng, 0.4))
            uuid = request.instance_uuid
            result = fit.fit(topology, request, strategy='pack')
            if not result.fits:
                continue
            placed = result.topology
            topology = usage.apply(topology, placed)
            guests.append((uuid, request, placed))
        state[f'h{index}'] = (topology, guests)
    wanted = _request(rng, _new_cells(rng), _asks(rng, 0.5))
    return state, wanted


# -- the exhaustive search, numamig's fit left out ---------------------------


def _shape(request):
    """((pCPUs, MiB) per guest cell, asks) of a request."""
    return (tuple((len(c.pcpuset), c.memory_mb)
                  for c in sorted(request.cells, key=lambda c: c.id)),
            [(r.product_id, r.count, r.numa_policy)
             for r in request.pci_requests])


def _release(claims, placed, topology):
    """Give a departing guest's cells and functions back to ``claims``
    (a drain_brute.Claims)."""
    for cell in placed.cells:
        claims.room[cell.host_cell][0] += len(cell.pcpuset)
        claims.room[cell.host_cell][1] += cell.memory_mb
    by_address = {d.address: d for d in topology.pci_devices}
    for device in placed.get('pci_devices') or ():
        d = by_address[device.address]
        claims.free.append((d.address, d.product_id, d.numa_node))
    claims.free.sort()


def _plans(state, max_moves, works):
    """The fewest moves for which ``works(hosts, group, dests)``, or
    None; ``hosts``: {host: Claims} once the group's guests left."""
    guests = [(host, uuid, request, placed)
              for host, (_, listed) in state.items()
              for uuid, request, placed in listed]
    start = {h: drain_brute.Claims(t) for h, (t, _) in state.items()}
    for size in range(max_moves + 1):
        for group in itertools.combinations(guests, size):
            others = [[h for h in state if h != g[0]] for g in group]
            for dests in itertools.product(*others):
                if not brute._acyclic((g[0], d) for g, d in zip(
                        group, dests, strict=True)):
                    continue
                hosts = {h: claims.copy() for h, claims in start.items()}
                for source, _uuid, _request, placed in group:
                    _release(hosts[source], placed, state[source][0])
                if works(hosts, group, dests):
                    return size
    return None


def optimum(state, wanted, max_moves):
    """The fewest moves of a plan the claims carry out, or None within
    ``max_moves``."""
    new = _shape(wanted)

    def works(hosts, group, dests):
        ends = {}
        for host, claims in hosts.items():
            arrivals = [_shape(g[2]) for g, d in zip(group, dests,
                                                     strict=True)
                        if d == host]
            ends[host] = []
            for order in itertools.permutations(arrivals):
                after = claims.copy()
                if all(after.take(*shape) is not None for shape in order):
                    ends[host].append(after)
            if not ends[host]:
                return False
        return any(end.copy().take(*new) is not None
                   for found in ends.values() for end in found)

    return _plans(state, max_moves, works)


def _takes(claims, shape):
    """Every (host cells, addresses) a guest of ``shape`` may take by the
    rules alone."""
    cells, asks = shape
    found = []
    for chosen in drain_brute.cell_choices(claims.room, cells):
        for picked in drain_brute._device_choices(
                claims.free, set(), asks, chosen, claims.socket_of):
            found.append((chosen, picked))
    return found


def free_optimum(state, wanted, max_moves):
    """optimum with any cells and functions the rules allow."""
    new = _shape(wanted)

    def works(hosts, group, dests):

        def arrive(position):
            if position == len(group):
                return any(_takes(claims, new) for claims in hosts.values())
            claims = hosts[dests[position]]
            cells, asks = _shape(group[position][2])
            for chosen, picked in _takes(claims, (cells, asks)):
                before = claims.copy()
                for host_cell, (pcpus, memory) in zip(chosen, cells,
                                                      strict=True):
                    claims.room[host_cell][0] -= pcpus
                    claims.room[host_cell][1] -= memory
                claims.free = [d for d in claims.free if d[0] not in picked]
                if arrive(position + 1):
                    return True
                claims.room, claims.free = before.room, before.free
            return False

        return arrive(0)

    return _plans(state, max_moves, works)


def invalid(state, plan, wanted):
    """What is wrong with ``plan``, or None."""
    pinned = {h: {c.id: set(c.pinned_cpus) for c in t.cells}
              for h, (t, _) in state.items()}
    memory = {h: {c.id: c.memory_usage_mb for c in t.cells}
              for h, (t, _) in state.items()}
    nodes = {h: {d.address: (d.product_id, d.numa_node)
                 for d in t.pci_devices if d.instance_uuid is None}
             for h, (t, _) in state.items()}
    claims = {h: drain_brute.Claims(t) for h, (t, _) in state.items()}
    placed = {uuid: (p, r) for _, (_, listed) in state.items()
              for uuid, r, p in listed}

    def arrive(host, uuid, placement, request):
        cells, asks = _shape(request)
        problem, on = drain_brute.invalid_cells(
            uuid, host, state[host][0], cells, placement, pinned[host],
            memory[host])
        if problem:
            return problem
        devices = placement.pci.devices if placement.pci else ()
        return drain_brute.invalid_devices(
            uuid, host, devices, asks, on, nodes[host],
            drain_brute._sockets(state[host][0])) or \
            drain_brute.unclaimed(uuid, claims[host], cells, asks,
                                  placement)

    for move in plan.moves:
        uuid = move.guest.uuid
        if any(m.source == move.host for m in plan.moves
               if plan.moves.index(m) > plan.moves.index(move)):
            return f"{uuid} moves in before {move.host} is left"
        problem = arrive(move.host, uuid, move.placement, placed[uuid][1])
        if problem:
            return problem
        old, _request = placed[uuid]
        topology = state[move.source][0]
        for cell in old.cells:
            pinned[move.source][cell.host_cell] -= set(
                cell.cpu_pinning.values())
            memory[move.source][cell.host_cell] -= cell.memory_mb
        by_address = {d.address: d for d in topology.pci_devices}
        for device in old.get('pci_devices') or ():
            d = by_address[device.address]
            nodes[move.source][d.address] = (d.product_id, d.numa_node)
        _release(claims[move.source], old, topology)
    return arrive(plan.host, 'new', plan.placement, wanted)


def by_plan(state, wanted, max_moves):
    candidates = [defrag.Candidate(host, topology, tuple(
        defrag.Resident(uuid, uuid, placed, request)
        for uuid, request, placed in guests))
        for host, (topology, guests) in state.items()]
    destinations = [drain.Destination(host, views.HostView(topology))
                    for host, (topology, _) in state.items()]
    return defrag.plan(wanted, candidates, destinations,
                       max_moves=max_moves, movable=candidates)


def _tally(counts, state, wanted, found):
    shapes = [_shape(r) for _, (_, listed) in state.items()
              for _u, r, _p in listed] + [_shape(wanted)]
    for cells, asks in shapes:
        counts['device guests'] += bool(asks)
        counts['two-cell device guests'] += bool(asks) and len(cells) == 2
    if not found.found:
        return
    requests = {uuid: r for _, (_, listed) in state.items()
                for uuid, r, _p in listed}
    moved = [(_shape(requests[m.guest.uuid]), m.placement)
             for m in found.moves] + [(_shape(wanted), found.placement)]
    with_devices = [(cells, placement) for (cells, _a), placement in moved
                    if placement.pci and placement.pci.devices]
    counts['plans with devices'] += bool(with_devices)
    counts['plans with a two-cell device guest'] += any(
        len(cells) == 2 for cells, _p in with_devices)
    counts['plans of 2 moves'] += len(found.moves) == 2


class DefragmentDevicesBruteForceTest(base.TestCase):

    def test_fewest_moves_valid_and_never_no_plan_where_one_exists(self):
        rng = random.Random(SEED)
        wrong = []
        counts = dict.fromkeys((
            'clouds', 'fit without moves', drain.PLANNED, drain.NO_PLAN,
            drain.NOT_FOUND, 'device guests', 'two-cell device guests',
            'plans with devices', 'plans with a two-cell device guest',
            'plans of 2 moves', 'fewer moves only by a free choice',
            'not found, a plan exists'), 0)
        for number in range(CLOUDS):
            state, wanted = cloud(rng)
            counts['clouds'] += 1
            if any(drain_brute.Claims(t).take(*_shape(wanted))
                   for t, _ in state.values()):
                counts['fit without moves'] += 1
                continue
            found = by_plan(state, wanted, MAX_MOVES)
            best = optimum(state, wanted, MAX_MOVES)
            # Fewer moves than the claims' optimum, or any within
            # MAX_MOVES where the claims make none.
            free = free_optimum(state, wanted,
                                MAX_MOVES if best is None else best)
            counts[found.outcome] += 1
            _tally(counts, state, wanted, found)
            if best is not None and (free is None or free > best):
                wrong.append((number, f"claims' optimum {best}, yet "
                                      f"{free} by the rules alone"))
            counts['fewer moves only by a free choice'] += \
                free is not None and (best is None or free < best)
            if found.found:
                problem = invalid(state, found, wanted)
                if problem:
                    wrong.append((number, problem))
                elif best is None or len(found.moves) > best:
                    wrong.append((number, f"{len(found.moves)} moves, "
                                          f"optimum {best}"))
            elif best is not None and found.outcome == drain.NO_PLAN:
                wrong.append((number, f"no plan, optimum {best}: "
                                      f"{found.reason}"))
            elif best is not None:
                counts['not found, a plan exists'] += 1
        if os.environ.get('NUMAMIG_BRUTE_COUNTS'):
            print(counts)
        self.assertEqual([], wrong[:5], f"{len(wrong)} clouds wrong")
        # The series covers both answers, and plans that move devices,
        # of two-cell guests too.
        searched = CLOUDS - counts['fit without moves']
        self.assertGreater(counts[drain.PLANNED], searched // 5, counts)
        self.assertGreater(counts[drain.NO_PLAN], searched // 10, counts)
        self.assertGreater(counts['plans of 2 moves'], searched // 50,
                           counts)
        self.assertGreater(counts['two-cell device guests'], CLOUDS // 2,
                           counts)
        self.assertGreater(counts['plans with devices'], searched // 10,
                           counts)
        self.assertGreater(counts['plans with a two-cell device guest'],
                           searched // 20, counts)
