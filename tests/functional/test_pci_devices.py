"""Guests with PCI devices on the embedded tier (issue 41 items 1-2).

A real conductor and compute agents on libvirt test-driver hosts whose
node devices (etc/numamig/hosts/test-node-pci.xml: two X710 VFs on node 1,
a GPU of unknown node) the [pci] device_spec admits. A guest asking for a
VF under the 'required' policy is placed on node 1 with a VF, whatever
the spread order prefers; the record names the function; a second guest
takes the other VF and a third is refused with the reason.
"""

from oslo_utils import uuidutils

from numamig import embedded
from numamig import exception
from numamig import objects
from tests import base
from tests.fixtures import deployment

SPEC = '{"vendor_id": "8086", "product_id": "154c"}'
ALIAS = ('{"name": "vf", "vendor_id": "8086", "product_id": "154c", '
         '"device_type": "type-VF"}')


class PCIDeviceGuestTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.flags(group='pci', device_spec=[SPEC], alias=[ALIAS])
        shared = frozenset({0, 8, 4, 12})
        hosts = (embedded.HostDefinition(
            'host-a', 'numa-2cell-a.xml', node_file='test-node-pci.xml',
            cpu_shared_set=shared),
            # Emptier (spread would take it first), without devices.
            embedded.HostDefinition('host-b', 'numa-2cell-b.xml',
                                    cpu_shared_set=shared))
        self.dep = self.useFixture(deployment.DeploymentFixture(
            'fake', hosts)).deployment
        self.api, self.ctxt = self.dep.api, self.dep.context

    def create(self, specs, host='host-a'):
        uuid = uuidutils.generate_uuid()
        return self.api.instance_create(self.ctxt, objects.Instance(
            uuid=uuid, name=f'guest-{uuid[:8]}', project_id='demo',
            vcpus=2, memory_mb=1024, extra_specs=specs), host)

    def test_the_scheduler_takes_the_host_with_the_devices(self):
        specs = {'pci_passthrough:alias': 'vf:2',
                 'hw:pci_numa_affinity_policy': 'preferred'}
        created = self.create(specs, host=None)
        record = self.api.instance_get(self.ctxt, created.uuid)
        self.assertEqual('host-a', record.host)
        self.assertEqual(['0000:81:02.0', '0000:81:02.1'],
                         [d.address for d in
                          record.numa_topology.pci_devices])
        # Both VFs held: the next one finds no host, and says why.
        error = self.assertRaises(exception.NumamigException, self.create,
                                  specs, None)
        self.assertIn('host-a', str(error))
        self.assertIn('needs 2, 0 free on the host', str(error))

    def test_required_vf_places_the_guest_on_its_node(self):
        specs = {'hw:cpu_policy': 'dedicated',
                 'pci_passthrough:alias': 'vf:1',
                 'hw:pci_numa_affinity_policy': 'required'}
        first = self.create(specs)
        placed = self.api.instance_get(self.ctxt, first.uuid).numa_topology
        self.assertEqual([1], [c.host_cell for c in placed.cells])
        self.assertEqual([('vf', '0000:81:02.0', 1, 0)],
                         [(d.alias, d.address, d.host_node, d.guest_cell)
                          for d in placed.pci_devices])
        second = self.create(specs)
        again = self.api.instance_get(self.ctxt, second.uuid).numa_topology
        self.assertEqual(['0000:81:02.1'],
                         [d.address for d in again.pci_devices])
        error = self.assertRaises(exception.NumamigException, self.create,
                                  specs)
        self.assertIn('PCI alias vf (required): needs 1, 0 free', str(error))
        # A guest without devices is untouched by them.
        plain = self.create({'hw:cpu_policy': 'dedicated'})
        self.assertEqual([], self.api.instance_get(
            self.ctxt, plain.uuid).numa_topology.pci_devices)

    def test_created_holding_its_function_and_refuse_keeps_it_home(self):
        # The guest numamig creates holds the function its claim chose
        # (a <hostdev> in its domain XML): what the source's unplug, and
        # the per-guest 'refuse', act on.
        specs = {'hw:cpu_policy': 'dedicated',
                 'pci_passthrough:alias': 'vf:1',
                 'numamig:device_migration': 'refuse'}
        guest = self.create(specs)
        xml = self.api.get_domain_xml(self.ctxt, guest.uuid)
        self.assertIn("<address domain='0x0000' bus='0x81' slot='0x02' "
                      "function='0x0'/>", xml)
        migration = self.dep.wait_for_migration(
            self.api.live_migrate_instance(self.ctxt, guest.uuid,
                                           'host-b').uuid)
        self.assertEqual('error', migration.status)
        self.assertIn("holds passed-through PCI device(s) 0000:81:02.0 and "
                      "its flavor numamig:device_migration is 'refuse'",
                      migration.error)
        record = self.api.instance_get(self.ctxt, guest.uuid)
        self.assertEqual(('host-a', ['0000:81:02.0']),
                         (record.host, [d.address for d in
                                        record.numa_topology.pci_devices]))
