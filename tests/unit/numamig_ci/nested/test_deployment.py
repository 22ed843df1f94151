"""How two libvirtd hosts of one nested machine share its kernel."""

import os
import sys

import fixtures

from numamig import exception
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
