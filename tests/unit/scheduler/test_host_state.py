"""Tests of the scheduler's host cache: reports, reservations, liveness."""

import copy
import datetime
import logging
import threading
import time

import fixtures
from oslo_utils.fixture import uuidsentinel as uuids

from numamig import exception
from numamig import objects
from numamig.numa import constraints
from numamig.numa import fit
from numamig.numa import usage
from numamig.scheduler import host_state
from numamig.scheduler import reservations
from tests import base
from tests.unit.scheduler import hosts

PINNED_2 = {'hw:cpu_policy': 'dedicated'}


def _request(vcpus=2, memory_mb=1024, specs=PINNED_2):
    return constraints.get_numa_request(vcpus, memory_mb, specs, {})


def _placed(topology, vcpus=2):
    result = fit.fit(topology, _request(vcpus))
    assert result.fits, result.reason
    return result.topology


def _free_pcpus(topology):
    return sum(len(cell.free_pcpus) for cell in topology.cells)


class CacheTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.flags(service_down_time=60)
        self.flags(reservation_timeout=300, group='scheduler')
        self.clock = hosts.Clock()
        self.cache = host_state.HostStateCache(clock=self.clock)
        self.guests = [('proj', uuids.running)]
        self.cache.update(hosts.report('cmp1', guests=self.guests),
                          guests=self.guests)

    def _later_report(self, seconds, guests, topology=None):
        return hosts.report(
            'cmp1', topology=topology, guests=guests,
            reported_at=hosts.T0 + datetime.timedelta(seconds=seconds))


class TestReports(CacheTestCase):

    def test_state_of_reported_host(self):
        state = self.cache.get('cmp1')
        self.assertEqual('cmp1', state.host)
        self.assertEqual('qemu', state.hypervisor_type)
        self.assertTrue(state.is_up)
        self.assertEqual((), state.reservations)
        self.assertEqual(hosts.host_topology(), state.topology)

    def test_hosts_older_than_follow_reports_and_removals(self):
        old = hosts.report('cmp2')
        old.service_version = 1
        self.cache.update(old)
        self.assertEqual(['cmp2'], self.cache.hosts_older_than(2))
        self.assertEqual([], self.cache.hosts_older_than(1))
        upgraded = hosts.report('cmp2', reported_at=hosts.T0 +
                                datetime.timedelta(seconds=5))
        self.cache.update(upgraded)
        self.assertEqual([], self.cache.hosts_older_than(2))
        self.cache.update(old.obj_clone())
        self.assertEqual([], self.cache.hosts_older_than(2),
                         "an older report is ignored")
        self.assertEqual(['cmp1', 'cmp2'], self.cache.hosts_older_than(3))
        self.cache.remove('cmp2')
        self.assertEqual(['cmp1'], self.cache.hosts_older_than(3))

    def test_service_version_is_the_last_report_s(self):
        old = hosts.report('cmp2')
        old.service_version = 1
        self.cache.update(old)
        self.assertEqual((1, None), (self.cache.service_version('cmp2'),
                                     self.cache.service_version('cmp9')))
        self.cache.update(hosts.report('cmp2', reported_at=hosts.T0 +
                                       datetime.timedelta(seconds=5)))
        self.assertEqual(2, self.cache.service_version('cmp2'))

    def test_unknown_host(self):
        self.assertRaisesMessage(exception.HostNotFound, 'cmp9',
                                 self.cache.get, 'cmp9')

    def test_host_states_sorted(self):
        self.cache.update(hosts.report('a-host'))
        self.assertEqual(['a-host', 'cmp1'],
                         [s.host for s in self.cache.host_states()])

    def test_older_report_ignored(self):
        newer = self._later_report(10, self.guests,
                                   hosts.host_topology(cells=1))
        self.cache.update(newer)
        self.assertEqual((), self.cache.update(hosts.report('cmp1')))
        self.assertIs(newer, self.cache.get('cmp1').report)

    def test_invalid_report_changes_nothing(self):
        bad = self._later_report(10, self.guests)
        bad.fingerprint = 'pfp0v001nothex!!!!!!!!!!'
        self.assertRaisesMessage(exception.InvalidHostReport,
                                 'not a podfingerprint', self.cache.update,
                                 bad)
        bad = self._later_report(10, self.guests)
        bad.topology.cells[0].pinned_cpus = {99}
        self.assertRaisesMessage(exception.InvalidHostReport,
                                 'pinned CPUs [99]', self.cache.update, bad)
        self.assertEqual(hosts.T0, self.cache.get('cmp1').report.reported_at)

    def test_report_without_topology_rejected(self):
        full = self._later_report(10, self.guests)
        bad = objects.ComputeNodeReport(**{
            name: getattr(full, name) for name in full.fields
            if name != 'topology'})
        self.assertRaisesMessage(exception.InvalidHostReport,
                                 'it has no topology', self.cache.update,
                                 bad)

    def test_bad_guests_rejected(self):
        self.assertRaisesMessage(exception.Invalid, 'pair of strings',
                                 self.cache.set_guests, 'cmp1',
                                 [('proj', 42)])

    def test_remove(self):
        self.assertTrue(self.cache.remove('cmp1'))
        self.assertFalse(self.cache.remove('cmp1'))
        self.assertEqual([], self.cache.host_states())


class TestRefresh(CacheTestCase):
    """A report that says what the cache holds only moves its time."""

    def at(self, seconds):
        return hosts.T0 + datetime.timedelta(seconds=seconds)

    def test_without_a_digest_the_report_is_read_whole(self):
        self.assertIsNone(self.cache.refresh('cmp1', self.at(60), 'd1'))
        self.assertIsNone(self.cache.refresh('cmp9', self.at(60), 'd1'))
        self.assertEqual(hosts.T0,
                         self.cache.get('cmp1').report.reported_at)

    def test_the_same_content_moves_the_time_and_keeps_the_rest(self):
        self.cache.update(self._later_report(10, self.guests),
                          guests=self.guests, digest='d1')
        before = self.cache.get('cmp1')
        self.clock.advance(70)
        self.assertEqual((), self.cache.refresh(
            'cmp1', self.at(70), 'd1', guests=self.guests))
        after = self.cache.get('cmp1')
        self.assertEqual(self.at(70), after.report.reported_at)
        self.assertTrue(after.is_up)
        # The topology is the same object: nothing worked out again.
        self.assertIs(before.topology, after.topology)
        self.assertNotIn('reported_at', after.report.obj_what_changed())
        # An older one changes nothing; another content is read whole.
        self.assertEqual((), self.cache.refresh('cmp1', self.at(20), 'd1'))
        self.assertEqual(self.at(70),
                         self.cache.get('cmp1').report.reported_at)
        self.assertIsNone(self.cache.refresh('cmp1', self.at(80), 'd2'))
        # A report taken without a digest forgets it.
        self.cache.update(self._later_report(90, self.guests))
        self.assertIsNone(self.cache.refresh('cmp1', self.at(100), 'd1'))


class TestLiveness(CacheTestCase):

    def test_up_until_service_down_time(self):
        self.clock.advance(59)
        self.assertTrue(self.cache.get('cmp1').is_up)
        self.clock.advance(1)
        state = self.cache.get('cmp1')
        self.assertFalse(state.is_up)
        self.assertEqual(datetime.timedelta(seconds=60), state.age)

    def test_check_up_raises_when_down(self):
        self.assertEqual('cmp1', self.cache.check_up('cmp1').host)
        self.clock.advance(61)
        self.assertRaisesMessage(exception.ComputeHostDown,
                                 'last report is 61 s old ([DEFAULT] '
                                 'service_down_time is 60 s)',
                                 self.cache.check_up, 'cmp1')

    def test_follows_configuration(self):
        self.clock.advance(30)
        self.flags(service_down_time=20)
        self.assertFalse(self.cache.get('cmp1').is_up)

    def test_judged_by_receive_time_not_agent_clock(self):
        # An agent whose clock runs an hour behind is still up.
        skewed = hosts.report('cmp2', reported_at=hosts.T0 -
                              datetime.timedelta(hours=1))
        self.cache.update(skewed)
        self.assertTrue(self.cache.get('cmp2').is_up)

    def test_reloaded_report_keeps_its_age(self):
        self.cache.update(hosts.report('cmp2'), received_at=hosts.T0 -
                          datetime.timedelta(seconds=600))
        self.assertFalse(self.cache.get('cmp2').is_up)


class TestReservations(CacheTestCase):

    def test_reserve_shrinks_free_resources_at_once(self):
        before = self.cache.get('cmp1').topology
        placed = _placed(before)
        placed_copy = copy.deepcopy(placed)
        reservation = self.cache.reserve('cmp1', uuids.inst, 'proj', placed)
        state = self.cache.get('cmp1')
        self.assertEqual(_free_pcpus(before) - 2, _free_pcpus(state.topology))
        self.assertEqual((reservation,), state.reservations)
        self.assertEqual(('proj', uuids.inst), reservation.guest)
        self.assertEqual(placed_copy, placed)
        # The report itself is untouched: the cache applies on a copy.
        self.assertEqual(_free_pcpus(before),
                         _free_pcpus(state.report.topology))

    def test_reserve_unknown_host(self):
        self.assertRaises(exception.HostNotFound, self.cache.reserve,
                          'cmp9', uuids.inst, 'proj',
                          _placed(hosts.host_topology()))

    def test_reserving_again_replaces_the_guests_placement(self):
        # The guest came, left before a report counted it and comes
        # back: one placement is counted, the new one, not two.
        free = _free_pcpus(self.cache.get('cmp1').topology)
        first = self.cache.reserve_fitting(
            'cmp1', uuids.inst, 'proj', _placed)
        self.clock.advance(10)
        again = self.cache.reserve_fitting(
            'cmp1', uuids.inst, 'proj', _placed)
        state = self.cache.get('cmp1')
        self.assertEqual((again,), state.reservations)
        self.assertEqual(free - 2, _free_pcpus(state.topology))
        # Fitted on the host without its first placement: the same pins.
        self.assertEqual(first.topology, again.topology)
        self.assertEqual(10, (again.reserved_at -
                              first.reserved_at).total_seconds())

    def test_a_replacement_that_does_not_fit_keeps_the_first(self):
        first = self.cache.reserve('cmp1', uuids.inst, 'proj',
                                   _placed(self.cache.get('cmp1').topology))
        before = self.cache.get('cmp1').topology

        def refuse(topology):
            raise exception.ReservationConflict(
                instance_uuid=uuids.inst, host='cmp1', reason='no room')
        self.assertRaises(exception.ReservationConflict,
                          self.cache.reserve_fitting, 'cmp1', uuids.inst,
                          'proj', refuse)
        state = self.cache.get('cmp1')
        self.assertEqual((first,), state.reservations)
        self.assertEqual(_free_pcpus(before), _free_pcpus(state.topology))

    def test_the_replaced_placements_deadline_does_not_expire_the_new(self):
        self.cache.reserve_fitting('cmp1', uuids.inst, 'proj', _placed)
        self.clock.advance(200)
        again = self.cache.reserve_fitting('cmp1', uuids.inst, 'proj',
                                           _placed)
        self.clock.advance(150)
        self.assertEqual((), self.cache.expire())
        self.assertEqual((again,), self.cache.get('cmp1').reservations)

    def test_reserve_taken_pins_refused_and_nothing_changed(self):
        placed = _placed(self.cache.get('cmp1').topology)
        self.cache.reserve('cmp1', uuids.first, 'proj', placed)
        before = self.cache.get('cmp1')
        exc = self.assertRaises(exception.ReservationConflict,
                                self.cache.reserve, 'cmp1', uuids.second,
                                'proj', placed)
        self.assertIn('already pinned', str(exc).lower())
        after = self.cache.get('cmp1')
        self.assertEqual(before.reservations, after.reservations)
        self.assertIs(before.topology, after.topology)

    def test_reserve_unplaced_refused(self):
        self.assertRaisesMessage(exception.ReservationConflict,
                                 'not placed', self.cache.reserve, 'cmp1',
                                 uuids.inst, 'proj', _request())

    def test_numa_view_made_once_per_topology(self):
        first = self.cache.get('cmp1')
        self.assertIs(first.numa_view, self.cache.get('cmp1').numa_view)
        self.assertEqual(
            [cell.id for cell in first.topology.cells],
            [cell.id for cell in first.numa_view.cells])
        self.cache.reserve('cmp1', uuids.inst, 'proj',
                           _placed(first.topology))
        reserved = self.cache.get('cmp1')
        self.assertIsNot(first.numa_view, reserved.numa_view)
        # The new view sees what the reservation took.
        self.assertEqual(
            _free_pcpus(reserved.topology),
            sum(cell.free_count for cell in reserved.numa_view.cells))
        self.assertEqual(_free_pcpus(first.topology) - 2,
                         sum(cell.free_count
                             for cell in reserved.numa_view.cells))
        self.cache.release('cmp1', uuids.inst)
        released = self.cache.get('cmp1')
        self.assertIsNot(reserved.numa_view, released.numa_view)
        self.assertEqual(fit.fit(first.topology, _request()),
                         fit.fit(released.numa_view, _request()))

    def test_release_restores_and_is_idempotent(self):
        before = self.cache.get('cmp1').topology
        self.cache.reserve('cmp1', uuids.inst, 'proj', _placed(before))
        self.assertTrue(self.cache.release('cmp1', uuids.inst))
        self.assertEqual(before, self.cache.get('cmp1').topology)
        self.assertFalse(self.cache.release('cmp1', uuids.inst))
        self.assertFalse(self.cache.release('cmp9', uuids.inst))

    def test_release_of_only_one_reservation_spares_a_newer_one(self):
        # A drain worker lets go of its own placement; a migration of the
        # same guest that reserved the host since keeps its own.
        before = self.cache.get('cmp1').topology
        old = self.cache.reserve('cmp1', uuids.inst, 'proj', _placed(before))
        self.cache.release('cmp1', uuids.inst)
        newer = self.cache.reserve('cmp1', uuids.inst, 'proj',
                                   _placed(before))
        self.assertFalse(self.cache.release('cmp1', uuids.inst, only=old))
        self.assertEqual((newer,), self.cache.get('cmp1').reservations)
        self.assertTrue(self.cache.release('cmp1', uuids.inst, only=newer))
        self.assertEqual(before, self.cache.get('cmp1').topology)

    def test_reservation_survives_report_without_it(self):
        self.cache.reserve('cmp1', uuids.inst, 'proj',
                           _placed(self.cache.get('cmp1').topology))
        # A fresh report that does not know the guest yet (its claim has
        # not landed): the reservation is applied on top of it.
        self.cache.update(self._later_report(10, self.guests))
        state = self.cache.get('cmp1')
        self.assertEqual(1, len(state.reservations))
        self.assertEqual(_free_pcpus(hosts.host_topology()) - 2,
                         _free_pcpus(state.topology))

    def test_matching_fingerprint_drops_reservation(self):
        placed = _placed(self.cache.get('cmp1').topology)
        reservation = self.cache.reserve('cmp1', uuids.inst, 'proj', placed)
        # The host now accounts for the guest itself (its claim landed)
        # and reports the guest set the cache expects.
        claimed = usage.apply(hosts.host_topology(), placed)
        report = self._later_report(
            10, self.guests + [('proj', uuids.inst)], claimed)
        self.assertEqual((reservation,), self.cache.update(report))
        state = self.cache.get('cmp1')
        self.assertEqual((), state.reservations)
        # Counted once, not twice.
        self.assertEqual(claimed, state.topology)

    def test_oldest_reservations_confirmed_first(self):
        first = self.cache.reserve('cmp1', uuids.first, 'proj',
                                   _placed(self.cache.get('cmp1').topology))
        self.cache.reserve('cmp1', uuids.second, 'proj',
                           _placed(self.cache.get('cmp1').topology))
        report = self._later_report(
            10, self.guests + [('proj', uuids.first)])
        self.assertEqual((first,), self.cache.update(report))
        self.assertEqual([uuids.second], [
            r.instance_uuid for r in self.cache.get('cmp1').reservations])

    def test_set_guests_can_confirm(self):
        reservation = self.cache.reserve(
            'cmp1', uuids.inst, 'proj',
            _placed(self.cache.get('cmp1').topology))
        # The host reports a guest the conductor's records did not have
        # yet; once they do, the fingerprints agree.
        late = [('proj', uuids.late)]
        self.cache.update(self._later_report(
            10, self.guests + late + [('proj', uuids.inst)]))
        self.assertEqual(1, len(self.cache.get('cmp1').reservations))
        self.assertEqual((reservation,),
                         self.cache.set_guests('cmp1', self.guests + late))
        self.assertEqual((), self.cache.get('cmp1').reservations)

    def test_clashing_reservation_not_counted_twice(self):
        placed = _placed(self.cache.get('cmp1').topology)
        self.cache.reserve('cmp1', uuids.inst, 'proj', placed)
        # The claim landed, but the fingerprints still differ (a guest
        # the conductor does not know yet): the pins are in the report,
        # so the reservation cannot be applied again.
        claimed = usage.apply(hosts.host_topology(), placed)
        self.cache.update(self._later_report(
            10, self.guests + [('proj', uuids.other)], claimed))
        state = self.cache.get('cmp1')
        self.assertEqual(1, len(state.reservations))
        self.assertEqual(claimed, state.topology)


class TestExpiry(CacheTestCase):

    def setUp(self):
        super().setUp()
        self.log = self.useFixture(fixtures.FakeLogger(
            name='numamig.scheduler.host_state', level=logging.INFO))
        self.cache.reserve('cmp1', uuids.inst, 'proj',
                           _placed(self.cache.get('cmp1').topology))

    def test_kept_before_timeout(self):
        self.clock.advance(299)
        self.assertEqual((), self.cache.expire())
        self.assertEqual(1, len(self.cache.get('cmp1').reservations))

    def test_expire_drops_and_logs(self):
        self.clock.advance(300)
        expired = self.cache.expire()
        self.assertEqual([uuids.inst], [r.instance_uuid for r in expired])
        self.assertEqual(hosts.host_topology(),
                         self.cache.get('cmp1').topology)
        self.assertIn(f'Reservation of instance {uuids.inst} on host cmp1 '
                      f'expired after 0:05:00', self.log.output)
        self.assertIn('reservation_timeout (300 s)', self.log.output)

    def test_reads_expire_too(self):
        self.flags(reservation_timeout=10, group='scheduler')
        self.clock.advance(10)
        self.assertEqual((), self.cache.get('cmp1').reservations)

    def test_explicit_timeout_wins_over_configuration(self):
        cache = host_state.HostStateCache(clock=self.clock,
                                          reservation_timeout=5)
        cache.update(hosts.report('cmp1'))
        cache.reserve('cmp1', uuids.inst, 'proj',
                      _placed(hosts.host_topology()))
        self.clock.advance(5)
        self.assertEqual(1, len(cache.expire()))


class TestConcurrency(CacheTestCase):
    """Reservations from many threads never over-commit a host."""

    THREADS = 16

    def _race(self, attempt):
        barrier = threading.Barrier(self.THREADS)
        outcomes = [None] * self.THREADS

        def run(index):
            barrier.wait()
            try:
                outcomes[index] = attempt(index)
            except exception.ReservationConflict as exc:
                outcomes[index] = exc

        threads = [threading.Thread(target=run, args=(i,))
                   for i in range(self.THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return [o for o in outcomes
                if isinstance(o, reservations.Reservation)]

    def test_same_placement_reserved_once(self):
        placed = _placed(self.cache.get('cmp1').topology)
        won = self._race(lambda i: self.cache.reserve(
            'cmp1', f'inst-{i}', 'proj', placed))
        self.assertEqual(1, len(won))

    def test_fitting_reservations_fill_the_host_exactly(self):
        # 2 cells x 4 dedicated pCPUs: room for exactly four 2-vCPU
        # pinned guests, whatever the interleaving.
        request = _request()

        def place(topology):
            # Yield to the other threads mid-decision: without the
            # cache's lock they would all fit on the same free pCPUs.
            time.sleep(0.001)
            result = fit.fit(topology, request)
            if not result.fits:
                raise exception.ReservationConflict(
                    instance_uuid='?', host='cmp1', reason=result.reason)
            return result.topology

        won = self._race(lambda i: self.cache.reserve_fitting(
            'cmp1', f'inst-{i}', 'proj', place))
        self.assertEqual(4, len(won))
        pins = [p for r in won for p in r.topology.cpu_pinning.values()]
        self.assertEqual(len(pins), len(set(pins)))
        state = self.cache.get('cmp1')
        self.assertEqual(0, _free_pcpus(state.topology))
        state.topology.validate()


class HoldTest(base.TestCase):
    """Holds: counted once the host's report leaves room for them."""

    def setUp(self):
        super().setUp()
        self.cache = host_state.HostStateCache(
            clock=hosts.Clock(), reservation_timeout=300,
            service_down_time=60)
        self.placed = _hold_placed()

    def pinned(self):
        return self.cache.get('h1').topology.cells[0].pinned_cpus

    def test_a_hold_waits_for_the_room_then_counts_at_once(self):
        busy = hosts.host_topology()
        busy.cells[0].pinned_cpus = {0, 1}
        self.cache.update(hosts.report('h1', topology=busy))
        self.cache.hold('h1', 'room', 'p', self.placed, arrives=False)
        # The room is still taken by the guest leaving: not counted.
        self.assertEqual({0, 1}, self.pinned())
        self.assertEqual(['room'], [r.instance_uuid for r in
                                    self.cache.get('h1').reservations])
        later = hosts.T0 + datetime.timedelta(seconds=5)
        self.cache.update(hosts.report('h1', reported_at=later))
        self.assertEqual({0, 1}, self.pinned())
        # A request fitted now cannot take pCPUs 0-1.
        self.assertRaises(exception.ReservationConflict, self.cache.reserve,
                          'h1', 'other', 'p', _hold_placed())
        # It is the hold that keeps them.
        self.cache.release('h1', 'room')
        self.assertEqual(set(), self.pinned())

    def test_room_kept_for_no_guest_is_never_confirmed_by_a_report(self):
        self.cache.update(hosts.report('h1'))
        self.cache.hold('h1', 'room', 'p', self.placed, arrives=False)
        # A report whose fingerprint counts the hold's key (as a guest of
        # its project) would confirm a reservation; not a hold for no
        # guest.
        later = hosts.T0 + datetime.timedelta(seconds=5)
        self.cache.update(hosts.report('h1', guests=[('p', 'room')],
                                       reported_at=later), guests=[])
        self.assertEqual({0, 1}, self.pinned())

    def test_a_reservation_does_not_replace_a_hold(self):
        self.cache.update(hosts.report('h1'))
        self.cache.hold('h1', 'room', 'p', self.placed)
        self.assertRaisesMessage(
            exception.ReservationConflict, 'already holds room there',
            self.cache.reserve, 'h1', 'room', 'p', _hold_placed())
        self.assertTrue(self.cache.get('h1').reservations[0].held)

    def test_holding_again_renews_it(self):
        self.cache.update(hosts.report('h1'))
        first = self.cache.hold('h1', 'room', 'p', self.placed)
        self.cache._clock.advance(200)
        again = self.cache.hold('h1', 'room', 'p', self.placed)
        self.assertEqual(200, (again.reserved_at -
                               first.reserved_at).total_seconds())
        self.cache._clock.advance(200)
        self.assertEqual(1, len(self.cache.get('h1').reservations))


def _hold_placed():
    return objects.InstanceNUMATopology(cells=[objects.InstanceNUMACell(
        id=0, host_cell=0, pcpuset={0, 1}, cpu_pinning={0: 0, 1: 1},
        memory_mb=512, cpu_policy='dedicated')])
