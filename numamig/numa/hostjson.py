"""The JSON forms of host topologies, requests and fit results.

Pure conversion between plain dicts (as json.load gives them) and the
versioned objects, used by ``numamig-manage numa fit`` and its batch mode
and by tools that describe hosts in files; doc/source/numa-fit.rst
documents the formats. Bad input raises InvalidNUMAJSON naming the path
of the field.
"""

import json

from numamig import cpuspec
from numamig import exception
from numamig import objects
from numamig.numa import constraints
from numamig.numa import pci
from numamig.numa import specs as specs_mod

_CELL_KEYS = {'id', 'cpus', 'dedicated', 'shared', 'siblings', 'memory_mb',
              'socket',
              'memory_usage_mb', 'pinned', 'cpu_usage', 'pages', 'distances'}
_POOL_KEYS = {'size_kb', 'total', 'used', 'reserved'}
_REQUEST_KEYS = {'vcpus', 'memory_mb', 'extra_specs', 'image_properties',
                 'pci_aliases',
                 'limits', 'pagesize_kb'}
_LIMIT_KEYS = {'cpu_allocation_ratio', 'ram_allocation_ratio'}
_DEVICE_KEYS = {'address', 'vendor_id', 'product_id', 'dev_type',
                'parent_addr', 'numa_node', 'instance_uuid'}


def _bad(what, where, reason):
    return exception.InvalidNUMAJSON(what=what, where=where, reason=reason)


def _object(what, where, data, allowed, required=()):
    if not isinstance(data, dict):
        raise _bad(what, where, f"must be an object, got {data!r}")
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise _bad(what, where, f"unknown keys {unknown}; known keys are "
                                f"{sorted(allowed)}")
    missing = [key for key in required if key not in data]
    if missing:
        raise _bad(what, where, f"missing keys {missing}")
    return data


def _integer(what, where, value, minimum=0):
    if isinstance(value, bool) or not isinstance(value, int) or \
            value < minimum:
        raise _bad(what, where, f"must be an integer >= {minimum}, got "
                                f"{value!r}")
    return value


def _cpus(where, value):
    """A CPU set given as a spec string ('0-3,^2') or a list of ids."""
    if isinstance(value, list):
        return {_integer('host', where, cpu) for cpu in value}
    try:
        return cpuspec.parse_cpu_spec(value)
    except cpuspec.CPUSpecError as exc:
        raise _bad('host', where, str(exc))


def host_from_json(data):
    """Return the HostNUMATopology a HOST.json document describes.

    :raises InvalidNUMAJSON: naming the field, e.g. ``cells[1].pages[0]``.
    """
    _object('host', '$', data, {'cells', 'pci_devices'},
            required=('cells',))
    if not isinstance(data['cells'], list):
        raise _bad('host', 'cells', "must be a list of cells")
    cells = [_cell_from_json(f"cells[{i}]", cell)
             for i, cell in enumerate(data['cells'])]
    devices = data.get('pci_devices', [])
    if not isinstance(devices, list) or len(devices) > \
            pci.MAX_HOST_DEVICES:
        raise _bad('host', 'pci_devices',
                   f"must be a list of at most {pci.MAX_HOST_DEVICES} "
                   f"devices")
    topology = objects.HostNUMATopology(
        cells=cells, pci_devices=[
            _device_from_json(f"pci_devices[{i}]", device)
            for i, device in enumerate(devices)])
    try:
        return topology.validate()
    except exception.ObjectValidationError as exc:
        raise _bad('host', '$', str(exc))


def _cell_from_json(where, data):
    _object('host', where, data, _CELL_KEYS,
            required=('id', 'cpus', 'memory_mb'))
    cpus = _cpus(f"{where}.cpus", data['cpus'])
    shared = _cpus(f"{where}.shared", data.get('shared', ''))
    if 'dedicated' in data:
        dedicated = _cpus(f"{where}.dedicated", data['dedicated'])
    else:
        dedicated = cpus - shared
    stray = (dedicated | shared) - cpus
    if stray:
        raise _bad('host', where, f"dedicated/shared CPUs {sorted(stray)} "
                                  f"are not in cpus")
    siblings = data.get('siblings', [])
    if not isinstance(siblings, list):
        raise _bad('host', f"{where}.siblings", "must be a list of lists")
    pools = data.get('pages', [])
    if not isinstance(pools, list):
        raise _bad('host', f"{where}.pages", "must be a list of pools")
    return objects.HostNUMACell(
        id=_integer('host', f"{where}.id", data['id']),
        cpuset=shared, pcpuset=dedicated,
        pinned_cpus=_cpus(f"{where}.pinned", data.get('pinned', '')),
        siblings=[_cpus(f"{where}.siblings[{i}]", group)
                  for i, group in enumerate(siblings)],
        memory_mb=_integer('host', f"{where}.memory_mb", data['memory_mb']),
        memory_usage_mb=_integer('host', f"{where}.memory_usage_mb",
                                 data.get('memory_usage_mb', 0)),
        cpu_usage=_integer('host', f"{where}.cpu_usage",
                           data.get('cpu_usage', 0)),
        mempages=[_pool_from_json(f"{where}.pages[{i}]", pool)
                  for i, pool in enumerate(pools)],
        distances=_distances(f"{where}.distances",
                             data.get('distances', {})),
        socket=(None if data.get('socket') is None else
                _integer('host', f"{where}.socket", data['socket'])))


def _device_from_json(where, data):
    _object('host', where, data, _DEVICE_KEYS,
            required=('address', 'vendor_id', 'product_id'))
    try:
        return objects.HostPCIDevice(**data).validate()
    except (ValueError, TypeError,
            exception.ObjectValidationError) as exc:
        raise _bad('host', where, str(exc))


def _distances(where, data):
    if not isinstance(data, dict):
        raise _bad('host', where, "must be an object of cell id: distance")
    result = {}
    for key, value in data.items():
        if not str(key).isdigit():
            raise _bad('host', where, f"key {key!r} is not a cell id")
        result[int(key)] = _integer('host', f"{where}[{key}]", value)
    return result


def _pool_from_json(where, data):
    _object('host', where, data, _POOL_KEYS, required=('size_kb', 'total'))
    return objects.NUMAPagesTopology(
        **{key: _integer('host', f"{where}.{key}", data.get(key, 0))
           for key in _POOL_KEYS})


def host_to_json(topology):
    """Return the HOST.json document of a HostNUMATopology (sockets and
    PCI devices only where the host has them)."""
    document = {'cells': [{
        'id': cell.id,
        'cpus': cpuspec.format_cpu_spec(cell.all_cpus),
        'dedicated': cpuspec.format_cpu_spec(cell.pcpuset),
        'shared': cpuspec.format_cpu_spec(cell.cpuset),
        'siblings': [sorted(group) for group in cell.siblings],
        'memory_mb': cell.memory_mb,
        'memory_usage_mb': cell.memory_usage_mb,
        'pinned': cpuspec.format_cpu_spec(cell.pinned_cpus),
        'cpu_usage': cell.cpu_usage,
        'pages': [{key: getattr(pool, key) for key in sorted(_POOL_KEYS)}
                  for pool in cell.mempages],
        'distances': {str(k): v for k, v in sorted(cell.distances.items())},
    } for cell in topology.cells]}
    for cell, entry in zip(topology.cells, document['cells'], strict=True):
        if cell.get('socket') is not None:
            entry['socket'] = cell.socket
    if topology.get('pci_devices'):
        document['pci_devices'] = [
            {key: device.get(key) for key in sorted(_DEVICE_KEYS)}
            for device in topology.pci_devices]
    return document


def request_from_json(data, foreign_specs=(), policies=None):
    """Return (request or None, NUMALimits or None, forced page size).

    :param foreign_specs: keys of the spec namespaces accepted unread
        (specs.check_known).
    :param policies: names of the known live-migration policies, or
        None (specs.check).
    :raises InvalidNUMAJSON: for a malformed document.
    :raises InvalidNUMARequest: for specs that make no valid request,
        or a key of the spec namespaces numamig does not read.
    """
    _object('request', '$', data, _REQUEST_KEYS,
            required=('vcpus', 'memory_mb'))
    specs = {}
    for key in ('extra_specs', 'image_properties'):
        value = data.get(key) or {}
        specs[key] = _object('request', key, value,
                             set(value) if isinstance(value, dict) else set())
        for spec_key, spec_value in specs[key].items():
            if not isinstance(spec_value, (str, int, float, bool)):
                raise _bad('request', f'{key}.{spec_key}',
                           f"must be a string or a number, got "
                           f"{type(spec_value).__name__}")
    limits = None
    if data.get('limits') is not None:
        raw = _object('request', 'limits', data['limits'], _LIMIT_KEYS)
        try:
            limits = objects.NUMALimits(**raw).validate()
        except (ValueError, TypeError,
                exception.ObjectValidationError) as exc:
            raise _bad('request', 'limits', str(exc))
    pagesize = data.get('pagesize_kb')
    if pagesize is not None:
        pagesize = _integer('request', 'pagesize_kb', pagesize, minimum=4)
    specs_mod.check(specs['extra_specs'], specs['image_properties'],
                    foreign_specs, policies)
    aliases = data.get('pci_aliases')
    if aliases is not None:
        if not isinstance(aliases, list):
            raise _bad('request', 'pci_aliases',
                       "must be a list of [pci] alias objects")
        try:
            aliases = pci.parse_aliases([json.dumps(aliases)])
        except exception.InvalidConfiguration as exc:
            raise _bad('request', 'pci_aliases', str(exc))
    request = constraints.get_numa_request(
        data['vcpus'], data['memory_mb'], specs['extra_specs'],
        specs['image_properties'], aliases)
    return request, limits, pagesize


def result_to_json(result):
    """Return the output document of a FitResult."""
    if not result.fits:
        return {'fits': False, 'reason': result.reason}
    placed = result.topology
    realtime = sorted(set().union(*(c.realtime_vcpus for c in placed.cells)))
    document = {
        'fits': True,
        'emulator_threads_policy': placed.emulator_threads_policy,
        'realtime_vcpus': realtime,
        'realtime_priority': (constraints.REALTIME_PRIORITY if realtime
                              else None),
        'cells': [_placed_cell_json(cell) for cell in placed.cells],
        'distance': distance_json(result.distance),
    }
    if placed.pci_devices:
        # Only for a guest with devices: other answers stay as they were.
        document['pci_devices'] = [
            {'alias': d.alias, 'address': d.address,
             'host_node': d.host_node, 'guest_cell': d.guest_cell}
            for d in placed.pci_devices]
    return document


def distance_json(found):
    """The output of a fit.Distance: the distance cost of the host cells
    chosen, its excess over the host's nearest pairs, and why them."""
    return {'cost': found.cost, 'excess': found.excess,
            'reason': found.reason}


def _placed_cell_json(cell):
    return {
        'guest_cell': cell.id,
        'host_cell': cell.host_cell,
        'vcpus': sorted(cell.vcpus),
        'pinned_vcpus': sorted(cell.pcpuset),
        'memory_mb': cell.memory_mb,
        'pagesize_kb': cell.pagesize,
        'cpu_policy': cell.cpu_policy,
        'cpu_thread_policy': cell.cpu_thread_policy,
        'cpu_pinning': {str(vcpu): pcpu for vcpu, pcpu
                        in sorted(cell.cpu_pinning.items())},
        'emulator_pcpus': sorted(cell.cpuset_reserved or ()),
    }
