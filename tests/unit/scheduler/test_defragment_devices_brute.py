"""The defragmentation planner with guests that hold passed-through PCI
devices, held against an exhaustive search written here, apart from
numamig's fit and device choice.

Each small cloud: 3 hosts of 2 cells (3 dedicated pCPUs and 4 GiB each,
one thread per core; both cells on one socket, one each, or some
unknown) with 0-3 plain PCI functions of two products on node 0, node 1
or of unknown node; 1-3 one-cell guests per host, placed by numamig's
fit, some holding 1 device under the ``required``, ``legacy``,
``preferred`` or ``socket`` policy. The new guest pins 2-3 pCPUs of one
cell and may ask a device of its own.

The search (``optimum``) tries every set of up to MAX_MOVES guests,
every other host and host cell for each (with room once the host's
departures left, and a free function of its product that its policy
allows there, none twice), the moves not waiting on each other in a
circle; then the new guest must find a cell with room and a device its
policy allows on that cell's node on some host. The planner must never
say "no plan exists" where the search finds one, its plans must have
the fewest moves, and every plan is replayed here: pCPUs free, memory
within the cell's, each device free when the guest arrives, of the
product asked, on a node its policy allows, used by one guest only.

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
allowed = drain_brute.allowed
CORES = 3
MEMORY = 4096


def _request(rng, pcpus, asks):
    request = numa_hosts.request([(pcpus, 0, rng.choice((512, 1024)),
                                   None, None)])
    request.instance_uuid = str(uuidlib.UUID(int=rng.getrandbits(128),
                                             version=4))
    request.pci_requests = [
        objects.PCIRequest(alias=f'a-{product}', count=count,
                           vendor_id='8086', product_id=product,
                           numa_policy=policy)
        for product, count, policy in asks]
    return request


def _asks(rng, chance):
    if rng.random() >= chance:
        return []
    return [(rng.choice(PRODUCTS), 1, rng.choice(POLICIES))]


def cloud(rng):
    """({host: (topology, [(uuid, request, placed)])}, new guest)."""
    state = {}
    for index in range(3):
        cells = [numa_hosts.make_cell(c, cores=CORES, threads=1, cells=2,
                                      memory_mb=MEMORY) for c in range(2)]
        for cell, socket in zip(cells, rng.choice(drain_brute.SOCKETS),
                                strict=True):
            cell.socket = socket
        topology = objects.HostNUMATopology(
            cells=cells,
            pci_devices=[drain_brute._device(
                index, i, rng.choice((0, 1, None)), rng.choice(PRODUCTS),
                False) for i in range(rng.randint(0, 3))])
        guests = []
        for _number in range(rng.randint(1, 3)):
            request = _request(rng, rng.randint(1, 2), _asks(rng, 0.4))
            uuid = request.instance_uuid
            result = fit.fit(topology, request, strategy='pack')
            if not result.fits:
                continue
            placed = result.topology
            topology = usage.apply(topology, placed)
            guests.append((uuid, request, placed))
        state[f'h{index}'] = (topology, guests)
    wanted = _request(rng, rng.randint(2, CORES), _asks(rng, 0.5))
    return state, wanted


# -- the exhaustive search, numamig's fit left out ---------------------------


def _shape(request):
    (cell,) = request.cells
    return (len(cell.pcpuset), cell.memory_mb,
            [(r.product_id, r.count, r.numa_policy)
             for r in request.pci_requests])


def _host_state(topology):
    """{cell: [free pCPUs, free MiB]}, {address: (product, node)} free,
    {cell: socket or None}."""
    room = {c.id: [len(c.pcpuset - c.pinned_cpus),
                   c.memory_mb - c.memory_usage_mb] for c in topology.cells}
    free = {d.address: (d.product_id, d.numa_node)
            for d in topology.pci_devices if d.instance_uuid is None}
    return room, free, drain_brute._sockets(topology)


def _release(room, free, placed, request, topology):
    (cell,) = placed.cells
    room[cell.host_cell][0] += len(cell.pcpuset)
    room[cell.host_cell][1] += cell.memory_mb
    by_address = {d.address: d for d in topology.pci_devices}
    for device in placed.get('pci_devices') or ():
        d = by_address[device.address]
        free[device.address] = (d.product_id, d.numa_node)


def _takes(room, free, sockets, shape):
    """Every (cell, addresses) a guest of ``shape`` may take."""
    pcpus, memory, asks = shape
    found = []
    for cell, (cpus, mib) in room.items():
        if cpus < pcpus or mib < memory:
            continue
        listed = [(a, p, n) for a, (p, n) in sorted(free.items())]
        for picked in drain_brute._device_choices(listed, set(), asks,
                                                  cell, sockets):
            found.append((cell, picked))
    return found


def optimum(state, wanted, max_moves):
    """The fewest moves of a plan, or None within ``max_moves``."""
    guests = [(host, uuid, request, placed)
              for host, (_, listed) in state.items()
              for uuid, request, placed in listed]
    new = _shape(wanted)
    for size in range(max_moves + 1):
        for group in itertools.combinations(guests, size):
            others = [[h for h in state if h != g[0]] for g in group]
            for dests in itertools.product(*others):
                if brute._acyclic((g[0], d) for g, d in zip(group, dests,
                                                      strict=True)) and \
                        _works(state, group, dests, new):
                    return size
    return None


def _works(state, group, dests, new):
    hosts = {h: _host_state(t) for h, (t, _) in state.items()}
    for source, _uuid, request, placed in group:
        room, free, _sockets = hosts[source]
        _release(room, free, placed, request, state[source][0])

    def arrive(position):
        if position == len(group):
            return any(_takes(room, free, sockets, new)
                       for room, free, sockets in hosts.values())
        host = dests[position]
        room, free, sockets = hosts[host]
        shape = _shape(group[position][2])
        for cell, picked in _takes(room, free, sockets, shape):
            room[cell][0] -= shape[0]
            room[cell][1] -= shape[1]
            taken = {a: free.pop(a) for a in picked}
            if arrive(position + 1):
                return True
            room[cell][0] += shape[0]
            room[cell][1] += shape[1]
            free.update(taken)
        return False

    return arrive(0)


def invalid(state, plan, wanted):
    """What is wrong with ``plan``, or None."""
    pinned = {h: {c.id: set(c.pinned_cpus) for c in t.cells}
              for h, (t, _) in state.items()}
    memory = {h: {c.id: c.memory_usage_mb for c in t.cells}
              for h, (t, _) in state.items()}
    holder = {h: {d.address: d.instance_uuid for d in t.pci_devices}
              for h, (t, _) in state.items()}
    nodes = {h: {d.address: (d.product_id, d.numa_node)
                 for d in t.pci_devices} for h, (t, _) in state.items()}
    placed = {uuid: (p, r) for _, (_, listed) in state.items()
              for uuid, r, p in listed}

    def arrive(host, uuid, placement, request):
        (cell,) = placement.cells
        pins = set(cell.pins.values())
        if len(pins) != _shape(request)[0] or \
                pins & pinned[host][cell.host_cell]:
            return f"{uuid}: pCPUs {sorted(pins)} on {host} not free"
        pinned[host][cell.host_cell] |= pins
        memory[host][cell.host_cell] += _shape(request)[1]
        if memory[host][cell.host_cell] > MEMORY:
            return f"{uuid}: memory of {host} cell {cell.host_cell} over"
        wanted_by = {f'a-{p}': (p, c, pol) for p, c, pol in
                     _shape(request)[2]}
        got = {}
        for alias, address, _node, _guest in (
                placement.pci.devices if placement.pci else ()):
            if holder[host].get(address, 'absent') is not None:
                return f"{uuid}: {address} on {host} is not free"
            holder[host][address] = uuid
            product, node = nodes[host][address]
            if alias not in wanted_by or wanted_by[alias][0] != product:
                return f"{uuid}: {address} is not of a product it asked"
            if not allowed(wanted_by[alias][2], node, cell.host_cell,
                           drain_brute._sockets(state[host][0])):
                return f"{uuid}: {address} on node {node} breaks its policy"
            got[alias] = got.get(alias, 0) + 1
        if got != {a: w[1] for a, w in wanted_by.items()}:
            return f"{uuid}: got devices {got}, asked {wanted_by}"
        return None

    for move in plan.moves:
        uuid = move.guest.uuid
        if any(m.source == move.host for m in plan.moves
               if plan.moves.index(m) > plan.moves.index(move)):
            return f"{uuid} moves in before {move.host} is left"
        problem = arrive(move.host, uuid, move.placement, placed[uuid][1])
        if problem:
            return problem
        old, _request = placed[uuid]
        (cell,) = old.cells
        pinned[move.source][cell.host_cell] -= set(
            cell.cpu_pinning.values())
        memory[move.source][cell.host_cell] -= cell.memory_mb
        for device in old.get('pci_devices') or ():
            holder[move.source][device.address] = None
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


class DefragmentDevicesBruteForceTest(base.TestCase):

    def test_fewest_moves_valid_and_never_no_plan_where_one_exists(self):
        rng = random.Random(SEED)
        wrong, counts, with_devices = [], {}, 0
        for number in range(CLOUDS):
            state, wanted = cloud(rng)
            if any(fit.fit(t, wanted).fits for t, _ in state.values()):
                continue
            found = by_plan(state, wanted, MAX_MOVES)
            best = optimum(state, wanted, MAX_MOVES)
            counts[found.outcome] = counts.get(found.outcome, 0) + 1
            if found.found:
                problem = invalid(state, found, wanted)
                if problem:
                    wrong.append((number, problem))
                elif best is None or len(found.moves) > best:
                    wrong.append((number, f"{len(found.moves)} moves, "
                                          f"optimum {best}"))
                if any(m.placement.pci for m in found.moves) or \
                        found.placement.pci:
                    with_devices += 1
            elif best is not None and found.outcome == drain.NO_PLAN:
                wrong.append((number, f"no plan, optimum {best}: "
                                      f"{found.reason}"))
        self.assertEqual([], wrong[:5], f"{len(wrong)} clouds wrong")
        # The series covers both answers, and plans that move devices.
        self.assertGreater(counts.get(drain.PLANNED, 0), CLOUDS // 20,
                           counts)
        self.assertGreater(counts.get(drain.NO_PLAN, 0), CLOUDS // 20,
                           counts)
        self.assertGreater(with_devices, CLOUDS // 30, counts)
