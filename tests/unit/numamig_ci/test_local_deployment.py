"""A local deployment before it starts: names unique to the run, CPU sets,
the daemons' configuration and the deployment file describing it.

Nothing is started here (the functional tests of numamig-ci do that).
"""

import os
import signal

import fixtures
import testscenarios

from numamig import exception
from numamig_ci import deployment_file
from numamig_ci import local_deployment
from numamig_ci import tcp_proxy
from tests import base

load_tests = testscenarios.load_tests_apply_scenarios


class LocalDeploymentTest(base.TestCase):

    def make(self, count=2, **kwargs):
        state = self.useFixture(fixtures.TempDir()).path
        return local_deployment.LocalDeployment(count, state_dir=state,
                                                **kwargs)

    def test_two_runs_share_no_name(self):
        one, two = self.make(), self.make()
        for attr in ('control_exchange', 'conductor', 'db_url'):
            self.assertNotEqual(getattr(one, attr), getattr(two, attr))
        self.assertFalse(set(one.host_names) & set(two.host_names))

    def test_runs_sharing_a_state_dir_and_database_stay_apart(self):
        state = self.useFixture(fixtures.TempDir()).path
        one = local_deployment.LocalDeployment(2, state_dir=state)
        two = local_deployment.LocalDeployment(2, state_dir=state)
        self.assertNotEqual(one.db_url, two.db_url)
        self.assertFalse(set(one.host_names) & set(two.host_names))

    def test_fewer_than_two_hosts_refused(self):
        self.assertRaisesMessage(
            exception.Invalid, "needs at least 2 hosts, got 1",
            local_deployment.LocalDeployment, 1)

    def test_description_is_a_valid_deployment_file(self):
        deployment = self.make(transport_url='rabbit://u:p@mq:5672/')
        # What start() fills in, without starting anything.
        deployment.libvirt = {name: _Host(name)
                              for name in deployment.host_names}
        deployment.sets = {
            name: local_deployment.host_sets(i, [0, 1])
            for i, name in enumerate(deployment.host_names, start=1)}
        spec = deployment_file.parse('d.json', deployment.describe())
        self.assertEqual('rabbit://u:p@mq:5672/', spec.transport_url)
        self.assertEqual(deployment.control_exchange, spec.control_exchange)
        self.assertEqual(deployment.db_url, spec.database)
        self.assertEqual(1, spec.report_interval)
        self.assertTrue(spec.real_qemu)
        first, second = deployment.host_names
        self.assertEqual((f'uri-of-{first}', {0}, {1}), (
            spec.hosts[first].libvirt_uri, spec.hosts[first].dedicated,
            spec.hosts[first].shared))
        self.assertEqual(({0, 1}, set()), (spec.hosts[second].dedicated,
                                           spec.hosts[second].shared))

    def test_agent_configuration_carries_its_host_and_sets(self):
        deployment = self.make()
        name = deployment.host_names[0]
        text = deployment._config(name, _Host(name),
                                  (frozenset({0, 2}), frozenset({1})))
        for line in (f'host = {name}', 'cpu_dedicated_set = 0,2',
                     'cpu_shared_set = 1', f'connection_uri = uri-of-{name}',
                     f'control_exchange = {deployment.control_exchange}',
                     f'connection = {deployment.db_url}'):
            self.assertIn(line + '\n', text)

    def test_peers_reach_a_host_through_its_link(self):
        # The port an agent gives its peers for its libvirtd is its
        # link's, which the harness can cut; the agent itself uses the
        # unix socket.
        deployment = self.make()
        name = deployment.host_names[0]
        deployment.links[name] = tcp_proxy.TCPProxy(
            ('127.0.0.1', 40001), ('127.0.0.1', _Host.port))
        text = deployment._config(name, _Host(name),
                                  (frozenset({0}), None))
        self.assertIn('live_migration_libvirtd_port = 40001\n', text)
        self.assertIn(f'connection_uri = uri-of-{name}\n', text)
        self.assertIn('live_migration_postcopy_recovery_timeout = '
                      f'{local_deployment.RECOVERY_TIMEOUT_S}\n', text)

    def test_conductor_and_agents_know_the_post_copy_policy(self):
        deployment = self.make()
        name = deployment.host_names[0]
        line = ('live_migration_policies = '
                f'{local_deployment.POST_COPY_POLICY_LINE}\n')
        self.assertIn(line, deployment._config(deployment.conductor, None,
                                               None))
        self.assertIn(line, deployment._config(name, _Host(name),
                                               (frozenset({0}), None)))

    def test_command_line_configuration_reaches_the_deployment(self):
        deployment = self.make()
        with open(deployment.cli_config()) as f:
            text = f.read()
        for line in (f'transport_url = {deployment.transport_url}',
                     f'control_exchange = {deployment.control_exchange}',
                     f'connection = {deployment.db_url}'):
            self.assertIn(line + '\n', text)


class RestartAgentTest(base.TestCase):
    """One agent restarted with more configuration; the rest untouched."""

    def test_old_agent_stopped_new_one_configured_log_kept(self):
        state = self.useFixture(fixtures.TempDir()).path
        deployment = local_deployment.LocalDeployment(2, state_dir=state)
        started = []

        class Proc:
            def __init__(self, argv, **kwargs):
                self.argv, self.signals = argv, []
                started.append(self)

            def poll(self):
                return 0 if self.signals else None

            def send_signal(self, signum):
                self.signals.append(signum)

            def wait(self, timeout=None):
                return 0

        self.useFixture(fixtures.MonkeyPatch(
            'numamig_ci.local_deployment.subprocess.Popen', Proc))
        first, second = deployment.host_names
        for name in (first, second):
            deployment.libvirt[name] = _Host(name)
            deployment.sets[name] = (frozenset({0}), None)
            deployment._spawn(name, 'numamig-compute', _Host(name),
                              deployment.sets[name])
        with open(os.path.join(state, f'{first}.log'), 'ab') as log:
            log.write(b'first life\n')
        old, other = started
        deployment.restart_agent(first, '[testing]\n'
                                        'pretend_service_version = 1\n')
        self.assertEqual([signal.SIGTERM], old.signals)
        self.assertEqual([], other.signals)
        self.assertIs(started[-1], deployment.procs[first][0])
        with open(os.path.join(state, f'{first}.conf')) as f:
            config = f.read()
        self.assertIn(f'host = {first}\n', config)
        self.assertTrue(config.endswith(
            '[testing]\npretend_service_version = 1\n'), config)
        with open(os.path.join(state, f'{first}.log'), 'rb') as f:
            self.assertIn(b'first life', f.read())
        for _proc, log in deployment.procs.values():
            log.close()


class _Host:
    """What the deployment reads of a started LibvirtHost."""

    port = 16509

    def __init__(self, name):
        self.uri = f'uri-of-{name}'


class HostSetsTest(base.TestCase):
    """Odd hosts keep their last pCPU shared, even hosts dedicate all, so
    that no two neighbours have the same sets."""

    scenarios = [
        ('odd-two-cpus', {'index': 1, 'cpus': [0, 1],
                          'sets': ({0}, {1})}),
        ('even-two-cpus', {'index': 2, 'cpus': [0, 1],
                           'sets': ({0, 1}, None)}),
        ('odd-one-cpu', {'index': 3, 'cpus': [0], 'sets': ({0}, None)}),
        ('odd-four-cpus', {'index': 1, 'cpus': [0, 1, 2, 3],
                           'sets': ({0, 1, 2}, {3})}),
    ]

    def test_sets(self):
        self.assertEqual(self.sets,
                         local_deployment.host_sets(self.index, self.cpus))


class ConfigFilesTest(base.TestCase):
    """--config-file: every daemon reads the given files after its own."""

    def test_every_daemon_reads_the_files_after_its_own(self):
        state = self.useFixture(fixtures.TempDir()).path
        deployment = local_deployment.LocalDeployment(
            2, state_dir=state, config_files=['quorum.conf', '/etc/x.conf'])
        started = []
        self.useFixture(fixtures.MonkeyPatch(
            'numamig_ci.local_deployment.subprocess.Popen',
            lambda argv, **kwargs: started.append(argv)))
        deployment._spawn(deployment.conductor, 'numamig-conductor')
        own = os.path.join(state, f'{deployment.conductor}.conf')
        self.assertEqual(['--config-file', own,
                          '--config-file', os.path.abspath('quorum.conf'),
                          '--config-file', '/etc/x.conf'], started[0][1:])
        for _proc, log in deployment.procs.values():
            log.close()
