"""The embedded tier: LibvirtDriver on the libvirt test driver.

Domain XML goes through the real libvirt library; migration is emulated
(the destination defines and starts the rewritten XML, the source
forgets the guest). Hosts are 2 cells x 4 cores x 2 threads, shared
pCPUs 0,8 (cell 0) and 4,12 (cell 1)::

    host A: cell 0 [0-3,8-11]  cell 1 [4-7,12-15]   guest on cell 0
    host B: cell 0 [0-3,8-11]  cell 1 [4-7,12-15]   claim on cell 1
"""

import fixtures

from numamig import exception
from numamig import objects
from numamig.numa import pci
from numamig.virt.libvirt import driver
from tests import base
from tests import libvirt_settings
from tests.fixtures import libvirt_caps
from tests.fixtures import libvirt_embedded
from tests.fixtures import libvirt_guests as guests
from tests.unit.virt.libvirt import test_nodedev

SHARED = {0, 8, 4, 12}


def _source_topology():
    return guests.topology(
        guests.cell(0, host_cell=0, vcpus=[0, 1, 2], pins={0: 1, 1: 9},
                    pagesize=2048, realtime_vcpus={1}))


def _claimed_topology():
    return guests.topology(
        guests.cell(0, host_cell=1, vcpus=[0, 1, 2], pins={0: 5, 1: 13},
                    pagesize=2048, realtime_vcpus={1}))


class EmbeddedMigrationTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.src = self.useFixture(libvirt_embedded.EmbeddedHost(
            'hostA', 'numa-2cell-a.xml', cpu_shared_set=SHARED)).driver
        self.dst = self.useFixture(libvirt_embedded.EmbeddedHost(
            'hostB', 'numa-2cell-b.xml', cpu_shared_set=SHARED)).driver
        self.instance = guests.instance(vcpus=3, memory_mb=1024)
        self.src.spawn(self.instance, _source_topology())

    def test_hosts_are_independent_and_typed(self):
        self.assertEqual({guests.UUID: 'guest-1'}, self.src.list_guests())
        self.assertEqual({}, self.dst.list_guests())
        self.assertFalse(self.src.supports_native_migration)
        self.assertEqual('test', self.src.hypervisor_type)

    def test_spawned_guest_reads_back_as_placed(self):
        self.assertEqual(
            guests.canonical(_source_topology()),
            guests.canonical(self.src.get_guest_topology(guests.UUID)))

    def test_emulated_migration_moves_guest_with_new_placement(self):
        info = self.dst.build_migrate_info(_claimed_topology(),
                                           self.dst.get_host_topology())
        dest_xml = self.src.get_destination_xml(guests.UUID, info)
        result = self.dst.accept_emulated_migration(guests.UUID, dest_xml)
        self.src.destroy(guests.UUID)

        self.assertTrue(result.emulated)
        self.assertEqual({}, self.src.list_guests())
        self.assertEqual(
            guests.canonical(_claimed_topology()),
            guests.canonical(self.dst.get_guest_topology(guests.UUID)))
        persistent = self.dst.get_domain_xml(guests.UUID, persistent=True)
        self.assertIn("<vcpupin vcpu='0' cpuset='5'/>", persistent)
        # Floating vCPU 2 runs on the shared pCPUs of host cell 1.
        self.assertIn("<vcpupin vcpu='2' cpuset='4,12'/>", persistent)

    def test_destination_xml_without_info_is_source_xml(self):
        self.assertEqual(self.src.get_domain_xml(guests.UUID),
                         self.src.get_destination_xml(guests.UUID, None))

    def test_native_migration_refused(self):
        self.assertRaisesMessage(
            exception.MigrationNotSupported, 'test driver cannot migrate',
            self.src.live_migrate, guests.UUID, '<domain/>', None)

    def test_accept_refuses_other_instance(self):
        xml = self.src.get_domain_xml(guests.UUID)
        self.assertRaisesMessage(
            exception.DomainXMLError, 'is not the migrating instance',
            self.dst.accept_emulated_migration,
            '5a1e0000-aaaa-4bbb-8ccc-0000000000ff', xml)
        self.assertEqual({}, self.dst.list_guests())

    def test_missing_guest(self):
        missing = '5a1e0000-aaaa-4bbb-8ccc-0000000000ff'
        self.assertRaises(exception.InstanceNotFound,
                          self.src.get_domain_xml, missing)
        # Destroying a guest that is not there is not an error.
        self.src.destroy(missing)

    def test_spawn_refused_leaves_nothing(self):
        bad = guests.topology(guests.cell(0, host_cell=7, vcpus=[0]))
        other = guests.instance(vcpus=1, memory_mb=1024,
                                uuid='5a1e0000-aaaa-4bbb-8ccc-000000000002',
                                name='guest-2')
        self.assertRaises(exception.MigrationPreCheckError,
                          self.dst.spawn, other, bad)
        self.assertEqual({}, self.dst.list_guests())

    def test_no_running_migration_to_abort(self):
        self.assertRaises(exception.NoRunningMigration,
                          self.src.live_migration_abort, guests.UUID)
        self.assertRaises(exception.NoRunningMigration,
                          self.src.live_migration_force_complete,
                          guests.UUID)


class InitHostTestCase(base.TestCase):

    def _driver(self, caps_file, **kwargs):
        drv = driver.LibvirtDriver(libvirt_settings.host(
            host='hostA', uri=f'test://{libvirt_embedded.TEST_NODE}',
            capabilities_file=caps_file, **kwargs))
        self.addCleanup(drv.cleanup_host)
        return drv

    def test_pci_node_devices_are_reported_as_the_allow_list_admits(self):
        """The test driver's node devices (a node file's <device>s, as
        virsh nodedev-dumpxml writes them) become the host's PCI
        functions, with each cell's socket."""
        temp = self.useFixture(fixtures.TempDir())
        caps = temp.join('caps.xml')
        with open(caps, 'w') as f:
            f.write(libvirt_caps.caps_xml(cells=2, cores=2, threads=1))
        node = temp.join('node.xml')
        with open(node, 'w') as f:
            f.write('<node>' + ''.join(
                text.replace('<path>', '<!--').replace('</path>', '-->')
                for text in (test_nodedev.PF, test_nodedev.VF,
                             test_nodedev.PLAIN_NO_NODE)) + '</node>')
        drv = driver.LibvirtDriver(libvirt_settings.host(
            host='hostA', uri=f'test://{node}', capabilities_file=caps,
            pci_device_spec=pci.parse_device_spec(
                ['{"vendor_id": "8086", "product_id": "154c"}',
                 '{"address": "0000:05:00.*"}'])))
        self.addCleanup(drv.cleanup_host)
        drv.init_host('hostA')
        topology = drv.get_host_topology()
        self.assertEqual([('0000:05:00.0', None, 'type-PCI'),
                          ('0000:81:02.1', 1, 'type-VF')],
                         [(d.address, d.numa_node, d.dev_type)
                          for d in topology.pci_devices])
        self.assertEqual([0, 1], [c.socket for c in topology.cells])

    def test_cpu_the_host_lacks(self):
        path = self.useFixture(fixtures.TempDir()).join('caps.xml')
        with open(path, 'w') as f:
            f.write(libvirt_caps.caps_xml(cells=1, cores=2, threads=1))
        drv = self._driver(path, cpu_dedicated_set=frozenset({0, 1, 2}))
        self.assertRaisesMessage(
            exception.InvalidConfiguration,
            'CPUs 2 are not online CPUs of host hostA', drv.init_host,
            'hostA')

    def test_missing_capabilities_file(self):
        drv = self._driver('/nonexistent/caps.xml')
        self.assertRaisesMessage(exception.InvalidConfiguration,
                                 'capabilities_file: cannot read',
                                 drv.init_host, 'hostA')

    def test_test_driver_without_capabilities_file(self):
        drv = self._driver(None)
        self.assertRaisesMessage(exception.CapabilitiesError,
                                 'capabilities_file', drv.init_host, 'hostA')

    def _caps_file(self, xml):
        path = self.useFixture(fixtures.TempDir()).join('caps.xml')
        with open(path, 'w') as f:
            f.write(xml)
        return path

    def test_no_distance_table_is_said_once_and_assumed(self):
        # libvirt on some hosts (no SLIT) gives cells without <distances>.
        xml = libvirt_caps.caps_xml(cells=2, cores=2, threads=1)
        bare = '\n'.join(line for line in xml.splitlines()
                         if 'distances>' not in line and 'sibling id=' not in
                         line) + '\n'
        path = self._caps_file(bare)
        logs = self.useFixture(fixtures.FakeLogger(
            name='numamig.virt.libvirt.driver'))
        drv = self._driver(path)
        drv.init_host('hostA')
        self.assertEqual(1, logs.output.count('NUMA distance table'))
        self.assertIn('libvirt gives no NUMA distance table (4 of 4 entries '
                      'missing); numamig assumes local 10, remote 20',
                      logs.output)
        self.assertEqual([{}, {}], [c.distances for c in
                                    drv.get_host_topology().cells])
        # Nothing changed: nothing to report, nothing said again.
        self.assertIsNone(drv.refresh_distances())
        self.assertEqual(1, logs.output.count('NUMA distance table'))
        # The table appears (libvirt restarted with it): re-reported.
        with open(path, 'w') as f:
            f.write(xml)
        changed = drv.refresh_distances()
        self.assertEqual([{0: 10, 1: 21}, {0: 21, 1: 10}],
                         [c.distances for c in changed.cells])
        self.assertEqual(changed.cells[0].distances,
                         drv.get_host_topology().cells[0].distances)
        self.assertIn('the NUMA distance table changed', logs.output)
        self.assertIsNone(drv.refresh_distances())

    def test_a_complete_table_says_nothing(self):
        path = self._caps_file(libvirt_caps.caps_xml(cells=2, cores=2,
                                                     threads=1))
        logs = self.useFixture(fixtures.FakeLogger(
            name='numamig.virt.libvirt.driver'))
        self._driver(path).init_host('hostA')
        self.assertNotIn('distance', logs.output)

    def test_topology_is_a_copy(self):
        drv = self.useFixture(libvirt_embedded.EmbeddedHost('hostA')).driver
        topo = drv.get_host_topology()
        topo.cells[0].pinned_cpus = {1}
        self.assertEqual(set(), drv.get_host_topology().cells[0].pinned_cpus)
        self.assertIsInstance(topo, objects.HostNUMATopology)

    def test_not_initialised(self):
        drv = driver.LibvirtDriver(libvirt_settings.host(host='h'))
        self.assertRaisesMessage(exception.HypervisorError,
                                 'init_host() has not run',
                                 drv.get_host_topology)
        self.assertRaisesMessage(exception.HypervisorError,
                                 'init_host() has not run', drv.list_guests)
