"""Random hosts and guests for the differential fuzzer (fuzz_fit.py).

A case is plain JSON, read by both engines: a host (1-16 cells, SMT or
not, dedicated and shared sets split by core or by thread, page pools
with reservations, existing usage), a guest (vCPUs, memory, flavor extra
specs and image properties over every key numamig reads, written the
ways operators write them, masks with ``^`` among them) and limits.

Usage is drawn as what guests hold, then written the way each engine
keeps it: memory of guests without a page size counts in the cell's
``memory_usage_mb``; Nova charges it to the smallest pool's ``used`` as
well, numamig does not (``nopage_mb`` carries it to nova_oracle.py).
"""


import json

from numamig import cpuspec

PAGE_SPECS = ('small', 'large', 'any', '2MB', '1GB', '2048', '4KB',
              '1048576', '3MB')
THREAD_POLICIES = ('prefer', 'isolate', 'require')


def random_host(rng):
    """Return a host as a dict of plain cells."""
    cells = rng.choice((1, 1, 2, 2, 2, 3, 4, 4, 6, 8, 16))
    smt = rng.random() < 0.6
    threads = rng.choice((2, 2, 4)) if smt else 1
    cores = rng.randint(1, 6)
    total = cells * cores
    return {'cells': [_cell(rng, cell_id, cores, threads, total)
                      for cell_id in range(cells)]}


def _cell(rng, cell_id, cores, threads, total):
    siblings = [sorted(cell_id * cores + core + t * total
                       for t in range(threads)) for core in range(cores)]
    shared, dedicated = _split(rng, siblings)
    pinned = sorted(cpu for cpu in dedicated if rng.random() < 0.3)
    memory_mb = rng.choice((1024, 2048, 4096, 8192, 16384))
    cell = {'id': cell_id, 'shared': shared, 'dedicated': dedicated,
            'pinned': pinned, 'siblings': siblings if threads > 1 else [],
            'memory_mb': memory_mb,
            'cpu_usage': rng.randint(0, 2 * len(shared) + 1)}
    cell.update(_memory(rng, memory_mb))
    return cell


def _split(rng, siblings):
    """Shared and dedicated pCPUs: whole cores mostly, threads sometimes
    (the split Nova's bug #1889633 is about)."""
    mode = rng.choice(('dedicated', 'cores', 'cores', 'threads'))
    shared = set()
    for core in siblings:
        if mode == 'cores' and rng.random() < 0.35:
            shared |= set(core)
        elif mode == 'threads':
            shared |= {cpu for cpu in core if rng.random() < 0.3}
    every = set().union(*map(set, siblings))
    return sorted(shared), sorted(every - shared)


def _memory(rng, memory_mb):
    """Page pools and the usage held in them, as both engines read it."""
    kind = rng.choice(('none', 'small', 'huge', 'huge', 'both'))
    if kind == 'none':
        usage = rng.randint(0, memory_mb * 5 // 4)
        return {'pools': [], 'nopage_mb': 0, 'memory_usage_mb': usage}
    huge = []
    left = memory_mb
    for size_kb, present in ((2048, kind in ('huge', 'both')),
                             (1048576, kind == 'both')):
        size_mb = size_kb // 1024
        if not present or left < 2 * size_mb:
            continue
        total = rng.randint(1, left // size_mb // 2)
        reserved = rng.choice((0, 0, 0, min(total, 1)))
        used = rng.randint(0, total - reserved)
        huge.append({'size_kb': size_kb, 'total': total, 'used': used,
                     'reserved': reserved})
        left -= total * size_mb
    reserved_mb = rng.choice((0, 0, 0, 128, 512))
    reserved_mb = min(reserved_mb, left // 2)
    capacity = left - reserved_mb
    small_guests = rng.randint(0, capacity // 2)
    nopage = rng.randint(0, max(0, capacity - small_guests) * 5 // 4)
    small = {'size_kb': 4, 'total': left * 256, 'used': small_guests * 256,
             'reserved': reserved_mb * 256}
    in_huge = sum(p['used'] * p['size_kb'] // 1024 for p in huge)
    return {'pools': [small] + huge, 'nopage_mb': nopage,
            'memory_usage_mb': small_guests + nopage + in_huge}


def random_guest(rng):
    """Return {'vcpus', 'memory_mb', 'extra_specs', 'image_properties'}."""
    vcpus = rng.choice((1, 2, 2, 3, 4, 4, 6, 8, 8, 12, 16))
    nodes = rng.choice([n for n in (None, None, 1, 2, 2, 3, 4) if
                        n is None or n <= vcpus])
    count = nodes or 1
    memory_mb = count * rng.choice((256, 512, 1024, 1536, 2048, 4096))
    flavor, image = {}, {}
    policy = rng.choice((None, 'shared', 'dedicated', 'dedicated', 'mixed',
                         'mixed'))
    _put(rng, flavor, image, 'cpu_policy', policy)
    if policy == 'mixed' or rng.random() < 0.03:
        flavor['hw:cpu_dedicated_mask'] = random_mask(rng, vcpus)
    if policy in ('dedicated', 'mixed') or rng.random() < 0.03:
        _put(rng, flavor, image, 'cpu_thread_policy',
             rng.choice((None, None) + THREAD_POLICIES))
        _put(rng, flavor, image, 'emulator_threads_policy',
             rng.choice((None, None, 'share', 'isolate')))
    if rng.random() < 0.15:
        _realtime(rng, flavor, image, vcpus)
    _put(rng, flavor, image, 'mem_page_size',
         rng.choice((None, None, None) + PAGE_SPECS))
    if nodes:
        _put(rng, flavor, image, 'numa_nodes', str(nodes))
        if nodes > 1 and rng.random() < 0.3:
            _split_nodes(rng, flavor, image, vcpus, memory_mb, nodes)
    return {'vcpus': vcpus, 'memory_mb': memory_mb, 'extra_specs': flavor,
            'image_properties': image}


def _put(rng, flavor, image, name, value):
    """Set a spec on the flavor mostly, on the image sometimes, on both
    (the same value or not) now and then."""
    if value is None:
        return
    draw = rng.random()
    if draw < 0.8:
        flavor[f'hw:{name}'] = value
    elif draw < 0.92:
        image[f'hw_{name}'] = value
    else:
        flavor[f'hw:{name}'] = value
        image[f'hw_{name}'] = (value if rng.random() < 0.6 else
                               _other(rng, name, value))


def _other(rng, name, value):
    choices = {'cpu_policy': ('shared', 'dedicated', 'mixed'),
               'cpu_thread_policy': THREAD_POLICIES,
               'emulator_threads_policy': ('share', 'isolate'),
               'mem_page_size': PAGE_SPECS,
               'numa_nodes': ('1', '2'),
               'pci_numa_affinity_policy': POLICIES}.get(name, (value,))
    return rng.choice(choices)


def random_mask(rng, vcpus):
    """A vCPU mask: a plain list, or one starting with ``^`` with
    several positive and negative tokens and ranges."""
    tokens = []
    for _ in range(rng.randint(1, 4)):
        low = rng.randrange(vcpus)
        high = min(vcpus - 1, low + rng.choice((0, 0, 1, 2)))
        token = str(low) if low == high else f"{low}-{high}"
        tokens.append(('^' if rng.random() < 0.5 else '') + token)
    if rng.random() < 0.6:
        tokens[0] = '^' + tokens[0].lstrip('^')
    return ','.join(tokens)


def _realtime(rng, flavor, image, vcpus):
    flavor['hw:cpu_realtime'] = rng.choice(('yes', 'true', 'no'))
    if rng.random() < 0.85:
        _put(rng, flavor, image, 'cpu_realtime_mask',
             random_mask(rng, vcpus))


def _split_nodes(rng, flavor, image, vcpus, memory_mb, nodes):
    """An explicit split: every node some vCPUs and memory."""
    order = list(range(vcpus))
    rng.shuffle(order)
    cuts = sorted(rng.sample(range(1, vcpus), nodes - 1))
    groups = [sorted(order[a:b]) for a, b in
              zip([0] + cuts, cuts + [vcpus], strict=True)]
    units = memory_mb // 256
    marks = sorted(rng.sample(range(1, units), nodes - 1))
    mems = [256 * (b - a) for a, b in
            zip([0] + marks, marks + [units], strict=True)]
    target = image if rng.random() < 0.15 else flavor
    prefix = 'hw_' if target is image else 'hw:'
    for node in range(nodes):
        target[f'{prefix}numa_cpus.{node}'] = cpuspec.format_cpu_spec(
            groups[node])
        target[f'{prefix}numa_mem.{node}'] = str(mems[node])


def random_limits(rng):
    if rng.random() < 0.4:
        return None
    return {'cpu_allocation_ratio': rng.choice((1.0, 2.0, 4.0, 16.0)),
            'ram_allocation_ratio': rng.choice((1.0, 1.0, 1.5))}


def random_case(rng):
    return {'host': random_host(rng), 'request': random_guest(rng),
            'limits': random_limits(rng)}


# -- PCI devices (fuzz_fit.py --devices) -------------------------------------

VENDOR = '8086'
# A card: its PF's product, its VFs' product (the same id on some cards,
# which is why a request that does not name type-PF never gets a PF) and
# a plain function's product.
PF_PRODUCT, VF_PRODUCT, PLAIN_PRODUCT = '1521', '1520', '10fb'
POLICIES = ('required', 'legacy', 'preferred', 'socket')


def random_device_case(rng):
    """A case whose guest asks PCI devices by alias on a host of 1-4 cells
    holding PFs with VFs and plain functions, some used, some of unknown
    node, sockets known, unknown or known for some cells only.

    ``case['pci']``: {'devices': [{address, vendor_id, product_id,
    dev_type, parent_addr, numa_node, used}], 'aliases': ['[pci] alias'
    JSON values], 'sockets': [socket or None per host cell]}.
    """
    host = random_host(rng)
    while len(host['cells']) > 4:
        host = random_host(rng)
    for cell in host['cells']:
        if rng.random() < 0.7:
            _idle(cell)
    cells = len(host['cells'])
    shared_ids = rng.random() < 0.3
    vf_product = PF_PRODUCT if shared_ids else VF_PRODUCT
    devices = []
    for card in range(rng.randint(0, 3)):
        node = _device_node(rng, cells)
        pf = f'0000:{0x10 + card:02x}:00.0'
        devices.append(_device(rng, pf, PF_PRODUCT, 'type-PF', None, node))
        for vf in range(rng.randint(0, 4)):
            devices.append(_device(
                rng, f'0000:{0x10 + card:02x}:{1 + vf // 8:02x}.{vf % 8}',
                vf_product, 'type-VF', pf, node))
    for plain in range(rng.randint(0, 3)):
        devices.append(_device(rng, f'0000:{0x40 + plain:02x}:00.0',
                               PLAIN_PRODUCT, 'type-PCI', None,
                               _device_node(rng, cells)))
    _used_families(rng, devices)
    aliases = {
        'vf': {'vendor_id': VENDOR, 'product_id': vf_product,
               'device_type': 'type-VF'},
        'pf': {'vendor_id': VENDOR, 'product_id': PF_PRODUCT,
               'device_type': 'type-PF'},
        'nic': {'vendor_id': VENDOR, 'product_id': PLAIN_PRODUCT},
        # No device type: VFs (and, with shared ids, never the PFs).
        'card': {'vendor_id': VENDOR, 'product_id': vf_product},
    }
    named = rng.sample(sorted(aliases), rng.choice((1, 1, 1, 2)))
    values = []
    for name in sorted(aliases):
        entry = dict(aliases[name], name=name)
        policy = rng.choice((None, None) + POLICIES)
        if policy:
            entry['numa_policy'] = policy
        values.append(json.dumps(entry, sort_keys=True))
    guest = (random_guest(rng) if rng.random() < 0.4
             else _plain_guest(rng, cells))
    guest['extra_specs']['pci_passthrough:alias'] = ','.join(
        f'{name}:{rng.choice((1, 1, 1, 2, 3))}' for name in named)
    policy = rng.choice((None, None) + POLICIES)
    if policy:
        _put(rng, guest['extra_specs'], guest['image_properties'],
             'pci_numa_affinity_policy', policy)
    return {'host': host, 'request': guest, 'limits': random_limits(rng),
            'pci': {'devices': devices, 'aliases': values,
                    'sockets': _sockets(rng, cells)}}


def _idle(cell):
    """No guest on the cell, so that the devices decide more often."""
    cell.update(pinned=[], cpu_usage=0, memory_usage_mb=0, nopage_mb=0)
    for pool in cell['pools']:
        pool['used'] = 0


def _device(rng, address, product, dev_type, parent, node):
    return {'address': address, 'vendor_id': VENDOR, 'product_id': product,
            'dev_type': dev_type, 'parent_addr': parent, 'numa_node': node,
            'used': False}


def _device_node(rng, cells):
    return None if rng.random() < 0.12 else rng.randrange(cells)


def _used_families(rng, devices):
    """Mark some functions used, never a PF with one of its VFs (a host
    cannot be in that state)."""
    for device in devices:
        if rng.random() >= 0.2:
            continue
        family = [d for d in devices
                  if d['address'] == device['parent_addr']
                  or d['parent_addr'] == device['address']]
        if not any(d['used'] for d in family):
            device['used'] = True


def _plain_guest(rng, cells):
    """A guest most hosts can hold, so that the devices decide."""
    nodes = rng.choice((None, None, 1, 2) if cells > 1 else (None, 1))
    vcpus = rng.choice((1, 2, 2, 4))
    if nodes == 2 and vcpus == 1:
        vcpus = 2
    flavor = {}
    if rng.random() < 0.5:
        flavor['hw:cpu_policy'] = 'dedicated'
    if nodes:
        flavor['hw:numa_nodes'] = str(nodes)
    return {'vcpus': vcpus,
            'memory_mb': (nodes or 1) * rng.choice((128, 256, 512)),
            'extra_specs': flavor, 'image_properties': {}}


def _sockets(rng, cells):
    """Each host cell's socket: known (one or two sockets), unknown on
    every cell, or unknown on some."""
    kind = rng.choice(('one', 'two', 'two', 'none', 'some'))
    if kind == 'none':
        return [None] * cells
    sockets = [0 if kind == 'one' else cell * 2 // max(cells, 2)
               for cell in range(cells)]
    if kind == 'some':
        sockets[rng.randrange(cells)] = None
    return sockets
