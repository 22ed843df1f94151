"""One nested host: a QEMU (TCG) virtual machine with a NUMA layout.

The machine boots the cached image (numamig_ci.nested.image) read-only
(``snapshot=on``), with one virtual socket per NUMA node, ``cores`` x
``threads`` CPUs per node (SMT siblings when threads > 1), its own
memory per node, 2 MiB pages reserved per node by the agent and 1 GiB
pages by the kernel at boot. Its agent (numamig_ci/nested/agent.py) and
the libvirtd ports are forwarded from 127.0.0.1 of this machine, each on
the same port number inside, so that a libvirtd inside dials its peer at
the very address the numamig agents outside are configured with.

Every step has a deadline; ``stop`` asks the agent to stop the daemons,
then waits for the power-off, then kills QEMU by its pid, and may be
called at any point of ``start``.
"""

import ctypes
import dataclasses
import os
import signal
import subprocess
import time
import xmlrpc.client

from numamig_ci import libvirt_hosts

BOOT_TIMEOUT_S = 300
CALL_TIMEOUT_S = 120
POWEROFF_TIMEOUT_S = 30
GUEST_ADDR = '10.0.2.15'
AGENT_PORT = 8765
GIB_MB = 1024
# What a node keeps beside its huge pages: the kernel's own allocations
# (its memory map at the node's top) and the hosts' small pages.
NODE_SPARE_MB = 512
PR_SET_PDEATHSIG = 1
# Where recipe/l1-init mounts the 'numamig' (code) and 'state' shares.
CODE_SHARE = '/numamig'
STATE_SHARE = '/numamig-state'
# The NIC joining two nested machines (the agent finds it by this).
LINK_MAC_PREFIX = '52:54:00:6e:6d'
# TCG's 'max' CPU with an Intel vendor: Linux then reads the SMT siblings
# from CPUID leaf 0xB (with the AMD vendor it wants 'topoext' and shows
# every thread as a core of its own). 'max' has pdpe1gb (1 GiB pages).
CPU_MODEL = 'max,vendor=GenuineIntel'
# With an AMD vendor, TCG's 'max' has SVM, which it emulates: kvm_amd
# loads inside and runs a guest kernel (Layout.kvm).
KVM_CPU_MODEL = 'max,vendor=AuthenticAMD'
# Layout.cpu: a machine's CPU model other than the two above, for CPU
# model checks between hosts of different generations. Measured under
# TCG on this machine's QEMU (``-accel tcg -cpu NAME``): max, Conroe,
# Penryn, Nehalem, Westmere, qemu64 run with every feature of their
# model; SandyBridge lacks x2apic and tsc-deadline, Haswell and
# Skylake-Client pcid, x2apic, tsc-deadline, hle, invpcid, rtm (and
# more), EPYC rdseed, sha-ni, topoext, xsavec and others: QEMU drops
# them with a warning, so such a machine is a poorer CPU than its name.
# The AMD ones carry SVM, which TCG emulates (kvm=1: KVM runs inside).
CPU_MODELS = {
    'intel-max': CPU_MODEL,
    'amd-max': KVM_CPU_MODEL,
    'nehalem': 'Nehalem',
    'westmere': 'Westmere',
    'opteron-g3': 'Opteron_G3,+svm',
    'epyc': 'EPYC',
}
# Layout.devices: the expander bridge's first bus number (its root
# ports follow), the devices' MAC addresses (their user networks are
# restricted: the devices exist to be assigned, not to carry traffic).
PXB_BUS_NR = 128
MAX_DEVICES = 8
DEVICE_MAC_PREFIX = '52:54:00:6e:70'
# The e1000e's PCI vendor and product ids (what [pci] device_spec and
# the guest's PCI bus name it by).
DEVICE_VENDOR_ID = '8086'
DEVICE_PRODUCT_ID = '10d3'
# Layout.vfs: QEMU's igb (an Intel 82576, SR-IOV) instead of the e1000e:
# its physical function's and its virtual functions' product ids. Its
# VFs start at routing id offset 128, stride 2 (the 82576's, read from
# sysfs sriov_offset / sriov_stride inside): VF i of the device on bus
# B is B:10.0, B:10.2, ... B:11.4. 82576 caps them at 7 (sriov_totalvfs).
PF_PRODUCT_ID = '10c9'
VF_PRODUCT_ID = '10ca'
VF_OFFSET = 128
VF_STRIDE = 2
MAX_VFS = 7
# Debian 12's QEMU 7.2 has no igb (added in QEMU 8.0): machines with
# VFs run bookworm-backports' qemu-system-x86 (10.0), unpacked into a
# private prefix by tools/nested-qemu.sh (never installed over the
# system QEMU, which libvirt and the other tiers use). QEMU_MODULE_DIR
# keeps it from loading the system QEMU's modules (it refuses them:
# "Only modules from the same build can be loaded").
VF_QEMU_ROOT_ENV = 'NUMAMIG_NESTED_QEMU_ROOT'
VF_QEMU_ROOT = '/var/cache/numamig/qemu-bpo/root'
SCALAR_KEYS = ('cores', 'threads', 'kvm', 'devices', 'pci_node', 'vfs')


@dataclasses.dataclass(frozen=True)
class Layout:
    """The NUMA layout of one nested host.

    ``memory_mb``, ``pages_2m`` and ``pages_1g`` have one entry per node.
    Node 0's 1 GiB pages need 2.5 GiB beside them there (q35 keeps the
    firmware, kernel and initrd in node 0's low 2 GiB; ``check``); the
    kernel may put a node's boot-time 1 GiB page on another node: read
    the per-node counters back (the agent's ``huge_pages``), never
    trust the request.
    """

    # Three cores per node: a host then keeps two whole dedicated cores
    # in a node beside its shared CPU (hw:cpu_thread_policy=isolate with
    # two vCPUs needs them).
    cores: int = 3
    threads: int = 2
    # The huge-page problem (huge-pages, huge-pages-1g) on two hosts of
    # one kernel shows in its counters only when the mover leaves the
    # node the destination's filling guest took: node 0 must then get
    # exactly the mover's page back and node 1 lose one (a move from
    # node 0 to node 0 shows as no change). So each pool of node 0 has
    # more pages per host than node 1's (the filling guest can go
    # nowhere else); the hosts split node 0's four 1 GiB pages, the
    # second host gets node 1's one, and the first host's mover, with
    # 1 GiB pages on node 0 only, leaves node 0. Node 0 has room for
    # them beyond q35's low 2 GiB and below the block at its top (see
    # ``check``).
    memory_mb: tuple = (6656, 3072)
    pages_2m: tuple = (128, 126)
    pages_1g: tuple = (4, 1)
    # 1: the machine's CPU is AMD's (TCG emulates its SVM), with KVM
    # loaded before the libvirtd hosts start, so that a guest kernel
    # runs under KVM inside the machine rather than under a TCG inside
    # TCG (measured: the guest's init 10-16 s after create instead of
    # 113-173 s). Its
    # CPUs show no SMT siblings then (AMD's wants 'topoext'): only with
    # threads=1.
    kvm: int = 0
    # A name of CPU_MODELS; '' for the default (CPU_MODEL, or
    # KVM_CPU_MODEL with kvm=1).
    cpu: str = ''
    # The machine's NUMA distance table, row by row (nodes x nodes
    # entries, 10 on the diagonal), given to QEMU as ``-numa dist``: the
    # kernel inside reads it as the firmware's (ACPI SLIT), libvirt
    # reports it, numamig places by it. Empty: QEMU's default (no table;
    # the kernel assumes 10 / 20).
    distances: tuple = ()
    # Assignable PCI devices: this many e1000e (8086:10d3), each on a
    # pcie-root-port behind a PCIe expander bridge (pxb-pcie) on node
    # ``pci_node``, with an emulated IOMMU (intel-iommu, interrupt
    # remapping) so that the libvirtd inside can give them to guests
    # (vfio-pci). Measured under TCG: sysfs numa_node of the bridge's
    # devices is ``pci_node``; libvirt's node devices say so. 0: no
    # IOMMU, no bridge, the machine's arguments as without the option.
    devices: int = 0
    pci_node: int = 1
    # With devices: each device an igb (8086:10c9, SR-IOV) instead of an
    # e1000e, of which the machine's kernel creates this many virtual
    # functions (8086:10ca, sriov_numvfs) before the libvirtd hosts
    # start. Measured under TCG (QEMU 10.0 outside, Linux 6.1 inside):
    # each VF is on ``pci_node``, in an IOMMU group of its own (not
    # its PF's), libvirt lists it with capability phys_function and the
    # PF with virt_functions; a guest holds one as a managed <hostdev>
    # (vfio-pci). Needs the private QEMU (``vf_qemu``).
    vfs: int = 0

    @property
    def qemu_cpu(self):
        """The machine's ``-cpu`` argument."""
        if self.cpu:
            return CPU_MODELS[self.cpu]
        return KVM_CPU_MODEL if self.kvm else CPU_MODEL

    @property
    def nodes(self):
        return len(self.memory_mb)

    def distance(self, src, dst):
        """Node ``src``'s distance to node ``dst`` as the layout gives it
        (None without a table)."""
        if not self.distances:
            return None
        return self.distances[src * self.nodes + dst]

    def node_cpus(self, node):
        """The CPU numbers QEMU gives node ``node`` (one socket each)."""
        per_node = self.cores * self.threads
        return tuple(range(node * per_node, (node + 1) * per_node))

    def check(self):
        """:raises ValueError: naming what is inconsistent."""
        if self.nodes < 1 or self.cores < 1 or self.threads < 1:
            raise ValueError(f"a layout needs at least one node, core and "
                             f"thread: {self}")
        if self.cpu and self.cpu not in CPU_MODELS:
            raise ValueError(f"unknown CPU {self.cpu!r}; known: "
                             f"{', '.join(sorted(CPU_MODELS))}")
        if self.kvm and self.threads > 1:
            raise ValueError(f"kvm=1 shows no SMT siblings: threads=1 "
                             f"only, not {self.threads}")
        self._check_distances()
        if self.devices < 0 or self.devices > MAX_DEVICES:
            raise ValueError(f"devices must be within 0-{MAX_DEVICES}, "
                             f"not {self.devices}")
        if self.devices and not 0 <= self.pci_node < self.nodes:
            raise ValueError(f"pci_node {self.pci_node} is not a node of "
                             f"this {self.nodes}-node layout")
        if self.vfs < 0 or self.vfs > MAX_VFS:
            raise ValueError(f"vfs must be within 0-{MAX_VFS}, not "
                             f"{self.vfs}")
        if self.vfs and not self.devices:
            raise ValueError("vfs needs devices (the functions whose "
                             "virtual functions they are)")
        for name in ('pages_2m', 'pages_1g'):
            if len(getattr(self, name)) != self.nodes:
                raise ValueError(f"{name} has {len(getattr(self, name))} "
                                 f"entries for {self.nodes} nodes")
        for node, memory in enumerate(self.memory_mb):
            pages_mb = 2 * self.pages_2m[node] + GIB_MB * self.pages_1g[node]
            if pages_mb + NODE_SPARE_MB > memory:
                raise ValueError(f"node {node}: {pages_mb} MiB of huge "
                                 f"pages leave less than {NODE_SPARE_MB} "
                                 f"MiB of its {memory} MiB")
        # Node 0's 1 GiB pages lie above 4 GiB: q35 maps its first 2 GiB
        # low (firmware, kernel, initrd), and the kernel allocates the
        # node's memory map at its top before reserving the pages, so
        # the block there is not free either. Short of room, Linux puts
        # the pages on another node without a word.
        low_mb = 2 * GIB_MB
        if self.pages_1g[0] and (self.memory_mb[0] < low_mb + NODE_SPARE_MB
                                 + GIB_MB * self.pages_1g[0]):
            raise ValueError(
                f"node 0: {self.pages_1g[0]} x 1 GiB pages need at least "
                f"{low_mb + NODE_SPARE_MB + GIB_MB * self.pages_1g[0]} "
                f"MiB there (q35's low 2 GiB hold none), not "
                f"{self.memory_mb[0]}")

    def _check_distances(self):
        # What QEMU takes (and Linux keeps: a remote entry of 10 would
        # make it ignore the whole table).
        if not self.distances:
            return
        if len(self.distances) != self.nodes * self.nodes:
            raise ValueError(f"distances has {len(self.distances)} entries, "
                             f"not {self.nodes} x {self.nodes}")
        for src in range(self.nodes):
            for dst in range(self.nodes):
                value = self.distance(src, dst)
                if src == dst and value != 10:
                    raise ValueError(f"distance of node {src} to itself "
                                     f"must be 10, not {value}")
                if src != dst and not 10 < value <= 255:
                    raise ValueError(f"distance {src} -> {dst} must be "
                                     f"within 11-255, not {value}")

    def device_args(self):
        """QEMU's arguments of the IOMMU, the expander bridge on node
        ``pci_node`` and the devices behind it (none without devices).

        The bridge's bus numbers start at PXB_BUS_NR: its root ports are
        buses PXB_BUS_NR + 1 .. + devices, each device at slot 0 of its
        own (``device_addresses``)."""
        if not self.devices:
            return []
        # The IOMMU first: QEMU wants it before the devices it covers.
        args = ['-device', 'intel-iommu,intremap=on',
                '-device', f'pxb-pcie,id=pxb1,bus_nr={PXB_BUS_NR},'
                           f'numa_node={self.pci_node},bus=pcie.0']
        for index in range(self.devices):
            args += ['-device', f'pcie-root-port,id=pxbrp{index},bus=pxb1,'
                                f'chassis={20 + index},slot={index}',
                     '-device', f'{self.device_model},bus=pxbrp{index},'
                                f'netdev=pxbnet{index},'
                                f'mac={DEVICE_MAC_PREFIX}:{index:02x}',
                     '-netdev', f'user,id=pxbnet{index},restrict=on']
        return args

    @property
    def device_model(self):
        return 'igb' if self.vfs else 'e1000e'

    @property
    def assigned_product_id(self):
        """The product id of the functions guests are given: the VFs'
        with vfs, else the e1000e's."""
        return VF_PRODUCT_ID if self.vfs else DEVICE_PRODUCT_ID

    def device_addresses(self):
        """The PCI addresses the machine's kernel gives the devices
        (the bridge's root ports' buses, each device at slot 0)."""
        return tuple(f'0000:{PXB_BUS_NR + 1 + index:02x}:00.0'
                     for index in range(self.devices))

    def vf_addresses(self):
        """{device address: (its VFs' addresses)} once the kernel
        created ``vfs`` of each (on the device's bus, VF_OFFSET and
        VF_STRIDE apart)."""
        found = {}
        for index, address in enumerate(self.device_addresses()):
            bus = PXB_BUS_NR + 1 + index
            found[address] = tuple(
                f'0000:{bus:02x}:{devfn >> 3:02x}.{devfn & 7}'
                for devfn in (VF_OFFSET + VF_STRIDE * vf
                              for vf in range(self.vfs)))
        return found

    def numa_dist_args(self):
        """QEMU's ``-numa dist`` arguments of the table (none without)."""
        args = []
        for src in range(self.nodes if self.distances else 0):
            for dst in range(self.nodes):
                if src != dst:
                    args += ['-numa', f'dist,src={src},dst={dst},'
                                      f'val={self.distance(src, dst)}']
        return args

    @classmethod
    def parse(cls, text):
        """A layout from 'cores=2,threads=2,memory=2048:2048,
        pages_2m=128:128,pages_1g=0:0,kvm=0,cpu=nehalem,devices=2,
        pci_node=1,vfs=2' (any subset;
        ':' separates nodes; ``cpu`` a name of CPU_MODELS; ``distances``
        gives the table row by row, ':' between entries, e.g.
        distances=10:21:21:10 for two nodes;
        with ``memory`` but no page counts, 128 x 2 MiB and no 1 GiB
        page per node).

        :raises ValueError: an unknown key or a bad number.
        """
        values = {}
        for item in filter(None, text.split(',')):
            key, _, value = item.partition('=')
            key = {'memory': 'memory_mb'}.get(key.strip(), key.strip())
            if key not in {f.name for f in dataclasses.fields(cls)}:
                raise ValueError(f"unknown layout key {key!r} in {text!r}")
            if key == 'cpu':
                values[key] = value.strip()
                continue
            numbers = tuple(int(v) for v in value.split(':'))
            values[key] = numbers[0] if key in SCALAR_KEYS else numbers
        layout = cls(**values)
        if 'memory_mb' in values:
            # Memory of one's own: node 0's 2 MiB pages of the default
            # per node, no 1 GiB page (where one fits depends on the
            # node's size).
            nodes = len(layout.memory_mb)
            for key, count in (('pages_2m', cls.pages_2m[0]),
                               ('pages_1g', 0)):
                if key not in values:
                    layout = dataclasses.replace(layout,
                                                 **{key: (count,) * nodes})
        layout.check()
        return layout


class NestedVM:
    """A running nested host. After ``start``: ``agent`` (an XML-RPC
    proxy to the agent inside) and ``ports`` (the forwarded ports).

    :param image_dir: a finished image (numamig_ci.nested.image.ensure).
    :param code_dir: the directory holding the numamig_ci package,
        shared read-only with the machine (its agent runs from there).
    :param state_dir: this run's directory: serial log, agent log.
    :param caps_dir: libvirt's QEMU capability cache for this image,
        kept between boots.
    :param ports: how many libvirtd ports to forward.
    :param link: (index, 'listen' or 'connect', TCP port): a second NIC
        on a QEMU socket network joining this machine to another one
        (two-machine deployments: the libvirtd hosts migrate over it).
    """

    def __init__(self, layout, image_dir, code_dir, state_dir, caps_dir,
                 ports=2, boot_timeout=BOOT_TIMEOUT_S, link=None):
        layout.check()
        self.layout = layout
        self.image_dir = image_dir
        self.code_dir = code_dir
        self.state_dir = state_dir
        self.caps_dir = caps_dir
        self.boot_timeout = boot_timeout
        self.agent_port = libvirt_hosts.free_port()
        self.ports = [libvirt_hosts.free_port() for _ in range(ports)]
        self.link = link
        self.agent = None
        self._proc = None
        self._console = None

    @property
    def serial_log(self):
        return os.path.join(self.state_dir, 'serial.log')

    def start(self):
        """Boot and wait for the agent.

        :raises RuntimeError: QEMU exited or the agent did not answer
            within the boot deadline (the serial log's end attached).
        """
        try:
            self.boot()
            self.wait_ready()
        except BaseException:
            self.stop()
            raise

    def boot(self):
        """Start QEMU and return at once (``wait_ready`` waits): several
        machines then boot side by side."""
        os.makedirs(self.state_dir, exist_ok=True)
        os.makedirs(self.caps_dir, exist_ok=True)
        argv = self.qemu_argv()
        env = None
        if self.layout.vfs:
            binary, modules = vf_qemu()
            argv[0] = binary
            env = dict(os.environ, QEMU_MODULE_DIR=modules)
        self._console = open(os.path.join(self.state_dir, 'qemu.out'), 'wb')
        # A session of its own: a terminal's Ctrl-C reaches the harness,
        # which then powers the machine off in order.
        self._proc = subprocess.Popen(
            ['nice', '-n', '15'] + argv,
            stdout=self._console, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
            preexec_fn=_die_with_parent, env=env)

    def qemu_argv(self):
        layout = self.layout
        total = sum(layout.memory_mb)
        argv = ['qemu-system-x86_64', '-name', 'numamig-nested',
                '-accel', 'tcg,thread=multi',
                '-cpu', layout.qemu_cpu,
                '-machine', 'q35,kernel-irqchip=split' if layout.devices
                else 'q35',
                '-smp', f'{layout.nodes * layout.cores * layout.threads},'
                        f'sockets={layout.nodes},cores={layout.cores},'
                        f'threads={layout.threads}',
                '-m', f'{total}M']
        for node, memory in enumerate(layout.memory_mb):
            cpus = layout.node_cpus(node)
            argv += ['-object', f'memory-backend-ram,id=mem{node},'
                                f'size={memory}M',
                     '-numa', f'node,nodeid={node},cpus={cpus[0]}-{cpus[-1]},'
                              f'memdev=mem{node}']
        argv += layout.numa_dist_args()
        pairs = [(self.agent_port, AGENT_PORT)] + [(p, p) for p in self.ports]
        forwards = ''.join(f',hostfwd=tcp:127.0.0.1:{outside}-{GUEST_ADDR}:'
                           f'{inside}' for outside, inside in pairs)
        root = os.path.join(self.image_dir, 'root.img')
        argv += layout.device_args()
        argv += ['-kernel', os.path.join(self.image_dir, 'vmlinuz'),
                 '-initrd', os.path.join(self.image_dir, 'initrd.img'),
                 '-append', self.kernel_cmdline()]
        if layout.devices:
            # The expander bridge takes any PCI device QEMU places on its
            # own, and refuses it ("Only PCI/PCIe bridges can be plugged
            # into pxb-pcie"): each other device names pcie.0.
            argv += ['-drive', f'file={root},if=none,id=root,format=raw,'
                               f'snapshot=on',
                     '-device', 'virtio-blk-pci,drive=root,bus=pcie.0',
                     '-netdev', f'user,id=user{forwards}',
                     '-device', 'virtio-net-pci,netdev=user,bus=pcie.0']
        else:
            argv += ['-drive', f'file={root},if=virtio,format=raw,'
                               f'snapshot=on',
                     '-nic', f'user,model=virtio-net-pci{forwards}']
        bus = ',bus=pcie.0' if layout.devices else ''
        if self.link is not None:
            index, mode, port = self.link
            argv += ['-netdev', f'socket,id=link,{mode}=127.0.0.1:{port}',
                     '-device', f'virtio-net-pci,netdev=link,'
                                f'mac={LINK_MAC_PREFIX}:{index:02x}{bus}']
        for tag, path, readonly in (('numamig', self.code_dir, True),
                                    ('state', self.state_dir, False),
                                    ('caps', self.caps_dir, False)):
            ro = ',readonly=on' if readonly else ''
            if layout.devices:
                argv += ['-fsdev', f'local,path={path},security_model=none,'
                                   f'id={tag}{ro}',
                         '-device', f'virtio-9p-pci,fsdev={tag},'
                                    f'mount_tag={tag}{bus}']
            else:
                argv += ['-virtfs', f'local,path={path},mount_tag={tag},'
                                    f'security_model=none,id={tag}{ro}']
        argv += ['-display', 'none', '-monitor', 'none',
                 '-serial', f'file:{self.serial_log}', '-no-reboot']
        return argv

    def kernel_cmdline(self):
        layout = self.layout
        line = ('root=/dev/vda rw console=ttyS0 init=/sbin/numamig-l1-init '
                'quiet loglevel=4 nokaslr mitigations=off '
                f'numamig.agent_port={AGENT_PORT} '
                f"numamig.hp2m={','.join(map(str, layout.pages_2m))}")
        if any(layout.pages_1g):
            per_node = ','.join(f'{node}:{count}' for node, count
                                in enumerate(layout.pages_1g))
            line += f' hugepagesz=1G hugepages={per_node}'
        if layout.devices:
            line += ' intel_iommu=on'
        return line

    def wait_ready(self):
        # The agent listens on AGENT_PORT inside; outside on agent_port.
        deadline = time.monotonic() + self.boot_timeout
        probe = _proxy(self.agent_port, timeout=5)
        while True:
            if self._proc.poll() is not None:
                raise QemuExited(self._proc.returncode,
                                 f"the nested host's QEMU exited with "
                                 f"{self._proc.returncode}: "
                                 f"{self.tail('qemu.out')}")
            try:
                probe.ping()
                break
            except (OSError, xmlrpc.client.Error):
                pass                   # not up yet
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"the nested host's agent did not answer within "
                    f"{self.boot_timeout} s; serial log: "
                    f"{self.tail('serial.log')}")
            time.sleep(1)
        self.agent = _proxy(self.agent_port, timeout=CALL_TIMEOUT_S)

    def tail(self, name, size=1500):
        try:
            with open(os.path.join(self.state_dir, name), 'rb') as f:
                return f.read().decode(errors='replace')[-size:]
        except OSError as exc:
            return f"({exc})"

    def stop(self):
        """Stop the daemons inside, power off, kill QEMU if it lingers."""
        if self._proc is None:
            return
        powering_off = False
        if self.agent is not None and self._proc.poll() is None:
            try:
                _proxy(self.agent_port, POWEROFF_TIMEOUT_S).shutdown()
                powering_off = True
            except (OSError, xmlrpc.client.Error):
                pass     # the kill below is the last resort anyway
        if not powering_off and self._proc.poll() is None:
            # No agent to power it off: nothing inside needs a clean end.
            os.killpg(self._proc.pid, signal.SIGTERM)
        try:
            self._proc.wait(timeout=POWEROFF_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait(timeout=POWEROFF_TIMEOUT_S)
        self._proc = None
        self.agent = None
        if self._console is not None:
            self._console.close()
            self._console = None


class QemuUnavailable(RuntimeError):
    """No QEMU with the igb device for a layout with vfs."""


def vf_qemu(root=None):
    """(QEMU binary, its module directory) of the private QEMU that
    has the igb device (Layout.vfs): under $NUMAMIG_NESTED_QEMU_ROOT, or
    VF_QEMU_ROOT.

    :raises QemuUnavailable: not there, or without igb (saying how to
        install it).
    """
    root = root or os.environ.get(VF_QEMU_ROOT_ENV) or VF_QEMU_ROOT
    binary = os.path.join(root, 'usr', 'bin', 'qemu-system-x86_64')
    modules = os.path.join(root, 'usr', 'lib', 'x86_64-linux-gnu', 'qemu')
    hint = ("install it with 'bash tools/nested-qemu.sh' (bookworm-"
            "backports' qemu-system-x86 unpacked there, not over the "
            "system QEMU)")
    if not os.access(binary, os.X_OK):
        raise QemuUnavailable(f"no QEMU with igb (SR-IOV) at {binary}: "
                              f"{hint}")
    try:
        proc = subprocess.run(
            [binary, '-device', 'igb,help'], capture_output=True,
            text=True, timeout=60, env=dict(os.environ,
                                            QEMU_MODULE_DIR=modules))
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise QemuUnavailable(f"{binary} does not run: {exc}; {hint}") \
            from exc
    if proc.returncode != 0:
        said = (proc.stderr.strip().splitlines() or [''])[-1]
        raise QemuUnavailable(f"{binary} has no igb device ({said}); "
                              f"{hint}")
    return binary, modules


class QemuExited(RuntimeError):
    """The machine's QEMU ended before its agent answered.

    ``returncode`` is Popen's: negative for the signal that ended it (an
    emulator's own assertion aborts it with SIGABRT).
    """

    def __init__(self, returncode, message):
        super().__init__(message)
        self.returncode = returncode

    @property
    def by_signal(self):
        return self.returncode is not None and self.returncode < 0


def _die_with_parent():
    """In the child before exec: SIGKILL it when the harness dies, even
    by SIGKILL, so that no machine outlives a killed CI job."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")


class _TimeoutTransport(xmlrpc.client.Transport):
    def __init__(self, timeout):
        super().__init__()
        self.timeout = timeout

    def make_connection(self, host):
        connection = super().make_connection(host)
        connection.timeout = self.timeout
        return connection


def _proxy(port, timeout):
    """An agent client whose every call gives up after ``timeout`` s."""
    return xmlrpc.client.ServerProxy(
        f'http://127.0.0.1:{port}/', transport=_TimeoutTransport(timeout),
        allow_none=True)
