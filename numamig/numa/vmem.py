"""virtio-mem devices of guest cells: the request and what the host holds.

A guest whose flavor sets ``hw:virtio_mem_size`` gets one virtio-mem
device per guest NUMA cell, backed by the host node of that cell. The
cell's boot memory (``memory_mb``) never changes; the device's plugged
part does, so the host holds for the cell its boot memory plus the
larger of the device's requested and current sizes
(InstanceNUMACell.memory_held_mb). Every accounting path (fit, claims,
usage, reports) reads the cell through ``held_mb`` so that they agree.
"""

import typing

from numamig import exception
from numamig.numa import specs as specs_mod
from numamig.objects import instance_numa

# QEMU's default (and Linux's THP size on x86): the smallest block a
# guest driver can always unplug.
DEFAULT_BLOCK_KB = 2048


class DeviceRequest(typing.NamedTuple):
    """The virtio-mem device every guest cell of a flavor gets."""

    size_mb: int
    block_kb: int
    requested_mb: int


def held_mb(cell):
    """Memory (MiB) the host holds for one guest cell, device included.

    Works on an InstanceNUMACell and on a views.GuestView alike.
    """
    size = getattr(cell, 'virtio_mem_size_mb', None)
    if size is None:
        return cell.memory_mb
    return cell.memory_mb + max(cell.virtio_mem_requested_mb or 0,
                                cell.virtio_mem_current_mb or 0)


def device_request(settings):
    """Return the DeviceRequest the resolved specs ask for, or None.

    :param settings: constraints' {spec name: _Setting}.
    :raises InvalidNUMASpec: a size, block or requested size QEMU would
        refuse; NUMASpecConflict: a page size the block cannot hold.
    """
    size, block, requested = (settings['virtio_mem_size'],
                              settings['virtio_mem_block'],
                              settings['virtio_mem_requested'])
    floor = settings['virtio_mem_min']
    if not size:
        for orphan in (block, requested, floor):
            if orphan:
                raise exception.InvalidNUMASpec(
                    key=orphan.key, value=orphan.raw,
                    reason="needs hw:virtio_mem_size")
        return None
    block_kb = block.value if block else DEFAULT_BLOCK_KB
    requested_mb = size.value if not requested else requested.value
    why = instance_numa.virtio_mem_problem(size.value, block_kb,
                                           requested_mb)
    if why:
        culprit = _culprit(why, size, block, requested)
        raise exception.InvalidNUMASpec(key=culprit.key, value=culprit.raw,
                                        reason=f"virtio-mem {why}")
    _check_page_size(settings['mem_page_size'], size, block_kb)
    if floor and (floor.value > size.value or
                  (floor.value * 1024) % block_kb):
        raise exception.InvalidNUMASpec(
            key=floor.key, value=floor.raw,
            reason=f"virtio-mem floor must be whole {block_kb} KiB blocks "
                   f"from 0 to the size {size.value} MiB")
    return DeviceRequest(size.value, block_kb, requested_mb)


# The flavor keys a device's placement floor is read from, first found.
_FLOOR_KEYS = ('hw:virtio_mem_min', 'hw:virtio_mem_requested')


def placement_floor_mb(extra_specs, cell):
    """MiB the device of guest cell ``cell`` keeps plugged when memory
    is reclaimed from it to place another guest.

    The flavor's ``hw:virtio_mem_min``, else the size the device started
    with (``hw:virtio_mem_requested``, default the whole size): a guest
    never loses, for someone else's placement, memory its flavor gave it
    unless the flavor says it can do with less. Rounded up to whole
    blocks. A key that does not read as MiB (a guest adopted with keys
    numamig did not check) gives the device's size: no slack.

    Works on an InstanceNUMACell with a device.
    """
    size = cell.virtio_mem_size_mb
    block_mb = max(1, cell.virtio_mem_block_kb // 1024)
    floor = size
    for key in _FLOOR_KEYS:
        if key in (extra_specs or {}):
            try:
                floor = specs_mod.parse_nonnegative_int(key,
                                                        extra_specs[key])
            except exception.InvalidNUMASpec:
                floor = size
            break
    return min(size, -(-floor // block_mb) * block_mb)


def _culprit(why, size, block, requested):
    """The setting a virtio_mem_problem text is about (the size when
    the one at fault was left to its default)."""
    if why.startswith('requested') and requested:
        return requested
    if why.startswith('block') and block:
        return block
    return size


def _check_page_size(page, size, block_kb):
    """The device is backed by the cell's pages: a block holds whole
    pages, so the page size must be known (not large/any) and fit."""
    if not page or page.value == instance_numa.PAGESIZE_SMALL:
        return
    if page.value in instance_numa.PAGESIZE_REQUESTS:
        reason = ("virtio-mem needs a known page size (small or a size "
                  "such as 2MB), not one the host chooses")
    elif page.value > block_kb:
        reason = (f"{page.value} KiB pages do not fit the virtio-mem "
                  f"block of {block_kb} KiB (set hw:virtio_mem_block)")
    else:
        return
    raise exception.NUMASpecConflict(
        key=page.key, value=page.raw, other_key=size.key,
        other_value=size.raw, reason=reason)


def cell_fields(device):
    """The InstanceNUMACell fields of a new cell with ``device``."""
    if device is None:
        return {}
    return {'virtio_mem_size_mb': device.size_mb,
            'virtio_mem_block_kb': device.block_kb,
            'virtio_mem_requested_mb': device.requested_mb}


_STATE_FIELDS = ('virtio_mem_requested_mb', 'virtio_mem_current_mb')


def with_device_state(request, placed):
    """Return a copy of ``request`` whose devices have ``placed``'s
    requested and current sizes (guest cells matched by id).

    Cells without a device on either side are copied as they are; the
    inputs are not modified.
    """
    result = request.obj_clone()
    state = {cell.id: cell for cell in placed.cells if cell.has_virtio_mem}
    for cell in result.cells:
        now = state.get(cell.id)
        if now is None or not cell.has_virtio_mem:
            continue
        for name in _STATE_FIELDS:
            setattr(cell, name, now.get(name))
    return result


def by_host_node(topologies):
    """What the guests' virtio-mem devices hold and could take, per host
    node: {node: {'devices', 'reclaimable_mb', 'growable_mb'}}.

    ``reclaimable_mb``: what the devices hold there (a reclaim can free
    at most this, less the per-guest bound); ``growable_mb``: what they
    could still plug (size minus requested). Nodes without a device are
    absent.
    """
    result = {}
    for topology in topologies:
        for cell in (topology.cells if topology is not None else ()):
            if not cell.has_virtio_mem or cell.host_cell is None:
                continue
            entry = result.setdefault(cell.host_cell, {
                'devices': 0, 'reclaimable_mb': 0, 'growable_mb': 0})
            entry['devices'] += 1
            entry['reclaimable_mb'] += cell.virtio_mem_held_mb
            entry['growable_mb'] += (cell.virtio_mem_size_mb -
                                     cell.virtio_mem_requested_mb)
    return result
