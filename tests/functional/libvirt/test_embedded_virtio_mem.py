"""virtio-mem guests on the embedded tier (libvirt's test driver).

What the test driver shows: it accepts ``<memory model='virtio-mem'>``
devices with ``<maxMemory>``, keeps source (nodemask, page size) and
target (size, node, block, requested) through define, start and a
numamig-emulated migration, and reports ``<current>`` 0 for a running
guest (there is no guest driver). It has no updateDeviceFlags, so a
resize (reclaim) cannot be carried out here: the real tier does that.
"""

from numamig import exception
from numamig.virt.libvirt import migration_xml
from numamig.virt.libvirt import virtio_mem
from tests import base
from tests.fixtures import libvirt_embedded
from tests.fixtures import libvirt_guests as guests

SHARED = {0, 8, 4, 12}
_DEVICE = {'virtio_mem_size_mb': 512, 'virtio_mem_block_kb': 2048,
           'virtio_mem_requested_mb': 256}


def _topology(host_cells, pagesize=2048):
    return guests.topology(*[
        guests.cell(i, host_cell=host, vcpus=[i], memory_mb=512,
                    pagesize=pagesize, **_DEVICE)
        for i, host in enumerate(host_cells)])


class EmbeddedVirtioMemTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.src = self.useFixture(libvirt_embedded.EmbeddedHost(
            'hostA', 'numa-2cell-a.xml', cpu_shared_set=SHARED)).driver
        self.dst = self.useFixture(libvirt_embedded.EmbeddedHost(
            'hostB', 'numa-2cell-b.xml', cpu_shared_set=SHARED)).driver
        self.instance = guests.instance(vcpus=2, memory_mb=1024)
        self.src.spawn(self.instance, _topology([0, 1]))

    def _devices(self, drv, persistent=False):
        doc = migration_xml.parse_domain(
            drv.get_domain_xml(guests.UUID, persistent=persistent))
        return {cell: (el.findtext('source/nodemask'),
                       el.findtext('source/pagesize'))
                for cell, el in virtio_mem.device_elements(doc).items()}, \
            virtio_mem.read_devices(doc, migration_xml.kib)

    def test_running_guest_has_its_devices_and_current_zero(self):
        sources, sizes = self._devices(self.src)
        self.assertEqual({0: ('0', '2048'), 1: ('1', '2048')}, sources)
        self.assertEqual({0: (256, 0), 1: (256, 0)}, {
            cell: (f['virtio_mem_requested_mb'], f['virtio_mem_current_mb'])
            for cell, f in sizes.items()})
        topology = self.src.get_guest_topology(guests.UUID)
        # current 0 (no guest driver): the host holds what was requested.
        self.assertEqual([768, 768], [c.memory_held_mb
                                      for c in topology.cells])

    def test_emulated_migration_moves_each_device_with_its_cell(self):
        claimed = _topology([1, 0])
        info = self.dst.build_migrate_info(claimed,
                                           self.dst.get_host_topology())
        dest_xml = self.src.get_destination_xml(guests.UUID, info)
        self.dst.accept_emulated_migration(guests.UUID, dest_xml)
        self.src.destroy(guests.UUID)
        for persistent in (False, True):
            sources, sizes = self._devices(self.dst, persistent)
            self.assertEqual({0: ('1', '2048'), 1: ('0', '2048')}, sources)
            self.assertEqual({256}, {f['virtio_mem_requested_mb']
                                     for f in sizes.values()})

    def test_resize_is_refused_by_the_test_driver(self):
        # No updateDeviceFlags in the test driver: refused, nothing
        # changed; the real tier carries resizes out.
        exc = self.assertRaises(exception.HypervisorError,
                                self.src.resize_virtio_mem, guests.UUID,
                                {1: 128}, 1.0)
        self.assertIn('resize the virtio-mem device of guest cell 1',
                      str(exc))
        _, sizes = self._devices(self.src)
        self.assertEqual(256, sizes[1]['virtio_mem_requested_mb'])
