"""--nested: libvirtd hosts in a nested multi-NUMA virtual machine.

The deployment is a numamig_ci.nested.deployment.NestedDeployment: one
QEMU (TCG) machine with 2+ NUMA nodes, SMT siblings and huge page pools
per node, two libvirtd hosts inside it, the conductor and agents here.
Beyond --local-libvirt it offers multi-node hosts, huge pages, SMT and
the kernel's own view from inside the machine (per-node page counters,
QEMU thread affinity, numa_maps). Torn down after success, failure or
Ctrl-C; the image and QEMU capability cache are kept between runs.
"""

import contextlib

from numamig import cpuspec
from numamig_ci import slow_copy
from numamig_ci.backends import local_libvirt
from numamig_ci.nested import deployment as nested_deployment
from numamig_ci.results import ScenarioSkipped

START_TIMEOUT_S = 300


class NestedBackend(local_libvirt.LocalLibvirtBackend):
    """Two libvirtd hosts in one nested NUMA host (see the module doc)."""

    name = 'nested'
    guest_memory_mb = 128
    # One live migration of a TCG guest inside a TCG host takes ~25 s.
    migration_timeout_s = 300
    start_timeout_s = START_TIMEOUT_S

    def __init__(self, layouts=None, transport_url=None, db_url=None,
                 state_dir=None, log=print):
        self.deployment = nested_deployment.NestedDeployment(
            2, layouts=layouts, transport_url=transport_url, db_url=db_url,
            state_dir=state_dir, log=log)
        self._init_remote()
        layouts = self.deployment.layouts
        features = {'qemu_threads', 'kernel_view', 'inject_failure',
                    'hold_migration', 'slow_copy'}
        if all(layout.nodes > 1 for layout in layouts):
            features.add('multi_node')
        if all(any(layout.pages_2m) or any(layout.pages_1g)
               for layout in layouts):
            features.add('huge_pages')
        if all(layout.threads > 1 for layout in layouts):
            features.add('smt')
        self.features = frozenset(features)

    def agent_of(self, host):
        """The agent of the machine ``host`` runs in (its kernel's view)."""
        return self.deployment.libvirt[host].machine.agent

    def kernel_of(self, host):
        """Which kernel (machine index) ``host`` runs on."""
        return self.deployment.machines.index(
            self.deployment.libvirt[host].machine)

    def kernel_pages(self):
        """{(kernel, node, size KiB): (free, total)} of every machine's
        kernel right now."""
        return {(index, int(node), int(size)): tuple(counts)
                for index, machine in enumerate(self.deployment.machines)
                for node, sizes in machine.agent.huge_pages().items()
                for size, counts in sizes.items()}

    def vcpu_affinity(self, host, uuid):
        pid = self.deployment.qemu_pid(host, self.guests(host)[uuid])
        return {int(vcpu): frozenset(cpuspec.parse_cpu_spec(text))
                for vcpu, text in self.agent_of(host).vcpu_affinity(
                    pid).items()}

    @contextlib.contextmanager
    def inject_failure(self, host, operation='started'):
        """``host`` fails incoming migrations at QEMU ``operation`` (a
        libvirt hook inside the machine): with 'started', after the
        destination QEMU has taken its memory, so that the rollback
        must give every page back."""
        self.agent_of(host).fail_at(host, operation)
        try:
            yield
        finally:
            self.agent_of(host).fail_at(host, '')

    def _dirtying_kernel(self, memory_mb):
        """The kernel's path inside the machines (written into each, at
        the same path, so that a peer's libvirtd finds it too)."""
        try:
            name = slow_copy.kernel_name(memory_mb)
            top = slow_copy.dirtied_mib(memory_mb)
        except ValueError as exc:
            raise ScenarioSkipped(str(exc)) from exc
        paths = {machine.agent.write_dirtying_kernel(name, top)
                 for machine in self.deployment.machines}
        (path,) = paths
        return path
