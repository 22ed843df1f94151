"""Cases the differential fuzzer (benchmarks/fuzz_fit.py) found, as data.

``data/nova_cases.json`` holds each case as HOST.json and REQUEST.json
documents (numa-fit.rst) with Nova 34's answer, recorded from Nova itself
(benchmarks/nova_oracle.py), so no Nova is needed here. Two groups:

- ``fixed: ...``: numamig disagreed with Nova on main (issue 16: ``^``
  masks, pinned memory overcommit); it must now give Nova's answer.
- an intended difference (doc/source/numa-fit.rst, "Comparing with
  Nova"): numamig must still differ from Nova, the way the docs say.

``data/nova_device_cases.json`` holds guests asking PCI devices by alias
(``benchmarks/fuzz_fit.py --devices --record``), each with Nova 34's
decision from its own ``PciDeviceStats`` and NUMA fit: ``agree`` cases
must keep Nova's decision, ``fixed: ...`` ones (the ``socket`` policy,
release 2) must now give it, intended ones (doc/source/devices.rst,
"Comparing with Nova") must still differ.
"""

import collections
import json
import os

import testscenarios

from numamig import exception
from numamig.numa import fit
from numamig.numa import hostjson
from tests import base

load_tests = testscenarios.load_tests_apply_scenarios

with open(os.path.join(os.path.dirname(__file__), 'data',
                       'nova_cases.json')) as _handle:
    _CASES = json.load(_handle)
with open(os.path.join(os.path.dirname(__file__), 'data',
                       'nova_device_cases.json')) as _handle:
    _DEVICE_CASES = json.load(_handle)


def answer(host_doc, request_doc):
    """numamig's answer in the terms the data records Nova's."""
    try:
        request, limits, _ = hostjson.request_from_json(request_doc)
    except exception.InvalidNUMARequest as exc:
        return {'error': type(exc).__name__}
    cells = request.cells if request else []
    fits = (fit.fit(hostjson.host_from_json(host_doc), request, limits).fits
            if request else None)
    return {'pinned': [sorted(c.pcpuset) for c in cells],
            'floating': [sorted(c.cpuset) for c in cells],
            'realtime': sorted(set().union(*(c.realtime_vcpus
                                             for c in cells))),
            'isolated_emulator': bool(
                request and request.emulator_threads_policy == 'isolate'),
            'cpu_thread_policy': [c.cpu_thread_policy if c.pcpuset else None
                                  for c in cells],
            'fits': fits}


def nova_answer(recorded):
    """Nova's recorded answer in the same terms."""
    if 'error' in recorded:
        return {'error': True}
    return {'pinned': recorded['pinned'], 'floating': recorded['floating'],
            'realtime': recorded['realtime'],
            'isolated_emulator':
                recorded['emulator_threads_policy'] == 'isolate',
            'cpu_thread_policy': [
                policy if pinned else None for policy, pinned in
                zip(recorded['cpu_thread_policy'], recorded['pinned'],
                    strict=True)],
            'fits': recorded['fits']}


def _comparable(ours, nova):
    """Both errors compare equal whatever the exception's name."""
    if 'error' in ours and 'error' in nova:
        return True, True
    return ours, nova


class NovaCaseTest(testscenarios.WithScenarios, base.TestCase):
    scenarios = [(case['name'], {'case': case}) for case in _CASES]

    def test_case(self):
        ours = answer(self.case['host'], self.case['request'])
        mine, theirs = _comparable(ours, nova_answer(self.case['nova']))
        if self.case['group'].startswith('fixed: '):
            self.assertEqual(theirs, mine)
        else:
            self.assertNotEqual(theirs, mine, self.case['group'])


class DataTest(base.TestCase):

    def test_every_fix_and_family_has_a_case(self):
        groups = {case['group'] for case in _CASES}
        for group in ('fixed: caret dedicated mask',
                      'fixed: caret realtime mask',
                      'fixed: pinned memory overcommit'):
            self.assertIn(group, groups)
        self.assertGreaterEqual(len(groups), 15)


def device_decision(host_doc, request_doc):
    """numamig's decision in the terms nova_device_cases.json records
    Nova's: 'error', whether the guest fits, None for no NUMA fit."""
    try:
        request, limits, _ = hostjson.request_from_json(request_doc)
    except exception.InvalidNUMARequest:
        return 'error'
    if request is None:
        return None
    return fit.fit(hostjson.host_from_json(host_doc), request, limits).fits


class NovaDeviceCaseTest(testscenarios.WithScenarios, base.TestCase):
    scenarios = [(case['name'], {'case': case}) for case in _DEVICE_CASES]

    def test_case(self):
        ours = device_decision(self.case['host'], self.case['request'])
        group = self.case['group']
        if group == 'agree' or group.startswith('fixed: '):
            self.assertEqual(self.case['nova'], ours, group)
        else:
            self.assertNotEqual(self.case['nova'], ours, group)


class DeviceDataTest(base.TestCase):

    def test_every_device_group_has_cases(self):
        groups = collections.Counter(
            (case['group'], case['what']) for case in _DEVICE_CASES)
        for wanted in (('agree', 'both fit'), ('agree', 'neither fits'),
                       ('agree', 'both fit (Nova: no guest node)'),
                       ('intended: a PF and its own VFs', 'only Nova fits'),
                       ('intended: devices alone get one guest node',
                        'only Nova fits')):
            self.assertGreaterEqual(groups[wanted], 5, wanted)
        fixed = [g for g, _ in groups if g.startswith('fixed: ')]
        self.assertTrue(fixed)
        # Every case asks devices, under every policy between them.
        policies = set()
        for case in _DEVICE_CASES:
            request = case['request']
            self.assertIn('pci_passthrough:alias', request['extra_specs'])
            policies.update(alias.get('numa_policy')
                            for alias in request['pci_aliases'])
        self.assertLessEqual({'required', 'legacy', 'preferred', 'socket'},
                             policies)
