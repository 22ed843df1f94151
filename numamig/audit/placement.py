"""Differences between a recorded guest placement and its domain XML."""

from numamig import cpuspec


def differences(recorded, actual):
    """Describe how ``actual`` differs from ``recorded``, one line each.

    :param recorded: the InstanceNUMATopology numamig records (or None).
    :param actual: the one parsed from the guest's domain XML (or None).
    :returns: a list of human-readable differences; empty when the
        host cells, pins, page sizes and emulator pins agree.
    """
    recorded_cells = _cells(recorded)
    actual_cells = _cells(actual)
    if set(recorded_cells) != set(actual_cells):
        return [f"guest cells {_ids(recorded_cells)} recorded, "
                f"{_ids(actual_cells)} in the XML"]
    found = []
    for cell_id in sorted(recorded_cells):
        found += _cell_differences(recorded_cells[cell_id],
                                   actual_cells[cell_id])
    want = _reserved(recorded)
    have = _reserved(actual)
    if want != have:
        found.append(f"emulator threads: recorded on {_cpus(want)}, XML "
                     f"pins them to {_cpus(have)}")
    return found


def _cell_differences(want, have):
    found = []
    label = f"guest cell {want.id}"
    if want.get('host_cell') != have.get('host_cell'):
        found.append(f"{label}: recorded on host cell {want.host_cell}, "
                     f"XML binds memory to node {have.host_cell}")
    want_pins = dict(want.get('cpu_pinning') or {})
    have_pins = dict(have.get('cpu_pinning') or {})
    if want_pins != have_pins:
        found.append(f"{label}: recorded pins {_pins(want_pins)}, XML "
                     f"pins {_pins(have_pins)}")
    if (want.get('pagesize') or None) != (have.get('pagesize') or None):
        found.append(f"{label}: recorded page size "
                     f"{_size(want.get('pagesize'))}, XML backs it with "
                     f"{_size(have.get('pagesize'))}")
    return found


def _cells(topology):
    if topology is None:
        return {}
    return {cell.id: cell for cell in topology.cells}


def _reserved(topology):
    return topology.cpuset_reserved if topology is not None else set()


def _ids(cells):
    return sorted(cells) or 'none'


def _pins(pins):
    if not pins:
        return 'none'
    return ' '.join(f"{v}->{p}" for v, p in sorted(pins.items()))


def _size(size_kb):
    return f"{size_kb} KiB" if size_kb else 'small pages'


def _cpus(cpus):
    return cpuspec.format_cpu_spec(cpus) if cpus else 'none'
