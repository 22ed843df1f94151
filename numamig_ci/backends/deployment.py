"""--deployment FILE: an existing numamig deployment the harness visits.

The file (numamig_ci.deployment_file) names the broker, the database and
each host's libvirt URI and CPU sets. The harness creates its guests
through numamig on these hosts and deletes them afterwards through
numamig too ('instance delete': the agent destroys the domain and
releases its usage, the conductor drops the record); it reads the
domains through the libvirt URIs.

The CPU sets must be the ones the hosts' numamig.conf give: they are
what the checks hold the XML against. Before any guest is created, each
file's sets are compared with those the host reports, and a difference
refuses the file: the checks would otherwise fail (or pass) for a
reason that has nothing to do with the migration.
"""

from numamig import cpuspec
from numamig_ci import deployment_file
from numamig_ci import libvirt_hosts
from numamig_ci.backends import remote


class DeploymentBackend(remote.RemoteBackend):
    """Hosts and daemons someone else runs; the harness only visits.

    :param spec: a deployment_file.DeploymentSpec.
    """

    name = 'deployment'

    def __init__(self, spec):
        super().__init__(spec.transport_url, spec.database,
                         spec.control_exchange, spec.report_interval)
        self.spec = spec
        self.guest_memory_mb = spec.guest_memory_mb
        # Reading /proc needs the guests' QEMU on this machine; the
        # topology features come from the hosts' reports at start.
        self.features = frozenset({'qemu_threads'} if spec.real_qemu
                                  else ())

    @classmethod
    def from_file(cls, path):
        """:raises CIDeploymentFileInvalid: naming the file and setting."""
        return cls(deployment_file.load(path))

    def start(self):
        """Reach the deployment and check the file against its reports.

        :raises CIDeploymentError: a URI, the broker or a host's report
            could not be reached.
        :raises CIDeploymentFileInvalid: a host's sets in the file are
            not the ones it reports.
        """
        hosts = self.spec.hosts
        self.connect({n: h.libvirt_uri for n, h in hosts.items()},
                     {n: (h.dedicated, h.shared) for n, h in hosts.items()})
        reports = self.wait_for_reports(3 * self.report_interval + 5)
        for name, host in hosts.items():
            _check_sets(self.spec.path, host, reports[name])
        self.features = self.features | _features(reports)

    def stop(self):
        self.disconnect()

    def vcpu_affinity(self, host, uuid):
        pid = libvirt_hosts.qemu_pid_of(uuid)
        return {vcpu: frozenset(cpuspec.parse_cpu_spec(text))
                for vcpu, text in
                libvirt_hosts.vcpu_thread_affinity(pid).items()}


def _check_sets(path, host, report):
    """Refuse a file whose sets are not the ones ``host`` reports."""
    cells = report.topology.cells
    reported = {'cpu_dedicated_set': frozenset().union(
                    *(c.pcpuset for c in cells)),
                'cpu_shared_set': frozenset().union(
                    *(c.cpuset for c in cells))}
    for key, given in (('cpu_dedicated_set', host.dedicated),
                       ('cpu_shared_set', host.shared)):
        if given != reported[key]:
            raise deployment_file.invalid(
                path, f"hosts.{host.name}.{key}",
                f"is {_spec(given)} but the host reports "
                f"{_spec(reported[key])}: give the value of [compute] "
                f"{key} in its numamig.conf")


def _spec(cpus):
    return cpuspec.format_cpu_spec(cpus) if cpus else 'none'


def _features(reports):
    """The topology features every reported host offers."""
    cells = [r.topology.cells for r in reports.values()]
    found = set()
    if all(len(c) >= 2 for c in cells):
        found.add('multi_node')
    if all(any(len(g) > 1 for cell in c for g in cell.siblings)
           for c in cells):
        found.add('smt')
    if all(any(p.size_kb > 4 and p.total for cell in c
               for p in cell.mempages) for c in cells):
        found.add('huge_pages')
    return found
