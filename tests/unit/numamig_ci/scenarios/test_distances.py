"""The nearest-pair checks of nested hosts, on canned kernel answers."""

import types

from numamig_ci import checks
from numamig_ci import domain
from numamig_ci.scenarios import distances
from tests import base

UUID = '6a1e2b4c-0000-4000-8000-000000000d39'
GUEST = types.SimpleNamespace(uuid=UUID, name='ci-near')
# Pairs 0-1 and 2-3 close (12), the others 21.
TABLE = {0: {0: 10, 1: 12, 2: 21, 3: 21}, 1: {0: 12, 1: 10, 2: 21, 3: 21},
         2: {0: 21, 1: 21, 2: 10, 3: 12}, 3: {0: 21, 1: 21, 2: 12, 3: 10}}


def domain_xml(nodes, rows=None):
    """A guest of two cells on host ``nodes`` with ``rows`` distances."""
    cells = ''
    for cell in (0, 1):
        siblings = ''.join(f"<sibling id='{o}' value='{v}'/>"
                           for o, v in sorted((rows or {}).get(cell,
                                                               {}).items()))
        inner = f"<distances>{siblings}</distances>" if siblings else ''
        cells += (f"<cell id='{cell}' cpus='{cell}' memory='65536' "
                  f"unit='KiB'>{inner}</cell>")
    memnodes = ''.join(f"<memnode cellid='{c}' mode='strict' "
                       f"nodeset='{n}'/>" for c, n in enumerate(nodes))
    return (f"<domain><name>ci-near</name><uuid>{UUID}</uuid>"
            f"<vcpu>2</vcpu><numatune><memory mode='strict' nodeset="
            f"'{','.join(map(str, nodes))}'/>{memnodes}</numatune>"
            f"<cpu><numa>{cells}</numa></cpu></domain>")


class FakeAgent:

    def __init__(self, xml, dist=(), table=TABLE):
        self.xml = xml
        self.dist = list(dist)
        self.table = table

    def dumpxml(self, host, name, inactive):
        return self.xml

    def node_distances(self):
        return {str(a): {str(b): v for b, v in row.items()}
                for a, row in self.table.items()}

    def qemu_numa_dist(self, pid):
        return self.dist

    def numa_maps(self, pid):
        return ''.join(f"7f00{n}0000000 bind:{n} anon=1 N{n}=1 "
                       f"kernelpagesize_kB=4\n" for n in self.nodes())

    def nodes(self):
        return sorted(domain.parse(self.xml).memnodes[0]
                      | domain.parse(self.xml).memnodes[1])


class FakeSession:

    def __init__(self, agent, dedicated=frozenset({1, 2, 3})):
        self.failures = []
        self.said = []
        deployment = types.SimpleNamespace(qemu_pid=lambda host, name: 42)
        self.backend = types.SimpleNamespace(
            agent_of=lambda host: agent, deployment=deployment,
            guests=lambda host: {UUID: 'ci-near'},
            features=frozenset({'kernel_view'}))
        self.config = checks.HostConfig(
            name='h', dedicated=dedicated, shared=frozenset({0}),
            cells={n: frozenset({n}) for n in range(4)})

    def host(self, name):
        return self.config

    def fail(self, guest, host, element, expected, actual, note=''):
        self.failures.append((element, str(expected), str(actual)))

    def say(self, line):
        self.said.append(line)


class TableTest(base.TestCase):

    def test_told_is_the_hosts_row_between_the_cells_nodes(self):
        self.assertEqual({0: {0: 10, 1: 12}, 1: {0: 12, 1: 10}},
                         distances.told(TABLE, {0: 2, 1: 3}))
        asymmetric = {0: {0: 10, 1: 13}, 1: {0: 31, 1: 10}}
        self.assertEqual({0: {0: 10, 1: 31}, 1: {0: 13, 1: 10}},
                         distances.told(asymmetric, {0: 1, 1: 0}))

    def test_usable_pairs_need_dedicated_pcpus_on_both_nodes(self):
        s = FakeSession(FakeAgent(domain_xml((2, 3))))
        self.assertEqual({(1, 2): 21, (1, 3): 21, (2, 3): 12},
                         distances.usable_pairs(s, 'h', TABLE))

    def test_cell_distances_read_independently(self):
        rows = {0: {0: 10, 1: 12}, 1: {0: 12, 1: 10}}
        self.assertEqual(rows, domain.cell_distances(domain_xml((2, 3),
                                                                rows)))
        self.assertEqual({0: {}, 1: {}},
                         domain.cell_distances(domain_xml((2, 3))))


class NearestTest(base.TestCase):

    def test_nearest_pair_passes(self):
        s = FakeSession(FakeAgent(domain_xml((2, 3))))
        self.assertEqual({0: 2, 1: 3}, distances.check_nearest(
            s, GUEST, 'h', TABLE))
        self.assertEqual([], s.failures)
        self.assertIn('nodes 2, 3 (distance 12;', s.said[0])

    def test_a_far_pair_fails(self):
        s = FakeSession(FakeAgent(domain_xml((1, 2))))
        distances.check_nearest(s, GUEST, 'h', TABLE)
        self.assertEqual([('distance of its pair of host nodes',
                           '12 (the nearest usable pair)', '21')],
                         s.failures)

    def test_told_and_qemu_checks(self):
        rows = {0: {0: 10, 1: 12}, 1: {0: 12, 1: 10}}
        s = FakeSession(FakeAgent(domain_xml((2, 3), rows),
                                  dist=['0,1,12', '1,0,12']))
        distances.check_told(s, GUEST, 'h', rows, 'live')
        distances.check_qemu(s, GUEST, 'h', rows, 'at creation')
        distances.check_told_as_kernel(s, GUEST, 'h')
        self.assertEqual([], s.failures)
        # Another table than the one written: both checks fail.
        other = {0: {0: 10, 1: 13}, 1: {0: 13, 1: 10}}
        distances.check_told(s, GUEST, 'h', other, 'persistent')
        distances.check_qemu(s, GUEST, 'h', other, 'next start')
        self.assertEqual(['<cell><distances> (persistent)',
                          'QEMU -numa dist (next start)'],
                         [f[0] for f in s.failures])

    def test_no_distances_written_fails_the_kernel_check(self):
        s = FakeSession(FakeAgent(domain_xml((2, 3))))
        distances.check_told_as_kernel(s, GUEST, 'h')
        self.assertEqual(['<cell><distances> (live)'],
                         [f[0] for f in s.failures])
