"""--local-libvirt N: real libvirtd hosts and numamig daemons, here.

N libvirtd hosts run side by side (numamig.ci.libvirt_hosts); a
numamig-conductor and one numamig-compute per host run as processes over
the local RabbitMQ, on a control exchange of their own, with a SQLite
(or given) database; guests are real TCG QEMU guests. The hosts get
DIFFERENT CPU sets within the machine's pCPUs: odd hosts keep their last
pCPU shared, even hosts dedicate every pCPU. On a 2-pCPU machine::

    ci-real-1  dedicated 0    shared 1
    ci-real-2  dedicated 0-1  no shared set

Everything is torn down afterwards (daemons by SIGTERM then SIGKILL,
guests destroyed, libvirtd stopped by its recorded pid), after a failure
or Ctrl-C too. The QEMU capability cache is kept between runs.
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
from numamig import service
from numamig.ci import libvirt_hosts
from numamig.ci.backends import remote
from numamig.db import api as db_api

DEFAULT_TRANSPORT = 'rabbit://guest:guest@127.0.0.1:5672/'
REPORT_INTERVAL_S = 1
START_TIMEOUT_S = 90
STOP_TIMEOUT_S = 15


class LocalLibvirtBackend(remote.RemoteBackend):
    """N real libvirtd hosts with a conductor and agents as processes."""

    name = 'local-libvirt'
    features = frozenset({'qemu_threads'})
    guest_memory_mb = 128
    migration_timeout_s = 120

    def __init__(self, count, transport_url=None, db_url=None,
                 state_dir=None, cache_root=libvirt_hosts.CACHE_ROOT):
        if count < 2:
            raise exception.Invalid(
                reason=f"--local-libvirt needs at least 2 hosts, got {count}")
        self._keep_state = state_dir is not None
        self.state_dir = state_dir or tempfile.mkdtemp(prefix='numamig-ci-')
        tag = uuidutils.generate_uuid()[:8]
        super().__init__(
            transport_url or DEFAULT_TRANSPORT,
            db_url or f"sqlite:///{self.state_dir}/numamig.sqlite",
            f'numamig-ci-{tag}', REPORT_INTERVAL_S)
        self.count = count
        self.cache_root = cache_root
        self.libvirt = {}
        self.procs = {}

    def start(self):
        reason = libvirt_hosts.missing_requirements()
        if reason:
            raise exception.CIDeploymentError(what='local libvirt hosts',
                                              reason=reason)
        os.makedirs(self.state_dir, exist_ok=True)
        db_api.Database(self.db_url).sync()
        cpus = sorted(os.sched_getaffinity(0))
        sets = {}
        for index in range(1, self.count + 1):
            name = f'ci-real-{index}'
            host = libvirt_hosts.LibvirtHost(name, self.state_dir,
                                             self.cache_root)
            self.libvirt[name] = host
            host.start()
            sets[name] = host_sets(index, cpus)
        self._spawn('ci-conductor', 'numamig-conductor')
        for name, host in self.libvirt.items():
            self._spawn(name, 'numamig-compute', host, sets[name])
        self.connect({n: h.uri for n, h in self.libvirt.items()}, sets)
        self.wait_for_reports(START_TIMEOUT_S, procs_alive=self._alive)

    def _spawn(self, name, command, host=None, sets=None):
        config = os.path.join(self.state_dir, f'{name}.conf')
        with open(config, 'w') as f:
            f.write(self._config(name, host, sets))
        log = open(os.path.join(self.state_dir, f'{name}.log'), 'wb')
        script = os.path.join(os.path.dirname(sys.executable), command)
        # A session of its own: a terminal's Ctrl-C reaches the harness
        # only, which then stops the daemons in order.
        self.procs[name] = (subprocess.Popen(
            [script, '--config-file', config], stdout=log,
            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True), log)

    def _config(self, name, host, sets):
        lines = ['[DEFAULT]', f'host = {name}',
                 f'transport_url = {self.transport_url}',
                 f'control_exchange = {self.control_exchange}',
                 f'report_interval = {REPORT_INTERVAL_S}',
                 f'state_path = {self.state_dir}',
                 '[database]', f'connection = {self.db_url}']
        if host is not None:
            dedicated, shared = sets
            lines += ['[libvirt]', f'connection_uri = {host.uri}',
                      'virt_type = qemu',
                      'live_migration_inbound_addr = 127.0.0.1',
                      f'live_migration_libvirtd_port = {host.port}',
                      '[compute]', 'reserved_host_memory_mb = 0',
                      f'cpu_dedicated_set = {_spec(dedicated)}']
            if shared:
                lines.append(f'cpu_shared_set = {_spec(shared)}')
        return '\n'.join(lines) + '\n'

    def _alive(self):
        for name, (proc, _log) in self.procs.items():
            if proc.poll() is not None:
                raise exception.CIDeploymentError(
                    what=name, reason=f"exited with {proc.returncode}: "
                                      f"{self.log_tail(name)}")

    def log_tail(self, name, size=2000):
        with open(os.path.join(self.state_dir, f'{name}.log'), 'rb') as f:
            return f.read().decode(errors='replace')[-size:]

    def stop(self):
        self.disconnect()
        for name in reversed(list(self.procs)):
            _terminate(*self.procs[name])
        self.procs = {}
        for host in self.libvirt.values():
            host.stop()
        if self.libvirt:
            remote.delete_queues(
                self.transport_url,
                service.RPCNames(suffix=self.control_exchange),
                ['ci-conductor'] + list(self.libvirt), self.control_exchange)
        self.libvirt = {}
        if not self._keep_state:
            shutil.rmtree(self.state_dir, ignore_errors=True)

    def vcpu_affinity(self, host, uuid):
        name = self.guests(host)[uuid]
        pid = self.libvirt[host].qemu_pid(name)
        return {vcpu: _cpus(text) for vcpu, text in
                libvirt_hosts.vcpu_thread_affinity(pid).items()}


def host_sets(index, cpus):
    """(dedicated, shared) of the ``index``-th host (from 1)."""
    if index % 2 == 1 and len(cpus) > 1:
        return frozenset(cpus[:-1]), frozenset(cpus[-1:])
    return frozenset(cpus), None


def _terminate(proc, log):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    log.close()


def _spec(cpus):
    return cpuspec.format_cpu_spec(cpus)


def _cpus(text):
    return frozenset(cpuspec.parse_cpu_spec(text))
