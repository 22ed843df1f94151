"""The nested host's layout and the QEMU command line it becomes."""

import os
import signal
import subprocess
import sys

import fixtures

from numamig_ci.nested import vm
from tests import base


class LayoutTest(base.TestCase):

    def test_default_is_two_nodes_of_three_smt_cores(self):
        layout = vm.Layout()
        self.assertEqual(2, layout.nodes)
        self.assertEqual((0, 1, 2, 3, 4, 5), layout.node_cpus(0))
        self.assertEqual((6, 7, 8, 9, 10, 11), layout.node_cpus(1))

    def test_default_has_1g_pages_where_aligned_blocks_are_free(self):
        layout = vm.Layout()
        layout.check()
        self.assertEqual((4, 1), layout.pages_1g)
        # Small pages per node at least as before the 1 GiB pages.
        for node in range(layout.nodes):
            self.assertLessEqual(1792, layout.memory_mb[node]
                                 - 2 * layout.pages_2m[node]
                                 - vm.GIB_MB * layout.pages_1g[node])

    def test_node_0_needs_room_for_1g_pages_beyond_the_low_range(self):
        # 4096 MiB took one page only: Linux put the other on node 1.
        self.assertRaisesMessage(
            ValueError, 'node 0: 2 x 1 GiB pages need at least 4608 MiB '
                        "there (q35's low 2 GiB hold none), not 4096",
            vm.Layout.parse, 'memory=4096:3072,pages_1g=2:1')
        self.assertEqual((1, 1), vm.Layout.parse(
            'memory=3584:2048,pages_2m=0:0,pages_1g=1:1').pages_1g)

    def test_parse_with_memory_asks_no_1g_pages(self):
        layout = vm.Layout.parse('memory=2048:2048')
        self.assertEqual((128, 128), layout.pages_2m)
        self.assertEqual((0, 0), layout.pages_1g)
        self.assertEqual((4, 1), vm.Layout.parse('cores=2').pages_1g)

    def test_parse_fills_per_node_defaults_for_more_nodes(self):
        layout = vm.Layout.parse('cores=1,threads=1,memory=3072:2048:2048,'
                                 'pages_2m=64:64:0')
        self.assertEqual(3, layout.nodes)
        self.assertEqual((64, 64, 0), layout.pages_2m)
        self.assertEqual((0, 0, 0), layout.pages_1g)
        self.assertEqual((2,), layout.node_cpus(2))

    def test_parse_refuses_unknown_keys_and_mismatched_nodes(self):
        self.assertRaisesMessage(ValueError, "unknown layout key 'sockets'",
                                 vm.Layout.parse, 'sockets=2')
        self.assertRaisesMessage(ValueError, 'pages_2m has 1 entries for 2',
                                 vm.Layout.parse, 'pages_2m=64')

    def test_distances_parsed_row_by_row(self):
        layout = vm.Layout.parse(
            'cores=1,threads=1,memory=1024:1024:1024:1024,pages_2m=0:0:0:0,'
            'distances=10:12:21:21:12:10:21:21:21:21:10:12:21:21:12:10')
        self.assertEqual((12, 21, 12), (layout.distance(0, 1),
                                        layout.distance(1, 2),
                                        layout.distance(3, 2)))
        self.assertIsNone(vm.Layout().distance(0, 1))

    def test_distances_refused_where_qemu_or_linux_would(self):
        two = 'memory=1024:1024,pages_2m=0:0,distances='
        for table, said in (('10:21:21', '3 entries, not 2 x 2'),
                            ('11:21:21:10', 'node 0 to itself must be 10'),
                            ('10:10:21:10', '0 -> 1 must be within 11-255'),
                            ('10:21:256:10', '1 -> 0 must be within')):
            self.assertRaisesMessage(ValueError, said, vm.Layout.parse,
                                     two + table)

    def test_pages_must_leave_memory_to_the_node(self):
        self.assertRaisesMessage(
            ValueError, 'node 1: 1024 MiB of huge pages leave',
            vm.Layout.parse, 'memory=4096:1024,pages_2m=0:0,pages_1g=1:1')


class CommandLineTest(base.TestCase):

    def machine(self, layout):
        return vm.NestedVM(layout, '/img', '/code', '/state', '/caps',
                           ports=2)

    def test_one_socket_and_memory_backend_per_node(self):
        argv = ' '.join(self.machine(vm.Layout()).qemu_argv())
        self.assertIn('-smp 12,sockets=2,cores=3,threads=2', argv)
        self.assertIn('-numa node,nodeid=1,cpus=6-11,memdev=mem1', argv)
        self.assertIn('memory-backend-ram,id=mem0,size=6656M', argv)
        self.assertIn('-m 9728M', argv)
        self.assertIn('file=/img/root.img,if=virtio,format=raw,snapshot=on',
                      argv)

    def test_agent_and_libvirtd_ports_forwarded_from_loopback(self):
        machine = self.machine(vm.Layout())
        argv = ' '.join(machine.qemu_argv())
        self.assertIn(f'hostfwd=tcp:127.0.0.1:{machine.agent_port}-'
                      f'10.0.2.15:{vm.AGENT_PORT}', argv)
        for port in machine.ports:     # the same number inside
            self.assertIn(f'hostfwd=tcp:127.0.0.1:{port}-10.0.2.15:{port}',
                          argv)
        self.assertIn('mount_tag=numamig,security_model=none,id=numamig,'
                      'readonly=on', argv)

    def test_kernel_reserves_1g_pages_per_node_only_when_asked(self):
        plain = self.machine(vm.Layout.parse(
            'memory=2048:2048')).kernel_cmdline()
        self.assertIn('numamig.hp2m=128,128', plain)
        self.assertNotIn('hugepagesz=1G', plain)
        self.assertIn('hugepagesz=1G hugepages=0:4,1:1',
                      self.machine(vm.Layout()).kernel_cmdline())
        big = self.machine(vm.Layout.parse(
            'memory=4096:2048,pages_1g=1:1')).kernel_cmdline()
        self.assertIn('hugepagesz=1G hugepages=0:1,1:1', big)

    def test_distance_table_given_to_qemu_pair_by_pair(self):
        layout = vm.Layout.parse('memory=1024:1024:1024,pages_2m=0:0:0,'
                                 'distances=10:12:31:12:10:31:32:31:10')
        argv = ' '.join(self.machine(layout).qemu_argv())
        self.assertIn('-numa dist,src=0,dst=2,val=31', argv)
        self.assertIn('-numa dist,src=2,dst=0,val=32', argv)
        self.assertEqual(6, argv.count('-numa dist,'))
        # No table: QEMU's default, no dist argument at all.
        self.assertNotIn('dist,', ' '.join(
            self.machine(vm.Layout()).qemu_argv()))

    def test_kvm_machine_has_an_amd_cpu_with_emulated_svm(self):
        layout = vm.Layout.parse('cores=2,threads=1,memory=2048:2048,'
                                 'pages_2m=0:0,kvm=1')
        self.assertEqual(1, layout.kvm)
        argv = self.machine(layout).qemu_argv()
        self.assertEqual('max,vendor=AuthenticAMD',
                         argv[argv.index('-cpu') + 1])
        plain = self.machine(vm.Layout()).qemu_argv()
        self.assertEqual('max,vendor=GenuineIntel',
                         plain[plain.index('-cpu') + 1])

    def test_a_named_cpu_model_replaces_the_default(self):
        layout = vm.Layout.parse('cores=2,threads=1,memory=2048,'
                                 'pages_2m=0,kvm=1,cpu=opteron-g3')
        argv = self.machine(layout).qemu_argv()
        self.assertEqual('Opteron_G3,+svm', argv[argv.index('-cpu') + 1])
        self.assertEqual('Nehalem', vm.Layout.parse('cpu=nehalem').qemu_cpu)
        self.assertRaisesMessage(ValueError, "unknown CPU 'pentium'",
                                 vm.Layout.parse, 'cpu=pentium')

    def test_devices_behind_an_expander_bridge_on_their_node(self):
        layout = vm.Layout.parse('cores=2,threads=1,memory=2048:2048,'
                                 'pages_2m=0:0,kvm=1,devices=2')
        self.assertEqual(('0000:81:00.0', '0000:82:00.0'),
                         layout.device_addresses())
        machine = self.machine(layout)
        argv = machine.qemu_argv()
        text = ' '.join(argv)
        self.assertEqual('q35,kernel-irqchip=split',
                         argv[argv.index('-machine') + 1])
        self.assertIn('-device intel-iommu,intremap=on -device pxb-pcie,'
                      'id=pxb1,bus_nr=128,numa_node=1,bus=pcie.0', text)
        self.assertEqual(2, text.count('e1000e,bus=pxbrp'))
        self.assertIn('intel_iommu=on', machine.kernel_cmdline())
        # Every other PCI device names pcie.0 (the bridge refuses them).
        for device in ('virtio-blk-pci,', 'virtio-net-pci,',
                       'virtio-9p-pci,'):
            for value in (v for v in argv if v.startswith(device)):
                self.assertTrue(value.endswith(',bus=pcie.0'), value)
        self.assertNotIn('-virtfs', argv)
        self.assertNotIn('-nic', argv)
        self.assertIn(f'hostfwd=tcp:127.0.0.1:{machine.agent_port}-'
                      f'10.0.2.15:{vm.AGENT_PORT}', text)

    def test_without_devices_the_machine_is_unchanged(self):
        argv = self.machine(vm.Layout()).qemu_argv()
        self.assertEqual('q35', argv[argv.index('-machine') + 1])
        for absent in ('intel-iommu', 'pxb-pcie', 'e1000e', 'bus=pcie.0'):
            self.assertNotIn(absent, ' '.join(argv))
        self.assertNotIn('intel_iommu', self.machine(
            vm.Layout()).kernel_cmdline())

    def test_devices_need_a_node_of_the_layout(self):
        self.assertRaisesMessage(ValueError, 'pci_node 2 is not a node',
                                 vm.Layout.parse, 'devices=1,pci_node=2')
        self.assertRaisesMessage(ValueError, 'devices must be within 0-8',
                                 vm.Layout.parse, 'devices=9')
        self.assertEqual(0, vm.Layout.parse('devices=1,pci_node=0')
                         .pci_node)

    def test_vfs_make_the_devices_igb_and_name_their_vfs(self):
        layout = vm.Layout.parse('cores=2,threads=1,memory=2048:2048,'
                                 'pages_2m=0:0,kvm=1,devices=2,vfs=2')
        text = ' '.join(self.machine(layout).qemu_argv())
        self.assertEqual(2, text.count('-device igb,bus=pxbrp'))
        self.assertNotIn('e1000e', text)
        self.assertEqual('10ca', layout.assigned_product_id)
        self.assertEqual({'0000:81:00.0': ('0000:81:10.0', '0000:81:10.2'),
                          '0000:82:00.0': ('0000:82:10.0', '0000:82:10.2')},
                         layout.vf_addresses())
        # Routing ids 128 + 2 i: the eighth function wraps to slot 0x11.
        seven = vm.Layout.parse('devices=1,vfs=7').vf_addresses()
        self.assertEqual(('0000:81:10.6', '0000:81:11.0', '0000:81:11.2',
                          '0000:81:11.4'), seven['0000:81:00.0'][3:])
        plain = vm.Layout.parse('devices=1')
        self.assertEqual('10d3', plain.assigned_product_id)
        self.assertEqual({'0000:81:00.0': ()}, plain.vf_addresses())

    def test_vfs_need_devices_and_the_82576s_limit(self):
        self.assertRaisesMessage(ValueError, 'vfs needs devices',
                                 vm.Layout.parse, 'vfs=2')
        self.assertRaisesMessage(ValueError, 'vfs must be within 0-7',
                                 vm.Layout.parse, 'devices=1,vfs=8')

    def _fake_qemu(self, script):
        root = self.useFixture(fixtures.TempDir()).path
        os.makedirs(os.path.join(root, 'usr', 'bin'))
        binary = os.path.join(root, 'usr', 'bin', 'qemu-system-x86_64')
        with open(binary, 'w') as f:
            f.write('#!/bin/sh\n' + script)
        os.chmod(binary, 0o755)
        return root, binary

    def test_vf_qemu_is_the_private_one_with_igb(self):
        root, binary = self._fake_qemu(
            '[ "$2" = igb,help ] && [ -n "$QEMU_MODULE_DIR" ] && exit 0\n'
            'exit 1\n')
        found, modules = vm.vf_qemu(root)
        self.assertEqual(binary, found)
        self.assertEqual(os.path.join(root, 'usr', 'lib',
                                      'x86_64-linux-gnu', 'qemu'), modules)
        self.useFixture(fixtures.EnvironmentVariable(vm.VF_QEMU_ROOT_ENV,
                                                     root))
        self.assertEqual(binary, vm.vf_qemu()[0])

    def test_vf_qemu_missing_or_without_igb_says_how_to_install(self):
        root = self.useFixture(fixtures.TempDir()).path
        self.assertRaisesMessage(vm.QemuUnavailable,
                                 'tools/nested-qemu.sh', vm.vf_qemu, root)
        old, _ = self._fake_qemu(
            'echo "Device \'igb\' not found" >&2; exit 1\n')
        self.assertRaisesMessage(vm.QemuUnavailable,
                                 "has no igb device (Device 'igb' not "
                                 "found)", vm.vf_qemu, old)

    def test_kvm_machine_shows_no_smt_siblings(self):
        self.assertRaisesMessage(ValueError, 'kvm=1 shows no SMT siblings',
                                 vm.Layout.parse, 'threads=2,kvm=1')


class WaitReadyTest(base.TestCase):
    """A QEMU that ends before the agent answers is named with how it
    ended: by a signal (an emulator's abort) or with an exit status."""

    def ended(self, code):
        top = self.useFixture(fixtures.TempDir()).path
        machine = vm.NestedVM(vm.Layout(), '/img', '/code', top, '/caps',
                              ports=0, boot_timeout=30)
        with open(os.path.join(top, 'qemu.out'), 'w') as f:
            f.write('qemu: msix_table_mmio_write: Assertion failed.\n')
        machine._proc = subprocess.Popen(
            [sys.executable, '-c', code])
        machine._proc.wait(timeout=30)
        return self.assertRaises(vm.QemuExited, machine.wait_ready)

    def test_death_by_signal(self):
        exc = self.ended('import os, signal; os.kill(os.getpid(), '
                         'signal.SIGABRT)')
        self.assertTrue(exc.by_signal)
        self.assertEqual(-signal.SIGABRT, exc.returncode)
        self.assertIn('Assertion failed.', str(exc))

    def test_exit_status(self):
        exc = self.ended('raise SystemExit(1)')
        self.assertFalse(exc.by_signal)
        self.assertEqual(1, exc.returncode)
