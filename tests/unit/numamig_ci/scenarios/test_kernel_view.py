"""The kernel-view checks of nested hosts, on canned kernel answers."""

import types

from numamig_ci.scenarios import kernel_view
from tests import base

UUID = '6a1e2b4c-0000-4000-8000-000000004e57'
GUEST = types.SimpleNamespace(uuid=UUID, name='ci-pages')
# numa_maps of a QEMU whose guest cell is bound to node 1, 2 MiB pages.
MAPS = (
    "55d0c0a00000 default file=/usr/bin/qemu-system-x86_64 mapped=1 N0=1 "
    "kernelpagesize_kB=4\n"
    "7f3a40000000 bind:1 file=/dev/hugepages/libvirt/qemu/1-ci-pages/"
    "qemu_back_mem.ram-node0 huge dirty=8 N1=8 kernelpagesize_kB=2048\n"
    "7f3a60000000 default anon=12 dirty=12 N0=7 N1=5 kernelpagesize_kB=4\n")


class FakeAgent:

    def __init__(self, maps=MAPS, threads=None):
        self.maps = maps
        self.threads = threads or {}

    def numa_maps(self, pid):
        return self.maps

    def numastat(self, pid):
        return 'Huge 16.00'

    def dumpxml(self, host, name, inactive):
        return ("<domain><name>ci-pages</name><numatune><memnode "
                "cellid='0' mode='strict' nodeset='1'/></numatune></domain>")

    def thread_affinity(self, pid):
        return self.threads


class FakeSession:

    def __init__(self, agent, xml=''):
        self.failures = []
        self.said = []
        deployment = types.SimpleNamespace(qemu_pid=lambda host, name: 42)
        self.backend = types.SimpleNamespace(
            agent_of=lambda host: agent, deployment=deployment,
            guests=lambda host: {UUID: 'ci-pages'},
            domain_xml=lambda host, uuid: xml,
            features=frozenset({'kernel_view'}))

    def fail(self, guest, host, element, expected, actual):
        self.failures.append((element, str(expected), str(actual)))

    def say(self, line):
        self.said.append(line)


class CountersTest(base.TestCase):

    def test_expected_after_a_move_between_nodes_of_one_kernel(self):
        before = {(0, 0, 2048): 64, (0, 1, 2048): 60}
        self.assertEqual({(0, 0, 2048): 72, (0, 1, 2048): 52},
                         kernel_view.expected_after(before, 2048, 8,
                                                    (0, 0), (0, 1)))
        self.assertEqual(before, kernel_view.expected_after(
            before, 2048, 8, None, None))

    def test_expected_after_a_move_between_kernels(self):
        before = {(0, 0, 2048): 64, (1, 0, 2048): 64, (1, 1, 2048): 64}
        self.assertEqual({(0, 0, 2048): 72, (1, 0, 2048): 64,
                          (1, 1, 2048): 56},
                         kernel_view.expected_after(before, 2048, 8,
                                                    (0, 0), (1, 1)))


    def test_pool_picks_one_page_size(self):
        counts = {(0, 1, 1048576): 0, (0, 0, 2048): 64,
                  (0, 0, 1048576): 1}
        self.assertEqual({(0, 0): 1, (0, 1): 0},
                         kernel_view.pool(counts, 1048576))
        self.assertEqual({}, kernel_view.pool(counts, 4))


class NumaMapsTest(base.TestCase):

    def test_huge_pages_counted_per_node_small_pages_ignored(self):
        s = FakeSession(FakeAgent())
        nodes, binds, pid = kernel_view.hugepage_nodes(s, 'h', GUEST)
        self.assertEqual(({1: 8}, {'1'}, 42), (nodes, binds, pid))

    def test_bound_where_expected_passes(self):
        s = FakeSession(FakeAgent())
        kernel_view.check_bound(s, GUEST, 'h', 1, 8)
        self.assertEqual([], s.failures)
        self.assertIn('Huge 16.00', s.said[0])

    def test_pages_on_another_node_fail(self):
        s = FakeSession(FakeAgent())
        kernel_view.check_bound(s, GUEST, 'h', 0, 8)
        self.assertEqual([('QEMU numa_maps huge pages per node', '{0: 8}',
                           '{1: 8}'),
                          ('QEMU numa_maps bind policy', 'bind:0', "['1']"),
                          ("virsh dumpxml <memnode cellid='0'>", '0', '1'),
                          ("virsh dumpxml --inactive <memnode cellid='0'>",
                           '0', '1')],
                         s.failures)

    def test_binds_of_a_two_cell_guest(self):
        # One backend per cell, the process itself bound to both nodes.
        maps = MAPS + ("7f3b00000000 bind:0 anon=3 N0=3 "
                       "kernelpagesize_kB=4\n"
                       "7f3c00000000 bind:0-1 anon=3 N0=3 "
                       "kernelpagesize_kB=4\n")
        s = FakeSession(FakeAgent(maps))
        kernel_view.check_binds(s, GUEST, 'h', [0, 1])
        self.assertEqual([], s.failures)

    def test_binds_elsewhere_fail(self):
        maps = MAPS + ("7f3b00000000 bind:0-1 anon=3 N0=3 "
                       "kernelpagesize_kB=4\n")
        s = FakeSession(FakeAgent(maps))
        kernel_view.check_binds(s, GUEST, 'h', [0])
        self.assertEqual([('QEMU numa_maps per-node bind policies', '[0]',
                           "['1']"),
                          ('QEMU numa_maps bind policies', 'within nodes 0',
                           "['0-1', '1']")], s.failures)


class EmulatorTest(base.TestCase):

    XML = ("<domain><name>ci-pages</name><cputune>"
           "<emulatorpin cpuset='2'/></cputune></domain>")

    def test_main_thread_on_emulatorpin_passes(self):
        s = FakeSession(FakeAgent(threads={'qemu-system-x86': ['2', '2'],
                                           'CPU 0/TCG': ['1']}), self.XML)
        kernel_view.check_emulator(s, GUEST, 'h')
        self.assertEqual([], s.failures)

    def test_main_thread_elsewhere_fails(self):
        s = FakeSession(FakeAgent(threads={'qemu-system-x86': ['2', '0-7']}),
                        self.XML)
        kernel_view.check_emulator(s, GUEST, 'h')
        self.assertEqual([('QEMU emulator thread Cpus_allowed_list',
                           '<emulatorpin> 2', "['2', '0-7']")], s.failures)
