"""Tests of the NodeResourceTopology export."""

import copy
import json

import testscenarios

from numamig import objects
from numamig.scheduler import nrt
from tests import base
from tests.unit.scheduler import hosts

_MIB = 1024 * 1024
_GIB = 1024 * _MIB


def _resources(zone):
    return {r['name']: (int(r['capacity']), int(r['allocatable']),
                        int(r['available'])) for r in zone['resources']}


class TestExport(base.TestCase):

    def _topology(self):
        """Two cells, 8 GiB each; cell 1 idle, without huge pages.

        cell 0: 4 dedicated CPUs (1 pinned) + 2 shared (3 vCPUs on them),
        a 2M pool of 512 pages (100 used, 12 reserved), a 1G pool of 2
        (1 used); 3072 MiB of guest memory: 1 GiB on the 1G page, 200 MiB
        on 2M pages, the rest on small pages.
        """
        topology = hosts.host_topology(cells=2, pcpus=4, shared=2,
                                       memory_mb=8192)
        cell = topology.cells[0]
        cell.pinned_cpus = {1}
        cell.cpu_usage = 3
        cell.memory_usage_mb = 3072
        cell.mempages = [
            objects.NUMAPagesTopology(size_kb=4, total=1048576, used=0),
            objects.NUMAPagesTopology(size_kb=2048, total=512, used=100,
                                      reserved=12),
            objects.NUMAPagesTopology(size_kb=1048576, total=2, used=1),
        ]
        return topology

    def test_document_shape(self):
        doc = nrt.export('cmp1', self._topology(),
                         fingerprint='pfp0v001ef46db3751d8e999')
        self.assertEqual('topology.node.k8s.io/v1alpha2', doc['apiVersion'])
        self.assertEqual('NodeResourceTopology', doc['kind'])
        self.assertEqual({'name': 'cmp1', 'annotations': {
            'topology.node.k8s.io/fingerprint':
                'pfp0v001ef46db3751d8e999'}}, doc['metadata'])
        self.assertIn({'name': 'topologyManagerPolicy',
                       'value': 'single-numa-node'}, doc['attributes'])
        self.assertEqual(['node-0', 'node-1'],
                         [z['name'] for z in doc['zones']])
        self.assertEqual({'Node'}, {z['type'] for z in doc['zones']})
        # Survives JSON unchanged: only plain types inside.
        self.assertEqual(doc, json.loads(json.dumps(doc)))

    def test_no_fingerprint_no_annotation(self):
        doc = nrt.export('cmp1', self._topology())
        self.assertEqual({'name': 'cmp1'}, doc['metadata'])

    def test_cpu(self):
        zone = nrt.export('cmp1', self._topology())['zones'][0]
        self.assertEqual((6, 4, 3), _resources(zone)['cpu'])
        self.assertIn({'name': 'cpus.shared', 'value': '2'},
                      zone['attributes'])
        self.assertIn({'name': 'cpus.shared.usage', 'value': '3'},
                      zone['attributes'])

    def test_hugepages(self):
        res = _resources(nrt.export('cmp1', self._topology())['zones'][0])
        two_m = 2 * _MIB
        self.assertEqual((512 * two_m, 500 * two_m, 400 * two_m),
                         res['hugepages-2Mi'])
        self.assertEqual((2 * _GIB, 2 * _GIB, _GIB), res['hugepages-1Gi'])

    def test_hugepages_always_listed(self):
        res = _resources(nrt.export('cmp1', self._topology())['zones'][1])
        self.assertEqual((0, 0, 0), res['hugepages-2Mi'])
        self.assertEqual((0, 0, 0), res['hugepages-1Gi'])

    def test_memory(self):
        res = _resources(nrt.export('cmp1', self._topology())['zones'][0])
        capacity = 8 * _GIB
        allocatable = capacity - 512 * 2 * _MIB - 2 * _GIB
        # 3072 MiB used, of which 1 GiB + 200 MiB come from huge pages.
        small_used = (3072 - 1024 - 200) * _MIB
        self.assertEqual((capacity, allocatable, allocatable - small_used),
                         res['memory'])

    def test_costs_from_distances(self):
        zone = nrt.export('cmp1', self._topology())['zones'][1]
        self.assertEqual([{'name': 'node-0', 'value': 21},
                          {'name': 'node-1', 'value': 10}], zone['costs'])

    def test_reported_costs_name_nothing_assumed(self):
        for zone in nrt.export('cmp1', self._topology())['zones']:
            self.assertNotIn(nrt.ASSUMED_COSTS,
                             [a['name'] for a in zone['attributes']])

    def test_missing_distances_exported_as_assumed(self):
        # libvirt gave no table: placement assumes 10/20, and the export
        # gives that table with every remote entry named assumed (the
        # local one too: libvirt reported none of them).
        topology = self._topology()
        for cell in topology.cells:
            cell.distances = {}
        zones = nrt.export('cmp1', topology)['zones']
        self.assertEqual([{'name': 'node-0', 'value': 20},
                          {'name': 'node-1', 'value': 10}], zones[1]['costs'])
        attributes = {a['name']: a['value'] for a in zones[1]['attributes']}
        self.assertEqual('node-0,node-1', attributes[nrt.ASSUMED_COSTS])

    def test_partial_table_marks_only_missing_entries(self):
        topology = hosts.host_topology(cells=3, pcpus=2)
        for cell in topology.cells:
            cell.distances = {other: 10 if other == cell.id else 12
                              for other in (0, 1, 2)}
        del topology.cells[2].distances[0]
        zones = nrt.export('cmp1', topology)['zones']
        self.assertEqual([10, 12, 12], [c['value'] for c in zones[0]['costs']])
        self.assertEqual([20, 12, 10], [c['value'] for c in zones[2]['costs']])
        marks = [{a['name']: a['value'] for a in z['attributes']}.get(
            nrt.ASSUMED_COSTS) for z in zones]
        self.assertEqual([None, None, 'node-0'], marks)

    def test_one_cell_without_table_has_no_costs(self):
        topology = hosts.host_topology(cells=1, pcpus=2)
        topology.cells[0].distances = {}
        zone = nrt.export('cmp1', topology)['zones'][0]
        self.assertNotIn('costs', zone)

    def test_zones_sorted_by_cell_id(self):
        topology = self._topology()
        topology.cells = list(reversed(topology.cells))
        doc = nrt.export('cmp1', topology)
        self.assertEqual(['node-0', 'node-1'],
                         [z['name'] for z in doc['zones']])

    def test_input_not_modified(self):
        topology = self._topology()
        before = copy.deepcopy(topology)
        nrt.export('cmp1', topology)
        self.assertEqual(before, topology)


class TestHugepagesResource(testscenarios.WithScenarios, base.TestCase):

    scenarios = [
        ('2m', {'size_kb': 2048, 'name': 'hugepages-2Mi'}),
        ('1g', {'size_kb': 1048576, 'name': 'hugepages-1Gi'}),
        ('64k', {'size_kb': 64, 'name': 'hugepages-64Ki'}),
        ('16g', {'size_kb': 16 * 1048576, 'name': 'hugepages-16Gi'}),
        ('512m', {'size_kb': 524288, 'name': 'hugepages-512Mi'}),
    ]

    def test_name(self):
        self.assertEqual(self.name, nrt.hugepages_resource(self.size_kb))
