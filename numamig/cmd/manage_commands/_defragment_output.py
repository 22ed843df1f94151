"""``numamig-manage host defragment``: read the guest's specs, show the
plan (numamig.conductor.defragment)."""

from numamig import exception
from numamig.cmd import common
from numamig.cmd import pictures

# The flavor-spec parser comes with the object registry.
specs_mod = common.lazy('numamig.numa.specs')

# The size keys of --for; every other key is an extra spec.
SIZES = ('vcpus', 'memory_mb')
MAX_SPECS = 64


def parse_spec(text):
    """(vcpus, memory_mb, extra specs) of ``--for``'s KEY=VALUE,...

    :raises Invalid: naming what is wrong.
    """
    values = {}
    for item in (text or '').split(','):
        key, sep, value = item.strip().partition('=')
        if not sep or not key or not value:
            raise exception.Invalid(
                reason=f"--for takes KEY=VALUE pairs separated by commas "
                       f"(vcpus=N,memory_mb=N and extra specs), got "
                       f"{item.strip()!r}")
        values[key] = value
    if len(values) > MAX_SPECS + len(SIZES):
        raise exception.Invalid(
            reason=f"--for may give at most {MAX_SPECS} extra specs")
    sizes = []
    for key in SIZES:
        raw = values.pop(key, None)
        if raw is None or not raw.isdigit() or int(raw) < 1:
            raise exception.Invalid(
                reason=f"--for needs {key}=N with N a positive integer, "
                       f"got {raw!r}")
        sizes.append(int(raw))
    return sizes[0], sizes[1], values


def unread_keys(specs):
    """The keys of ``--for`` outside numamig's ``hw:`` namespace: other
    services' (accepted, as ``instance create`` accepts them), which the
    plan cannot take into account; ``show`` names them so that a key
    meant for numamig but misspelt outside the namespace is not left
    out silently."""
    return sorted(key for key in specs
                  if not key.startswith(specs_mod.FLAVOR_NAMESPACE))


def plain(answer):
    """The plan as JSON data; the guest's placement as plain data and as
    the lines ``show`` prints."""
    data = dict(answer)
    data['placement'] = common.plain(answer['placement'])
    data['placement_lines'] = [] if answer['placement'] is None else \
        pictures.placement_lines(answer['placement'])
    data['moves'] = [dict(move, numa_topology=common.plain(
        move['numa_topology'])) for move in answer['moves']]
    return data


def show(data):
    if data.get('unread_keys'):
        print(f"Not read by numamig (another service's keys), left out of "
              f"the plan: {', '.join(data['unread_keys'])}")
    if not data['found']:
        print(f"No room found: {data['reason']}")
        return
    print(f"Room on {data['host']} after {len(data['moves'])} "
          f"migration(s), in this order:")
    for move in data['moves']:
        print(f"  {move['name']} {move['instance_uuid']}: "
              f"{move['source_host']} -> {move['dest_host']}")
    print("The guest would be placed:")
    for line in data['placement_lines']:
        print(f"  {line}")
    search = data['search']
    print(f"Search: {search['steps']} set(s) tried in "
          f"{search['elapsed_ms']} ms; nothing was moved.")
