"""The interface every deployment backend of the harness implements.

A backend starts (or reaches) a conductor and its compute hosts, and
gives the scenarios what a whitebox check needs beyond numamig's public
API: each host's libvirt connection (through a LibvirtDriver "probe" on
the host's URI), each host's configured dedicated and shared sets, the
way to make reports current, and the way to delete a guest for good
(numamig's own instance deletion, checked on every host).
Features a backend cannot offer (failure injection, QEMU threads)
raise ScenarioSkipped with the reason, so scenarios report them skipped.
"""

import abc

from lxml import etree
from oslo_log import log as logging

from numamig import context as nm_context
from numamig_ci import checks
from numamig_ci import lifecycle
from numamig_ci.results import ScenarioSkipped

LOG = logging.getLogger(__name__)

#: Features a backend may offer; scenarios name the ones they need.
FEATURES = {
    'multi_node': 'hosts with at least two NUMA nodes',
    'huge_pages': 'hosts with huge page pools',
    'smt': 'hosts with SMT thread siblings',
    'qemu_threads': 'real QEMU processes whose vCPU threads can be read',
    'inject_failure': 'failures injected into a compute agent',
    'hold_migration': 'migration held in progress until the harness '
                      'aborts it',
    'slow_copy': 'real QEMU memory copy kept in progress (a guest '
                 'dirtying its memory, the copy capped by libvirt)',
    'kernel_view': "the hosts' kernel read from inside (per-node huge "
                   "page counters, QEMU numa_maps and thread affinity)",
    'old_release': 'compute agents restarted as the release before',
    'post_copy_hold': 'real QEMU migration held until a policy switches '
                      'it to a crawling post-copy (a guest dirtying a '
                      'small set, both copies capped by libvirt)',
    'cut_link': 'a link between hosts the harness cuts and restores, and '
                'numamig-manage on the deployment',
    'agents_on_hosts': "compute agents run on their hosts' own kernel "
                       "(reading the /proc their QEMUs run in), as on "
                       "real compute hosts",
    'guest_kernel': "a Linux guest kernel with the virtio_mem driver "
                    "booted in a guest numamig created, its console read",
    'separate_kernels': "each host on a kernel of its own",
    'cpu_generations': "hosts of two CPU generations whose guests run "
                       "under KVM (what a guest may be given differs "
                       "between them)",
    'pci_devices': "hosts with assignable PCI functions on node 1 (an "
                   "IOMMU, vfio-pci; --nested layouts with devices=N and "
                   "kvm=1, one machine per host) and a guest kernel with "
                   "PCI hot-plug",
    'pci_vfs': "hosts whose assignable functions on node 1 are SR-IOV "
               "virtual functions of a physical function there (--nested "
               "layouts with devices=N,vfs=M and kvm=1; QEMU with igb, "
               "tools/nested-qemu.sh)",
}


class Backend(lifecycle.StartStop, abc.ABC):
    """A deployment the scenarios run against.

    After ``start``: ``hosts`` maps host name -> checks.HostConfig (in a
    stable order), ``api`` is a conductor RPC client and ``context`` an
    admin request context.
    """

    name = '?'
    features = frozenset()
    guest_memory_mb = 256
    migration_timeout_s = 120

    def __init__(self):
        self.hosts = {}
        self.api = None
        self.context = nm_context.get_admin_context()

    @abc.abstractmethod
    def start(self):
        """Start or reach the deployment; fill ``hosts`` and ``api``."""

    @abc.abstractmethod
    def stop(self):
        """Tear down what ``start`` started (idempotent)."""

    @abc.abstractmethod
    def probe(self, host):
        """A LibvirtDriver connected to ``host``'s hypervisor."""

    @abc.abstractmethod
    def database(self):
        """The numamig.db.api.Database the conductor uses."""

    @abc.abstractmethod
    def refresh(self):
        """Return once every host's report reflects its current usage."""

    def guests(self, host):
        """{instance uuid: domain name} of the domains ``host`` has."""
        return self.probe(host).list_guests()

    def domain_xml(self, host, uuid, persistent=False):
        return self.probe(host).get_domain_xml(uuid, persistent=persistent)

    def reports(self):
        """{host: its last ComputeNodeReport}."""
        return {r.host: r for r in
                self.api.compute_node_get_all(self.context)}

    def power_cycle(self, host, uuid):
        """Stop a guest and start it again from its persistent definition."""
        self.probe(host).power_cycle(uuid)

    def delete_guest(self, uuid):
        """Remove a guest the harness created, through numamig.

        The conductor has its host destroy the domain and release its
        usage, then removes the record (idempotent). A domain still
        found on any host afterwards is a leak numamig left: it is
        destroyed so that the next scenario starts clean, and logged.
        """
        self.api.instance_delete(self.context, uuid)
        for host in self.hosts:
            if uuid in self.guests(host):
                LOG.warning("numamig-ci: guest %s was still defined on %s "
                            "after numamig deleted it; destroying it",
                            uuid, host)
                self.probe(host).destroy(uuid)

    def vcpu_affinity(self, host, uuid):
        """{vCPU: pCPUs} QEMU's vCPU threads of a guest may run on."""
        raise ScenarioSkipped(f"{self.name} hosts run no QEMU processes "
                              f"whose threads the harness can read")

    def inject_failure(self, host):
        """A context manager making ``host`` fail incoming migrations."""
        raise ScenarioSkipped(f"the {self.name} backend cannot inject a "
                              f"failure into a compute agent")

    def hold_migration(self, host, guest):
        """A context manager keeping the next migration of ``guest`` (a
        record) from ``host`` in progress; yields a hold with ``phase``
        (where it is held, in words), ``wait(session, migration, until)``
        -> (reached, record) and ``release()`` (see
        numamig_ci.slow_copy.Hold)."""
        raise ScenarioSkipped(f"the {self.name} backend cannot hold a "
                              f"migration in progress")

    def post_copy_hold(self, host, guest):
        """A context manager holding the next migration of ``guest`` from
        ``host`` until its policy (``post_copy_policy``) switches it to a
        crawling post-copy (see numamig_ci.postcopy_cut.PostCopyHold)."""
        raise ScenarioSkipped(f"the {self.name} backend cannot hold a "
                              f"real post-copy")

    def agents_on_hosts(self, extra_config=''):
        """A context manager inside which every host's compute agent
        runs on the kernel its QEMUs run on, its configuration followed
        by ``extra_config`` (option lines with their sections); yields
        the seconds the agents took to start there."""
        raise ScenarioSkipped(f"the {self.name} backend cannot run the "
                              f"compute agents on their hosts' kernel")

    def cut_link(self, host):
        """Cut the link from every peer to ``host``'s libvirtd."""
        raise ScenarioSkipped(f"the {self.name} backend cannot cut a link")

    def restore_link(self, host):
        raise ScenarioSkipped(f"the {self.name} backend cannot cut a link")

    def cli_config(self):
        """A numamig.conf with which numamig-manage reaches the
        deployment."""
        raise ScenarioSkipped(f"the {self.name} backend gives numamig-manage"
                              f" no configuration")

    def warnings(self):
        """What makes this deployment weaker as a test bed."""
        warning = checks.same_sets_warning(list(self.hosts.values()))
        return [warning] if warning else []


def host_config(name, caps_xml, dedicated, shared):
    """A HostConfig from capabilities XML and the configured sets.

    Unset sets follow numamig's rule: an unset dedicated set is every
    pCPU outside the shared set; an unset shared set is empty.
    """
    cells = caps_cells(caps_xml)
    every = frozenset().union(*cells.values())
    shared = frozenset(shared or ())
    if dedicated is None:
        dedicated = every - shared
    return checks.HostConfig(name, frozenset(dedicated), shared, cells)


def caps_cells(caps_xml):
    """{NUMA node: its online pCPUs} of a capabilities document."""
    root = etree.fromstring(caps_xml.encode()
                            if isinstance(caps_xml, str) else caps_xml)
    cells = {}
    for cell in root.iterfind('host/topology/cells/cell'):
        cells[int(cell.get('id'))] = frozenset(
            int(c.get('id')) for c in cell.iterfind('cpus/cpu')
            if c.get('socket_id') is not None)
    return cells
