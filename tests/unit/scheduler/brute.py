"""An exhaustive drain search to hold the planner against, written
apart from it (numamig.scheduler.drain shares nothing with it).

A drain plan exists when the guests can be shared out among the
destinations so that each destination's share fits there in some
order, each guest fitted by the claims' NUMA fit on what the guests
before it left. Per destination, every order of every share is tried
by building the shares up one guest at a time from every reachable
state (states equal in free resources merged); then every way of
sharing the guests out is looked up.

``optimum`` does the same for a defragmentation: the fewest moves of
guests of any hosts after which a new guest fits on one host, the
moves into a host after every move off it (no circle), the arrivals on
each host in every order. Nothing here imports the tests' package, so
the benchmarks load this file too.
"""

import itertools

from numamig.numa import fit
from numamig.numa import usage
from numamig.numa import view_usage


def _state(view):
    return tuple((c.id, frozenset(c.pinned_cpus), c.memory_usage_mb,
                  c.cpu_usage, c.pools) for c in view.cells)


def shares(view, guests, allowed, limits=None, strategy='spread'):
    """{frozenset of guest positions: one order placing them} of every
    share of ``allowed`` guest positions the view takes in some order.

    ``guests``: (request view, pagesize_kb) per position.
    """
    found = {frozenset(): ()}
    layer = {frozenset(): {_state(view): (view, ())}}
    while layer:
        following = {}
        for share, states in layer.items():
            for current, order in states.values():
                for guest in allowed:
                    if guest in share:
                        continue
                    request, pagesize = guests[guest]
                    result = fit.fit(current, request, limits=limits,
                                     strategy=strategy, pagesize_kb=pagesize)
                    if not result.fits:
                        continue
                    after = view_usage.apply(current, result.placement)
                    bigger = share | {guest}
                    following.setdefault(bigger, {}).setdefault(
                        _state(after), (after, order + (guest,)))
                    found.setdefault(bigger, order + (guest,))
        layer = following
    return found


def exists(views, guests, barred, limits=None, strategy='spread'):
    """Return {guest position: destination} of a plan, or None.

    :param views: {destination: HostView}.
    :param barred: per guest position, the destinations it may not take.
    """
    hosts = sorted(views)
    options = [[h for h in hosts if h not in barred[g]]
               for g in range(len(guests))]
    tables = {h: shares(views[h], guests,
                        [g for g in range(len(guests))
                         if h in options[g]], limits, strategy)
              for h in hosts}
    return first_assignment(options, tables)


def first_assignment(options, tables):
    """The first {guest: host} taking each guest to one of its
    ``options`` such that every host's share of guests is one its
    ``tables`` entry holds (the sets of guests it can take together),
    or None."""
    for choice in itertools.product(*options):
        per_host = {}
        for guest, host in enumerate(choice):
            per_host.setdefault(host, set()).add(guest)
        if all(frozenset(share) in tables[host]
               for host, share in per_host.items()):
            return dict(enumerate(choice))
    return None


def _orders(topology, arrivals):
    """The views a host ends in, its arrivals fitted in every order
    (None: no order fits them all)."""
    ends = []
    for order in itertools.permutations(arrivals):
        current = topology
        for request in order:
            result = fit.fit(current, request)
            if not result.fits:
                break
            current = usage.apply(current, result.topology)
        else:
            ends.append(current)
    return ends


def _acyclic(edges):
    edges = {(a, b) for a, b in edges}
    nodes = {n for edge in edges for n in edge}
    while nodes:
        leaf = next((n for n in nodes
                     if not any(a == n and b in nodes for a, b in edges)),
                    None)
        if leaf is None:
            return False
        nodes.discard(leaf)
    return True


def optimum(state, wanted, max_moves):
    """The fewest moves of a plan, or None within ``max_moves``."""
    guests = [(host, uuid, request, placed)
              for host, (_, listed) in state.items()
              for uuid, request, placed in listed]
    for size in range(max_moves + 1):
        for group in itertools.combinations(guests, size):
            others = [[h for h in state if h != g[0]] for g in group]
            for dests in itertools.product(*others):
                if _works(state, wanted, group, dests):
                    return size
    return None


def _works(state, wanted, group, dests):
    if not _acyclic((g[0], d) for g, d in zip(group, dests, strict=True)):
        return False
    ends = {}
    for host, (topology, _) in state.items():
        for source, _uuid, _request, placed in group:
            if source == host:
                topology = usage.release(topology, placed)
        arrivals = [g[2] for g, d in zip(group, dests, strict=True)
                    if d == host]
        ends[host] = _orders(topology, arrivals)
        if not ends[host]:
            return False
    return any(fit.fit(view, wanted).fits
               for found in ends.values() for view in found)
