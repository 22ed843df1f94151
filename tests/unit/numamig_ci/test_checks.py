"""The whitebox checks: each row breaks one thing a copied XML breaks.

Host under test (2 nodes, no SMT)::

    node 0  pCPUs 0-3   shared 0   dedicated 1-3
    node 1  pCPUs 4-7   shared 4   dedicated 5-7
"""

import copy

import testscenarios

from numamig import objects
from numamig_ci import checks
from tests import base

load_tests = testscenarios.load_tests_apply_scenarios

HOST = checks.HostConfig(
    'dst', frozenset({1, 2, 3, 5, 6, 7}), frozenset({0, 4}),
    {0: frozenset({0, 1, 2, 3}), 1: frozenset({4, 5, 6, 7})})


def record(pins=None, host_cell=1, floating=(), emulator=None,
           pagesize=None):
    pins = {0: 5, 1: 6} if pins is None else pins
    cell = objects.InstanceNUMACell(
        id=0, host_cell=host_cell, cpuset=set(floating),
        pcpuset=set(pins), memory_mb=1024, cpu_pinning=pins,
        pagesize=pagesize, cpuset_reserved=emulator)
    return objects.Instance(
        uuid='5a1e0000-aaaa-4bbb-8ccc-00000000a001', name='guest-1',
        vcpus=len(pins) + len(floating), memory_mb=1024,
        numa_topology=objects.InstanceNUMATopology(
            cells=[cell],
            emulator_threads_policy='isolate' if emulator else None))


def xml(pins="<vcpupin vcpu='0' cpuset='5'/><vcpupin vcpu='1' cpuset='6'/>",
        emulator='0,4', vcpu_cpuset='0,4', memnode='1', extra=''):
    cpuset = f" cpuset='{vcpu_cpuset}'" if vcpu_cpuset else ''
    emu = f"<emulatorpin cpuset='{emulator}'/>" if emulator else ''
    return (f"<domain type='test'><name>guest-1</name>"
            f"<vcpu placement='static'{cpuset}>2</vcpu>"
            f"<cputune>{pins}{emu}{extra}</cputune>"
            f"<numatune><memory mode='strict' nodeset='{memnode}'/>"
            f"<memnode cellid='0' mode='strict' nodeset='{memnode}'/>"
            f"</numatune><cpu><numa><cell id='0' cpus='0-1' "
            f"memory='1048576' unit='KiB'/></numa></cpu></domain>")


class CheckGuestTest(base.TestCase):

    scenarios = [
        ('recomputed', {'xml': xml(), 'record': record(), 'elements': []}),
        ('copied_pins_outside_dedicated', {
            'xml': xml(pins="<vcpupin vcpu='0' cpuset='4'/>"
                         "<vcpupin vcpu='1' cpuset='6'/>"),
            'record': record(),
            'elements': ["<vcpupin vcpu='0'>", "<vcpupin vcpu='0'>"]}),
        ('pin_not_the_recorded_one', {
            'xml': xml(pins="<vcpupin vcpu='0' cpuset='7'/>"
                         "<vcpupin vcpu='1' cpuset='6'/>"),
            'record': record(), 'elements': ["<vcpupin vcpu='0'>"]}),
        ('emulator_on_source_shared_set', {
            'xml': xml(emulator='0,8'), 'record': record(),
            'elements': ['<emulatorpin>']}),
        ('floating_cpuset_of_source', {
            'xml': xml(vcpu_cpuset='0,8'), 'record': record(),
            'elements': ['<vcpu cpuset>']}),
        ('memory_on_old_node', {
            'xml': xml(memnode='0'), 'record': record(),
            'elements': ["<memnode cellid='0'> nodeset",
                      "<numatune><memory> nodeset"]}),
        ('iothread_not_with_emulator', {
            'xml': xml(extra="<iothreadpin iothread='1' cpuset='5'/>"),
            'record': record(), 'elements': ["<iothreadpin iothread='1'>"]}),
        ('isolated_emulator', {
            'xml': xml(emulator='7'), 'record': record(emulator={7}),
            'elements': []}),
        ('isolated_emulator_on_a_vcpu_pin', {
            'xml': xml(emulator='6'), 'record': record(emulator={6}),
            'elements': ['<emulatorpin> (isolate)']}),
        ('floating_vcpu_on_node_shared_set', {
            'xml': xml(pins="<vcpupin vcpu='0' cpuset='5'/>"
                         "<vcpupin vcpu='1' cpuset='4'/>"),
            'record': record(pins={0: 5}, floating={1}), 'elements': []}),
        ('floating_vcpu_on_wrong_shared_set', {
            'xml': xml(pins="<vcpupin vcpu='0' cpuset='5'/>"
                         "<vcpupin vcpu='1' cpuset='0,4'/>"),
            'record': record(pins={0: 5}, floating={1}),
            'elements': ["<vcpupin vcpu='1'> (floating)"]}),
        ('huge_pages_dropped', {
            'xml': xml(), 'record': record(pagesize=2048),
            'elements': ["<hugepages><page nodeset='0'> size"]}),
    ]

    def test_check_guest(self):
        rec = copy.deepcopy(self.record)
        failures = checks.check_guest(rec, HOST, self.xml, 'live')
        self.assertEqual([f'live {e}' for e in self.elements],
                         [f.element for f in failures],
                         '\n'.join(map(str, failures)))
        for failure in failures:
            self.assertEqual(('guest-1', 'dst'),
                             (failure.guest, failure.host))
            self.assertNotEqual(failure.expected, failure.actual)
        self.assertEqual(self.record.numa_topology.cpu_pinning,
                         rec.numa_topology.cpu_pinning)


class HostChecksTest(base.TestCase):

    def test_disjoint_names_both_guests(self):
        from numamig_ci import domain
        placements = {'a': domain.parse(xml()), 'b': domain.parse(xml(
            pins="<vcpupin vcpu='0' cpuset='6'/>"
                 "<vcpupin vcpu='1' cpuset='7'/>"))}
        (failure,) = checks.check_disjoint(HOST, placements)
        self.assertEqual(('b', 'also pinned by guest a'),
                         (failure.guest, failure.actual))
        self.assertIn('pCPU 6', failure.element)

    def _topology(self, pinned):
        cells = [objects.HostNUMACell(
            id=node, cpuset=set(HOST.shared & cpus),
            pcpuset=set(HOST.dedicated & cpus),
            pinned_cpus=set(pinned & cpus), memory_mb=4096)
            for node, cpus in HOST.cells.items()]
        return objects.HostNUMATopology(cells=cells)

    def test_usage_is_the_union_of_records(self):
        self.assertEqual([], checks.check_usage(
            HOST, self._topology({5, 6}), [record()]))

    def test_usage_leaking_a_claim_fails(self):
        (failure,) = checks.check_usage(HOST, self._topology({5, 6, 7}),
                                        [record()])
        self.assertEqual(('reported usage: node 1 pinned_cpus', '5-6',
                          '5-7'), (failure.element,
                                   failure.expected.split()[-1],
                                   failure.actual))

    def test_topology_with_other_sets_fails(self):
        other = checks.HostConfig('dst', frozenset({2, 3, 5, 6, 7}),
                                  frozenset({0, 1, 4}), HOST.cells)
        failures = checks.check_topology(other, self._topology(set()))
        self.assertEqual(['reported node 0 pcpuset (dedicated)',
                          'reported node 0 cpuset (shared)'],
                         [f.element for f in failures])

    def test_same_sets_everywhere_warns(self):
        self.assertIsNotNone(checks.same_sets_warning([HOST, HOST]))
        other = checks.HostConfig('x', HOST.dedicated - {7},
                                  HOST.shared | {7}, HOST.cells)
        self.assertIsNone(checks.same_sets_warning([HOST, other]))
