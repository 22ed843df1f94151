"""How ``migration show`` words the memory reclaimed to place a guest:
what was taken from which other guest's virtio-mem device, and whether
it was kept or given back ([virtio_mem] placement_reclaim)."""

from numamig.cmd.manage_commands import _names

_NUMBERS = ('host_node', 'cell', 'before_mb', 'after_mb', 'current_mb',
            'released_mb')


def view(entries):
    """The JSON-able entries (numbers as numbers) of a MigrationReclaim's
    ``entries``; [] when nothing was reclaimed for the migration."""
    result = []
    for entry in entries or []:
        shown = {}
        for key in _names.MEMORY_RECLAIM_KEYS:
            value = entry.get(key)
            if key in _NUMBERS and value is not None:
                try:
                    value = int(value)
                except ValueError:
                    pass
            shown[key] = value
        result.append(shown)
    return result


def lines(entries):
    """``migration show`` lines of ``view``'s entries."""
    if not entries:
        return []
    kept = sum(e['released_mb'] or 0 for e in entries
               if e['outcome'] == 'kept')
    found = [f"memory reclaimed to place it: {kept} MiB kept"]
    for e in entries:
        now = '?' if e['current_mb'] is None else e['current_mb']
        found.append(
            f"  {e['host']} node {e['host_node']}: guest "
            f"{e['instance_uuid']} cell {e['cell']}: {e['before_mb']} -> "
            f"{e['after_mb']} MiB asked, {now} MiB plugged, released "
            f"{e['released_mb']} MiB, {e['outcome']}")
    return found
