"""JSON forms of hosts, requests and results."""

import copy
import json
import os

from numamig import exception
from numamig.numa import fit
from numamig.numa import hostjson
from tests import base

EXAMPLES = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'etc',
                        'numamig', 'examples')


def _cell(**overrides):
    cell = {'id': 0, 'cpus': '0-3', 'siblings': [[0, 2], [1, 3]],
            'memory_mb': 1024}
    cell.update(overrides)
    return cell


class HostJSONTest(base.TestCase):

    def test_defaults_all_dedicated_none_shared(self):
        host = hostjson.host_from_json({'cells': [_cell()]})
        self.assertEqual(({0, 1, 2, 3}, set()),
                         (host.cells[0].pcpuset, host.cells[0].cpuset))

    def test_shared_and_exclusions(self):
        host = hostjson.host_from_json({'cells': [_cell(
            cpus='0-7,^6-7', shared='0', pinned='1-2')]})
        cell = host.cells[0]
        self.assertEqual(({1, 2, 3, 4, 5}, {0}, {1, 2}),
                         (cell.pcpuset, cell.cpuset, cell.pinned_cpus))

    def test_round_trip(self):
        with open(os.path.join(EXAMPLES, 'host-2cell-smt.json')) as handle:
            data = json.load(handle)
        host = hostjson.host_from_json(data)
        self.assertEqual(host, hostjson.host_from_json(
            hostjson.host_to_json(host)))

    def test_errors_name_the_field(self):
        cases = [
            ({'cells': [_cell(pages=[{'size_kb': 3, 'total': 1}])]},
             "unknown page size 3 KiB"),
            ({'cells': [_cell(cpus='0-x')]}, "cells[0].cpus"),
            ({'cells': [_cell(memory_mb=-1)]}, "cells[0].memory_mb"),
            ({'cells': [_cell(colour='blue')]}, "unknown keys ['colour']"),
            ({'cells': [_cell(dedicated='0-5')]},
             "dedicated/shared CPUs [4, 5] are not in cpus"),
            ({'cells': [_cell(pinned='9')]}, "pinned CPUs [9]"),
            ({}, "missing keys ['cells']"),
        ]
        for data, fragment in cases:
            exc = self.assertRaises(exception.InvalidNUMAJSON,
                                    hostjson.host_from_json, data)
            self.assertIn(fragment, str(exc))


class RequestJSONTest(base.TestCase):

    def test_request_limits_and_page_size(self):
        data = {'vcpus': 2, 'memory_mb': 1024,
                'extra_specs': {'hw:cpu_policy': 'dedicated'},
                'limits': {'ram_allocation_ratio': 1.5},
                'pagesize_kb': 2048}
        before = copy.deepcopy(data)
        request, limits, pagesize = hostjson.request_from_json(data)
        self.assertEqual({0, 1}, request.cells[0].pcpuset)
        self.assertEqual(1.5, limits.ram_allocation_ratio)
        self.assertEqual(2048, pagesize)
        self.assertEqual(before, data)

    def test_bad_request(self):
        self.assertRaisesMessage(exception.InvalidNUMAJSON,
                                 "missing keys ['memory_mb']",
                                 hostjson.request_from_json, {'vcpus': 1})
        self.assertRaisesMessage(exception.InvalidNUMAJSON,
                                 "limits",
                                 hostjson.request_from_json,
                                 {'vcpus': 1, 'memory_mb': 1,
                                  'limits': {'cpu_allocation_ratio': 0}})

    def test_result_document(self):
        host = hostjson.host_from_json({'cells': [_cell(pinned='1')]})
        request, _, _ = hostjson.request_from_json({
            'vcpus': 2, 'memory_mb': 512,
            'extra_specs': {'hw:cpu_policy': 'dedicated',
                            'hw:cpu_realtime': 'yes',
                            'hw:cpu_realtime_mask': '^0'}})
        document = hostjson.result_to_json(fit.fit(host, request))
        self.assertEqual(
            {'fits': True, 'emulator_threads_policy': None,
             'realtime_vcpus': [1], 'realtime_priority': 1,
             'cells': [{'guest_cell': 0, 'host_cell': 0, 'vcpus': [0, 1],
                        'pinned_vcpus': [0, 1], 'memory_mb': 512,
                        'pagesize_kb': None, 'cpu_policy': 'dedicated',
                        'cpu_thread_policy': None,
                        'cpu_pinning': {'0': 0, '1': 2},
                        'emulator_pcpus': []}],
             'distance': {'cost': 0, 'excess': 0, 'reason':
                          'host cells 0: distance cost 0 (one guest cell: '
                          'no distance between guest cells)'}},
            document)

    def test_result_document_names_the_distance_cost(self):
        # Two sockets of two cells; cell 0 has one free pCPU, so the
        # spread order's first answer (1, 2) crosses sockets and the
        # nearest pair it fits is (2, 3).
        cells = [{'id': i, 'cpus': f'{4 * i}-{4 * i + 3}',
                  'memory_mb': 1024,
                  'distances': {str(j): 10 if i == j else
                                12 if i // 2 == j // 2 else 21
                                for j in range(4)}} for i in range(4)]
        cells[0]['pinned'] = '0-2'
        host = hostjson.host_from_json({'cells': cells})
        request, _, _ = hostjson.request_from_json({
            'vcpus': 4, 'memory_mb': 1024,
            'extra_specs': {'hw:cpu_policy': 'dedicated',
                            'hw:numa_nodes': '2'}})
        document = hostjson.result_to_json(fit.fit(host, request))
        self.assertEqual([2, 3], [cell['host_cell']
                                  for cell in document['cells']])
        self.assertEqual(12, document['distance']['cost'])
        self.assertEqual(0, document['distance']['excess'])
        self.assertIn('host cells 2, 3: distance cost 12',
                      document['distance']['reason'])


class UnknownKeysTest(base.TestCase):

    REQUEST = {'vcpus': 2, 'memory_mb': 1024,
               'extra_specs': {'hw:cpu_polcy': 'dedicated'}}

    def test_unknown_key_refused(self):
        self.assertRaises(exception.UnknownNUMASpec,
                          hostjson.request_from_json, self.REQUEST)

    def test_foreign_key_accepted_unread(self):
        request, _limits, _pagesize = hostjson.request_from_json(
            self.REQUEST, foreign_specs=('hw:cpu_polcy',))
        self.assertIsNone(request)
