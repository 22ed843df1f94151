"""NUMA distance scenarios (issue 39): the nearest pair, told and kept.

On a host whose kernel reads a distance table of several values (two
pairs of close nodes, as two sockets with sub-NUMA clustering have), a
guest of two cells lands on the nearest pair of nodes its vCPUs can
have, and its domain XML tells it the distances between them. Migrated
to a host of another table, it lands on that host's nearest pair; the
running guest keeps the distances it booted with (libvirt holds them to
be guest ABI), its persistent definition carries the destination's, and
its next start there gives QEMU (``-numa dist``) the destination's.

Every fact is read from the hosts, not from numamig's records: the
nodes from the inner libvirtd's live XML (``virsh dumpxml``) and QEMU's
``numa_maps``, the tables from the kernel's sysfs, QEMU's distances from
its command line.
"""

import itertools

import libvirt

from numamig_ci import domain
from numamig_ci.scenarios import kernel_view
from numamig_ci.scenarios.registry import scenario
from numamig_ci.session import DEDICATED

LOCAL = 10


def kernel_table(s, host):
    """{node: {node: distance}} the kernel ``host`` runs on reads."""
    raw = s.backend.agent_of(host).node_distances()
    return {int(a): {int(b): int(v) for b, v in row.items()}
            for a, row in raw.items()}


def pair_distance(table, a, b):
    """As numamig counts a pair (numa/distance.py): the larger of the
    two directions."""
    return max(table[a][b], table[b][a])


def told(table, memnodes):
    """The guest's table its cells on ``memnodes`` ({cell: node}) have
    on a host of ``table``."""
    return {cell: {other: LOCAL if other == cell else table[node][peer]
                   for other, peer in memnodes.items()}
            for cell, node in memnodes.items()}


def usable_pairs(s, host, table):
    """{(a, b): distance} of the node pairs a guest of one dedicated
    vCPU per cell may have on ``host``."""
    config = s.host(host)
    nodes = sorted(node for node, cpus in config.cells.items()
                   if cpus & config.dedicated)
    return {(a, b): pair_distance(table, a, b)
            for a, b in itertools.combinations(nodes, 2)}


def live_placement(s, guest, host, inactive=False):
    """({cell: node}, {cell: {cell: distance}}) of the guest's XML as the
    inner libvirtd gives it (virsh inside the machine)."""
    name = s.backend.guests(host)[guest.uuid]
    xml = s.backend.agent_of(host).dumpxml(host, name, inactive)
    placement = domain.parse(xml)
    memnodes = {cell: min(nodes) for cell, nodes in
                placement.memnodes.items() if len(nodes) == 1}
    return memnodes, domain.cell_distances(xml)


def qemu_distances(s, guest, host):
    """{(src, dst): val} QEMU was started with (its ``-numa dist``)."""
    pid = s.backend.deployment.qemu_pid(host,
                                        s.backend.guests(host)[guest.uuid])
    found = {}
    for item in s.backend.agent_of(host).qemu_numa_dist(pid):
        src, dst, val = (int(v) for v in item.split(','))
        found[src, dst] = val
    return found


def pairs_of(rows):
    return {(a, b): v for a, row in rows.items() for b, v in row.items()
            if a != b}


def check_nearest(s, guest, host, table):
    """The guest's cells are on a nearest usable pair of ``host``'s
    kernel table (live XML and numa_maps); return {cell: node}."""
    memnodes, _ = live_placement(s, guest, host)
    nodes = sorted(memnodes.values())
    pairs = usable_pairs(s, host, table)
    best = min(pairs.values())
    usable = ', '.join(f'{a}-{b}:{d}' for (a, b), d in sorted(pairs.items()))
    s.say(f"nearest pair: {guest.name} on {host} nodes "
          f"{', '.join(map(str, nodes))} (distance "
          f"{pair_distance(table, *nodes) if len(nodes) == 2 else '?'}; "
          f"usable pairs {usable})")
    if len(nodes) != 2 or tuple(nodes) not in pairs:
        s.fail(guest, host, '<numatune><memnode> nodesets',
               'two distinct nodes with dedicated pCPUs', memnodes)
        return memnodes
    if pairs[tuple(nodes)] != best:
        s.fail(guest, host, 'distance of its pair of host nodes',
               f"{best} (the nearest usable pair)", pairs[tuple(nodes)])
    kernel_view.check_binds(s, guest, host, nodes)
    return memnodes


def check_told(s, guest, host, expected, which, inactive=False):
    """The guest's XML (live or persistent) tells it ``expected``."""
    _, rows = live_placement(s, guest, host, inactive)
    s.say(f"guest distances ({which}) of {guest.name} on {host}: "
          f"{sorted(pairs_of(rows).items())}")
    if rows != expected:
        s.fail(guest, host, f"<cell><distances> ({which})", expected, rows)


def check_told_as_kernel(s, guest, host):
    """The guest's live XML tells it what the kernel ``host`` runs on
    has between its cells' nodes (the firmware's table, or the 10 / 20
    the kernel assumes without one): one read of each, for scenarios
    that move a multi-cell guest within one kernel."""
    memnodes, _ = live_placement(s, guest, host)
    check_told(s, guest, host, told(kernel_table(s, host), memnodes),
               'live')


def check_qemu(s, guest, host, expected, which):
    found = qemu_distances(s, guest, host)
    s.say(f"QEMU -numa dist of {guest.name} on {host} ({which}): "
          f"{sorted((k, v) for k, v in found.items() if k[0] != k[1])}")
    want = pairs_of(expected)
    got = {k: v for k, v in found.items() if k[0] != k[1]}
    if got != want:
        s.fail(guest, host, f"QEMU -numa dist ({which})", want, got)


@scenario('nearest-pair',
          "A two-cell guest lands on the nearest pair of host nodes and is "
          "told their distances; migrated to a host of another distance "
          "table, its placement and its distances follow (live: the ones "
          "it booted with; its next start: the destination's).",
          requires=('multi_node', 'kernel_view'))
def nearest_pair(s):
    src, dst = s.pair()
    tables = {host: kernel_table(s, host) for host in (src, dst)}
    for host in (src, dst):
        pairs = usable_pairs(s, host, tables[host])
        s.require(len(set(pairs.values())) > 1,
                  f"needs hosts whose usable node pairs are not all "
                  f"equally far ({host}: {sorted(pairs.items())}); e.g. "
                  f"--nested-layout ...,distances=10:12:21:21:...")
    s.say("kernel distance tables: "
          + '; '.join(f"{host} {sorted(pairs_of(tables[host]).items())}"
                      for host in (src, dst)))
    specs = dict(DEDICATED, **{'hw:numa_nodes': '2'})
    guest = s.create(src, 2, specs=specs, label='near')
    placed = check_nearest(s, guest, src, tables[src])
    booted = told(tables[src], placed)
    check_told(s, guest, src, booted, 'live')
    check_qemu(s, guest, src, booted, 'at creation')

    migration = s.migrate(guest, dst)
    if not s.expect_status(migration, guest, 'completed'):
        return
    s.check_placed(guest, dst)
    placed = check_nearest(s, guest, dst, tables[dst])
    there = told(tables[dst], placed)
    if there == booted:
        s.fail(guest, dst, 'distances of the destination pair',
               f"other than the source pair's {booted}", there)
    # Live: what the guest booted with (guest ABI); persistent: the
    # destination's, for its next start.
    check_told(s, guest, dst, booted, 'live')
    check_told(s, guest, dst, there, 'persistent', inactive=True)
    check_qemu(s, guest, dst, booted, 'after the move')

    restart(s, guest, dst)
    check_told(s, guest, dst, there, 'live after its next start')
    check_qemu(s, guest, dst, there, 'after its next start')


def restart(s, guest, host):
    """Power the guest off and start it again from its persistent
    definition (a new QEMU), as an operator's stop and start would."""
    conn = libvirt.open(s.backend.deployment.libvirt[host].uri)
    try:
        dom = conn.lookupByUUIDString(guest.uuid)
        dom.destroy()
        dom.create()
    finally:
        conn.close()
    s.say(f"{guest.name} stopped and started again on {host}")
