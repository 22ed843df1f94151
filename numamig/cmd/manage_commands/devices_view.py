"""How ``migration show`` words the destination's verification of a
guest's passed-through devices after the arrival (MigrationDevices,
numamig.objects.migration_satellites)."""


def view(record):
    """The JSON-able verification ({host, all_local, devices: [{alias,
    address, guest_cell, cell_nodes, device_node, plugged, local}]}) of
    a stored {host, devices} record, or None where nothing was verified
    (the guest held no device, or its destination has not reported)."""
    if not record or not record.get('devices'):
        return None
    devices = [{
        'alias': d['alias'], 'address': d['address'],
        'guest_cell': int(d['guest_cell']),
        'cell_nodes': [int(n) for n in d['cell_nodes'].split(',') if n],
        'device_node': (None if d['device_node'] in (None, '')
                        else int(d['device_node'])),
        'plugged': d['plugged'] == 'yes', 'local': d['local'] == 'yes'}
        for d in record['devices']]
    return {'host': record['host'],
            'all_local': all(d['local'] for d in devices),
            'devices': devices}


def lines(data):
    """``migration show`` lines of ``view``'s data: a summary, then one
    line per device."""
    if not data:
        return []
    devices = data['devices']
    astray = sum(1 for d in devices if not d['local'])
    found = [f"devices verified on {data['host']}: " + (
        f"all {len(devices)} plugged and local to their guest cells"
        if not astray else
        f"{astray} of {len(devices)} NOT plugged or not local")]
    for d in devices:
        nodes = ','.join(str(n) for n in d['cell_nodes']) or 'unknown'
        if not d['plugged']:
            state = "NOT plugged"
        else:
            node = 'unknown' if d['device_node'] is None else \
                d['device_node']
            state = f"plugged, on node {node}" + (
                '' if d['local'] else ': NOT local')
        found.append(f"  {d['alias']} {d['address']} of guest cell "
                     f"{d['guest_cell']} (host nodes {nodes}): {state}")
    return found
