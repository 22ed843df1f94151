"""--local-libvirt N: real libvirtd hosts and numamig daemons, here.

The deployment itself (N libvirtd hosts side by side, a conductor and
one compute agent per host as processes, names unique to the run) is a
numamig_ci.local_deployment.LocalDeployment; this backend starts it,
reaches it like any deployment over the broker, and reads the vCPU
threads of the guests' QEMU processes. Everything is torn down
afterwards, after a failure or Ctrl-C too; the QEMU capability cache is
kept between runs.
"""

from numamig import cpuspec
from numamig_ci import libvirt_hosts
from numamig_ci import local_deployment
from numamig_ci import postcopy_cut
from numamig_ci import slow_copy
from numamig_ci.backends import remote
from numamig_ci.results import ScenarioSkipped

START_TIMEOUT_S = 90


class LocalLibvirtBackend(remote.RemoteBackend):
    """N real libvirtd hosts with a conductor and agents as processes.

    After ``start``, ``deployment`` is the running LocalDeployment.
    """

    name = 'local-libvirt'
    features = frozenset({'qemu_threads', 'hold_migration', 'slow_copy',
                          'post_copy_hold', 'cut_link'})
    post_copy_policy = local_deployment.POST_COPY_POLICY
    guest_memory_mb = 128
    migration_timeout_s = 120
    start_timeout_s = START_TIMEOUT_S

    def __init__(self, count, transport_url=None, db_url=None,
                 state_dir=None, cache_root=libvirt_hosts.CACHE_ROOT,
                 config_files=()):
        self.deployment = local_deployment.LocalDeployment(
            count, transport_url=transport_url, db_url=db_url,
            state_dir=state_dir, cache_root=cache_root,
            config_files=config_files)
        self._init_remote()

    def _init_remote(self):
        """Reach ``self.deployment``'s broker, database and exchange."""
        super().__init__(self.deployment.transport_url,
                         self.deployment.db_url,
                         self.deployment.control_exchange,
                         self.deployment.report_interval)

    @property
    def state_dir(self):
        return self.deployment.state_dir

    def start(self):
        deployment = self.deployment
        deployment.start_hosts()
        deployment.start_conductor()
        self.connect(deployment.uris(), deployment.sets)
        # An agent's first call to a conductor whose queue does not
        # exist yet is lost and retried seconds later: start the agents
        # once the conductor answers.
        self.wait_for_conductor(self.start_timeout_s,
                                procs_alive=deployment.alive)
        deployment.start_agents()
        self.wait_for_reports(self.start_timeout_s,
                              procs_alive=deployment.alive)

    def stop(self):
        self.disconnect()
        self.deployment.stop()

    def vcpu_affinity(self, host, uuid):
        pid = self.deployment.qemu_pid(host, self.guests(host)[uuid])
        return {vcpu: frozenset(cpuspec.parse_cpu_spec(text))
                for vcpu, text in
                libvirt_hosts.vcpu_thread_affinity(pid).items()}

    def hold_migration(self, host, guest):
        """A real migration of ``guest`` kept in progress (see
        numamig_ci.slow_copy)."""
        return slow_copy.Hold(self.deployment.uris()[host], guest.uuid,
                              self._dirtying_kernel(guest.memory_mb),
                              self.migration_timeout_s)

    def post_copy_hold(self, host, guest):
        """A real migration of ``guest`` held until it crawls in
        post-copy (see numamig_ci.postcopy_cut)."""
        return postcopy_cut.PostCopyHold(
            self.deployment.uris()[host], guest.uuid,
            postcopy_cut.write_kernel(self.state_dir),
            self.migration_timeout_s)

    def cut_link(self, host):
        self.deployment.cut_link(host)

    def restore_link(self, host):
        self.deployment.restore_link(host)

    def cli_config(self):
        return self.deployment.cli_config()

    def libvirt_uri(self, host):
        return self.deployment.uris()[host]

    def _dirtying_kernel(self, memory_mb):
        """The kernel's path, as every host's libvirtd sees it: the
        hosts share this machine's files outside their own directories.
        """
        try:
            return slow_copy.write_kernel(self.state_dir, memory_mb)
        except ValueError as exc:
            raise ScenarioSkipped(str(exc)) from exc
