"""The deployment guide's files, as shipped, run a cloud.

doc/source/deployment.rst shows per-role configuration files and systemd
units (etc/numamig/deploy/). Here the conductor and two test-driver
compute agents start from exactly those files over this machine's
RabbitMQ and PostgreSQL, one guest migrates, and numamig-manage works
from the client's file. A second --config-file gives only what differs
on this machine: the broker and database URLs (with their passwords),
the host names, the state directory and the capabilities' location,
each of which the guide tells operators to replace.
"""

import configparser
import os
import subprocess
import sys

from numamig import embedded
from tests.functional import test_multiprocess

DEPLOY = os.path.join(os.path.dirname(__file__), '..', '..', 'etc',
                      'numamig', 'deploy')
ROLE_FILES = ('conductor.conf', 'compute-libvirt.conf',
              'compute-test-driver.conf', 'client.conf')
UNITS = ('numamig-conductor.service', 'numamig-compute.service')


def shipped(name):
    return os.path.abspath(os.path.join(DEPLOY, name))


class ShippedFilesTest(test_multiprocess.MultiProcessTestBase):

    def config_files(self, host, caps=None):
        role = 'compute-test-driver.conf' if caps else 'conductor.conf'
        return [shipped(role), self._machine(host, caps)]

    def _machine(self, host, caps):
        """What this machine replaces in the shipped files."""
        lines = ['[DEFAULT]', f'host = {host}',
                 f'transport_url = {self.rpc.url}',
                 f'control_exchange = {self.rpc.exchange}',
                 f'state_path = {self.dir}', 'report_interval = 2',
                 '[database]', f'connection = {self.db.url}']
        if caps:
            lines += ['[libvirt]',
                      f'connection_uri = test://{embedded.TEST_NODE_FILE}',
                      f'capabilities_file = '
                      f'{os.path.join(embedded.HOSTS_DIR, caps)}']
        path = os.path.join(self.dir, f'{host}-machine.conf')
        with open(path, 'w', encoding='utf-8') as handle:
            handle.write('\n'.join(lines) + '\n')
        return path

    def manage(self, *argv):
        machine = self._machine('client', None)
        return subprocess.run(
            [os.path.join(os.path.dirname(sys.executable), 'numamig-manage'),
             '--config-file', shipped('client.conf'), '--config-file',
             machine, *argv], capture_output=True, text=True, timeout=60)

    def test_a_cloud_from_the_shipped_files(self):
        source, dest = sorted(self.hosts)
        instance = self.create(source, 'deploy-guest')
        run = self.manage('migration', 'start', instance.uuid, '--host',
                          dest, '--wait', '--wait-timeout', '60')
        self.assertEqual(0, run.returncode, run.stdout + run.stderr)
        self.assertIn('COMPLETED', run.stdout)
        self.assert_placed(instance, dest)
        listed = self.manage('instance', 'list', '--host', dest)
        self.assertEqual(0, listed.returncode, listed.stderr)
        self.assertIn(instance.uuid, listed.stdout)
        self.stop_daemons()
        for host in [self.conductor_host, *self.hosts]:
            log = self.log_of(host)
            # Start-up chatter operators need not read (issue 14 #16).
            for noise in ('no_fork=True', 'alembic.runtime', 'Traceback'):
                self.assertNotIn(noise, log, host)


class ShippedFilesReadTest(test_multiprocess.base.TestCase):
    """Every shipped file is well formed (the units without systemd)."""

    def test_role_files_hold_only_known_options(self):
        from numamig.conf import opts
        known = {group: {o.name for o in group_opts}
                 for group, group_opts in
                 ((getattr(g, 'name', g), o) for g, o in opts.list_opts())}
        known['DEFAULT'] |= {'transport_url', 'control_exchange',
                             'log_file', 'debug'}
        for name in ROLE_FILES:
            parser = configparser.ConfigParser()
            parser.read(shipped(name))
            for section in ['DEFAULT', *parser.sections()]:
                options = parser.defaults() if section == 'DEFAULT' else {
                    k: v for k, v in parser.items(section)
                    if k not in parser.defaults()}
                unknown = set(options) - known.get(section, set())
                self.assertEqual(set(), unknown, f"{name} [{section}]")

    def test_units_start_the_daemons_with_the_default_file(self):
        for name in UNITS:
            parser = configparser.ConfigParser(interpolation=None)
            parser.read(shipped(name))
            start = parser['Service']['ExecStart']
            daemon = name.split('.')[0]
            self.assertTrue(start.split()[0].endswith(daemon), start)
            self.assertIn('--config-file /etc/numamig/numamig.conf', start)
            self.assertEqual(
                '2', parser['Service']['RestartPreventExitStatus'])
