"""PCI passthrough: allow-list, aliases, requests, usage and device choice.

Pure: the operator's ``[pci] device_spec`` and ``[pci] alias`` reach
here as the strings configuration holds; nothing here reads
configuration or the host.

The NUMA affinity rules (Nova's, ``hw:pci_numa_affinity_policy``), for
the host cells the guest's cells were placed on (its *nodes*):

- ``required``: every device on one of the guest's nodes; a device whose
  node the host does not know is never taken.
- ``legacy`` (the default): a device on one of the guest's nodes, or one
  whose node is unknown.
- ``preferred``: as legacy when enough such devices are free; otherwise
  any device of the host.
- ``socket``: a device on one of the guest's nodes, or on a node of the
  same socket as one of them; beyond the guest's own nodes only where
  every host cell reports its socket (a host that leaves some unknown
  may put several sockets in one node, which Nova does not support
  either). A device of unknown node is never taken.

Within what a policy allows, the choice takes devices on the guest's
nodes first, then those of unknown node, then the others; in address
order within each.

A PF and its VFs exclude each other: a PF is given only while none of
its VFs is used, and takes its VFs with it; a request that does not
name type-PF never gets a PF (Nova's rule: a PF and its VFs often share
vendor and product ids).
"""

import collections
import fnmatch
import itertools
import json
import typing

from numamig import exception
from numamig import objects
from numamig.objects import pci as pci_obj

ALIAS_SPEC_KEY = 'pci_passthrough:alias'

# Bounds checked before any work: a request names at most this many
# devices in all, a host reports at most this many functions.
MAX_REQUESTED = 64
MAX_HOST_DEVICES = 4096

_SPEC_KEYS = frozenset({'vendor_id', 'product_id', 'address'})
_ALIAS_KEYS = frozenset({'name', 'vendor_id', 'product_id', 'device_type',
                         'numa_policy'})


class Alias(typing.NamedTuple):
    """One ``[pci] alias`` entry."""

    name: str
    vendor_id: str | None
    product_id: str | None
    device_type: str | None
    numa_policy: str | None


def _bad_config(reason):
    """InvalidConfiguration of a reason written '[pci] OPTION rest'."""
    _group, option, rest = reason.split(' ', 2)
    return exception.InvalidConfiguration(option=f'[pci] {option}',
                                          reason=rest)


def _entries(values, option):
    """Yield (text, dict) of each JSON object of a MultiStrOpt's values."""
    for text in values or ():
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise _bad_config(
                reason=f"[pci] {option} {text!r} is not JSON: {exc}")
        for entry in data if isinstance(data, list) else [data]:
            if not isinstance(entry, dict):
                raise _bad_config(
                    reason=f"[pci] {option} {text!r}: each entry must be "
                           f"a JSON object")
            yield text, entry


def _hex_or_any(option, text, key, value, wildcard):
    if value is None or (wildcard and value == '*'):
        return None
    lowered = value.lower() if isinstance(value, str) else value
    if not pci_obj.is_hex_id(lowered):
        raise _bad_config(
            reason=f"[pci] {option} {text!r}: {key} {value!r} is not four "
                   f"hex digits" + (" or '*'" if wildcard else ''))
    return lowered


def parse_device_spec(values):
    """Return the allow-list: a tuple of {key: pattern} (None: any).

    :raises InvalidConfiguration: naming the entry.
    """
    specs = []
    for text, entry in _entries(values, 'device_spec'):
        _check_keys('device_spec', text, entry, _SPEC_KEYS)
        address = entry.get('address')
        if address is not None and (not isinstance(address, str) or
                                    address.count(':') != 2 or
                                    '.' not in address):
            raise _bad_config(
                reason=f"[pci] device_spec {text!r}: address {address!r} "
                       f"is not 'dddd:bb:ss.f' (globs allowed)")
        specs.append({
            'vendor_id': _hex_or_any('device_spec', text, 'vendor_id',
                                     entry.get('vendor_id'), True),
            'product_id': _hex_or_any('device_spec', text, 'product_id',
                                      entry.get('product_id'), True),
            'address': address.lower() if address else None})
    return tuple(specs)


def _check_keys(option, text, entry, known):
    """Refuse an entry of ``[pci] option`` naming a key not in ``known``."""
    unknown = sorted(set(entry) - known)
    if unknown:
        raise _bad_config(
            reason=f"[pci] {option} {text!r}: unknown keys {unknown}; "
                   f"known: {sorted(known)}")


def admitted(device, specs):
    """Whether some allow-list entry matches the HostPCIDevice (or any
    object with address/vendor_id/product_id)."""
    for spec in specs:
        if spec['vendor_id'] not in (None, device.vendor_id):
            continue
        if spec['product_id'] not in (None, device.product_id):
            continue
        if spec['address'] is not None and not fnmatch.fnmatchcase(
                device.address, spec['address']):
            continue
        return True
    return False


def parse_aliases(values):
    """Return {name: Alias} of ``[pci] alias``.

    :raises InvalidConfiguration: naming the entry (a name given twice
        too: Nova merges such entries, numamig refuses the ambiguity).
    """
    aliases = {}
    for text, entry in _entries(values, 'alias'):
        _check_keys('alias', text, entry, _ALIAS_KEYS)
        name = entry.get('name')
        if not isinstance(name, str) or not name or ':' in name or \
                ',' in name:
            raise _bad_config(
                reason=f"[pci] alias {text!r}: 'name' must be a non-empty "
                       f"string without ':' or ','")
        if name in aliases:
            raise _bad_config(
                reason=f"[pci] alias {text!r}: name {name!r} is given "
                       f"twice")
        device_type = entry.get('device_type')
        if device_type is not None and \
                device_type not in pci_obj.DEVICE_TYPES:
            raise _bad_config(
                reason=f"[pci] alias {text!r}: device_type must be one of "
                       f"{', '.join(pci_obj.DEVICE_TYPES)}")
        policy = entry.get('numa_policy')
        if policy is not None and policy not in pci_obj.NUMA_POLICIES:
            raise _bad_config(
                reason=f"[pci] alias {text!r}: numa_policy must be one of "
                       f"{', '.join(pci_obj.NUMA_POLICIES)}")
        aliases[name] = Alias(
            name,
            _hex_or_any('alias', text, 'vendor_id', entry.get('vendor_id'),
                        False),
            _hex_or_any('alias', text, 'product_id',
                        entry.get('product_id'), False),
            device_type, policy)
    return aliases


def requests_of(extra_specs, aliases, guest_policy):
    """Return the PCIRequests of a flavor's ``pci_passthrough:alias``.

    :param aliases: {name: Alias} (parse_aliases), or None when none are
        configured.
    :param guest_policy: the guest's hw:pci_numa_affinity_policy, or None.
    :raises InvalidNUMASpec: naming the key and what is wrong.
    """
    raw = (extra_specs or {}).get(ALIAS_SPEC_KEY)
    if raw is None:
        return []

    def bad(reason):
        return exception.InvalidNUMASpec(key=ALIAS_SPEC_KEY, value=raw,
                                         reason=reason)

    if not isinstance(raw, str) or not raw.strip():
        raise bad("must be NAME:COUNT[,NAME:COUNT]")
    requests, total = [], 0
    for part in raw.split(','):
        name, colon, count = part.strip().partition(':')
        if not colon:
            count = '1'
        if not count.strip().isdigit() or int(count) < 1:
            raise bad(f"{part.strip()!r}: the count must be a positive "
                      f"integer")
        if not aliases or name not in aliases:
            known = ', '.join(sorted(aliases or ())) or 'none'
            raise bad(f"no [pci] alias is named {name!r} (configured: "
                      f"{known})")
        if any(r.alias == name for r in requests):
            raise bad(f"alias {name!r} is named twice")
        total += int(count)
        if total > MAX_REQUESTED:
            raise bad(f"more than {MAX_REQUESTED} devices")
        alias = aliases[name]
        requests.append(objects.PCIRequest(
            alias=name, count=int(count), vendor_id=alias.vendor_id,
            product_id=alias.product_id, device_type=alias.device_type,
            numa_policy=(guest_policy or alias.numa_policy
                         or pci_obj.POLICY_LEGACY)))
    return requests


# -- usage -----------------------------------------------------------------


def held_addresses(host_devices):
    """The addresses of a topology-with-usage's functions some guest
    holds (HostPCIDevice.instance_uuid set)."""
    return frozenset(d.address for d in host_devices
                     if d.get('instance_uuid') is not None)


def used_addresses(placed_topologies):
    """The host functions the guests' placed topologies hold."""
    used = set()
    for topology in placed_topologies:
        if topology is None:
            continue
        for held in topology.get('pci_devices') or ():
            used.add(held.address)
    return used


def unavailable(devices, used):
    """Addresses no new guest may take: the used ones, the VFs of a used
    PF and the PFs with a used VF.

    :param devices: Device tuples (devices_of).
    """
    blocked = set(used)
    used_pfs = {d.address for d in devices
                if d.address in used and d.dev_type == pci_obj.TYPE_PF}
    for device in devices:
        parent = device.parent_addr
        if parent is None:
            continue
        if parent in used_pfs:
            blocked.add(device.address)
        if device.address in used:
            blocked.add(parent)
    return blocked


def counts_per_node(host_devices):
    """{node (None: unknown): [total, free]} of a host's HostPCIDevices
    (with usage): what the per-cell usage, ``host show`` and the NRT
    export read."""
    devices = devices_of(host_devices)
    blocked = unavailable(devices, held_addresses(host_devices))
    counts = collections.defaultdict(lambda: [0, 0])
    for device in devices:
        entry = counts[device.numa_node]
        entry[0] += 1
        if device.address not in blocked:
            entry[1] += 1
    return dict(counts)


# -- the choice --------------------------------------------------------------


class Device(typing.NamedTuple):
    """A host function as the choice reads it (HostPCIDevice's fields)."""

    address: str
    vendor_id: str
    product_id: str
    dev_type: str
    parent_addr: str | None
    numa_node: int | None


def devices_of(host_devices):
    """Device tuples of HostPCIDevices, in address order."""
    return tuple(sorted(
        (Device(d.address, d.vendor_id, d.product_id,
                d.get('dev_type', pci_obj.TYPE_PCI), d.get('parent_addr'),
                d.get('numa_node')) for d in host_devices),
        key=lambda d: d.address))


def matches(request, device):
    """Whether the device is of the request's alias: its vendor, product
    and type, never a PF unless type-PF is asked for."""
    if request.vendor_id is not None and device.vendor_id != \
            request.vendor_id:
        return False
    if request.product_id is not None and device.product_id != \
            request.product_id:
        return False
    wanted = request.device_type
    if wanted is None:
        return device.dev_type != pci_obj.TYPE_PF
    return device.dev_type == wanted


def allowed(policy, device, nodes, sockets, socket_of):
    """Whether ``policy`` lets a guest on host cells ``nodes`` take the
    device, before preferred's fallback; ``sockets``: guest_sockets()."""
    node = device.numa_node
    if policy == pci_obj.POLICY_REQUIRED:
        return node in nodes
    if policy == pci_obj.POLICY_SOCKET:
        return node in nodes or (node is not None and
                                 socket_of.get(node) in sockets)
    return node is None or node in nodes


def guest_sockets(nodes, socket_of):
    """The sockets of host cells ``nodes`` whose other nodes ``socket``
    may take devices from: none unless every host cell reports its
    socket (``socket_of``: {host cell id: socket or None})."""
    if None in socket_of.values():
        return frozenset()
    return frozenset(socket_of[n] for n in nodes if n in socket_of)


class Prepared(typing.NamedTuple):
    """What every choice for one guest on one host reads, worked out once
    per fit (a fit tries several sets of host cells): per request the
    free functions of its kind, and each PF's VFs."""

    devices: tuple
    per_request: tuple
    children: dict


def prepare(devices, blocked, requests):
    """Return the Prepared of a guest's ``requests`` on a host's
    ``devices`` (Device tuples) minus ``blocked``."""
    free = [d for d in devices if d.address not in blocked]
    children = {}
    for device in devices:
        if device.parent_addr is not None:
            children.setdefault(device.parent_addr, []).append(
                device.address)
    return Prepared(tuple(devices),
                    tuple([d for d in free if matches(request, d)]
                          for request in requests), children)


def shortfall(prepared, requests):
    """Why no set of host cells can give the devices (a request with
    fewer free functions of its kind on the whole host than it asks),
    or None."""
    for request, usable in zip(requests, prepared.per_request, strict=True):
        if len(usable) < request.count:
            return (f"PCI alias {request.alias} ({request.numa_policy}): "
                    f"needs {request.count}, {len(usable)} free on the "
                    f"host")
    return None


def choose(devices, blocked, requests, nodes, socket_of, prepared=None):
    """Choose a host function per requested device.

    Each request in turn takes the best-ranked functions its policy
    allows (on the guest's nodes, then of unknown node, then others;
    address order within). When that leaves a later request short, which
    only happens when two aliases can take the same functions or a PF
    competes with its VFs, an exhaustive search over the requests'
    choices (SEARCH_BUDGET steps at most) finds an assignment if there is
    one; so on all but huge cases the answer is exact: the guest gets
    devices whenever some choice of free functions satisfies every
    request and policy (tests/unit/numa/test_pci.py holds it against a
    brute force).

    :param devices: Device tuples (devices_of), in address order.
    :param blocked: addresses no new guest may take (unavailable()).
    :param requests: PCIRequests.
    :param nodes: the host cell ids the guest's cells were placed on.
    :param socket_of: {host cell id: socket or None}.
    :param prepared: prepare()'s answer for these devices, blocked and
        requests (a fit makes it once for all the sets it tries).
    :returns: ([(alias, address, node)] in request order, None) or
        (None, why not).
    """
    if prepared is None:
        prepared = prepare(devices, blocked, requests)
    nodes = frozenset(nodes)
    sockets = guest_sockets(nodes, socket_of)
    taken = set()
    chosen = []
    alone = True
    for index, request in enumerate(requests):
        candidates = _candidates(request, prepared.per_request[index], taken,
                                 prepared.children, nodes, sockets,
                                 socket_of)
        if len(candidates) < request.count:
            break
        alone = False
        for device in candidates[:request.count]:
            taken.add(device.address)
            chosen.append((request.alias, device.address, device.numa_node))
    else:
        return chosen, None
    # The first request short with nothing taken yet cannot be helped by
    # any other choice: no search.
    found = None if alone else _search(
        list(enumerate(requests)), prepared, nodes, sockets, socket_of,
        [SEARCH_BUDGET])
    if found is not None:
        return found, None
    # Why: the first request short when it goes first.
    for index, request in enumerate(requests):
        candidates = _candidates(request, prepared.per_request[index], set(),
                                 prepared.children, nodes, sockets,
                                 socket_of)
        if len(candidates) < request.count:
            break
    else:
        index, request = len(requests) - 1, requests[-1]
    matching = prepared.per_request[index]
    fitting = [d for d in matching
               if request.numa_policy == pci_obj.POLICY_PREFERRED or
               allowed(request.numa_policy, d, nodes, sockets, socket_of)]
    return None, _shortage(request, matching, fitting, nodes, sockets,
                           len(requests) > 1)


# Steps the exhaustive search may take before it gives up (a step: one
# combination of functions tried for one request).
SEARCH_BUDGET = 20000


def _candidates(request, usable, taken, children, nodes, sockets,
                socket_of, every=False):
    """The functions ``request`` may take besides ``taken``, best first
    (``every``: all its kind allows, for preferred's search)."""
    usable = [d for d in usable if d.address not in taken
              and not _family_taken(d, taken, children)]
    if every:
        fitting = usable
    else:
        fitting = [d for d in usable
                   if allowed(request.numa_policy, d, nodes, sockets,
                              socket_of)]
        if request.numa_policy == pci_obj.POLICY_PREFERRED and \
                len(fitting) < request.count:
            fitting = usable
    fitting.sort(key=lambda d: (_rank(d, nodes), d.address))
    return fitting


def _search(requests, prepared, nodes, sockets, socket_of, budget,
            taken=frozenset()):
    """Return a full choice [(alias, address, node)] or None."""
    if not requests:
        return []
    (index, request), rest = requests[0], requests[1:]
    # Preferred: any free function will do for feasibility (ranked).
    candidates = _candidates(
        request, prepared.per_request[index], taken, prepared.children,
        nodes, sockets, socket_of,
        every=request.numa_policy == pci_obj.POLICY_PREFERRED)
    for combination in itertools.combinations(candidates, request.count):
        budget[0] -= 1
        if budget[0] < 0:
            return None
        addresses = {d.address for d in combination}
        if any(_family_taken(d, addresses - {d.address}, prepared.children)
               for d in combination):
            continue
        tail = _search(rest, prepared, nodes, sockets, socket_of, budget,
                       taken | addresses)
        if tail is not None:
            return [(request.alias, d.address, d.numa_node)
                    for d in combination] + tail
    return None


def _rank(device, nodes):
    if device.numa_node in nodes:
        return 0
    return 1 if device.numa_node is None else 2


def _family_taken(device, taken, children):
    """Whether taking ``device`` conflicts with one taken already (its
    PF, or one of its VFs); ``children``: {PF address: VF addresses}."""
    if device.parent_addr is not None:
        return device.parent_addr in taken
    if device.dev_type == pci_obj.TYPE_PF:
        return any(vf in taken for vf in children.get(device.address, ()))
    return False


def _shortage(request, free, fitting, nodes, sockets, several=False):
    where = ', '.join(str(n) for n in sorted(nodes))
    if request.numa_policy == pci_obj.POLICY_SOCKET:
        place = (f"on the sockets {sorted(sockets)} of host cells {where}"
                 if sockets else
                 f"on host cells {where}, as not every host cell reports "
                 f"its socket")
    elif request.numa_policy == pci_obj.POLICY_REQUIRED:
        place = f"on host cells {where}"
    elif request.numa_policy == pci_obj.POLICY_PREFERRED:
        place = "anywhere on the host"
    else:
        place = f"on host cells {where} or of unknown node"
    together = ("; the aliases together cannot be given"
                if several and len(fitting) >= request.count else '')
    return (f"PCI alias {request.alias} ({request.numa_policy}): needs "
            f"{request.count}, {len(fitting)} free {place} "
            f"({len(free)} free on the host){together}")


# How a guest's passed-through devices cross a live migration
# (doc/source/device-migration.rst): hot-unplugged before the copy and
# the destination's plugged after it, or the migration refused.
DEVICE_MIGRATION_FLAVOR_KEY = 'numamig:device_migration'
DEVICE_MIGRATION_IMAGE_KEY = 'numamig_device_migration'
UNPLUG = 'unplug'
REFUSE = 'refuse'
DEVICE_MIGRATION_MODES = (UNPLUG, REFUSE)


def device_migration_mode(instance):
    """(mode, where it came from) of a guest's devices in a migration:
    the flavor's extra spec, else the image's property, else
    ``unplug``.

    :raises MigrationPreCheckError: a value that is neither mode.
    """
    for where, specs, key in (
            ('flavor', instance.get('extra_specs') or {},
             DEVICE_MIGRATION_FLAVOR_KEY),
            ('image', instance.get('image_properties') or {},
             DEVICE_MIGRATION_IMAGE_KEY)):
        value = specs.get(key)
        if value is None:
            continue
        if value not in DEVICE_MIGRATION_MODES:
            raise exception.MigrationPreCheckError(
                reason=f"instance {instance.uuid}: {where} {key}={value!r} "
                       f"is not one of {', '.join(DEVICE_MIGRATION_MODES)}")
        return value, f"{where} {key}"
    return UNPLUG, 'default'
