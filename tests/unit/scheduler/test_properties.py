"""Property tests: the indexed selection decides as the exhaustive one.

On random clouds (hosts of random cells, pins, memory and page use, some
down, of another hypervisor type, excluded, or holding reservations) and
random requests, ``select_destinations`` (capacity index, best weight
first, early exit) must return the same candidates in the same order with
equal placements as ``_select_exhaustive`` (every host filtered and
weighed), for both strategies; and every host is accounted for once:
candidate, refused with the exhaustive path's reason, skipped by the
index, or left unexamined after the last candidate.
"""

import datetime

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from numamig import exception
from numamig.scheduler import host_state
from numamig.scheduler import scheduler
from numamig.scheduler import weighers
from tests import base
from tests.unit.numa import test_properties as numa_properties
from tests.unit.scheduler import hosts

PAGESIZES = (None, None, 4, 2048)


@st.composite
def clouds(draw):
    """Return (cache, {host: request to reserve or None}) of 1-8 hosts."""
    clock = hosts.Clock()
    cache = host_state.HostStateCache(clock=clock, service_down_time=60,
                                      reservation_timeout=300)
    count = draw(st.integers(1, 8))
    reservations = []
    for index in range(count):
        name = f'h{index}'
        down = draw(st.integers(0, 9)) == 0
        cache.update(hosts.report(
            name, topology=draw(numa_properties.host_topologies()),
            hypervisor_type=draw(st.sampled_from(('qemu',) * 5 + ('kvm',)))),
            received_at=hosts.T0 - datetime.timedelta(
                seconds=120 if down else 0))
        for _ in range(draw(st.integers(0, 2))):
            reservations.append((name, draw(numa_properties.requests())))
    return cache, reservations


class IndexedSelectionTest(base.TestCase):

    @settings(max_examples=400, deadline=None)
    @given(clouds(), st.one_of(st.none(), numa_properties.requests()),
           numa_properties.limits, st.sampled_from(weighers.STRATEGIES),
           st.sampled_from(weighers.STRATEGIES), st.integers(1, 4),
           st.sampled_from(PAGESIZES), st.sets(st.sampled_from(
               [f'h{i}' for i in range(8)]), max_size=2))
    def test_same_decisions_as_exhaustive(self, cloud, request, limits,
                                          strategy, cell_strategy,
                                          max_candidates, pagesize_kb,
                                          exclude):
        cache, reservations = cloud
        sched = scheduler.Scheduler(cache, strategy=strategy,
                                    max_candidates=max_candidates,
                                    cell_strategy=cell_strategy)
        for number, (host, reserved) in enumerate(reservations):
            try:
                sched.reserve(host, f'inst-{number}', 'proj', reserved)
            except exception.ReservationConflict:
                pass
        args = (request, 'h0', limits, None, exclude, pagesize_kb)
        indexed = sched.select_destinations(*args)
        exhaustive = sched._select_exhaustive(*args)
        self.assertEqual(
            [(c.host, c.weight, c.placement) for c in exhaustive.candidates],
            [(c.host, c.weight, c.placement) for c in indexed.candidates])
        refusals = {(r.host, r.filter, r.reason) for r in exhaustive.rejected}
        for rejection in indexed.rejected:
            self.assertIn((rejection.host, rejection.filter,
                           rejection.reason), refusals)
        self.assertEqual(
            len(cache),
            len(indexed.candidates) + len(indexed.rejected) +
            sum(s.hosts for s in indexed.skipped) + indexed.unexamined)
        if not indexed.candidates:
            self.assertEqual(0, indexed.unexamined)
