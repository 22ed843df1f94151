"""The conductor's defragmentation request (``request_of``): a guest's
``pci_passthrough:alias`` becomes device requests under the alias's
policy, and the planner then makes room only where a matching function
is free on the node of the cell it opens."""

from numamig import exception
from numamig import objects
from numamig.conductor import defragment
from numamig.numa import fit
from numamig.numa import pci
from numamig.numa import usage
from numamig.numa import views
from numamig.scheduler import defragment as defrag
from numamig.scheduler import drain
from tests import base
from tests.unit.numa import hosts as numa_hosts

ALIASES = pci.parse_aliases(
    ['{"name": "nic", "vendor_id": "8086", "product_id": "1572", '
     '"numa_policy": "required"}'])
SMALL = '6a1f0e2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b'
SPECS = {'hw:cpu_policy': 'dedicated', 'hw:numa_nodes': '1',
         pci.ALIAS_SPEC_KEY: 'nic:1'}


def _nic(host, node):
    return objects.HostPCIDevice(
        address=f'0000:{host:02x}:00.0', vendor_id='8086',
        product_id='1572', dev_type='type-PCI', numa_node=node)


def _host(index, nic_node):
    """Two cells of 4 pCPUs; a NIC on ``nic_node``."""
    return objects.HostNUMATopology(
        cells=[numa_hosts.make_cell(c, cores=4, threads=1, cells=2,
                                    memory_mb=4096) for c in range(2)],
        pci_devices=[_nic(index, nic_node)])


class RequestOfTest(base.TestCase):

    def test_the_alias_becomes_a_device_request_under_its_policy(self):
        request = defragment.request_of(4, 1024, SPECS, ALIASES)
        (asked,) = request.pci_requests
        self.assertEqual(('nic', 1, '1572', 'required'),
                         (asked.alias, asked.count, asked.product_id,
                          asked.numa_policy))

    def test_an_unknown_alias_is_bad_input(self):
        self.assertRaises(exception.InvalidNUMARequest,
                          defragment.request_of, 4, 1024,
                          dict(SPECS, **{pci.ALIAS_SPEC_KEY: 'gpu:1'}),
                          ALIASES)

    def test_room_is_made_on_the_node_of_the_device(self):
        """h0's NIC is on node 0, where a small guest sits; its node 1
        is empty but has no NIC; h1 has room and no NIC. The guest asking
        the NIC is only planned onto h0's node 0, after the small guest
        leaves it (a planner blind to devices answers h0's node 1 with
        no move)."""
        h0, h1 = _host(0, 0), _host(1, 0)
        h1.pci_devices = []
        small = numa_hosts.request([(1, 0, 512, None, None)])
        small.instance_uuid = SMALL
        placed = fit.fit(h0, small, strategy='pack').topology
        self.assertEqual(0, placed.cells[0].host_cell)
        h0 = usage.apply(h0, placed)
        candidates = [
            defrag.Candidate('h0', h0, (defrag.Resident(
                SMALL, SMALL, placed, small),)),
            defrag.Candidate('h1', h1, ())]
        request = defragment.request_of(4, 1024, SPECS, ALIASES)
        found = defrag.plan(
            request, candidates,
            [drain.Destination(h, views.HostView(t))
             for h, t in (('h0', h0), ('h1', h1))],
            max_moves=2, movable=candidates)
        self.assertTrue(found.found, found.reason)
        self.assertEqual('h0', found.host)
        self.assertEqual([(SMALL, 'h0', 'h1')],
                         [(m.guest.uuid, m.source, m.host)
                          for m in found.moves])
        (cell,) = found.placement.cells
        self.assertEqual(0, cell.host_cell)
        self.assertEqual(['0000:00:00.0'],
                         [d[1] for d in found.placement.pci.devices])
