"""Tests of numamig.compute.guest_cpus: the guests' CPUs in the reports."""

from unittest import mock

from numamig import cpumodel
from numamig.compute import guest_cpus
from tests import base

PKU = cpumodel.GuestCPU('host-model', 'Icelake-Server',
                        frozenset({'pku', 'avx512f'}), frozenset({'mpx'}))


class GuestCPUsTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.driver = mock.Mock()
        self.driver.guest_cpu.side_effect = lambda uuid: {
            'g1': PKU, 'g2': cpumodel.GuestCPU()}.get(uuid)
        self.cpus = guest_cpus.GuestCPUs()

    def test_each_guest_is_read_once(self):
        first = self.cpus.current(self.driver, {'g1', 'g2'})
        self.assertEqual([('g1', 'host-model', ['avx512f', 'pku'],
                           ['mpx']), ('g2', None, [], [])],
                         [(e.instance_uuid, e.mode, e.features, e.disabled)
                          for e in first])
        self.assertEqual(PKU, first[0].guest_cpu())
        for entry in first:
            entry.validate()
        self.cpus.current(self.driver, {'g1', 'g2'})
        self.assertEqual(2, self.driver.guest_cpu.call_count)

    def test_a_guest_the_driver_cannot_tell_is_left_out_not_asked_again(self):
        self.assertEqual([], self.cpus.current(self.driver, {'g3'}))
        self.cpus.current(self.driver, {'g3'})
        self.assertEqual(1, self.driver.guest_cpu.call_count)

    def test_a_failed_read_is_tried_again_at_the_next_report(self):
        self.driver.guest_cpu.side_effect = [RuntimeError('no domain'), PKU]
        self.assertEqual([], self.cpus.current(self.driver, {'g1'}))
        self.assertEqual(['g1'], [e.instance_uuid for e in
                                  self.cpus.current(self.driver, {'g1'})])

    def test_a_guest_that_left_or_was_forgotten_is_read_again(self):
        self.cpus.current(self.driver, {'g1'})
        self.cpus.current(self.driver, set())
        self.cpus.current(self.driver, {'g1'})
        self.cpus.forget('g1')
        self.cpus.current(self.driver, {'g1'})
        self.assertEqual(3, self.driver.guest_cpu.call_count)
