"""How ``numamig-manage host drain`` shows a drain plan.

The conductor answers with plain data and a placed InstanceNUMATopology
per move; ``plain`` turns it into what ``--format json`` prints (and
keeps the topology for the drawing), ``show`` prints it for people.
"""

from numamig.cmd import common
from numamig.cmd import pictures

# The drain planner comes with the NUMA engine and the objects.
drain = common.lazy('numamig.scheduler.drain')


def plain(answer):
    """The plan as JSON data; each move keeps its ``numa_topology`` as
    plain data and gains ``placement``, the lines ``show`` prints."""
    data = dict(answer)
    data['moves'] = [dict(move, numa_topology=common.plain(
        move['numa_topology']), placement=pictures.placement_lines(
            move['numa_topology'])) for move in answer['moves']]
    return data


def show(data):
    """Print the plan: moves with their placements, then what cannot be
    placed and why, the hosts that are no destination, the admission
    and the verdict."""
    state = (f"disabled: {data['reason']}" if data['disabled']
             else "enabled")
    total = len(data['moves']) + len(data['unplaced'])
    print(f"Drain plan of host {data['host']} ({state}): {total} guest(s)")
    # First, the guests whose standing answer says they cannot move (a
    # conductor older than the answer sends none).
    stuck = data.get('not_migratable') or []
    if stuck:
        print(f"Not live-migratable now ({len(stuck)}):")
    for guest in stuck:
        print(f"  {guest['name']} {guest['instance_uuid']}: "
              f"{guest['status']}")
        for reason in guest['reasons']:
            print(f"      {reason['kind']}: {reason['detail']}")
    for move in data['moves']:
        print(f"  {move['name']} {move['instance_uuid']} -> "
              f"{move['dest_host']}")
        for line in move['placement']:
            print(f"      {line}")
    if data['unplaced']:
        print(f"Cannot be placed ({len(data['unplaced'])}):")
    for guest in data['unplaced']:
        print(f"  {guest['name']} {guest['instance_uuid']}: "
              f"{guest['reason']}")
    if data['left_out']:
        print(f"Not destinations ({len(data['left_out'])}):")
    for host, why in data['left_out'].items():
        print(f"  {host}: {why}")
    for host, cells in data['kept_free'].items():
        print(f"Kept free on {host}: NUMA node(s) "
              f"{', '.join(str(c) for c in cells)}")
    _show_admission(data)
    _show_link(data)
    search = data['search']
    limit = search.get('max_steps')
    print(f"Search: {search['steps']} placement(s)"
          + (f" of at most {limit}" if limit else '')
          + f" tried in {search['elapsed_ms']} ms")
    answer = drain.answer_outcome(data)
    if answer == drain.NOT_FOUND:
        print(f"No plan found within {limit or search['steps']} "
              f"placements; one may exist: raise [scheduler] "
              f"drain_plan_max_steps to search further.")
    elif answer == drain.NO_PLAN:
        print("No plan exists: every destination and every order of the "
              "guests on each was tried, or a guest cannot move at all.")
    if data['emptiable']:
        print(f"Host {data['host']} can be emptied; nothing was moved.")


def why_not(data):
    """The one line saying why the host cannot be emptied."""
    return (f"host {data['host']} cannot be emptied: "
            f"{drain.why_not(data)}; nothing was moved")


def _show_link(data):
    # A conductor older than the link settings answers without it.
    link = data.get('link')
    if not link or not data['moves']:
        return
    if link['rate_mib'] is None:
        print(f"Link: {link['memory_mb']} MiB of guest memory to move; "
              f"the rate of {data['host']}'s migration link is unknown "
              f"([conductor] migration_link_rate)")
    else:
        print(f"Link: {link['memory_mb']} MiB of guest memory over "
              f"{data['host']}'s migration link of {link['rate_mib']} "
              f"MiB/s: at least {link['least_seconds']:g} s")


def _show_admission(data):
    admission = data['admission']
    if admission['refused']:
        print(f"Admission: {admission['refused']}")
    elif data['moves']:
        print(f"Admission: {len(data['moves'])} migration(s) in at least "
              f"{admission['waves']} wave(s) under the conductor's "
              f"per-host limits")
