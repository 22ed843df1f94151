"""The locality watch's libvirt side: measure a guest, move its memory.

Measuring reads the kernel's ``numa_maps`` of the guest's QEMU (found in
the proc root by its ``-uuid``, as numamig.virt.libvirt.migration_threads
does) and asks libvirt where each vCPU thread last ran (``vcpus()``:
``virsh vcpuinfo``'s CPU, which libvirt reads from the thread's
/proc stat). Which guests may be moved is read from the domain XML, live
and persistent: a ``<vcpupin>`` that restricts a vCPU, or a ``strict`` /
``restrictive`` memory binding that restricts its memory, means someone
placed the guest on purpose, and the watch never touches it. Pins and a
binding that cover every host CPU and node restrict nothing (a relaxed
``virsh numatune --nodeset 0-1``) and do not count.

Moving the memory is libvirt's live numatune (``setNumaParameters`` with
the target node and the mode the guest runs with, ``strict`` where it
has none: libvirt refuses to change a running guest's mode); libvirt
writes the cgroup's ``cpuset.mems`` and the kernel migrates the pages.
The vCPUs are then pinned to the target node's CPUs (within those they
were allowed), so that they stay with their memory. Both are live only:
the guest's definition is untouched, and it floats again after a restart
or a migration. What the watch set is written into the domain's live
metadata, so that its own pins and binding are told from an operator's,
also after the agent restarted.
"""

import ctypes
import dataclasses
import errno
import os

import libvirt
from lxml import etree

from numamig import cpuspec
from numamig.numa import locality
from numamig.virt.libvirt import migration_threads

# The watch's own record in a domain's live metadata.
METADATA_NS = 'https://numamig.org/xmlns/locality/1'
METADATA_PREFIX = 'numamig-locality'

_BINDING_MODES = ('strict', 'restrictive')
_MODES = {'strict': libvirt.VIR_DOMAIN_NUMATUNE_MEM_STRICT,
          'preferred': libvirt.VIR_DOMAIN_NUMATUNE_MEM_PREFERRED,
          'interleave': libvirt.VIR_DOMAIN_NUMATUNE_MEM_INTERLEAVE}
if hasattr(libvirt, 'VIR_DOMAIN_NUMATUNE_MEM_RESTRICTIVE'):
    _MODES['restrictive'] = libvirt.VIR_DOMAIN_NUMATUNE_MEM_RESTRICTIVE


@dataclasses.dataclass(frozen=True)
class OwnMove:
    """What the watch last set on a running guest (its metadata)."""

    node: int
    cpus: frozenset

    def element(self):
        return (f'<move node="{self.node}" '
                f'cpus="{cpuspec.format_cpu_spec(self.cpus)}"/>')


def own_move(live_xml):
    """The OwnMove recorded in a live domain XML, or None."""
    doc = etree.fromstring(live_xml.encode())
    found = doc.find(f'metadata/{{{METADATA_NS}}}move')
    if found is None:
        return None
    try:
        return OwnMove(int(found.get('node')),
                       frozenset(cpuspec.parse_cpu_spec(found.get('cpus'))))
    except (TypeError, ValueError):
        return None


def excluded(live_xml, persistent_xml, host_cpus, host_nodes):
    """None if the watch may move the guest, else locality.PINNED or
    locality.BOUND: its definition or its running state pins a vCPU or
    binds memory, and not to what the watch itself set."""
    own = own_move(live_xml)
    for xml, live in ((persistent_xml, False), (live_xml, True)):
        if xml is None:
            continue
        doc = etree.fromstring(xml.encode())
        for pin in doc.iterfind('cputune/vcpupin'):
            cpus = frozenset(cpuspec.parse_cpu_spec(pin.get('cpuset', '')))
            if cpus >= host_cpus:
                continue
            if not (live and own is not None and cpus <= own.cpus):
                return locality.PINNED
        for el in doc.iterfind('numatune/memnode'):
            if el.get('mode', 'strict') in _BINDING_MODES:
                return locality.BOUND
        memory = doc.find('numatune/memory')
        if memory is None or memory.get('mode', 'strict') \
                not in _BINDING_MODES:
            continue
        if memory.get('placement') == 'auto':
            return locality.BOUND   # numad places it
        nodes = frozenset(cpuspec.parse_cpu_spec(
            memory.get('nodeset', '')))
        if nodes >= host_nodes:
            continue
        if not (live and own is not None and nodes == {own.node}):
            return locality.BOUND
    return None


def live_mode(live_xml):
    """The running guest's numatune memory mode name, or None."""
    memory = etree.fromstring(live_xml.encode()).find('numatune/memory')
    return None if memory is None else memory.get('mode', 'strict')


def memory_of(uuid, proc):
    """{host node: KiB} of the guest's QEMU, or None when no QEMU of it
    runs here (the test driver, a guest that just stopped)."""
    pid = migration_threads.qemu_pid(uuid, proc)
    if pid is None:
        return None
    try:
        with open(os.path.join(proc, str(pid), 'numa_maps')) as f:
            text = f.read(locality.MAX_NUMA_MAPS + 1)
    except OSError:
        return None
    return locality.memory_by_node(text)


def vcpu_nodes(dom, node_of_cpu):
    """({host node: vCPUs that last ran there}, [allowed CPU sets per
    vCPU]) from libvirt's vcpuinfo."""
    info, maps = dom.vcpus()
    nodes = {}
    for _vcpu, _state, _time, cpu in info:
        node = node_of_cpu.get(cpu)
        if node is not None:
            nodes[node] = nodes.get(node, 0) + 1
    allowed = [frozenset(i for i, on in enumerate(cpumap) if on)
               for cpumap in maps]
    return nodes, allowed


def move(dom, live_xml, node, node_cpus, allowed, migrate_pages=None):
    """Move the running guest's memory to ``node`` and pin its vCPUs to
    ``node_cpus`` (the node's shared CPUs) within what each was allowed;
    record it.

    :param migrate_pages: called with the node when libvirt cannot
        change the running guest's nodeset because its libvirtd runs
        without the cgroup cpuset controller (``cgroup_controllers =
        [ ]``): the kernel's migrate_pages(2) on its QEMU then moves the
        pages, and the pinned vCPUs keep new ones local (first touch).
        None: such a refusal is raised.
    :returns: (the OwnMove recorded, how the memory moved: 'numatune'
        or 'migrate_pages').
    :raises ValueError: a vCPU may run on none of the node's CPUs.
    :raises libvirt.libvirtError: libvirt refused.
    :raises OSError: migrate_pages(2) failed.
    """
    pins = [cpus & node_cpus for cpus in allowed]
    if not pins or not all(pins):
        raise ValueError(f"a vCPU may run on none of node {node}'s shared "
                         f"CPUs")
    mode = _MODES.get(live_mode(live_xml) or 'strict',
                      libvirt.VIR_DOMAIN_NUMATUNE_MEM_STRICT)
    how = 'numatune'
    try:
        dom.setNumaParameters({libvirt.VIR_DOMAIN_NUMA_NODESET: str(node),
                               libvirt.VIR_DOMAIN_NUMA_MODE: mode},
                              libvirt.VIR_DOMAIN_AFFECT_LIVE)
    except libvirt.libvirtError as exc:
        if migrate_pages is None or not _no_cpuset(exc):
            raise
        migrate_pages(node)
        how = 'migrate_pages'
    width = max(max(node_cpus), max(max(p) for p in pins)) + 1
    for vcpu, cpus in enumerate(pins):
        # pinVcpu changes the running guest only (virsh vcpupin --live).
        dom.pinVcpu(vcpu, tuple(i in cpus for i in range(width)))
    done = OwnMove(node, frozenset().union(*pins))
    dom.setMetadata(libvirt.VIR_DOMAIN_METADATA_ELEMENT, done.element(),
                    METADATA_PREFIX, METADATA_NS,
                    libvirt.VIR_DOMAIN_AFFECT_LIVE)
    return done, how


def _no_cpuset(exc):
    """libvirt's refusal for want of the cgroup cpuset controller."""
    return 'cpuset' in (exc.get_error_message() or '')


# migrate_pages(2) on x86_64 and aarch64 (asm-generic: 238).
_SYS_MIGRATE_PAGES = {'x86_64': 256, 'aarch64': 238}


def migrate_pages(pid, nodes, node):
    """Move every page of process ``pid`` on ``nodes`` to ``node`` (the
    kernel's migrate_pages(2), as numactl's migratepages does).

    :returns: the pages the kernel could not move.
    :raises OSError: the call failed (no such process, not permitted).
    """
    machine = os.uname().machine
    if machine not in _SYS_MIGRATE_PAGES:
        raise OSError(errno.ENOSYS, f"migrate_pages on {machine}")
    width = max(list(nodes) + [node]) + 1
    words = -(-width // 64)
    old = (ctypes.c_ulong * words)()
    new = (ctypes.c_ulong * words)()
    for n in nodes:
        old[n // 64] |= 1 << (n % 64)
    new[node // 64] |= 1 << (node % 64)
    libc = ctypes.CDLL(None, use_errno=True)
    left = libc.syscall(_SYS_MIGRATE_PAGES[machine], ctypes.c_long(pid),
                        ctypes.c_ulong(words * 64 + 1), old, new)
    if left < 0:
        code = ctypes.get_errno()
        raise OSError(code, f"migrate_pages of {pid}: {os.strerror(code)}")
    return left
