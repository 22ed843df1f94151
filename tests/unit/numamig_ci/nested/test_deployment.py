"""How two libvirtd hosts of one nested machine share its kernel."""

import configparser
import os
import signal
import subprocess
import sys
import types
import xmlrpc.client

import fixtures

from numamig import exception
from numamig.numa import pci
from numamig.virt.libvirt import guard_install
from numamig_ci.nested import deployment
from numamig_ci.nested import vm
from tests import base

KERNEL = {'0': {'2048': [128, 128], '1048576': [1, 1]},
          '1': {'2048': [127, 127], '1048576': [1, 1]}}


class SplitPoolsTest(base.TestCase):

    def test_every_page_goes_to_exactly_one_host(self):
        pools = deployment.split_pools(KERNEL, ['a', 'b'])
        for key in pools['a']:
            total = pools['a'][key][0]
            self.assertEqual(total, pools['a'][key][1] + pools['b'][key][1])

    def test_one_page_per_node_gives_each_host_one_nodes_page(self):
        pools = deployment.split_pools(KERNEL, ['a', 'b'])
        self.assertEqual((1, 1), pools['a'][(0, 1048576)])
        self.assertEqual((1, 0), pools['a'][(1, 1048576)])
        self.assertEqual((1, 1), pools['b'][(1, 1048576)])
        self.assertEqual((127, 63), pools['a'][(1, 2048)])


    def test_default_layout_gives_the_second_host_two_nodes_1g_pages(self):
        # The huge-page problem with 1 GiB pages: a destination with
        # more pages to fill on node 0 than on node 1, where the mover
        # lands; a source with pages on node 0 only.
        kernel = {'0': {'1048576': [4, 4]}, '1': {'1048576': [1, 1]}}
        self.assertEqual((4, 1), vm.Layout().pages_1g)
        pools = deployment.split_pools(kernel, ['a', 'b'])
        self.assertEqual({(0, 1048576): (4, 2), (1, 1048576): (1, 0)},
                         pools['a'])
        self.assertEqual({(0, 1048576): (4, 2), (1, 1048576): (1, 1)},
                         pools['b'])


class PagesAsAskedTest(base.TestCase):

    def test_pools_as_asked_say_nothing(self):
        layout = vm.Layout.parse('memory=4608:3072,pages_2m=128:127,'
                                 'pages_1g=2:1')
        self.assertIsNone(deployment.pages_not_as_asked(layout, {
            '0': {'2048': [128, 128], '1048576': [2, 2]},
            '1': {'2048': [127, 127], '1048576': [0, 1]}}))
        none = vm.Layout.parse('memory=2048:2048,pages_2m=0:0')
        self.assertIsNone(deployment.pages_not_as_asked(
            none, {'0': {'2048': [0, 0]}, '1': {}}))

    def test_1g_page_put_on_another_node_is_named(self):
        layout = vm.Layout.parse('memory=4608:3072,pages_1g=2:1')
        self.assertEqual(
            f"{deployment.NOT_AS_ASKED}: 1048576 KiB pages per node "
            f"node0 1, node1 2, not node0 2, node1 1",
            deployment.pages_not_as_asked(layout, {
                '0': {'2048': [128, 128], '1048576': [1, 1]},
                '1': {'2048': [128, 128], '1048576': [2, 2]}}))

    def test_fewer_2m_pages_and_no_1g_pool_at_all_are_named(self):
        layout = vm.Layout.parse('memory=4608:3072,pages_1g=1:0')
        self.assertEqual(
            f"{deployment.NOT_AS_ASKED}: 2048 KiB pages per node node0 "
            f"100, node1 128, not node0 128, node1 128; 1048576 KiB pages "
            f"per node node0 0, node1 0, not node0 1, node1 0",
            deployment.pages_not_as_asked(layout, {
                '0': {'2048': [100, 100]}, '1': {'2048': [128, 128]}}))


class HostSetsTest(base.TestCase):

    def test_sets_differ_and_both_hosts_have_shared_cpus(self):
        layout = vm.Layout(cores=2)
        first = deployment.host_sets(0, layout)
        second = deployment.host_sets(1, layout)
        # The first host's last core of each node is shared, whole.
        self.assertEqual((frozenset({0, 1, 4, 5}), frozenset({2, 3, 6, 7})),
                         first)
        self.assertEqual((frozenset({0, 1, 2, 4, 5, 6, 7}), frozenset({3})),
                         second)

    def test_one_core_per_node_keeps_dedicated_cpus(self):
        layout = vm.Layout(cores=1, threads=1, memory_mb=(1024, 1024),
                           pages_2m=(0, 0), pages_1g=(0, 0))
        self.assertEqual((frozenset({1}), frozenset({0})),
                         deployment.host_sets(0, layout))


class ConfigTest(base.TestCase):

    def state(self):
        return self.useFixture(fixtures.TempDir()).path

    def test_one_layout_or_one_per_host_of_two(self):
        two = deployment.NestedDeployment(2, layouts=[vm.Layout()] * 2,
                                          state_dir=self.state())
        self.assertFalse(two.shared_machine)
        self.assertEqual('10.1.0.2', two.inbound_address(two.host_names[1]))
        self.assertRaisesMessage(
            exception.Invalid, 'one per host for two hosts; got 2 for 3',
            deployment.NestedDeployment, 3, layouts=[vm.Layout()] * 2,
            state_dir=self.state())

    def test_each_host_reserves_the_other_hosts_pages(self):
        nested = deployment.NestedDeployment(2, state_dir=self.state())
        names = nested.host_names
        nested.pools = deployment.split_pools(KERNEL, names)
        host = deployment.NestedHost(names[0], 16509, machine=None)
        text = nested._config(names[0], host, deployment.host_sets(
            0, nested.layouts[0]))
        self.assertIn('connection_uri = qemu+tcp://127.0.0.1:16509/system',
                      text)
        self.assertIn('live_migration_inbound_addr = 127.0.0.1', text)
        self.assertIn('reserved_huge_pages = node:0,size:2048,count:64',
                      text)
        self.assertIn('reserved_huge_pages = node:1,size:1048576,count:1',
                      text)
        self.assertNotIn('node:0,size:1048576', text)


class PCIConfigTest(base.TestCase):
    """Machines with devices (Layout.devices): agents offer their
    e1000e, conductor and agents know the alias."""

    LAYOUT = vm.Layout.parse('cores=2,threads=1,memory=2048:2048,'
                             'pages_2m=0:0,kvm=1,devices=2')

    def _nested(self, layout):
        nested = deployment.NestedDeployment(
            2, layouts=[layout] * 2,
            state_dir=self.useFixture(fixtures.TempDir()).path)
        nested.pools = {name: {} for name in nested.host_names}
        return nested

    def _agent_config(self, nested):
        name = nested.host_names[0]
        machine = types.SimpleNamespace(layout=nested.layouts[0])
        host = deployment.NestedHost(name, 16509, machine=machine)
        return nested._config(name, host, deployment.host_sets(
            0, nested.layouts[0]))

    def test_agents_offer_the_devices_and_everyone_knows_the_alias(self):
        nested = self._nested(self.LAYOUT)
        agent = self._agent_config(nested)
        self.assertIn('device_spec = {"product_id": "10d3", "vendor_id": '
                      '"8086"}', agent)
        alias = ('alias = {"device_type": "type-PCI", "name": "nested-nic", '
                 '"numa_policy": "required", "product_id": "10d3", '
                 '"vendor_id": "8086"}')
        self.assertIn(alias, agent)
        conductor = nested._config(nested.conductor, None, None)
        self.assertIn(alias, conductor)
        self.assertNotIn('device_spec', conductor)
        # Both parse as numamig reads them.
        pci.parse_aliases([alias.partition(' = ')[2]])
        pci.parse_device_spec(['{"product_id": "10d3", "vendor_id": '
                               '"8086"}'])

    def test_with_vfs_the_alias_asks_for_vfs_and_pfs_are_offered(self):
        layout = vm.Layout.parse('cores=2,threads=1,memory=2048:2048,'
                                 'pages_2m=0:0,kvm=1,devices=2,vfs=2')
        nested = self._nested(layout)
        agent = self._agent_config(nested)
        spec = ('[{"product_id": "10c9", "vendor_id": "8086"}, '
                '{"product_id": "10ca", "vendor_id": "8086"}]')
        self.assertIn(f'device_spec = {spec}', agent)
        alias = ('alias = {"device_type": "type-VF", "name": "nested-nic", '
                 '"numa_policy": "required", "product_id": "10ca", '
                 '"vendor_id": "8086"}')
        self.assertIn(alias, agent)
        self.assertIn(alias, nested._config(nested.conductor, None, None))
        pci.parse_aliases([alias.partition(' = ')[2]])
        self.assertEqual(2, len(pci.parse_device_spec([spec])))

    def test_agents_give_up_unplugging_after_the_short_timeout(self):
        parser = configparser.ConfigParser(strict=False,
                                           interpolation=None)
        parser.read_string(self._agent_config(self._nested(self.LAYOUT)))
        self.assertEqual(str(deployment.DEVICE_DETACH_TIMEOUT_S),
                         parser['compute']['device_detach_timeout'])

    def test_no_devices_no_pci_section(self):
        nested = self._nested(vm.Layout.parse('memory=2048:2048'))
        self.assertNotIn('device_detach_timeout',
                         self._agent_config(nested))
        self.assertNotIn('[pci]', self._agent_config(nested))
        self.assertNotIn('[pci]', nested._config(nested.conductor, None,
                                                 None))


class _MachineAgent:
    """What the deployment asks of a machine's agent about paths."""

    def __init__(self, version):
        self.version = version
        self.aliases = []

    def python_version(self):
        return list(self.version)

    def alias(self, path, target):
        self.aliases.append((path, target))
        return True


class _Machine:

    def __init__(self, state_dir, version=sys.version_info[:2]):
        self.state_dir = state_dir
        self.agent = _MachineAgent(version)


class _KvmAgent(_MachineAgent):
    """A machine's agent that records what the deployment asks, in
    order (its Python differs: no guard, no aliases)."""

    def __init__(self, present):
        super().__init__((2, 7))
        self.present = present
        self.calls = []

    def load_kvm(self):
        self.calls.append('load_kvm')
        return [self.present, 'modprobe kvm_amd: exit 1 No such device']

    def huge_pages(self):
        self.calls.append('huge_pages')
        return {'0': {}, '1': {}}

    def start_host(self, name, *args):
        self.calls.append(f'start_host {name}')


class KvmMachineTest(base.TestCase):
    """A kvm=1 machine loads KVM before its libvirtd hosts start (they
    look for /dev/kvm once), and fails to start without it."""

    def machine(self, present):
        machine = _Machine('/state/vm0')
        machine.agent = _KvmAgent(present)
        machine.layout = vm.Layout.parse(
            'cores=2,threads=1,memory=2048:2048,pages_2m=0:0,kvm=1')
        machine.link = None
        machine.ports = [16601, 16602]
        return machine

    def test_kvm_loaded_before_the_hosts_start(self):
        nested = deployment.NestedDeployment(
            2, state_dir=self.useFixture(fixtures.TempDir()).path)
        machine = self.machine(True)
        nested._start_in(machine, nested.host_names)
        self.assertEqual(['load_kvm', 'huge_pages']
                         + [f'start_host {n}' for n in nested.host_names],
                         machine.agent.calls)

    def test_no_dev_kvm_starts_no_host_and_says_why(self):
        nested = deployment.NestedDeployment(
            2, state_dir=self.useFixture(fixtures.TempDir()).path)
        machine = self.machine(False)
        self.assertRaisesMessage(
            RuntimeError, 'no /dev/kvm in the nested machine with kvm=1: '
                          'modprobe kvm_amd: exit 1 No such device',
            nested._start_in, machine, nested.host_names)
        self.assertEqual(['load_kvm'], machine.agent.calls)


class _DyingMachine:
    """A machine whose QEMU ends, in turn, as ``endings`` says: a
    returncode, or None for a boot whose agent answers."""

    def __init__(self, endings, link=None):
        self.endings = list(endings)
        self.link = link
        self.calls = []

    def wait_ready(self):
        self.calls.append('wait_ready')
        code = self.endings.pop(0)
        if code is not None:
            raise vm.QemuExited(code, f"the nested host's QEMU exited with "
                                      f"{code}: booting\nqemu: Assertion "
                                      f"failed.\n\n")

    def stop(self):
        self.calls.append('stop')

    def boot(self):
        self.calls.append('boot')


class BootAgainTest(base.TestCase):
    """A machine whose QEMU died by a signal while booting is booted
    once more; anything else fails the start as before."""

    def deployment(self, machine):
        said = []
        nested = deployment.NestedDeployment(
            2, state_dir=self.useFixture(fixtures.TempDir()).path,
            log=said.append)
        nested.machines.append(machine)
        return nested, said

    def test_death_by_signal_boots_once_more_and_says_why(self):
        machine = _DyingMachine([-signal.SIGABRT, None])
        nested, said = self.deployment(machine)
        nested._wait_ready(machine)
        self.assertEqual(['wait_ready', 'stop', 'boot', 'wait_ready'],
                         machine.calls)
        self.assertEqual(["numamig-ci: nested machine 0: QEMU died by signal "
                          "6 while booting (qemu: Assertion failed.); "
                          "booting it once more"], said)

    def test_a_second_death_fails_the_start(self):
        machine = _DyingMachine([-signal.SIGABRT, -signal.SIGSEGV])
        nested, _said = self.deployment(machine)
        exc = self.assertRaises(vm.QemuExited, nested._wait_ready, machine)
        self.assertEqual(-signal.SIGSEGV, exc.returncode)
        self.assertEqual(2, machine.calls.count('wait_ready'))

    def test_an_exit_status_is_not_booted_again(self):
        machine = _DyingMachine([1, None])
        nested, said = self.deployment(machine)
        self.assertRaises(vm.QemuExited, nested._wait_ready, machine)
        self.assertEqual(['wait_ready'], machine.calls)
        self.assertEqual([], said)

    def test_a_linked_machine_is_not_booted_alone(self):
        machine = _DyingMachine([-signal.SIGABRT, None],
                                link=(0, 'listen', 16600))
        nested, _said = self.deployment(machine)
        self.assertRaises(vm.QemuExited, nested._wait_ready, machine)
        self.assertEqual(['wait_ready'], machine.calls)


class GuardTest(base.TestCase):
    """The last host's libvirtd runs numamig's migration guard, its files
    on the machine's state share at the paths they have here."""

    def setUp(self):
        super().setUp()
        self.nested = deployment.NestedDeployment(
            2, state_dir=self.useFixture(fixtures.TempDir()).path)
        self.machine = _Machine(os.path.join(self.nested.state_dir, 'vm0'))

    def test_code_state_and_interpreter_share_their_paths(self):
        # The agents' interpreter in the checkout, as the README's
        # commands make it, wherever this test's own venv lives.
        self.useFixture(fixtures.MonkeyPatch(
            'numamig_ci.nested.deployment.agent_python',
            lambda: os.path.join(deployment._code_dir(), '.venv', 'bin',
                                 'python3')))
        self.assertTrue(self.nested._share_paths(self.machine))
        aliases = dict(self.machine.agent.aliases)
        self.assertEqual(vm.CODE_SHARE, aliases[deployment._code_dir()])
        self.assertEqual(vm.STATE_SHARE, aliases[self.machine.state_dir])
        if sys.base_prefix != '/usr':
            self.assertEqual('/usr', aliases[sys.base_prefix])
        self.assertIsNone(self.nested.guard_unavailable)

    def test_an_interpreter_outside_the_checkout_says_why_no_guard(self):
        self.useFixture(fixtures.MonkeyPatch(
            'numamig_ci.nested.deployment.agent_python',
            lambda: '/opt/venv/bin/python3'))
        self.assertFalse(self.nested._share_paths(self.machine))
        self.assertIn('/opt/venv/bin/python3 is outside',
                      self.nested.guard_unavailable)
        self.assertEqual([], self.machine.agent.aliases)

    def test_another_python_inside_says_why_no_guard(self):
        self.machine.agent.version = (2, 7)
        self.assertFalse(self.nested._share_paths(self.machine))
        self.assertIn("nested host's Python 2.7 cannot run the guard hook",
                      self.nested.guard_unavailable)
        self.assertEqual([], self.machine.agent.aliases)

    def test_guard_written_by_numamig_and_configured_for_the_agent(self):
        name = self.nested.host_names[-1]
        hooks = self.nested._install_guard(self.machine, name)
        settings = self.nested.guards[name]
        self.assertEqual(os.path.join(self.machine.state_dir, 'guard', name,
                                      'qemu.d'), hooks)
        with open(settings.hook_path) as f:
            shim = f.read()
        # What the agent writes at its start: it finds it there already.
        self.assertEqual(guard_install.shim_text(settings), shim)
        self.assertIn(deployment.agent_python(), shim)
        self.nested.pools = deployment.split_pools(KERNEL,
                                                   self.nested.host_names)
        text = self.nested._config(
            name, deployment.NestedHost(name, 16509, machine=None),
            deployment.host_sets(1, self.nested.layouts[0]))
        for line in ('migration_guard = true',
                     f'migration_guard_hook_path = {settings.hook_path}',
                     f'migration_guard_claims_file = '
                     f'{settings.claims_file}',
                     f'migration_guard_log_file = {settings.log_file}'):
            self.assertIn(line + '\n', text)
        first = self.nested.host_names[0]
        self.assertNotIn('migration_guard', self.nested._config(
            first, deployment.NestedHost(first, 16508, machine=None),
            deployment.host_sets(0, self.nested.layouts[0])))

    def test_conductor_lets_nested_guests_move_beside_an_old_agent(self):
        text = self.nested._config(self.nested.conductor, None, None)
        self.assertIn('[workarounds]\nenable_numa_live_migration = true\n',
                      text)

    def test_agent_python_is_the_agents_script_interpreter(self):
        bindir = self.useFixture(fixtures.TempDir()).path
        with open(os.path.join(bindir, 'numamig-compute'), 'w') as f:
            f.write('#!/opt/venv/bin/python3\nimport sys\n')
        self.useFixture(fixtures.MonkeyPatch(
            'sys.executable', os.path.join(bindir, 'python')))
        self.assertEqual('/opt/venv/bin/python3', deployment.agent_python())


class InMachineConfigTest(base.TestCase):

    def test_loopback_broker_reached_through_the_user_net_gateway(self):
        for outside, inside in (
                ('rabbit://guest:guest@127.0.0.1:5672/',
                 'rabbit://guest:guest@10.0.2.2:5672/'),
                ('rabbit://localhost/', 'rabbit://10.0.2.2/'),
                ('rabbit://u:p@127.0.0.1:5672,u:p@localhost:5673/v',
                 'rabbit://u:p@10.0.2.2:5672,u:p@10.0.2.2:5673/v'),
                # A broker elsewhere is reached at its own address.
                ('rabbit://u:p@rabbit.example:5672/',
                 'rabbit://u:p@rabbit.example:5672/'),
                ('rabbit://u:p@127.0.0.10:5672/',
                 'rabbit://u:p@127.0.0.10:5672/')):
            self.assertEqual(inside,
                             deployment.machine_transport_url(outside))

    def test_broker_and_state_rewritten_everything_else_kept(self):
        text = ('[DEFAULT]\nhost = h1\n'
                'transport_url = rabbit://g:g@127.0.0.1:5672/\n'
                'state_path = /tmp/run\n[database]\n'
                'connection = sqlite:////tmp/run/x.sqlite\n[libvirt]\n'
                'connection_uri = qemu+tcp://127.0.0.1:16509/system\n')
        self.assertEqual(
            '[DEFAULT]\nhost = h1\n'
            'transport_url = rabbit://g:g@10.0.2.2:5672/\n'
            'state_path = /tmp/run/vm0\n[database]\n'
            'connection = sqlite:////tmp/run/x.sqlite\n[libvirt]\n'
            'connection_uri = qemu+tcp://127.0.0.1:16509/system\n',
            deployment.in_machine_config(
                text, 'rabbit://g:g@127.0.0.1:5672/', '/tmp/run/vm0'))


class _DaemonAgent:
    """A machine's agent as MachineDaemon asks it."""

    def __init__(self, statuses=()):
        self.statuses = list(statuses)
        self.asked = 0
        self.signals = []

    def daemon_status(self, name):
        self.asked += 1
        if isinstance(self.statuses[0], Exception):
            raise self.statuses[0]
        return self.statuses.pop(0) if len(self.statuses) > 1 \
            else self.statuses[0]

    def signal_daemon(self, name, signum):
        self.signals.append((name, signum))
        return None


class MachineDaemonTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.now = 100.0
        self.useFixture(fixtures.MonkeyPatch('time.sleep', self.tick))

    def tick(self, seconds):
        self.now += seconds

    def daemon(self, *statuses):
        agent = _DaemonAgent(statuses)
        return agent, deployment.MachineDaemon(agent, 'h1',
                                               clock=lambda: self.now)

    def test_status_asked_at_most_once_a_second(self):
        agent, daemon = self.daemon(None, None, 0)
        self.assertIsNone(daemon.poll())
        self.assertIsNone(daemon.poll())
        self.assertEqual(1, agent.asked)
        self.tick(1.0)
        self.assertIsNone(daemon.poll())
        self.tick(1.0)
        self.assertEqual(0, daemon.poll())
        self.assertEqual(0, daemon.returncode)
        self.assertEqual(3, agent.asked)
        self.assertEqual(0, daemon.poll())
        self.assertEqual(3, agent.asked)

    def test_machine_gone_means_daemon_gone(self):
        for error in (ConnectionRefusedError(), xmlrpc.client.Fault(1, 'x')):
            _agent, daemon = self.daemon(error)
            self.assertEqual(-signal.SIGKILL, daemon.poll())

    def test_wait_asks_afresh_and_is_bounded(self):
        agent, daemon = self.daemon(None)
        self.assertRaises(subprocess.TimeoutExpired, daemon.wait, 1)
        self.assertGreater(agent.asked, 3)
        agent.statuses = [-signal.SIGTERM]
        self.assertEqual(-signal.SIGTERM, daemon.wait(1))

    def test_signals_reach_a_running_daemon_only(self):
        agent, daemon = self.daemon(None)
        daemon.send_signal(signal.SIGTERM)
        daemon.kill()
        self.assertEqual([('h1', signal.SIGTERM), ('h1', signal.SIGKILL)],
                         agent.signals)
        agent.statuses = [0]
        daemon.wait(1)
        daemon.kill()
        self.assertEqual(2, len(agent.signals))


class _InsideAgent(_MachineAgent):

    def __init__(self):
        super().__init__(sys.version_info[:2])
        self.started = []
        self.running = set()

    def start_daemon(self, name, argv, log_path, env=None):
        self.started.append((name, argv, log_path, env))
        self.running.add(name)
        return 4242

    def daemon_status(self, name):
        return None if name in self.running else 0

    def signal_daemon(self, name, signum):
        self.running.discard(name)
        return 0


class _Popen:
    """An agent started here (subprocess.Popen's part the deployment
    uses)."""

    started = []

    def __init__(self, argv, **kwargs):
        self.argv = argv
        self.returncode = None
        _Popen.started.append(argv)

    def poll(self):
        return self.returncode

    def send_signal(self, signum):
        self.returncode = -signum

    def wait(self, timeout=None):
        return self.returncode


class MoveAgentsTest(base.TestCase):
    """A host's compute agent moved into its machine and back."""

    def setUp(self):
        super().setUp()
        self.nested = deployment.NestedDeployment(
            2, state_dir=self.useFixture(fixtures.TempDir()).path)
        self.machine = _Machine(os.path.join(self.nested.state_dir, 'vm0'))
        self.machine.agent = _InsideAgent()
        os.makedirs(self.machine.state_dir)
        self.nested.pools = deployment.split_pools(KERNEL,
                                                   self.nested.host_names)
        for index, name in enumerate(self.nested.host_names):
            self.nested.libvirt[name] = deployment.NestedHost(
                name, 16508 + index, self.machine)
            self.nested.sets[name] = deployment.host_sets(
                index, self.nested.layouts[0])
        _Popen.started = []
        self.useFixture(fixtures.MonkeyPatch(
            'numamig_ci.local_deployment.subprocess.Popen', _Popen))
        self.useFixture(fixtures.EnvironmentVariable('PYTHONPATH', '/code'))
        self.nested.start_agents()
        self.addCleanup(self.nested.stop_agents,
                        list(self.nested.procs))

    def test_started_inside_with_the_machines_broker_and_share(self):
        name = self.nested.host_names[0]
        self.nested.move_agents([name], True, '[x]\ny = 1\n')
        ((started, argv, log, env),) = self.machine.agent.started
        config = os.path.join(self.machine.state_dir, f'{name}.conf')
        self.assertEqual(name, started)
        self.assertEqual([os.path.join(os.path.dirname(sys.executable),
                                       'numamig-compute'),
                          '--config-file', config], argv)
        self.assertEqual(os.path.join(self.machine.state_dir,
                                      f'{name}.log'), log)
        self.assertEqual(log, self.nested.log_path(name))
        self.assertEqual({'PYTHONPATH': '/code'}, env)
        with open(config) as f:
            text = f.read()
        self.assertIn('transport_url = rabbit://guest:guest@10.0.2.2:5672/',
                      text)
        self.assertIn(f'state_path = {self.machine.state_dir}\n', text)
        self.assertIn('connection_uri = qemu+tcp://127.0.0.1:16508/system',
                      text)
        self.assertTrue(text.endswith('[x]\ny = 1\n'))
        # The other host's agent still runs here, untouched.
        self.assertEqual(2, len(_Popen.started))
        self.nested.alive()

    def test_back_here_as_configured_at_start(self):
        names = list(self.nested.host_names)
        self.nested.move_agents(names, True)
        self.assertEqual(set(names), self.machine.agent.running)
        self.nested.move_agents(names, False)
        self.assertEqual(set(), self.machine.agent.running)
        self.assertEqual(set(), self.nested.inside)
        self.assertEqual(4, len(_Popen.started))
        self.assertEqual(_Popen.started[:2], _Popen.started[2:])
        self.assertEqual(os.path.join(self.nested.state_dir,
                                      f'{names[0]}.log'),
                         self.nested.log_path(names[0]))

    def test_a_daemon_that_died_inside_is_named(self):
        name = self.nested.host_names[1]
        self.nested.move_agents([name], True)
        self.machine.agent.running.discard(name)
        with open(self.nested.log_path(name), 'w') as f:
            f.write('Traceback: no module named numamig\n')
        self.assertRaisesRegex(Exception, 'no module named numamig',
                               self.nested.alive)

    def test_none_inside_when_the_machine_cannot_run_them(self):
        self.nested.guard_unavailable = 'the Python differs'
        self.assertRaisesMessage(exception.Invalid, 'the Python differs',
                                 self.nested.move_agents,
                                 self.nested.host_names, True)
        self.assertEqual([], self.machine.agent.started)
        self.assertEqual(2, len(self.nested.procs))
