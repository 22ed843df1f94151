"""The locality watch's last look as host show and instance show print it.

Both read it from the host's last report (ComputeNodeReport.locality):
what the watch saw when it last looked, not a measurement made now.
"""

import datetime

# What a guest's state says, for the human format.
_STATE_WORDS = {
    'pinned': 'pinned (never moved)',
    'strictly-bound': 'strictly bound (never moved)',
    'not-measured': 'not measured',
    'local': 'local',
    'above-threshold': 'above the threshold',
    'over-budget': 'over the page budget',
    'waiting-for-budget': 'waiting for the page budget',
    'flapping': 'flapping: left alone',
    'move': 'moved',
    'would-move': 'would be moved (policy report)',
    'move-failed': 'move failed',
}


def guest_entry(guest):
    """One GuestLocality as plain data."""
    return {'instance_uuid': guest.instance_uuid,
            'memory_mb': {str(n): mb for n, mb in
                          sorted(guest.memory_mb.items())},
            'vcpu_nodes': {str(n): count for n, count in
                           sorted(guest.vcpu_nodes.items())},
            'home_node': guest.home_node,
            'remote_share': guest.remote_share,
            'state': guest.state, 'reason': guest.reason,
            'moves': guest.moves}


def host_entry(locality, now=None):
    """A report's HostLocality as plain data; None from an agent older
    than the watch."""
    if locality is None:
        return None
    measured = locality.get('measured_at')
    return {'policy': locality.policy,
            'measured_at': measured.isoformat() if measured else None,
            'age_s': _age(measured, now),
            'remote_share': locality.get('remote_share'),
            'moves_total': locality.moves_total,
            'pages_moved_total': locality.pages_moved_total,
            'guests': [guest_entry(g) for g in locality.guests]}


def guest_of(locality, instance_uuid):
    """The entry of one guest in a report's HostLocality, or None."""
    if locality is None:
        return None
    for guest in locality.guests:
        if guest.instance_uuid == instance_uuid:
            return guest_entry(guest)
    return None


def _age(measured, now):
    if measured is None:
        return None
    now = now or datetime.datetime.now(datetime.UTC)
    if measured.tzinfo is None:
        measured = measured.replace(tzinfo=datetime.UTC)
    return round(max(0.0, (now - measured).total_seconds()), 1)


def host_lines(entry, names=None):
    """host show's lines for the watch (``names``: {uuid: guest name})."""
    if entry is None:
        return ["Locality watch: not reported (an agent older than it)"]
    if entry['policy'] == 'off':
        return ["Locality watch: off ([locality] policy)"]
    if entry['measured_at'] is None:
        return [f"Locality watch: policy {entry['policy']}, not looked "
                f"yet"]
    share = entry['remote_share']
    lines = [f"Locality watch: policy {entry['policy']}, looked "
             f"{entry['age_s']:.0f}s ago; remote memory "
             f"{_percent(share)} of the guests' memory; moved "
             f"{entry['moves_total']} guests, "
             f"{entry['pages_moved_total']} pages since the agent "
             f"started"]
    names = names or {}
    for guest in entry['guests']:
        name = names.get(guest['instance_uuid'], '(not numamig\'s)')
        lines.append(f"  {name} {guest['instance_uuid']}: "
                     + guest_text(guest))
    return lines


def guest_text(guest):
    """One guest's memory, vCPUs and state on one line."""
    memory = ', '.join(f"node {n} {mb} MiB"
                       for n, mb in guest['memory_mb'].items()) or \
        'no memory seen'
    vcpus = ', '.join(f"node {n} x{count}"
                      for n, count in guest['vcpu_nodes'].items()) or \
        'not seen'
    state = _STATE_WORDS.get(guest['state'], guest['state'])
    return (f"memory {memory}; vCPUs ran on {vcpus}; remote "
            f"{_percent(guest['remote_share'])}; {state}"
            + (f" ({guest['reason']})" if guest['reason'] else ''))


def _percent(share):
    return '-' if share is None else f"{share:.0%}"
