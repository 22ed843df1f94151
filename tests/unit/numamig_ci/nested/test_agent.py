"""The nested host agent's pieces that need no machine: the failure
hook libvirtd runs, and the per-node page counters it reads."""

import os
import signal
import subprocess
import sys
import time

import fixtures

from numamig_ci import libvirt_hosts
from numamig_ci.nested import agent
from tests import base


class FailHookTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.host = self.useFixture(fixtures.TempDir()).path
        agent._install_hook(self.host)
        self.hook = os.path.join(self.host, 'etc', 'hooks', 'qemu')

    def call(self, operation):
        return subprocess.run([self.hook, 'guest', operation, 'begin', '-'],
                              capture_output=True, text=True,
                              stdin=subprocess.DEVNULL)

    def test_no_flag_no_failure(self):
        self.assertEqual(0, self.call('started').returncode)

    def test_fails_only_the_flagged_operation(self):
        with open(agent._flag_path(self.host), 'w') as f:
            f.write('started')
        self.assertEqual(0, self.call('prepare').returncode)
        failed = self.call('started')
        self.assertEqual(1, failed.returncode)
        self.assertIn("failure injected at 'started' of guest",
                      failed.stderr)


class HugePagesTest(base.TestCase):

    def test_counters_per_node_and_size(self):
        root = self.useFixture(fixtures.TempDir()).path
        for node, size, free, total in ((0, 2048, 3, 64), (1, 1048576, 1, 1)):
            pool = os.path.join(root, f'node{node}', 'hugepages',
                                f'hugepages-{size}kB')
            os.makedirs(pool)
            for name, value in (('free_hugepages', free),
                                ('nr_hugepages', total)):
                with open(os.path.join(pool, name), 'w') as f:
                    f.write(f'{value}\n')
        self.useFixture(fixtures.MonkeyPatch(
            'numamig_ci.nested.agent.NODE_DIR', root))
        pools = agent.Agent().huge_pages()
        self.assertEqual({'0': {'2048': [3, 64]}, '1': {'1048576': [1, 1]}},
                         pools)


class NodeMeminfoTest(base.TestCase):

    def test_fields_per_node_in_kb(self):
        root = self.useFixture(fixtures.TempDir()).path
        for node, free in ((0, 1643916), (1, 1866168)):
            os.makedirs(os.path.join(root, f'node{node}'))
            with open(os.path.join(root, f'node{node}', 'meminfo'),
                      'w') as f:
                f.write(f"Node {node} MemTotal:        2060868 kB\n"
                        f"Node {node} MemFree:         {free} kB\n"
                        f"Node {node} HugePages_Total:     0\n")
        self.useFixture(fixtures.MonkeyPatch(
            'numamig_ci.nested.agent.NODE_DIR', root))
        self.assertEqual(
            {'0': {'MemTotal': 2060868, 'MemFree': 1643916},
             '1': {'MemTotal': 2060868, 'MemFree': 1866168}},
            agent.Agent().node_meminfo())


class PciTest(base.TestCase):
    """sysfs as the kernel lays it out after sriov_numvfs: a PF's
    virtfn<i> links and each VF's physfn link."""

    def setUp(self):
        super().setUp()
        self.root = self.useFixture(fixtures.TempDir()).path
        self.useFixture(fixtures.MonkeyPatch(
            'numamig_ci.nested.agent.PCI_DIR', self.root))

    def function(self, address, device, driver=''):
        path = os.path.join(self.root, address)
        os.makedirs(path)
        for key, value in (('vendor', '0x8086'), ('device', device),
                           ('numa_node', '1')):
            with open(os.path.join(path, key), 'w') as f:
                f.write(value + '\n')
        if driver:
            os.symlink(f'../../../bus/pci/drivers/{driver}',
                       os.path.join(path, 'driver'))
        return path

    def test_vfs_created_and_named_in_vf_order(self):
        pf = self.function('0000:81:00.0', '0x10c9', 'igb')
        for index, vf in enumerate(('0000:81:10.0', '0000:81:10.2')):
            self.function(vf, '0x10ca')
            os.symlink(f'../{vf}', os.path.join(pf, f'virtfn{index}'))
            os.symlink('../0000:81:00.0',
                       os.path.join(self.root, vf, 'physfn'))
        self.assertEqual(['0000:81:10.0', '0000:81:10.2'],
                         agent.Agent().create_vfs('0000:81:00.0', 2))
        with open(os.path.join(pf, 'sriov_numvfs')) as f:
            self.assertEqual('2', f.read())
        found = agent.Agent().pci_devices()
        self.assertEqual('0000:81:00.0', found['0000:81:10.2']['physfn'])
        self.assertEqual(('igb', ''), (found['0000:81:00.0']['driver'],
                                       found['0000:81:00.0']['physfn']))

    def test_a_refused_count_names_the_function(self):
        pf = self.function('0000:81:00.0', '0x10d3')
        os.makedirs(os.path.join(pf, 'sriov_numvfs'))   # not writable
        self.assertRaisesMessage(RuntimeError, '0000:81:00.0: sriov_numvfs '
                                 '= 2:', agent.Agent().create_vfs,
                                 '0000:81:00.0', 2)


class NodeDistancesTest(base.TestCase):

    def test_table_per_node_from_sysfs(self):
        root = self.useFixture(fixtures.TempDir()).path
        for node, row in ((0, '10 12 21'), (1, '12 10 21'),
                          (2, '21 21 10')):
            os.makedirs(os.path.join(root, f'node{node}'))
            with open(os.path.join(root, f'node{node}', 'distance'),
                      'w') as f:
                f.write(row + '\n')
        self.useFixture(fixtures.MonkeyPatch(
            'numamig_ci.nested.agent.NODE_DIR', root))
        table = agent.Agent().node_distances()
        self.assertEqual({'0': 10, '1': 12, '2': 21}, table['0'])
        self.assertEqual(21, table['2']['1'])

    def test_qemu_numa_dist_of_this_process_is_empty(self):
        self.assertEqual([], agent.Agent().qemu_numa_dist(os.getpid()))


class DirtyingKernelTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.root = self.useFixture(fixtures.TempDir()).path
        self.useFixture(fixtures.MonkeyPatch(
            'numamig_ci.nested.agent.HOSTS_ROOT', self.root))

    def test_written_where_the_hosts_read_it(self):
        path = agent.Agent().write_dirtying_kernel('dirtying-48m.bin', 48)
        self.assertEqual(os.path.join(self.root, 'dirtying-48m.bin'), path)
        with open(path, 'rb') as f:
            self.assertEqual(libvirt_hosts.dirtying_kernel(48), f.read())

    def test_a_path_is_refused(self):
        for name in ('../x.bin', '/tmp/x.bin', 'x.sh'):
            self.assertRaises(ValueError, agent.Agent().write_dirtying_kernel,
                              name, 48)
        self.assertEqual([], os.listdir(self.root))


class GuardHooksDirTest(base.TestCase):

    def test_qemu_d_is_the_shared_hooks_directory(self):
        host = self.useFixture(fixtures.TempDir()).path
        shared = self.useFixture(fixtures.TempDir()).path
        # /etc/libvirt as copied into the host: an empty qemu.d.
        os.makedirs(os.path.join(host, 'etc', 'hooks', 'qemu.d'))
        agent._install_hook(host, shared)
        link = os.path.join(host, 'etc', 'hooks', 'qemu.d')
        self.assertEqual(shared, os.readlink(link))
        self.assertTrue(os.path.exists(os.path.join(host, 'etc', 'hooks',
                                                    'qemu')))

    def test_no_hooks_directory_no_qemu_d(self):
        host = self.useFixture(fixtures.TempDir()).path
        agent._install_hook(host)
        self.assertFalse(os.path.lexists(
            os.path.join(host, 'etc', 'hooks', 'qemu.d')))


class AliasTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.root = self.useFixture(fixtures.TempDir()).path
        self.target = os.path.join(self.root, 'share')
        os.mkdir(self.target)

    def test_outer_path_names_the_share(self):
        path = os.path.join(self.root, 'work', 'tree')
        self.assertTrue(agent.Agent().alias(path, self.target))
        self.assertEqual(self.target, os.readlink(path))
        # Asked again (a second host of the machine): nothing to do.
        self.assertFalse(agent.Agent().alias(path, self.target))

    def test_same_path_inside_and_out_is_left_alone(self):
        self.assertFalse(agent.Agent().alias(self.target, self.target))
        self.assertTrue(os.path.isdir(self.target))

    def test_something_else_at_the_path_is_refused(self):
        path = os.path.join(self.root, 'taken')
        os.mkdir(path)
        self.assertRaisesMessage(RuntimeError, 'exists in the nested host',
                               agent.Agent().alias, path, self.target)
        self.assertFalse(os.path.islink(path))


class DaemonsTest(base.TestCase):
    """The daemons the harness has the agent run (compute agents moved
    into the machine), on real processes here."""

    def setUp(self):
        super().setUp()
        self.agent = agent.Agent()
        self.addCleanup(self.agent.stop_daemons, grace_s=1)
        self.log = os.path.join(self.useFixture(fixtures.TempDir()).path,
                                'daemon.log')

    def wait(self, name):
        self.agent.daemons[name].wait(timeout=10)
        return self.agent.daemon_status(name)

    def test_output_appended_with_the_given_environment_only(self):
        with open(self.log, 'w') as f:
            f.write('earlier life\n')
        os.environ.setdefault('NUMAMIG_CI_LEAK', 'yes')
        code = ("import os; print(os.environ['PYTHONPATH'], "
                "os.environ.get('NUMAMIG_CI_LEAK'), os.getcwd())")
        pid = self.agent.start_daemon('probe', [sys.executable, '-c', code],
                                      self.log, {'PYTHONPATH': '/code'})
        self.assertGreater(pid, 0)
        self.assertEqual(0, self.wait('probe'))
        with open(self.log) as f:
            self.assertEqual('earlier life\n/code None /\n', f.read())

    def test_one_daemon_per_name_while_it_runs(self):
        sleep = [sys.executable, '-c', 'import time; time.sleep(60)']
        self.agent.start_daemon('agent', sleep, self.log)
        self.assertIsNone(self.agent.daemon_status('agent'))
        self.assertRaisesRegex(RuntimeError, 'daemon agent still runs',
                               self.agent.start_daemon, 'agent', sleep,
                               self.log)
        self.agent.signal_daemon('agent', signal.SIGTERM)
        self.assertEqual(-signal.SIGTERM, self.wait('agent'))
        # Ended: its name may be started again.
        self.agent.start_daemon('agent', [sys.executable, '-c', ''],
                                self.log)
        self.assertEqual(0, self.wait('agent'))

    def test_stop_kills_a_daemon_ignoring_sigterm(self):
        code = ("import signal, sys, time; "
                "signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                "print('ready', flush=True); time.sleep(60)")
        self.agent.start_daemon('stubborn', [sys.executable, '-c', code],
                                self.log)
        for _ in range(100):     # SIGTERM ignored only once it said so
            with open(self.log) as f:
                if 'ready' in f.read():
                    break
            time.sleep(0.05)
        self.agent.stop_daemons(grace_s=0.5)
        self.assertEqual(-signal.SIGKILL,
                         self.agent.daemon_status('stubborn'))
