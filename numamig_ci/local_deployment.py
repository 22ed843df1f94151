"""A numamig deployment stood up on this machine, for numamig-ci.

N real libvirtd hosts side by side (numamig_ci.libvirt_hosts), one
numamig-conductor and one numamig-compute per host as processes over a
broker, on a control exchange of their own, with a SQLite (or given)
database. ``numamig-ci --local-libvirt`` runs its scenarios on one; the
tests of ``numamig-ci --deployment`` stand one up and describe it in a
deployment file (``describe``), so both go through this code.

Every name a run leaves on shared ground is unique to the run: host
names (which are also the records' host names in a shared database),
daemon names, the control exchange and its queues, the SQLite file and
each host's directory. Two runs on one machine, or on one broker or
database, therefore never see each other's hosts, guests or messages.
The hosts get DIFFERENT CPU sets within the machine's pCPUs: odd hosts
keep their last pCPU shared, even hosts dedicate every pCPU. On a
2-pCPU machine, for a run tagged ``3f2a1b``::

    ci-3f2a1b-1  dedicated 0    shared 1
    ci-3f2a1b-2  dedicated 0-1  no shared set

Each host's peers reach its libvirtd through a link of the run's own (a
numamig_ci.tcp_proxy on loopback, named to them as the host's
``live_migration_libvirtd_port``), so that a scenario can cut the link
to a host (``cut_link``: its libvirt connections from its peers reset,
new ones refused) and restore it; the host's own agent and the harness
reach it by its unix socket, never through the link. Every host and the
conductor know the policy POST_COPY_POLICY, which switches a stalled
migration to post-copy at its second pass, and agents give up a post-copy
recovery after RECOVERY_TIMEOUT_S: what a post-copy cut needs, unused by
any other migration (the default policy stays ``timer``).

``stop`` tears everything down (daemons by SIGTERM then SIGKILL, guests
destroyed, libvirtd stopped by its recorded pid, links closed, the run's
queues deleted) and may be called at any point of ``start``.
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile

from oslo_utils import uuidutils

from numamig import cpuspec
from numamig import exception
from numamig import filemodes
from numamig import service
from numamig.db import api as db_api
from numamig_ci import broker
from numamig_ci import exception as ci_exception
from numamig_ci import libvirt_hosts
from numamig_ci import lifecycle
from numamig_ci import tcp_proxy

DEFAULT_TRANSPORT = 'rabbit://guest:guest@127.0.0.1:5672/'
REPORT_INTERVAL_S = 1
STOP_TIMEOUT_S = 15
# A policy a scenario requests to get a post-copy at a known moment: the
# first pass allows 1 ms of downtime (nothing converges in it), and the
# start of the second counts as a stall unless 99 % of the memory went
# across without being dirtied again.
POST_COPY_POLICY = 'ci-post-copy'
POST_COPY_POLICY_LINE = (f'{POST_COPY_POLICY}: downtime=1; then=post_copy; '
                         f'min_progress=99')
# Seconds after a lost post-copy link that agents stop trying to resume
# (numamig's default, 600 s, is for real outages).
RECOVERY_TIMEOUT_S = 4


class LocalDeployment(lifecycle.StartStop):
    """N libvirtd hosts with a conductor and agents as processes.

    Start it in steps (``start_hosts``, ``start_conductor``,
    ``start_agents``) so that a caller can wait for the conductor to
    listen before the agents' first call, or all at once (``start``).

    :param state_dir: where hosts, configuration files, logs and the
        SQLite database go; kept afterwards when given, else a
        temporary directory removed by ``stop``.
    :param cache_root: the QEMU capability cache shared between runs.
    :param config_files: numamig configuration files every daemon reads
        after its own (the options a deployment's broker needs, such as
        quorum queues), in order.
    """

    def __init__(self, count, transport_url=None, db_url=None,
                 state_dir=None, cache_root=libvirt_hosts.CACHE_ROOT,
                 report_interval=REPORT_INTERVAL_S, config_files=()):
        if count < 2:
            raise exception.Invalid(
                reason=f"a local deployment needs at least 2 hosts, "
                       f"got {count}")
        self.tag = uuidutils.generate_uuid()[:6]
        self.control_exchange = f'numamig-ci-{self.tag}'
        self.conductor = f'ci-{self.tag}-conductor'
        self.host_names = [f'ci-{self.tag}-{index}'
                           for index in range(1, count + 1)]
        self._keep_state = state_dir is not None
        self.state_dir = state_dir or tempfile.mkdtemp(prefix='numamig-ci-')
        self.transport_url = transport_url or DEFAULT_TRANSPORT
        self.db_url = db_url or \
            f"sqlite:///{self.state_dir}/numamig-{self.tag}.sqlite"
        self.cache_root = cache_root
        self.report_interval = report_interval
        self.config_files = tuple(os.path.abspath(path)
                                  for path in config_files)
        self.libvirt = {}
        self.links = {}
        self.sets = {}
        self.procs = {}

    def start(self):
        self.start_hosts()
        self.start_conductor()
        self.start_agents()

    def start_hosts(self):
        """Create the database schema and start every libvirtd host.

        :raises CIDeploymentError: this machine cannot run real hosts.
        """
        reason = libvirt_hosts.missing_requirements()
        if reason:
            raise ci_exception.CIDeploymentError(what='local libvirt hosts',
                                              reason=reason)
        os.makedirs(self.state_dir, exist_ok=True)
        db_api.Database(self.db_url).sync()
        cpus = sorted(os.sched_getaffinity(0))
        for index, name in enumerate(self.host_names, start=1):
            host = libvirt_hosts.LibvirtHost(name, self.state_dir,
                                             self.cache_root)
            self.libvirt[name] = host
            host.start()
            link = tcp_proxy.TCPProxy(
                ('127.0.0.1', libvirt_hosts.free_port()),
                ('127.0.0.1', host.port))
            self.links[name] = link
            link.restore()
            self.sets[name] = host_sets(index, cpus)

    def start_conductor(self):
        self._spawn(self.conductor, 'numamig-conductor')

    def start_agents(self):
        for name, host in self.libvirt.items():
            self._spawn(name, 'numamig-compute', host, self.sets[name])

    def restart_agent(self, name, extra_config=''):
        """Stop host ``name``'s compute agent and start it again, its
        configuration followed by ``extra_config`` (option lines with
        their sections, e.g. to run it as an older release); the host's
        libvirtd and guests keep running."""
        terminate([self.procs.pop(name)])
        self._spawn(name, 'numamig-compute', self.libvirt[name],
                    self.sets[name], extra_config)

    def cut_link(self, name):
        """Reset the connections host ``name``'s peers hold to its
        libvirtd, and refuse new ones until ``restore_link``."""
        self.links[name].cut()

    def restore_link(self, name):
        self.links[name].restore()

    def cli_config(self):
        """The path of a numamig.conf with which numamig-manage reaches
        this deployment (its broker, exchange and database)."""
        path = os.path.join(self.state_dir, 'numamig-manage.conf')
        filemodes.write_private(path, '\n'.join(
            ['[DEFAULT]', f'transport_url = {self.transport_url}',
             f'control_exchange = {self.control_exchange}',
             '[database]', f'connection = {self.db_url}']) + '\n')
        return path

    def uris(self):
        """{host: the libvirt URI a client on this machine opens}."""
        return {name: host.uri for name, host in self.libvirt.items()}

    def describe(self):
        """This deployment as a ``numamig-ci --deployment`` file holds it."""
        hosts = {}
        for name, host in self.libvirt.items():
            dedicated, shared = self.sets[name]
            hosts[name] = {'libvirt_uri': host.uri,
                           'cpu_dedicated_set': _spec(dedicated)}
            if shared:
                hosts[name]['cpu_shared_set'] = _spec(shared)
        return {'transport_url': self.transport_url,
                'control_exchange': self.control_exchange,
                'database': self.db_url,
                'report_interval': self.report_interval,
                'real_qemu': True,
                'hosts': hosts}

    def _spawn(self, name, command, host=None, sets=None, extra_config=''):
        config = os.path.join(self.state_dir, f'{name}.conf')
        filemodes.write_private(config, self._config(name, host, sets)
                                + extra_config)
        # Appended: a restarted daemon's log follows its earlier life's.
        log = open(self.log_path(name), 'ab')
        script = os.path.join(os.path.dirname(sys.executable), command)
        # A session of its own: a terminal's Ctrl-C reaches the harness
        # only, which then stops the daemons in order.
        extra = [arg for path in self.config_files
                 for arg in ('--config-file', path)]
        self.procs[name] = (subprocess.Popen(
            [script, '--config-file', config, *extra], stdout=log,
            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True), log)

    def _config(self, name, host, sets):
        lines = ['[DEFAULT]', f'host = {name}',
                 f'transport_url = {self.transport_url}',
                 f'control_exchange = {self.control_exchange}',
                 f'report_interval = {self.report_interval}',
                 f'state_path = {self.state_dir}',
                 '[database]', f'connection = {self.db_url}',
                 '[libvirt]',
                 f'live_migration_policies = {POST_COPY_POLICY_LINE}']
        if host is not None:
            dedicated, shared = sets
            link = self.links.get(name)
            port = link.listen[1] if link is not None else host.port
            lines += [f'connection_uri = {host.uri}',
                      'virt_type = qemu',
                      'live_migration_inbound_addr = 127.0.0.1',
                      f'live_migration_libvirtd_port = {port}',
                      'live_migration_postcopy_recovery_timeout = '
                      f'{RECOVERY_TIMEOUT_S}',
                      '[compute]', 'reserved_host_memory_mb = 0',
                      f'cpu_dedicated_set = {_spec(dedicated)}']
            if shared:
                lines.append(f'cpu_shared_set = {_spec(shared)}')
        return '\n'.join(lines) + '\n'

    def alive(self):
        """Return if every daemon runs.

        :raises CIDeploymentError: naming the daemon that exited and the
            end of its log.
        """
        for name, (proc, _log) in self.procs.items():
            if proc.poll() is not None:
                raise ci_exception.CIDeploymentError(
                    what=name, reason=f"exited with {proc.returncode}: "
                                      f"{self.log_tail(name)}")

    def log_path(self, name):
        """Where daemon ``name`` writes its log."""
        return os.path.join(self.state_dir, f'{name}.log')

    def log_tail(self, name, size=2000):
        """The last ``size`` characters (all if None) of a daemon's log."""
        with open(self.log_path(name), 'rb') as f:
            text = f.read().decode(errors='replace')
        return text if size is None else text[-size:]

    def qemu_pid(self, host, domain_name):
        return self.libvirt[host].qemu_pid(domain_name)

    def stop(self):
        """Stop the daemons, then the hosts; delete the run's queues."""
        # The agents first, all at once (each takes seconds to drain its
        # RPC server), then the conductor they were talking to.
        agents = [self.procs[n] for n in self.procs if n != self.conductor]
        terminate(agents)
        terminate([self.procs[n] for n in self.procs
                    if n == self.conductor])
        self.procs = {}
        for link in self.links.values():
            link.close()
        self.links = {}
        for host in self.libvirt.values():
            host.stop()
        if self.libvirt:
            broker.delete_queues(
                self.transport_url,
                service.RPCNames(suffix=self.control_exchange),
                [self.conductor] + list(self.libvirt), self.control_exchange)
        self.libvirt = {}
        if not self._keep_state:
            shutil.rmtree(self.state_dir, ignore_errors=True)


def host_sets(index, cpus):
    """(dedicated, shared) of the ``index``-th host (from 1)."""
    if index % 2 == 1 and len(cpus) > 1:
        return frozenset(cpus[:-1]), frozenset(cpus[-1:])
    return frozenset(cpus), None


def terminate(procs):
    """SIGTERM every (process, log) of ``procs``, SIGKILL the laggards."""
    for proc, _log in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc, log in procs:
        try:
            proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _spec(cpus):
    return cpuspec.format_cpu_spec(cpus)
