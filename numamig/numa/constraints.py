"""Flavor extra specs and image properties -> an unplaced NUMA request.

The semantics are those operators know from Nova's ``hw:*`` flavor keys
and ``hw_*`` image properties. The flavor is the operator's word: an image
may fill in what the flavor leaves open and narrow what it allows ('any'
page size, the 'prefer' thread policy), never contradict it. Every invalid
combination raises an InvalidNUMARequest subclass naming the keys and
values involved; nothing here reads configuration or the host.
"""

from numamig import exception
from numamig import objects
from numamig.numa import pci
from numamig.numa import specs as specs_mod
from numamig.numa import vmem
from numamig.objects import fields
from numamig.objects import instance_numa

_POLICY = fields.CPUAllocationPolicy
_THREADS = fields.CPUThreadAllocationPolicy
_EMULATOR = fields.CPUEmulatorThreadsPolicy
_PINNED_POLICIES = (_POLICY.DEDICATED, _POLICY.MIXED)

# Upper bounds checked before any work: the engine builds per-vCPU
# structures, so an absurd size (10^8 vCPUs) must be refused, not tried.
# QEMU's q35 machine tops out at 4096 vCPUs; 64 TiB is beyond any host.
MAX_VCPUS = 4096
MAX_MEMORY_MB = 64 * 1024 * 1024

# The FIFO scheduler priority of realtime vCPUs (Nova's: the lowest FIFO
# priority, enough to preempt every normal thread of the host).
REALTIME_PRIORITY = 1


class _Setting:
    """A resolved spec: its value, the key and text it came from."""

    __slots__ = ('value', 'key', 'raw')

    def __init__(self, value=None, key=None, raw=None):
        self.value = value
        self.key = key
        # What the operator wrote, for messages ('large', not -2).
        self.raw = raw

    def __bool__(self):
        return self.value is not None


def get_numa_request(vcpus, memory_mb, extra_specs, image_properties,
                     pci_aliases=None):
    """Return the guest's unplaced InstanceNUMATopology, or None.

    None means the guest asks for no NUMA characteristic at all: no guest
    nodes, no page size, no pinned vCPU and no PCI device. The inputs are
    not modified. A guest asking for PCI devices (flavor key
    ``pci_passthrough:alias``) and nothing else gets one guest node: its
    devices' policy is about the host node it runs on.

    :param pci_aliases: {name: numa.pci.Alias} of ``[pci] alias``, or
        None when none are configured (a guest naming one is refused).

    :param vcpus: number of vCPUs of the flavor.
    :param memory_mb: memory of the flavor in MiB.
    :param extra_specs: flavor extra specs (``hw:*`` keys are read).
    :param image_properties: image properties (``hw_*`` keys are read).
    :raises InvalidNUMARequest: a subclass naming the keys and values.
    """
    _check_size('vcpus', vcpus, MAX_VCPUS)
    _check_size('memory_mb', memory_mb, MAX_MEMORY_MB)
    flavor = dict(extra_specs or {})
    image = dict(image_properties or {})
    settings = _resolve(flavor, image, vcpus)
    policy = settings['cpu_policy'].value
    pinned = policy in _PINNED_POLICIES
    _check_pinning_only(settings, policy)
    dedicated = _dedicated_vcpus(settings, vcpus)
    realtime = _realtime_vcpus(settings, vcpus, dedicated)
    page = settings['mem_page_size']
    nodes = settings['numa_nodes']
    explicit_split = any(settings['cells'])
    device = vmem.device_request(settings)
    pci_policy = settings['pci_numa_affinity_policy'].value
    pci_requests = pci.requests_of(flavor, pci_aliases, pci_policy)
    if not (nodes or page or pinned or explicit_split or device
            or pci_requests):
        return None
    split = _split(settings, vcpus, memory_mb)
    cells = [_cell(i, vcpus_i, mem_i, settings, dedicated, realtime,
                   device)
             for i, (vcpus_i, mem_i) in enumerate(split)]
    emulator = settings['emulator_threads_policy'].value if pinned else None
    return objects.InstanceNUMATopology(
        cells=cells, emulator_threads_policy=emulator,
        pci_requests=pci_requests,
        pci_numa_affinity_policy=pci_policy if pci_requests else None)


def _check_size(name, value, maximum):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise exception.InvalidNUMASpec(
            key=name, value=value, reason="must be a positive integer")
    if value > maximum:
        raise exception.InvalidNUMASpec(
            key=name, value=value, reason=f"must be at most {maximum}")


def _parse(spec, key, value, vcpus):
    if spec.kind == 'choice':
        return specs_mod.parse_choice(spec, key, value)
    if spec.kind == 'bool':
        return specs_mod.parse_bool(key, value)
    if spec.kind == 'int':
        return specs_mod.parse_positive_int(key, value)
    if spec.kind == 'pagesize':
        return specs_mod.parse_page_size(key, value)
    if spec.kind == 'size':
        return specs_mod.parse_size_kb(key, value)
    if spec.kind == 'mib':
        return specs_mod.parse_nonnegative_int(key, value)
    if spec.kind == 'vcpus':
        return specs_mod.parse_vcpu_list(key, value, vcpus)
    return specs_mod.parse_vcpu_mask(key, value, vcpus)


def _resolve(flavor, image, vcpus):
    """Return {spec name: _Setting} after the flavor/image precedence."""
    settings = {}
    for spec in specs_mod.SPECS:
        if spec.per_cell:
            continue
        from_flavor = _read(spec, spec.flavor_key, flavor, vcpus)
        from_image = _read(spec, spec.image_key, image, vcpus)
        settings[spec.name] = _merge(spec, from_flavor, from_image)
    for name in ('numa_cpus', 'numa_mem'):
        spec = specs_mod.SPECS_BY_NAME[name]
        settings[name] = (_read_cells(spec, spec.flavor_key, flavor, vcpus),
                          _read_cells(spec, spec.image_key, image, vcpus))
    settings['cells'] = _merge_cells(settings.pop('numa_cpus'),
                                     settings.pop('numa_mem'))
    return settings


def _read(spec, key, source, vcpus):
    if key is None or key not in source or source[key] is None:
        return _Setting()
    return _Setting(_parse(spec, key, source[key], vcpus), key,
                    source[key])


def _read_cells(spec, prefix, source, vcpus):
    """Return {guest node: _Setting} of the ``prefix.N`` keys in source."""
    found = {}
    for key, value in source.items():
        if not isinstance(key, str) or not key.startswith(prefix + '.'):
            continue
        index = key[len(prefix) + 1:]
        if not index.isdigit():
            raise exception.InvalidNUMASpec(
                key=key, value=value,
                reason="the part after the dot must be a guest NUMA node "
                       "number")
        found[int(index)] = _Setting(_parse(spec, key, value, vcpus), key,
                                     value)
    return found


def _merge(spec, flavor, image):
    """Apply the precedence rule of one spec; raise on a contradiction."""
    if not image:
        return flavor
    if not flavor:
        if spec.name == 'mem_page_size':
            raise exception.ImageSpecForbidden(
                key=image.key, value=image.raw, other_key=spec.flavor_key,
                other_value=None,
                reason="the flavor must allow a page size choice with "
                       "hw:mem_page_size=large or any")
        return image
    if flavor.value == image.value or _narrows(spec, flavor, image):
        return image
    raise exception.ImageSpecForbidden(
        key=image.key, value=image.raw, other_key=flavor.key,
        other_value=flavor.raw,
        reason="an image may only narrow what the flavor allows")


def _narrows(spec, flavor, image):
    if spec.name == 'cpu_thread_policy':
        return flavor.value == _THREADS.PREFER
    if spec.name == 'mem_page_size':
        if flavor.value == instance_numa.PAGESIZE_ANY:
            return True
        # 'large' lets the image name a huge page size, not small pages.
        return (flavor.value == instance_numa.PAGESIZE_LARGE
                and image.value not in (instance_numa.PAGESIZE_SMALL,
                                        instance_numa.PAGESIZE_ANY))
    return False


def _merge_cells(cpus, mems):
    """Pick the flavor's explicit node split, else the image's."""
    flavor_cpus, image_cpus = cpus
    flavor_mems, image_mems = mems
    if not (flavor_cpus or flavor_mems):
        return image_cpus, image_mems
    for flavor_side, image_side in ((flavor_cpus, image_cpus),
                                    (flavor_mems, image_mems)):
        for node, setting in sorted(image_side.items()):
            theirs = flavor_side.get(node, _Setting())
            if theirs.value != setting.value:
                raise exception.ImageSpecForbidden(
                    key=setting.key, value=setting.raw,
                    other_key=theirs.key or 'the flavor',
                    other_value=theirs.raw,
                    reason="the flavor already splits the guest's NUMA "
                           "nodes")
    return flavor_cpus, flavor_mems


def _check_pinning_only(settings, policy):
    """Reject the settings that only make sense for pinned vCPUs."""
    policy_setting = settings['cpu_policy']
    checks = (
        ('cpu_thread_policy', None,
         "a thread policy applies to pinned vCPUs only"),
        ('emulator_threads_policy', _EMULATOR.ISOLATE,
         "isolated emulator threads need a dedicated pCPU, so pinned "
         "vCPUs"),
        ('cpu_realtime', True, "realtime vCPUs must be pinned"),
    )
    for name, bad_value, reason in checks:
        setting = settings[name]
        if not setting or policy in _PINNED_POLICIES:
            continue
        if bad_value is None or setting.value == bad_value:
            raise exception.NUMASpecConflict(
                key=setting.key, value=setting.raw,
                other_key=policy_setting.key or 'hw:cpu_policy',
                other_value=policy_setting.raw, reason=reason)


def _dedicated_vcpus(settings, vcpus):
    """Return the set of pinned vCPUs."""
    policy = settings['cpu_policy']
    mask = settings['cpu_dedicated_mask']
    if policy.value == _POLICY.DEDICATED and not mask:
        return set(range(vcpus))
    if policy.value != _POLICY.MIXED:
        if mask:
            raise exception.NUMASpecConflict(
                key=mask.key, value=mask.raw,
                other_key=policy.key or 'hw:cpu_policy',
                other_value=policy.raw,
                reason="a dedicated mask needs hw:cpu_policy=mixed")
        return set()
    if not mask:
        mask = settings['cpu_realtime_mask']
    if not mask:
        raise exception.InvalidNUMASpec(
            key=policy.key, value=policy.raw,
            reason="mixed needs hw:cpu_dedicated_mask (or a realtime mask) "
                   "to say which vCPUs are pinned")
    if not mask.value or mask.value == set(range(vcpus)):
        left = "no dedicated" if not mask.value else "no shared"
        raise exception.InvalidNUMASpec(
            key=mask.key, value=mask.raw,
            reason=f"leaves {left} vCPU of the {vcpus}; mixed needs at "
                   f"least one pinned and one shared vCPU")
    return set(mask.value)


def _realtime_vcpus(settings, vcpus, dedicated):
    """Return the realtime vCPUs (empty when realtime is off)."""
    enabled = settings['cpu_realtime']
    mask = settings['cpu_realtime_mask']
    if not enabled.value:
        if mask:
            raise exception.NUMASpecConflict(
                key=mask.key, value=mask.raw,
                other_key='hw:cpu_realtime', other_value=enabled.raw,
                reason="a realtime mask needs hw:cpu_realtime=yes")
        return set()
    if not mask:
        raise exception.InvalidNUMASpec(
            key=enabled.key, value=enabled.raw,
            reason="realtime needs hw:cpu_realtime_mask (or the image's "
                   "hw_cpu_realtime_mask) naming the realtime vCPUs")
    if not mask.value:
        raise exception.InvalidNUMASpec(
            key=mask.key, value=mask.raw, reason="names no realtime vCPU")
    outside = mask.value - dedicated
    if outside:
        raise exception.NUMASpecConflict(
            key=mask.key, value=mask.raw,
            other_key='hw:cpu_dedicated_mask', other_value=sorted(dedicated),
            reason=f"realtime vCPUs {sorted(outside)} are not pinned")
    emulator = settings['emulator_threads_policy'].value
    if mask.value == set(range(vcpus)) and emulator != _EMULATOR.ISOLATE:
        raise exception.InvalidNUMASpec(
            key=mask.key, value=mask.raw,
            reason="every vCPU would be realtime; leave one for the "
                   "emulator threads or set hw:emulator_threads_policy="
                   "isolate")
    return set(mask.value)


def _split(settings, vcpus, memory_mb):
    """Return [(vCPU set, memory MiB)] per guest node."""
    nodes = settings['numa_nodes']
    cpus, mems = settings['cells']
    count = nodes.value or 1
    if count > vcpus:
        raise exception.InvalidNUMASpec(
            key=nodes.key, value=nodes.raw,
            reason=f"more guest nodes than the guest's {vcpus} vCPUs")
    if cpus or mems:
        if not nodes:
            keys = sorted(s.key for s in (*cpus.values(), *mems.values()))
            raise exception.InvalidNUMASplit(
                keys=', '.join(keys),
                reason="an explicit split needs hw:numa_nodes")
        return _explicit_split(nodes, cpus, mems, vcpus, memory_mb)
    if vcpus % count or memory_mb % count:
        raise exception.InvalidNUMASplit(
            keys=f"{nodes.key}={count}",
            reason=f"{vcpus} vCPUs and {memory_mb} MiB cannot be split "
                   f"evenly over {count} nodes; give hw:numa_cpus.N and "
                   f"hw:numa_mem.N")
    per_vcpus, per_mem = vcpus // count, memory_mb // count
    return [(set(range(i * per_vcpus, (i + 1) * per_vcpus)), per_mem)
            for i in range(count)]


def _explicit_split(nodes, cpus, mems, vcpus, memory_mb):
    count = nodes.value
    expected = set(range(count))
    for name, found in (('hw:numa_cpus', cpus), ('hw:numa_mem', mems)):
        if set(found) != expected:
            extra = sorted(set(found) - expected)
            missing = sorted(expected - set(found))
            raise exception.InvalidNUMASplit(
                keys=f"{name}.N with {nodes.key}={count}",
                reason=f"needs exactly nodes 0-{count - 1}; missing "
                       f"{missing}, beyond the node count {extra}")
    seen = {}
    for node in sorted(cpus):
        for vcpu in sorted(cpus[node].value):
            if vcpu in seen:
                raise exception.InvalidNUMASplit(
                    keys=f"{cpus[seen[vcpu]].key}, {cpus[node].key}",
                    reason=f"vCPU {vcpu} is assigned to two nodes")
            seen[vcpu] = node
    unassigned = sorted(set(range(vcpus)) - set(seen))
    if unassigned:
        raise exception.InvalidNUMASplit(
            keys='hw:numa_cpus.N',
            reason=f"vCPUs {unassigned} are assigned to no node")
    total = sum(m.value for m in mems.values())
    if total != memory_mb:
        raise exception.InvalidNUMASplit(
            keys='hw:numa_mem.N',
            reason=f"the nodes' memory adds up to {total} MiB, the guest "
                   f"has {memory_mb} MiB")
    return [(set(cpus[n].value), mems[n].value) for n in range(count)]


def _cell(index, vcpus, memory_mb, settings, dedicated, realtime, device):
    page = settings['mem_page_size']
    if page and page.value > 0 and (memory_mb * 1024) % page.value:
        raise exception.PageSizeMemoryMismatch(
            cell=index, memory_mb=memory_mb, pagesize_kb=page.value,
            key=f"{page.key}={page.value}")
    pinned = vcpus & dedicated
    policy = settings['cpu_policy'].value
    thread_policy = settings['cpu_thread_policy'].value if pinned else None
    return objects.InstanceNUMACell(
        id=index, cpuset=vcpus - pinned, pcpuset=pinned,
        memory_mb=memory_mb, pagesize=page.value, cpu_policy=policy,
        cpu_thread_policy=thread_policy, realtime_vcpus=vcpus & realtime,
        **vmem.cell_fields(device))
