"""An exhaustive drain search to hold the planner against, written
apart from it (numamig.scheduler.drain shares nothing with it).

A drain plan exists when the guests can be shared out among the
destinations so that each destination's share fits there in some
order, each guest fitted by the claims' NUMA fit on what the guests
before it left. Per destination, every order of every share is tried
by building the shares up one guest at a time from every reachable
state (states equal in free resources merged); then every way of
sharing the guests out is looked up.
"""

import itertools

from numamig.numa import fit
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
    for choice in itertools.product(*options):
        per_host = {}
        for guest, host in enumerate(choice):
            per_host.setdefault(host, set()).add(guest)
        if all(frozenset(share) in tables[host]
               for host, share in per_host.items()):
            return dict(enumerate(choice))
    return None
