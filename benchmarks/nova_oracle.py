"""Nova's answer for the differential fuzzer's cases (fuzz_fit.py).

Runs under the Python of a virtualenv where Nova is installed (it is not
a numamig requirement):  NOVA_PYTHON nova_oracle.py CASES.jsonl
and prints one JSON line per case.

For each case, Nova's own code reads the flavor and image
(``hardware.numa_get_constraints`` and ``get_realtime_cpu_constraint``)
and, when it accepts them, decides whether the guest fits the host. The
decision is built on Nova's per-cell rule, ``_numa_fit_instance_cell``
(memory, pages, CPUs, limits, the thread policies' packing onto cores),
asked for every (host cell, guest cell) pair on fresh copies, and a
bipartite matching of guest cells to distinct host cells: the question
Nova's permutation search asks, without its cost on 16-cell hosts nor
its verdict cache, which can reuse one guest cell's verdict for another
(doc/source/numa-fit.rst, "Comparing with Nova"). Nova's own search
also runs where it tries few permutations, so the two can be compared.

Output per case: ``{"error": "<Nova exception>"}`` when Nova refuses the
flavor or image, else ``{"request": ..., "realtime": [...], "table":
[[host cell positions]] per guest cell, "fits": bool, "search_fits": bool
| null}``.
"""

import itertools
import json
import math
import sys
import warnings

warnings.simplefilter('ignore')

from nova import conf as nova_conf  # noqa: E402
from nova import exception  # noqa: E402
from nova import objects  # noqa: E402
from nova.pci import request as pci_request  # noqa: E402
from nova.pci import stats as pci_stats  # noqa: E402
from nova.pci import whitelist  # noqa: E402
from nova.virt import hardware  # noqa: E402

objects.register_all()
CONF = nova_conf.CONF

# Nova's permutation search runs only where it tries at most this many.
SEARCH_LIMIT = 720


def _pools(cell):
    """Nova's page pools: guests without a page size are charged to the
    smallest pool's ``used`` (numamig charges them to memory usage only;
    the case gives their memory as ``nopage_mb``)."""
    pools = sorted(cell['pools'], key=lambda pool: pool['size_kb'])
    result = []
    for index, pool in enumerate(pools):
        used = pool['used']
        if index == 0:
            used += cell['nopage_mb'] * 1024 // pool['size_kb']
        result.append(objects.NUMAPagesTopology(
            size_kb=pool['size_kb'], total=pool['total'], used=used,
            reserved=pool['reserved']))
    return result


def _siblings(cell):
    """Nova's sibling sets: a pCPU without SMT siblings is a set of one
    (as its libvirt driver reports it; numamig's hosts leave it out)."""
    if cell['siblings']:
        return [set(group) for group in cell['siblings']]
    return [{cpu} for cpu in sorted(cell['shared'] + cell['dedicated'])]


def host(data, sockets=None):
    sockets = sockets or [None] * len(data['cells'])
    return objects.NUMATopology(cells=[objects.NUMACell(
        id=cell['id'], cpuset=set(cell['shared']),
        pcpuset=set(cell['dedicated']), memory=cell['memory_mb'],
        cpu_usage=cell['cpu_usage'], memory_usage=cell['memory_usage_mb'],
        pinned_cpus=set(cell['pinned']),
        siblings=_siblings(cell), mempages=_pools(cell),
        network_metadata=objects.NetworkMetadata(physnets=set(),
                                                 tunneled=False),
        socket=socket) for cell, socket in zip(data['cells'], sockets,
                                               strict=True)])


def read_request(case):
    """Return (Nova's InstanceNUMATopology or None, realtime vCPUs)."""
    request = case['request']
    flavor = objects.Flavor(
        name='fuzz', vcpus=request['vcpus'],
        memory_mb=request['memory_mb'],
        extra_specs=dict(request['extra_specs']))
    image = objects.ImageMeta.from_dict(
        {'name': 'fuzz', 'properties': dict(request['image_properties'])})
    topology = hardware.numa_get_constraints(flavor, image)
    realtime = hardware.get_realtime_cpu_constraint(flavor, image)
    return topology, sorted(realtime or ())


def plain_request(topology):
    if topology is None:
        return None
    return {'emulator_threads_policy': topology.emulator_threads_policy,
            'cells': [{'pcpuset': sorted(cell.pcpuset),
                       'cpuset': sorted(cell.cpuset),
                       'memory_mb': cell.memory,
                       'pagesize': cell.pagesize,
                       'cpu_policy': cell.cpu_policy,
                       'cpu_thread_policy': cell.cpu_thread_policy}
                      for cell in topology.cells]}


def _cell_fits(host_cell, guest_cell, limits, reserved):
    try:
        placed = hardware._numa_fit_instance_cell(
            host_cell, guest_cell.obj_clone(), limits, reserved)
    except exception.MemoryPageSizeNotSupported:
        return False
    return placed is not None


def _has_matching(table, hosts):
    """Whether every guest cell gets a distinct host cell it fits
    (augmenting paths)."""
    owner = [None] * hosts

    def place(guest, seen):
        for position in table[guest]:
            if position in seen:
                continue
            seen.add(position)
            if owner[position] is None or place(owner[position], seen):
                owner[position] = guest
                return True
        return False

    return all(place(guest, set()) for guest in range(len(table)))


def fit_table(host_topology, topology, limits):
    """[host cell positions guest cell i fits, by Nova's rule] per i."""
    isolated = topology.emulator_threads_isolated
    return [[position for position, host_cell in
             enumerate(host_topology.cells)
             if _cell_fits(host_cell, guest_cell, limits,
                           int(isolated and index == 0))]
            for index, guest_cell in enumerate(topology.cells)]


def decide(host_topology, table):
    """Whether the guest cells get distinct host cells they fit."""
    if len(host_topology.cells) < len(table) or not all(table):
        return False
    return _has_matching(table, len(host_topology.cells))


def search(host_topology, topology, limits):
    """Nova's own numa_fit_instance_to_host, or None where it would try
    more than SEARCH_LIMIT permutations."""
    if math.perm(len(host_topology.cells), len(topology.cells)) > \
            SEARCH_LIMIT:
        return None
    placed = hardware.numa_fit_instance_to_host(
        host_topology, topology.obj_clone(), None, limits=limits)
    return placed is not None


# -- PCI devices (fuzz_fit.py --devices) -----------------------------------


def read_pci_requests(case, topology_request):
    """Nova's InstancePCIRequests of the case's flavor under its
    ``[pci] alias`` (set for this case), or None for a case without
    devices."""
    if 'pci' not in case:
        return None
    CONF.set_override('alias', case['pci']['aliases'], group='pci')
    pci_request.get_alias_from_config.cache_clear()
    request = case['request']
    flavor = objects.Flavor(
        name='fuzz', vcpus=request['vcpus'], memory_mb=request['memory_mb'],
        extra_specs=dict(request['extra_specs']))
    image = objects.ImageMeta.from_dict(
        {'name': 'fuzz', 'properties': dict(request['image_properties'])})
    policy = hardware.get_pci_numa_policy_constraint(flavor, image)
    return pci_request.get_pci_requests_from_flavor(flavor, policy).requests


def _available(devices):
    """The functions Nova's tracker pools: not used, not the PF of a used
    VF, not a VF of a used PF (its PciDevice.allocate marks those
    unavailable)."""
    used = {d['address'] for d in devices if d['used']}
    used_pfs = {d['address'] for d in devices
                if d['used'] and d['dev_type'] == 'type-PF'}
    blocked = set(used)
    for device in devices:
        if device['parent_addr'] in used_pfs:
            blocked.add(device['address'])
        if device['address'] in used and device['parent_addr']:
            blocked.add(device['parent_addr'])
    return [d for d in devices if d['address'] not in blocked]


def device_stats(host_topology, devices):
    """Nova's PciDeviceStats of the host's free functions, every function
    admitted by ``[pci] device_spec``."""
    pairs = sorted({(d['vendor_id'], d['product_id']) for d in devices})
    spec = json.dumps([{'vendor_id': vendor, 'product_id': product}
                       for vendor, product in pairs])
    stats = pci_stats.PciDeviceStats(
        host_topology, dev_filter=whitelist.Whitelist([spec] if pairs
                                                      else []))
    for index, device in enumerate(_available(devices)):
        stats.add_device(objects.PciDevice(
            id=index, compute_node_id=1, address=device['address'],
            vendor_id=device['vendor_id'], product_id=device['product_id'],
            dev_type=device['dev_type'],
            parent_addr=device['parent_addr'],
            numa_node=device['numa_node'], status='available',
            extra_info={}, request_id=None, instance_uuid=None))
    return stats


def device_decide(host_topology, topology, table, requests, stats):
    """Whether some set of host cells the guest cells fit (by Nova's
    per-cell rule, matched to distinct host cells) passes Nova's device
    check for those cells (``PciDeviceStats.support_requests``, as
    numa_fit_instance_to_host asks it), trying every set rather than
    Nova's permutation order and verdict cache."""
    hosts = host_topology.cells
    if len(hosts) < len(table) or not all(table):
        return False
    for chosen in itertools.combinations(range(len(hosts)), len(table)):
        allowed = set(chosen)
        if not _has_matching([[p for p in row if p in allowed]
                              for row in table], len(hosts)):
            continue
        cells = [objects.InstanceNUMACell(id=hosts[p].id, cpuset=set(),
                                          pcpuset=set(), memory=0)
                 for p in chosen]
        if stats.support_requests(requests, None, cells):
            return True
    return False


def device_search(host_topology, topology, limits, requests, stats):
    """Nova's own numa_fit_instance_to_host with the devices, or None
    where it would try more than SEARCH_LIMIT permutations."""
    if math.perm(len(host_topology.cells), len(topology.cells)) > \
            SEARCH_LIMIT:
        return None
    placed = hardware.numa_fit_instance_to_host(
        host_topology, topology.obj_clone(), None, limits=limits,
        pci_requests=requests, pci_stats=stats)
    return placed is not None


def run(case):
    try:
        topology, realtime = read_request(case)
        requests = read_pci_requests(case, topology)
    except (exception.NovaException, ValueError) as exc:
        return {'error': type(exc).__name__}
    answer = {'request': plain_request(topology), 'realtime': realtime}
    sockets = case['pci']['sockets'] if requests is not None else None
    host_topology = host(case['host'], sockets)
    stats = (device_stats(host_topology, case['pci']['devices'])
             if requests is not None else None)
    if topology is None:
        if requests:
            # No guest NUMA topology: Nova's PCI filter asks the pools
            # without cells, so no policy applies. What Nova answers for
            # the same guest given one guest node (hw:numa_nodes=1) says
            # whether that node is the only difference.
            answer['devices_alone'] = stats.support_requests(requests,
                                                             None)
            one = dict(case, request=dict(case['request'], extra_specs=dict(
                case['request']['extra_specs'], **{'hw:numa_nodes': '1'})))
            answer['one_node'] = run(one)
        return answer
    limits = None
    if case.get('limits'):
        limits = objects.NUMATopologyLimits(**case['limits'])
    answer['table'] = fit_table(host_topology, topology, limits)
    if requests:
        answer['fits'] = device_decide(host_topology, topology,
                                       answer['table'], requests, stats)
        answer['search_fits'] = device_search(host_topology, topology,
                                              limits, requests, stats)
        if not answer['fits'] and not any(
                spec.get('dev_type') == 'type-PF'
                for request in requests for spec in request.spec):
            # Nova filters pools by node before it drops the PFs nobody
            # asked for, so a PF on the guest's node can stand in for
            # devices elsewhere and then vanish: the same check on the
            # host without its PFs says whether that decided.
            without = [d for d in case['pci']['devices']
                       if d['dev_type'] != 'type-PF']
            answer['fits_without_pfs'] = device_decide(
                host_topology, topology, answer['table'], requests,
                device_stats(host_topology, without))
        return answer
    answer['fits'] = decide(host_topology, answer['table'])
    answer['search_fits'] = search(host_topology, topology, limits)
    return answer


def main():
    with open(sys.argv[1]) as handle:
        for line in handle:
            print(json.dumps(run(json.loads(line))), flush=True)


if __name__ == '__main__':
    main()
