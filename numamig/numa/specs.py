"""The flavor extra specs and image properties the NUMA engine reads.

Each spec is declared once, as data: its flavor key, its image property
(if images may set it), the kind of value and the values allowed. The
parsers here turn one raw value into a typed one and name the key when
they cannot; combining specs into a request is constraints.py's job.
"""

import dataclasses
import difflib
import re

from numamig import cpuspec
from numamig import exception
from numamig import pagesize
from numamig.objects import fields
from numamig.objects import instance_numa
from numamig.objects import pci

# Page-size requests by name, as operators write them.
PAGE_SIZE_NAMES = {
    'small': instance_numa.PAGESIZE_SMALL,
    'large': instance_numa.PAGESIZE_LARGE,
    'any': instance_numa.PAGESIZE_ANY,
}

_TRUE = ('1', 'true', 'yes', 'on', 'y', 't')
_FALSE = ('0', 'false', 'no', 'off', 'n', 'f')


@dataclasses.dataclass(frozen=True)
class Spec:
    """One NUMA-related setting and where a guest may ask for it.

    ``kind`` is one of 'choice', 'bool', 'int', 'mask' (a vCPU mask:
    one starting with ``^`` is read against all vCPUs), 'vcpus' (a guest
    node's vCPU list), 'pagesize', 'size' (a memory size such as 2MB,
    read as KiB), 'mib' (a whole number of MiB, 0 allowed). Per-cell
    specs (``per_cell``) are written ``<key>.N`` with N a guest cell
    number.
    """

    name: str
    flavor_key: str
    image_key: str | None
    kind: str
    help: str
    choices: tuple = ()
    per_cell: bool = False


SPECS = (
    Spec('cpu_policy', 'hw:cpu_policy', 'hw_cpu_policy', 'choice',
         "Pin every vCPU (dedicated), none (shared), or those of "
         "hw:cpu_dedicated_mask (mixed).",
         choices=fields.CPUAllocationPolicy.ALL),
    Spec('cpu_thread_policy', 'hw:cpu_thread_policy', 'hw_cpu_thread_policy',
         'choice',
         "How pinned vCPUs use SMT threads: prefer siblings, isolate "
         "(a whole core each), require siblings.",
         choices=fields.CPUThreadAllocationPolicy.ALL),
    Spec('emulator_threads_policy', 'hw:emulator_threads_policy',
         'hw_emulator_threads_policy', 'choice',
         "Run emulator threads on the shared set (share) or on one extra "
         "dedicated pCPU (isolate).",
         choices=fields.CPUEmulatorThreadsPolicy.ALL),
    Spec('cpu_realtime', 'hw:cpu_realtime', None, 'bool',
         "Give the vCPUs of the realtime mask a FIFO scheduler priority."),
    Spec('cpu_realtime_mask', 'hw:cpu_realtime_mask', 'hw_cpu_realtime_mask',
         'mask',
         "Which vCPUs are realtime, e.g. '^0-1' (all but 0 and 1); a "
         "mask starting with '^' is read against all vCPUs."),
    Spec('cpu_dedicated_mask', 'hw:cpu_dedicated_mask', None, 'mask',
         "Which vCPUs are pinned under hw:cpu_policy=mixed, e.g. '^0' "
         "(all but 0) or '^0,2' (all but 0, and 2 again)."),
    Spec('mem_page_size', 'hw:mem_page_size', 'hw_mem_page_size', 'pagesize',
         "Back guest memory with small, large, any, or a given page size "
         "such as 2MB or 1GB (a bare number is KiB)."),
    Spec('numa_nodes', 'hw:numa_nodes', 'hw_numa_nodes', 'int',
         "Number of guest NUMA nodes, each on its own host node."),
    Spec('numa_cpus', 'hw:numa_cpus', 'hw_numa_cpus', 'vcpus',
         "vCPUs of guest node N (hw:numa_cpus.N), for an asymmetric split.",
         per_cell=True),
    Spec('numa_mem', 'hw:numa_mem', 'hw_numa_mem', 'int',
         "Memory in MiB of guest node N (hw:numa_mem.N).", per_cell=True),
    Spec('pci_numa_affinity_policy', 'hw:pci_numa_affinity_policy',
         'hw_pci_numa_affinity_policy', 'choice',
         "Where the guest's PCI devices (pci_passthrough:alias) must be: "
         "on its host nodes (required), there or of unknown node "
         "(legacy), there if possible (preferred), on their sockets "
         "(socket). Default: each alias' numa_policy, else legacy.",
         choices=pci.NUMA_POLICIES),
    # virtio-mem: the flavor's only (memory is the operator's to size).
    Spec('virtio_mem_size', 'hw:virtio_mem_size', None, 'int',
         "Give every guest NUMA node a virtio-mem device of this many MiB "
         "(its maximum), on top of the node's boot memory, so that "
         "memory can be reclaimed from and given back to that node."),
    Spec('virtio_mem_block', 'hw:virtio_mem_block', None, 'size',
         "Block size of the virtio-mem devices, a power of two of at "
         "least 1MB such as 2MB (default) or 1GB; a bare number is KiB."),
    Spec('virtio_mem_requested', 'hw:virtio_mem_requested', None, 'mib',
         "MiB each virtio-mem device starts plugged with (0 up to "
         "hw:virtio_mem_size; default: all of it)."),
    Spec('virtio_mem_min', 'hw:virtio_mem_min', None, 'mib',
         "MiB each virtio-mem device keeps plugged when numamig reclaims "
         "memory from the guest to place another guest ([virtio_mem] "
         "placement_reclaim); default: what it started with "
         "(hw:virtio_mem_requested)."),
)

SPECS_BY_NAME = {spec.name: spec for spec in SPECS}


# The namespaces numamig owns: a key there that no Spec declares is
# refused when a guest is created, so that a typo is not silently ignored.
FLAVOR_NAMESPACE = 'hw:'
IMAGE_NAMESPACE = 'hw_'
# Keys of those namespaces that numamig reads outside the NUMA engine:
# the convergence policy of a guest's migrations (numamig.convergence).
OTHER_KEYS = ('hw:live_migration_policy', 'hw_live_migration_policy')


def check(extra_specs, image_properties, foreign=(), policies=None):
    """The one rule for flavor-like specs, applied before anything is
    recorded or planned wherever they are taken (a guest created, the
    guest ``host defragment --for`` makes room for, ``numa fit``'s
    request): the keys (check_known) and the values numamig reads outside
    the NUMA engine (check_policies). The NUMA specs' values are checked
    by the request they make (numamig.numa.constraints), which every one
    of those places builds next.

    :param policies: the names of the live-migration policies known
        (numamig.convergence.policy.catalog); None: not checked.
    :raises UnknownNUMASpec: an unknown key of numamig's namespaces.
    :raises UnknownMigrationPolicy: a policy key naming none of
        ``policies``: such a guest could never be migrated.
    """
    check_known(extra_specs, image_properties, foreign)
    if policies is not None:
        check_policies(extra_specs, image_properties, policies)


def check_policies(extra_specs, image_properties, policies):
    """Refuse a live-migration policy key naming an unknown policy.

    :raises UnknownMigrationPolicy: naming the key, the value, the
        closest known name and every known one.
    """
    known = sorted(policies)
    for where, source, key in (('flavor key', extra_specs, OTHER_KEYS[0]),
                               ('image property', image_properties,
                                OTHER_KEYS[1])):
        value = (source or {}).get(key)
        if not value or value in policies:
            continue
        close = difflib.get_close_matches(str(value), known, n=1)
        hint = f"; did you mean {close[0]}?" if close else ''
        raise exception.UnknownMigrationPolicy(
            name=value, where=f"{where} {key}{hint}", known=', '.join(known))


def check_known(extra_specs, image_properties, foreign=()):
    """Refuse keys of numamig's namespaces that no Spec declares.

    Keys outside ``hw:`` (flavor) and ``hw_`` (image) pass untouched, as
    do those listed in ``foreign`` (keys of those namespaces numamig
    accepts without reading, such as another service's).

    :raises UnknownNUMASpec: naming the first unknown key, with the
        closest known key when there is one.
    """
    for where, source, namespace, attr in (
            ('flavor key', extra_specs, FLAVOR_NAMESPACE, 'flavor_key'),
            ('image property', image_properties, IMAGE_NAMESPACE,
             'image_key')):
        known = _known_keys(attr)
        for key in sorted(source or {}, key=str):
            if not str(key).startswith(namespace) or key in foreign or \
                    key in OTHER_KEYS or _declared(key, known):
                continue
            close = difflib.get_close_matches(str(key).split('.')[0],
                                              sorted(known), n=1)
            raise exception.UnknownNUMASpec(
                where=where, key=key,
                hint=f" (did you mean {close[0]}?)" if close else '')


def _known_keys(attr):
    """Declared key -> whether it is per cell (written ``<key>.N``)."""
    return {getattr(spec, attr): spec.per_cell for spec in SPECS
            if getattr(spec, attr)}


def _declared(key, known):
    if key in known:
        return not known[key]
    base, dot, cell = str(key).rpartition('.')
    return bool(dot and cell.isdigit() and known.get(base))


def parse_choice(spec, key, value):
    text = str(value).strip().lower()
    if text not in spec.choices:
        raise exception.InvalidNUMASpec(
            key=key, value=value,
            reason=f"must be one of {', '.join(spec.choices)}")
    return text


def parse_bool(key, value):
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise exception.InvalidNUMASpec(
        key=key, value=value, reason="must be a boolean such as yes or no")


def parse_positive_int(key, value):
    if isinstance(value, bool):
        value = str(value)
    text = str(value).strip()
    if not re.fullmatch(r'\+?\d+', text) or int(text) < 1:
        raise exception.InvalidNUMASpec(
            key=key, value=value, reason="must be a positive integer")
    return int(text)


def parse_nonnegative_int(key, value):
    if isinstance(value, bool):
        value = str(value)
    text = str(value).strip()
    if not re.fullmatch(r'\+?\d+', text):
        raise exception.InvalidNUMASpec(
            key=key, value=value, reason="must be a whole number (0 or more)")
    return int(text)


def parse_size_kb(key, value):
    """Return a memory size such as '2MB' in KiB (a bare number is KiB)."""
    try:
        return pagesize.parse_page_size_kb(str(value).strip().lower())
    except (ValueError, IndexError) as exc:
        raise exception.InvalidNUMASpec(
            key=key, value=value, reason=f"must be a size such as 2MB ({exc})")


def parse_page_size(key, value):
    """Return a size in KiB or one of the PAGESIZE_* request values."""
    text = str(value).strip().lower()
    if text in PAGE_SIZE_NAMES:
        return PAGE_SIZE_NAMES[text]
    try:
        return pagesize.parse_page_size_kb(text)
    except (ValueError, IndexError) as exc:
        raise exception.InvalidNUMASpec(
            key=key, value=value,
            reason=f"must be small, large, any or a page size ({exc})")


def parse_vcpu_mask(key, value, vcpus):
    """Return the set of vCPUs a mask names, out of ``vcpus`` vCPUs.

    The rule of hw:cpu_dedicated_mask and hw:cpu_realtime_mask, as Nova
    reads them: a mask that starts with ``^`` is read against all the
    guest's vCPUs, so on 4 vCPUs ``^0,2`` is 0-3, less 0, plus 2: {1, 2,
    3}. Any other mask names exactly the listed vCPUs, less its ``^``
    terms. Exclusions win over inclusions wherever they stand.
    """
    text = _mask_text(key, value)
    if text.startswith('^'):
        text = f"0-{vcpus - 1},{text}"
    return _named_vcpus(key, value, text, vcpus)


def parse_vcpu_list(key, value, vcpus):
    """Return the set of vCPUs of a guest node (hw:numa_cpus.N).

    The listed vCPUs less the ``^`` terms, as Nova reads it; a list made
    only of exclusions, which Nova reads as no vCPU at all, names every
    vCPU but those (numamig has read it so since its first release, and
    recorded guests keep it).
    """
    text = _mask_text(key, value)
    terms = [t.strip() for t in text.split(',') if t.strip()]
    if all(t.startswith('^') for t in terms):
        text = f"0-{vcpus - 1},{text}"
    return _named_vcpus(key, value, text, vcpus)


def _mask_text(key, value):
    """Return the stripped text of a vCPU mask; refuse a blank one."""
    text = str(value).strip()
    if not text.replace(',', '').strip():
        raise exception.InvalidNUMASpec(key=key, value=value,
                                        reason="names no vCPU")
    return text


def _named_vcpus(key, value, text, vcpus):
    """Parse ``text`` (the mask as read) into vCPUs of the guest."""
    try:
        named = cpuspec.parse_cpu_spec(text)
    except cpuspec.CPUSpecError as exc:
        raise exception.InvalidNUMASpec(key=key, value=value,
                                        reason=str(exc))
    beyond = sorted(v for v in named if v >= vcpus)
    if beyond:
        raise exception.InvalidNUMASpec(
            key=key, value=value,
            reason=f"names vCPUs {beyond} but the guest has vCPUs "
                   f"0-{vcpus - 1}")
    return named
