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
from numamig_ci.backends import local_libvirt
from numamig_ci.nested import deployment as nested_deployment

START_TIMEOUT_S = 300


class NestedBackend(local_libvirt.LocalLibvirtBackend):
    """Two libvirtd hosts in one nested NUMA host (see the module doc)."""

    name = 'nested'
    guest_memory_mb = 128
    # One live migration of a TCG guest inside a TCG host takes ~25 s.
    migration_timeout_s = 300
    start_timeout_s = START_TIMEOUT_S

    def __init__(self, layout=None, transport_url=None, db_url=None,
                 state_dir=None, log=print):
        self.deployment = nested_deployment.NestedDeployment(
            2, layout=layout, transport_url=transport_url, db_url=db_url,
            state_dir=state_dir, log=log)
        self._init_remote()
        layout = self.deployment.layout
        features = {'qemu_threads', 'kernel_view', 'inject_failure'}
        if layout.nodes > 1:
            features.add('multi_node')
        if any(layout.pages_2m) or any(layout.pages_1g):
            features.add('huge_pages')
        if layout.threads > 1:
            features.add('smt')
        self.features = frozenset(features)

    @property
    def agent(self):
        """The nested host's agent (the kernel's own view)."""
        return self.deployment.vm.agent

    def kernel_pages(self):
        """{(node, size KiB): (free, total)} the kernel counts right now."""
        return {(int(node), int(size)): tuple(counts)
                for node, sizes in self.agent.huge_pages().items()
                for size, counts in sizes.items()}

    def vcpu_affinity(self, host, uuid):
        pid = self.deployment.qemu_pid(host, self.guests(host)[uuid])
        return {int(vcpu): frozenset(cpuspec.parse_cpu_spec(text))
                for vcpu, text in self.agent.vcpu_affinity(pid).items()}

    @contextlib.contextmanager
    def inject_failure(self, host, operation='started'):
        """``host`` fails incoming migrations at QEMU ``operation`` (a
        libvirt hook inside the machine): with 'started', after the
        destination QEMU has taken its memory, so that the rollback
        must give every page back."""
        self.agent.fail_at(host, operation)
        try:
            yield
        finally:
            self.agent.fail_at(host, '')
