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
import os
import shutil
import time

import libvirt
from lxml import etree
from oslo_utils import timeutils

from numamig import cpuspec
from numamig.objects import service as service_obj
from numamig.virt.libvirt import hostdev_xml
from numamig_ci import exception as ci_exception
from numamig_ci import slow_copy
from numamig_ci import vmem_guest
from numamig_ci.backends import local_libvirt
from numamig_ci.nested import deployment as nested_deployment
from numamig_ci.nested import vm as nested_vm
from numamig_ci.results import ScenarioSkipped

START_TIMEOUT_S = 300
# The guest kernel's command line: its console, hot-plugged memory
# onlined movable (so that unplugging it can migrate what it holds),
# little printing (every console byte costs under TCG), a panic ends it.
GUEST_CMDLINE = ('console=ttyS0 memhp_default_state=online_movable quiet '
                 'loglevel=1 panic=-1 nokaslr mitigations=off')
QEMU_NS = 'http://libvirt.org/schemas/domain/qemu/1.0'


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
                    'hold_migration', 'slow_copy', 'old_release',
                    'agents_on_hosts', 'guest_kernel'}
        if all(layout.nodes > 1 for layout in layouts):
            features.add('multi_node')
        if all(any(layout.pages_2m) or any(layout.pages_1g)
               for layout in layouts):
            features.add('huge_pages')
        if all(layout.threads > 1 for layout in layouts):
            features.add('smt')
        if len(layouts) == 2:
            features.add('separate_kernels')
        if len(layouts) == 2 and all(layout.kvm and layout.devices
                                     for layout in layouts):
            # A machine per host, each with assignable devices and KVM
            # inside (a guest kernel that answers a hot-unplug).
            features.add('pci_devices')
            if all(layout.vfs for layout in layouts):
                features.add('pci_vfs')
        if len(layouts) == 2 and all(layout.kvm and layout.cpu
                                     for layout in layouts) and \
                layouts[0].qemu_cpu != layouts[1].qemu_cpu:
            features.add('cpu_generations')
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

    def guarded_host(self):
        """(host, guard.GuardSettings) of the host whose libvirtd runs
        numamig's migration guard.

        :raises ScenarioSkipped: naming why no host could run it.
        """
        guards = self.deployment.guards
        if not guards:
            raise ScenarioSkipped(
                f"no nested host runs the migration guard: "
                f"{self.deployment.guard_unavailable or 'not installed'}")
        ((host, settings),) = guards.items()
        return host, settings

    def guard_log(self, host):
        """What host ``host``'s guard has logged (the file is on the
        machine's state share: the same path here and inside)."""
        path = self.deployment.guards[host].log_file
        if not os.path.exists(path):
            return ''
        with open(path) as f:
            return f.read()

    @contextlib.contextmanager
    def as_release(self, host, version):
        """Host ``host``'s compute agent runs as service version
        ``version`` ([testing] pretend_service_version) inside the block,
        as the current release again after it; its libvirtd and guests
        run on throughout. Each restart is over once the conductor has
        its report in that version."""
        self._restart_agent(host, f'[testing]\npretend_service_version = '
                                  f'{int(version)}\n', version)
        try:
            yield
        finally:
            self._restart_agent(host, '', service_obj.SERVICE_VERSION)

    def _restart_agent(self, host, extra_config, version):
        since = timeutils.utcnow(with_timezone=True)
        deadline = time.monotonic() + self.start_timeout_s
        self.deployment.restart_agent(host, extra_config)
        while True:
            reports = self.wait_for_reports(
                max(1, deadline - time.monotonic()), since=since,
                procs_alive=self.deployment.alive)
            if reports[host].service_version == version:
                return
            if time.monotonic() > deadline:
                raise ci_exception.CIDeploymentError(
                    what=host, reason=f"its agent did not report service "
                                      f"version {version} within "
                                      f"{self.start_timeout_s} s of its "
                                      f"restart")
            # A report the agent sent before it stopped.
            since = timeutils.utcnow(with_timezone=True)

    @contextlib.contextmanager
    def agents_on_hosts(self, extra_config=''):
        """Every host's compute agent runs inside its machine in the
        block (numamig_ci.nested.deployment's ``move_agents``), its
        configuration followed by ``extra_config``; here again, as
        configured at start, after it (unless the run is being torn
        down: the deployment's stop ends them inside). Each move is over
        once every host has reported from where it now runs; the block
        gets the seconds the move inside took.

        :raises ScenarioSkipped: the machine cannot run this interpreter
            and code (the reason named).
        """
        if self.deployment.guard_unavailable:
            raise ScenarioSkipped(
                f"no compute agent can run inside the nested machine: "
                f"{self.deployment.guard_unavailable}")
        names = list(self.hosts)
        took = self._move_agents(names, True, extra_config)
        try:
            yield took
        except KeyboardInterrupt:
            # The run is being torn down (Ctrl-C, a CI job's SIGTERM):
            # the deployment's stop ends the agents where they are.
            raise
        except BaseException:
            self._move_agents(names, False, '')
            raise
        self._move_agents(names, False, '')

    def _move_agents(self, names, inside, extra_config):
        where = 'inside their machine' if inside else 'here'
        self.deployment.stop_agents(names)
        # Every report after this one is from an agent started below.
        since = timeutils.utcnow(with_timezone=True)
        started = time.monotonic()
        self.deployment.move_agents(names, inside, extra_config)
        try:
            self.wait_for_reports(self.start_timeout_s, since=since,
                                  procs_alive=self.deployment.alive)
        except ci_exception.CIDeploymentError as exc:
            raise ci_exception.CIDeploymentError(
                what=', '.join(names),
                reason=f"compute agents started {where}: {exc}") from exc
        return time.monotonic() - started

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

    def online_cpus(self, host):
        """The CPUs online in the kernel ``host`` runs on (a frozenset),
        read from its sysfs inside the machine."""
        return frozenset(cpuspec.parse_cpu_spec(
            self.agent_of(host).online_cpus()))

    def set_guest_cpu(self, host, guest, cpu_xml):
        """Restart ``guest`` (on ``host``) with ``cpu_xml`` as its
        ``<cpu>`` (under KVM where its machine has it), through libvirt
        and outside numamig, as an operator's image would have it:
        numamig creates guests with the hypervisor's default CPU."""
        machine = self.deployment.libvirt[host].machine
        conn = libvirt.open(self.deployment.uris()[host])
        try:
            dom = conn.lookupByUUIDString(guest.uuid)
            conn.defineXML(with_cpu(
                dom.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE), cpu_xml,
                machine.layout.kvm))
            if dom.isActive():
                dom.destroy()
            dom.create()
        finally:
            conn.close()

    def boot_guest_kernel(self, host, guest, cmdline=GUEST_CMDLINE,
                          hostdevs=()):
        """Restart ``guest`` (on ``host``) booting a Linux kernel with the
        virtio_mem driver (numamig_ci.vmem_guest); return the path of its
        console, here, and the seconds ``create`` took.

        numamig creates diskless guests that boot nothing; the guest's
        persistent definition gets, through libvirt and outside numamig,
        ``<os>`` kernel, initrd and command line, ACPI (its NUMA nodes
        are read from the SRAT), its console on a file
        of the machine's state share (the guest kernel prints each of
        its nodes' MemTotal there), virtio-mem devices that populate
        what they plug (QEMU's ``prealloc``: the host's per-node
        counters then show every plugged MiB) and, on a machine with
        KVM (Layout.kvm), ``type='kvm'``. numamig's NUMA parts and
        virtio-mem devices are kept as numamig wrote them. ``hostdevs``:
        host PCI addresses the guest must hold as managed ``<hostdev>``
        (numamig creates the guest holding the functions its claim chose;
        the harness adds any it does not hold).

        With a machine per host, the kernel, initrd and console paths
        name the same files' places in every machine (each machine's
        state share, under the first machine's path): the guest then
        migrates between the machines, its console continuing in the
        destination machine's state directory (``console_in``).

        :raises ScenarioSkipped: no guest kernel can be had here.
        """
        machine = self.deployment.libvirt[host].machine
        try:
            kernel, initrd = vmem_guest.build()
        except vmem_guest.Unavailable as exc:
            raise ScenarioSkipped(f"no guest kernel with the virtio_mem "
                                  f"driver: {exc}") from exc
        # The state share gets the same path inside the machine (as it
        # has when the guard runs there; ``alias`` leaves it then); every
        # machine's share gets this machine's path too, and a copy of
        # the kernel and initrd.
        for other in self.deployment.machines:
            other.agent.alias(machine.state_dir, nested_vm.STATE_SHARE)
            for source in (kernel, initrd):
                target = os.path.join(other.state_dir,
                                      os.path.basename(source))
                if not os.path.exists(target):
                    shutil.copyfile(source, target + '.part')
                    os.replace(target + '.part', target)
        paths = [os.path.join(machine.state_dir, os.path.basename(source))
                 for source in (kernel, initrd)]
        console = os.path.join(machine.state_dir, f'{guest.name}.console')
        conn = libvirt.open(self.deployment.uris()[host])
        try:
            dom = conn.lookupByUUIDString(guest.uuid)
            conn.defineXML(with_guest_kernel(
                dom.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE), paths[0],
                paths[1], cmdline, console, machine.layout.kvm,
                hostdevs))
            if dom.isActive():
                dom.destroy()
            started = time.monotonic()
            dom.create()
            return console, time.monotonic() - started
        finally:
            conn.close()

    def console_in(self, host, console):
        """Where, here, the console file ``console`` (a path
        ``boot_guest_kernel`` gave) of a guest now on ``host`` is
        written: the state directory of ``host``'s machine."""
        machine = self.deployment.libvirt[host].machine
        return os.path.join(machine.state_dir, os.path.basename(console))

    def pci_devices(self, host):
        """{address: {vendor, device, numa_node, driver, iommu_group}}
        of the PCI functions of ``host``'s machine, read from its
        kernel's sysfs."""
        return self.agent_of(host).pci_devices()




def with_cpu(domain_xml, cpu_xml, kvm):
    """``domain_xml`` with its ``<cpu>`` replaced by ``cpu_xml`` (and,
    on a machine with KVM, of type kvm); pure: returns new text."""
    root = etree.fromstring(domain_xml.encode())
    if kvm:
        root.set('type', 'kvm')
    for old in root.findall('cpu'):
        root.remove(old)
    cpu = etree.fromstring(cpu_xml.encode())
    anchor = root.find('vcpu')
    if anchor is not None:
        anchor.addnext(cpu)
    else:
        root.append(cpu)
    # numamig's <cpu> carried the guest's NUMA cells: keep them.
    old_numa = etree.fromstring(domain_xml.encode()).find('cpu/numa')
    if old_numa is not None and cpu.find('numa') is None:
        cpu.append(old_numa)
    return etree.tostring(root, encoding='unicode')


def with_guest_kernel(domain_xml, kernel, initrd, cmdline, console, kvm,
                      hostdevs=()):
    """``domain_xml`` booting ``kernel`` (see
    NestedBackend.boot_guest_kernel), holding the host PCI functions at
    ``hostdevs``; pure: returns new text."""
    root = etree.fromstring(domain_xml.encode())
    if kvm:
        root.set('type', 'kvm')
    os_el = root.find('os')
    if os_el is None:
        os_el = etree.SubElement(root, 'os')
    for tag in ('kernel', 'initrd', 'cmdline', 'boot'):
        for old in os_el.findall(tag):
            os_el.remove(old)
    for tag, text in (('kernel', kernel), ('initrd', initrd),
                      ('cmdline', cmdline)):
        etree.SubElement(os_el, tag).text = text
    # ACPI: the guest kernel reads its NUMA nodes from the SRAT (a
    # guest numamig creates has no <features>).
    features = root.find('features')
    if features is None:
        features = etree.Element('features')
        os_el.addnext(features)
    if features.find('acpi') is None:
        etree.SubElement(features, 'acpi')
    devices = root.find('devices')
    if devices is None:
        devices = etree.SubElement(root, 'devices')
    for tag in ('serial', 'console'):
        for old in devices.findall(tag):
            devices.remove(old)
    serial = etree.SubElement(devices, 'serial', type='file')
    etree.SubElement(serial, 'source', path=console)
    etree.SubElement(serial, 'target', port='0')
    # numamig writes the functions its claim chose into the guest it
    # creates; only those not there yet are added.
    present = {d.address for d in hostdev_xml.assigned_devices(root)}
    for address in hostdevs:
        if address not in present:
            devices.append(etree.fromstring(
                hostdev_xml.new_device_xml(address)))
    # libvirt 9.0 has no XML for virtio-mem's prealloc: QEMU's global
    # property, on every virtio-mem device of this guest.
    qemu = root.find(f'{{{QEMU_NS}}}commandline')
    if qemu is None:
        qemu = etree.SubElement(root, f'{{{QEMU_NS}}}commandline',
                                nsmap={'qemu': QEMU_NS})
    for value in ('-global', 'virtio-mem-pci.prealloc=on'):
        etree.SubElement(qemu, f'{{{QEMU_NS}}}arg', value=value)
    return etree.tostring(root, encoding='unicode')
