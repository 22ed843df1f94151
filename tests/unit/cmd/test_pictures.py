"""Tests of numamig.cmd.pictures: the text the CLI draws placements in."""

from numamig import objects
from numamig.cmd import pictures
from tests import base


class PlacementLinesTest(base.TestCase):

    def _topology(self, devices):
        return objects.InstanceNUMATopology(
            cells=[objects.InstanceNUMACell(
                id=0, cpuset=set(), pcpuset={0, 1}, memory_mb=1024,
                host_cell=1, cpu_pinning={0: 5, 1: 13})],
            pci_devices=devices)

    def test_each_held_device_gets_a_line_with_its_node_and_cell(self):
        lines = pictures.placement_lines(self._topology([
            objects.InstancePCIDevice(alias='vf', address='0000:81:02.0',
                                      host_node=1, guest_cell=0),
            objects.InstancePCIDevice(alias='nic', address='0000:05:00.0',
                                      host_node=None, guest_cell=None)]))
        self.assertEqual(
            ["guest cell 0 -> host cell 1: 1024 MiB, small pages, "
             "vCPU 0->5 1->13",
             "PCI vf 0000:81:02.0 on host node 1 (guest cell 0)",
             "PCI nic 0000:05:00.0 on unknown node (no guest cell on that "
             "node)"], lines)

    def test_a_guest_without_devices_has_no_device_line(self):
        lines = pictures.placement_lines(self._topology([]))
        self.assertEqual(1, len(lines))
