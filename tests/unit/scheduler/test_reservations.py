"""Tests of numamig.scheduler.reservations: a host with its placements."""

import copy

from numamig import exception
from numamig import objects
from numamig.scheduler import reservations
from tests import base
from tests.unit.scheduler import hosts


def _reservation(uuid, pcpus, held=False):
    placed = objects.InstanceNUMATopology(cells=[objects.InstanceNUMACell(
        id=0, host_cell=0, pcpuset=set(range(len(pcpus))),
        cpu_pinning=dict(enumerate(pcpus)), memory_mb=512,
        cpu_policy='dedicated')])
    return reservations.Reservation('h1', uuid, 'p', placed, hosts.T0,
                                    held=held)


def _pinned(topology):
    return topology.cells[0].pinned_cpus


class ReservedTopologyTest(base.TestCase):

    def test_every_reservation_counts_and_the_report_is_untouched(self):
        report = hosts.report('h1')
        before = copy.deepcopy(report.topology)
        topology = reservations.reserved_topology(
            report, [_reservation('a', [0, 1]), _reservation('b', [2])])
        self.assertEqual({0, 1, 2}, _pinned(topology))
        self.assertEqual(_pinned(before), _pinned(report.topology))

    def test_a_clashing_reservation_is_not_counted(self):
        busy = hosts.host_topology()
        busy.cells[0].pinned_cpus = {0}
        topology = reservations.reserved_topology(
            hosts.report('h1', topology=busy),
            [_reservation('a', [0, 1]), _reservation('b', [2], held=True)])
        self.assertEqual({0, 2}, _pinned(topology))


class ApplyPlacedTest(base.TestCase):

    def test_an_unplaced_topology_is_a_conflict(self):
        unplaced = objects.InstanceNUMATopology(cells=[
            objects.InstanceNUMACell(id=0, pcpuset={0}, memory_mb=512)])
        self.assertRaisesMessage(
            exception.ReservationConflict, 'not placed',
            reservations.apply_placed, 'h1', 'a', hosts.host_topology(),
            unplaced)

    def test_taken_pcpus_are_a_conflict(self):
        taken = reservations.apply_placed(
            'h1', 'a', hosts.host_topology(),
            _reservation('a', [0]).topology)
        self.assertRaises(exception.ReservationConflict,
                          reservations.apply_placed, 'h1', 'b', taken,
                          _reservation('b', [0]).topology)
