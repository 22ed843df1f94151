"""Tests of the host index's maintenance by the cache.

Every change of a host's topology (a new report, a reservation, a
release, an expiry) must remake that host's record (weight, capacity)
and put it where its weight now sorts; the other hosts' records stay as
they were.
"""

from numamig.numa import fit
from numamig.numa import usage
from numamig.scheduler import host_state
from numamig.scheduler import index
from numamig.scheduler import weighers
from tests import base
from tests.unit.scheduler import hosts
from tests.unit.scheduler import test_scheduler

_request = test_scheduler._request


def _order(cache, strategy=weighers.SPREAD):
    return [record.host for record in cache.walk(strategy).records]


def _record(cache, host):
    return next(r for r in cache.walk(weighers.SPREAD).records
                if r.host == host)


class IndexMaintenanceTest(base.TestCase):
    """Hosts 'a' (two 2-vCPU guests, one per cell) and 'b' (empty), of
    2 cells x 4 pCPUs."""

    def setUp(self):
        super().setUp()
        self.clock = hosts.Clock()
        self.cache = host_state.HostStateCache(
            clock=self.clock, reservation_timeout=300, service_down_time=60)
        self.cache.update(hosts.report('a', topology=test_scheduler._busy(2)))
        self.cache.update(hosts.report('b'))

    def _reserve(self, host, uuid):
        topology = self.cache.get(host).topology
        return self.cache.reserve(host, uuid, 'proj',
                                  fit.fit(topology, _request()).topology)

    def test_order_per_strategy(self):
        self.assertEqual(['b', 'a'], _order(self.cache, weighers.SPREAD))
        self.assertEqual(['a', 'b'], _order(self.cache, weighers.PACK))

    def test_report_replaces_the_record(self):
        before = _record(self.cache, 'b')
        self.clock.advance(1)
        self.cache.update(hosts.report('b', topology=test_scheduler._busy(3),
                                       reported_at=self.clock.now))
        after = _record(self.cache, 'b')
        self.assertEqual((4, 2), (before.capacity.pcpus,
                                  after.capacity.pcpus))
        self.assertEqual(weighers.weigh(after.topology), after.weight)
        self.assertLess(after.weight, before.weight)
        self.assertEqual(['a', 'b'], _order(self.cache))
        self.assertEqual(2, len(self.cache.walk(weighers.SPREAD).records))

    def test_reservation_shrinks_and_release_grows(self):
        other = _record(self.cache, 'a')
        before = _record(self.cache, 'b')
        self._reserve('b', 'inst-1')
        self._reserve('b', 'inst-2')
        shrunk = _record(self.cache, 'b')
        self.assertEqual(2, shrunk.capacity.pcpus)
        self.assertLess(shrunk.weight, before.weight)
        self.assertEqual(['a', 'b'], _order(self.cache))
        # The other host's record is untouched: nothing re-weighed.
        self.assertIs(other, _record(self.cache, 'a'))
        self.cache.release('b', 'inst-1')
        self.cache.release('b', 'inst-2')
        grown = _record(self.cache, 'b')
        self.assertEqual((4, before.weight), (grown.capacity.pcpus,
                                              grown.weight))
        self.assertEqual(['b', 'a'], _order(self.cache))

    def test_expiry_grows_without_a_call_per_host(self):
        before = _record(self.cache, 'b').weight
        self._reserve('b', 'inst-1')
        self._reserve('b', 'inst-2')
        self.clock.advance(299)
        self.assertEqual(2, _record(self.cache, 'b').capacity.pcpus)
        self.assertLess(_record(self.cache, 'b').weight, before)
        self.clock.advance(1)
        # walk() expires what is due, from the deadline heap.
        self.assertEqual(4, _record(self.cache, 'b').capacity.pcpus)
        self.assertEqual(before, _record(self.cache, 'b').weight)
        self.assertEqual((), self.cache.get('b').reservations)
        self.assertEqual((), self.cache.expire())

    def test_released_reservation_does_not_expire_its_successor(self):
        self._reserve('b', 'inst-1')
        self.cache.release('b', 'inst-1')
        self.clock.advance(200)
        self._reserve('b', 'inst-1')
        self.clock.advance(100)
        # The first deadline is due, but it belongs to the released one.
        self.assertEqual((), self.cache.expire())
        self.assertEqual(1, len(self.cache.get('b').reservations))
        self.clock.advance(200)
        self.assertEqual(['inst-1'], [r.instance_uuid
                                      for r in self.cache.expire()])

    def test_remove_takes_the_host_out(self):
        self.assertTrue(self.cache.remove('b'))
        self.assertEqual(['a'], _order(self.cache))
        self.assertEqual(2, self.cache.walk(weighers.SPREAD).best.pcpus)

    def test_best_follows_the_host_that_held_it(self):
        self.assertEqual(4, self.cache.walk(weighers.SPREAD).best.pcpus)
        self._reserve('b', 'inst-1')
        self._reserve('b', 'inst-2')
        self.assertEqual(2, self.cache.walk(weighers.SPREAD).best.pcpus)
        self.cache.release('b', 'inst-2')
        self.assertEqual(4, self.cache.walk(weighers.SPREAD).best.pcpus)

    def test_best_after_the_last_host_holding_it_goes(self):
        self.cache.update(hosts.report('c', topology=hosts.host_topology(
            cells=1, pcpus=6)))
        best = self.cache.walk(weighers.SPREAD).best
        self.assertEqual((2, 6), (best.cells, best.pcpus))
        self.cache.remove('c')
        best = self.cache.walk(weighers.SPREAD).best
        self.assertEqual((2, 4), (best.cells, best.pcpus))
        self.cache.remove('a')
        self.cache.remove('b')
        best = self.cache.walk(weighers.SPREAD).best
        self.assertEqual((0, 0), (best.cells, best.pcpus))

    def test_view_kept_while_the_topology_is(self):
        record = _record(self.cache, 'b')
        view = record.view()
        self.assertIs(view, self.cache.get('b').numa_view)
        self.cache.set_guests('b', [])
        self.assertIs(view, _record(self.cache, 'b').view_if_made())
        self._reserve('b', 'inst-1')
        self.assertIsNone(_record(self.cache, 'b').view_if_made())

    def test_index_refuses_a_record_it_does_not_hold(self):
        host_index = index.HostIndex()
        record = _record(self.cache, 'a')
        host_index.put(None, record)
        stranger = index.HostRecord(
            record.report, usage.apply(record.topology, fit.fit(
                record.topology, _request()).topology),
            (), record.received_at, record.weight, record.capacity,
            None)
        self.assertRaises(AssertionError, host_index.remove, stranger)
