"""Host weighers: order candidate hosts emptiest first or fullest first.

Each weigher gives the free share of one kind of resource on a host, an
exact fraction in [0, 1], or None when the host has none of it (a host
without huge pages is not "full" of them). A host's weight is the mean
of the shares that apply, computed on its topology with in-flight
reservations applied. ``spread`` puts the emptiest hosts first, which
leaves room on every host for growth and lowers the odds that
concurrent migrations collide; ``pack`` puts the fullest first, which
keeps whole hosts free for large guests. Equal weights are ordered by
host name, so the same cache always gives the same order.

The distance weigher works on the candidates of one guest, not on the
host: among the hosts that take it, those where its cells end nearer
each other (the fit's distance excess, numa/distance.py) come first,
in the order above among equals (``by_distance``).
"""

import fractions

SPREAD = 'spread'
PACK = 'pack'
STRATEGIES = (SPREAD, PACK)


def _share(free, total):
    if total <= 0:
        return None
    return fractions.Fraction(max(0, min(free, total)), total)


def dedicated_cpu_share(topology):
    """Free share of the dedicated pCPUs (the ones guests pin)."""
    return _share(sum(len(c.free_pcpus) for c in topology.cells),
                  sum(len(c.pcpuset) for c in topology.cells))


def shared_cpu_share(topology):
    """Share of the shared CPUs not yet used by floating vCPUs.

    Counted at a ratio of 1.0: overcommit lets a host take more, but
    the host with fewer floating vCPUs per CPU is still the emptier one.
    """
    return _share(sum(len(c.cpuset) - c.cpu_usage for c in topology.cells),
                  sum(len(c.cpuset) for c in topology.cells))


def memory_share(topology):
    """Free share of the host's memory."""
    return _share(
        sum(c.memory_mb - c.memory_usage_mb for c in topology.cells),
        sum(c.memory_mb for c in topology.cells))


def hugepage_share(topology):
    """Free share of the memory held in huge page pools."""
    pools = [pool for cell in topology.cells for pool in cell.mempages
             if pool.size_kb > 4]
    return _share(sum(max(0, p.free) * p.size_kb for p in pools),
                  sum((p.total - p.reserved) * p.size_kb for p in pools))


WEIGHERS = (dedicated_cpu_share, shared_cpu_share, memory_share,
            hugepage_share)


def weigh(topology, weighers=WEIGHERS):
    """Return the host's free share: the mean of the shares that apply.

    A host with none of the weighed resources weighs 0 (full).
    """
    shares = [s for s in (w(topology) for w in weighers) if s is not None]
    if not shares:
        return fractions.Fraction(0)
    return sum(shares) / len(shares)


def order(weighed, strategy):
    """Sort (host name, weight, item) triples for ``strategy``.

    :returns: a new list; spread puts the highest weight first, pack the
        lowest; ties go to the alphabetically first host.
    :raises ValueError: for an unknown strategy.
    """
    if strategy == SPREAD:
        return sorted(weighed, key=lambda t: (-t[1], t[0]))
    if strategy == PACK:
        return sorted(weighed, key=lambda t: (t[1], t[0]))
    raise ValueError(f"unknown strategy {strategy!r}; choose one of "
                     f"{', '.join(STRATEGIES)}")


def distance_excess(fit):
    """How much farther apart than its host allows the guest's cells end
    on a candidate: the fit's Distance.excess, 0 for a guest without a
    NUMA request or of one cell. 0 on every host whose remote distances
    are all equal (or that reports no table), so a cloud of such hosts
    keeps its order."""
    if fit is None or not fit.fits:
        return 0
    return fit.distance.excess


def by_distance(candidates, fit_of):
    """Return ``candidates`` (already in weight order) with those whose
    guest cells end nearer first: a stable sort by distance_excess, so
    candidates of equal excess keep their weight order.

    A guest split over the far socket pays on every remote memory access
    for as long as it runs, while the free-share weights only break the
    tie between hosts that take it equally well.

    :param fit_of: returns a candidate's FitResult (or None).
    """
    return sorted(candidates, key=lambda item: distance_excess(fit_of(item)))
