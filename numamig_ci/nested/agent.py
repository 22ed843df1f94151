"""The host agent inside a nested host (run by recipe/l1-init, python3).

It starts and stops the libvirtd hosts of the virtual machine (each in
its own mount namespace, with its own hugetlbfs mounts, listening on the
port the machine forwards from the outer host) and answers what the
harness reads from the kernel's own view: per-node huge page counters,
QEMU's thread affinities, ``numa_maps`` and ``numastat -p``. It speaks
XML-RPC on the port the outer host forwards to it from 127.0.0.1 only.

Read from the 9p share, not the image: it uses only the standard
library, python3-libvirt and numamig_ci.libvirt_hosts, never numamig.
"""

import argparse
import glob
import os
import re
import signal
import subprocess
import sys
import threading
import xmlrpc.server

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
from numamig_ci import libvirt_hosts  # noqa: E402 (path set just above)

HOSTS_ROOT = '/tmp/numamig-hosts'
CAPS_CACHE = '/numamig-caps'
NODE_DIR = '/sys/devices/system/node'
PCI_DIR = '/sys/bus/pci/devices'
COMMAND_TIMEOUT_S = 60
# Each libvirtd host mounts hugetlbfs instances of its own: both keep a
# domain's pages under <mount>/libvirt/qemu/<id>-<name>, and a guest
# migrating between two hosts of one machine has the same id and name
# on both.
HUGETLBFS_SETUP = (
    'mount -t hugetlbfs -o pagesize=2M hugetlbfs /dev/hugepages',
    'if grep -q " /dev/hugepages1G " /proc/mounts; then '
    'mount -t hugetlbfs -o pagesize=1G hugetlbfs /dev/hugepages1G; fi')


# libvirtd runs the hooks present at its start; this one fails the QEMU
# operation named in the host's flag file (prepare, start, started) while
# the file exists: the harness's way to make a destination fail an
# incoming migration for real, at a chosen point (with 'started', after
# the destination QEMU took its memory).
FAIL_HOOK = """#!/bin/sh
flag={flag}
if [ -e "$flag" ] && [ "$2" = "$(cat "$flag")" ]; then
    echo "numamig-ci: failure injected at '$2' of $1" >&2
    exit 1
fi
exit 0
"""


class Agent:
    """What the harness may ask; every method returns plain data."""

    def __init__(self):
        self.hosts = {}
        # name -> Popen of the daemons started for the harness.
        self.daemons = {}

    def ping(self):
        with open('/proc/uptime') as f:
            return float(f.read().split()[0])

    def start_host(self, name, port, migration_port_min, hooks_dir=''):
        """Start libvirtd host ``name`` listening on 0.0.0.0:``port``.

        :param hooks_dir: a directory (on a share) whose executables
            libvirtd runs as its ``qemu.d`` hooks, e.g. numamig's
            migration guard, written there by the compute agent outside
            before this start ('' for none).
        """
        if name in self.hosts:
            return self.hosts[name].pid
        os.makedirs(CAPS_CACHE, exist_ok=True)
        # The image lacks the directories libvirt-daemon-system would
        # create; the host's bind mounts need them as mount points.
        for _sub, target in libvirt_hosts.BIND_DIRS:
            os.makedirs(target, exist_ok=True)
        host = libvirt_hosts.LibvirtHost(
            name, HOSTS_ROOT, cache_root=CAPS_CACHE, port=port,
            before_start=lambda directory: _install_hook(directory,
                                                         hooks_dir),
            migration_port_min=migration_port_min, listen_addr='0.0.0.0',
            namespace_setup=HUGETLBFS_SETUP)
        host.start()
        self.hosts[name] = host
        return host.pid

    def start_daemon(self, name, argv, log_path, env=None):
        """Start ``argv`` as the harness's daemon ``name`` (a numamig
        compute agent run here with the outer host's interpreter and
        code, aliased to the shares), its output appended to
        ``log_path``; return its pid.

        :param env: variables set beside a minimal environment (PATH,
            HOME, LANG), e.g. the harness's PYTHONPATH.
        :raises RuntimeError: a daemon of that name still runs.
        """
        running = self.daemons.get(name)
        if running is not None and running.poll() is None:
            raise RuntimeError(f"daemon {name} still runs as pid "
                               f"{running.pid}")
        environment = {'PATH': os.environ.get('PATH', '/usr/bin:/bin'),
                       'HOME': '/root', 'LANG': 'C.UTF-8'}
        environment.update(env or {})
        with open(log_path, 'ab') as log:
            self.daemons[name] = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, env=environment, cwd='/',
                start_new_session=True)
        return self.daemons[name].pid

    def daemon_status(self, name):
        """None while daemon ``name`` runs, else its exit status."""
        return self.daemons[name].poll()

    def signal_daemon(self, name, signum):
        """Send ``signum`` to daemon ``name`` (nothing once it ended);
        return its status as ``daemon_status`` does."""
        proc = self.daemons[name]
        if proc.poll() is None:
            proc.send_signal(int(signum))
        return proc.poll()

    def stop_daemons(self, grace_s=15):
        """SIGTERM every daemon, SIGKILL those still running after
        ``grace_s``."""
        for proc in self.daemons.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.daemons.values():
            try:
                proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        return True

    def stop_hosts(self):
        """Destroy every guest and stop every daemon (publishes the QEMU
        capability cache for the next boot of this image); the harness's
        daemons first, as they talk to the hosts."""
        self.stop_daemons()
        for host in self.hosts.values():
            host.stop()
        self.hosts = {}
        return True

    def python_version(self):
        """[major, minor] of this machine's python3."""
        return list(sys.version_info[:2])

    def alias(self, path, target):
        """Make ``path`` (a path of the outer host) name ``target`` here.

        Files the daemons outside write for a libvirtd inside (the
        migration guard's hook, its claims file, the interpreter and
        code the hook runs) then have the same path on both sides, as on
        a real compute host. An existing ``path`` is left alone when it
        already names ``target``.

        :raises RuntimeError: ``path`` exists and is something else.
        """
        path, target = os.path.abspath(path), os.path.abspath(target)
        if os.path.realpath(path) == os.path.realpath(target):
            return False
        if os.path.lexists(path):
            raise RuntimeError(f"{path} exists in the nested host and is "
                               f"not {target}")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        os.symlink(target, path)
        return True

    def link_up(self, mac, address):
        """Give the NIC with ``mac`` (the link to another nested machine)
        ``address`` (CIDR); return the interface's name."""
        for nic in os.listdir('/sys/class/net'):
            with open(f'/sys/class/net/{nic}/address') as f:
                if f.read().strip() != mac.lower():
                    continue
            _command(['ip', 'link', 'set', nic, 'up'])
            _command(['ip', 'addr', 'replace', address, 'dev', nic])
            return nic
        raise RuntimeError(f"no network interface with MAC {mac}")

    def fail_at(self, host, operation):
        """Fail ``host``'s QEMU ``operation`` from now on ('' stops)."""
        flag = _flag_path(self.hosts[host].directory)
        if operation:
            with open(flag, 'w') as f:
                f.write(operation)
        elif os.path.exists(flag):
            os.unlink(flag)
        return True

    def online_cpus(self):
        """The kernel's online CPUs (``/sys/devices/system/cpu/online``,
        e.g. '0,3'): what CPU power management took offline is absent."""
        with open('/sys/devices/system/cpu/online') as f:
            return f.read().strip()

    def huge_pages(self):
        """{node: {page size KiB: [free, total]}} from sysfs."""
        pools = {}
        for path in glob.glob(f'{NODE_DIR}/node*/hugepages/hugepages-*kB'):
            node_dir, _, pool = os.path.relpath(path, NODE_DIR).split('/')
            node = node_dir[len('node'):]
            size = pool[len('hugepages-'):-len('kB')]
            pools.setdefault(node, {})[size] = [
                _read_int(f'{path}/free_hugepages'),
                _read_int(f'{path}/nr_hugepages')]
        return pools

    def load_kvm(self):
        """Load KVM for the CPU's virtualisation extension (TCG emulates
        AMD's SVM): [whether /dev/kvm is there, the module's answer]. A
        guest kernel then runs under KVM in this machine instead of
        under a TCG inside TCG (the harness chooses before it starts
        the libvirtd hosts, which probe /dev/kvm once)."""
        with open('/proc/cpuinfo') as f:
            flags = f.read()
        module = 'kvm_amd' if ' svm' in flags else 'kvm_intel'
        proc = subprocess.run(['modprobe', module], capture_output=True,
                              text=True, timeout=COMMAND_TIMEOUT_S)
        return [os.path.exists('/dev/kvm'),
                f"modprobe {module}: exit {proc.returncode} "
                f"{proc.stderr.strip()}"]

    def load_vfio(self):
        """Load vfio-pci, which libvirt binds an assigned device to
        (``managed='yes'``): [whether the driver is there, modprobe's
        answer]."""
        proc = subprocess.run(['modprobe', 'vfio-pci'], capture_output=True,
                              text=True, timeout=COMMAND_TIMEOUT_S)
        return [os.path.isdir('/sys/bus/pci/drivers/vfio-pci'),
                f"modprobe vfio-pci: exit {proc.returncode} "
                f"{proc.stderr.strip()}"]

    def create_vfs(self, address, count):
        """Have the PF at ``address`` create ``count`` SR-IOV virtual
        functions (sysfs sriov_numvfs, its driver's doing); return their
        addresses in VF order (its ``virtfn<i>`` links), [] for 0.

        :raises RuntimeError: the kernel refused (its answer attached).
        """
        path = os.path.join(PCI_DIR, address)
        try:
            with open(os.path.join(path, 'sriov_numvfs'), 'w') as f:
                f.write(str(int(count)))
        except OSError as exc:
            raise RuntimeError(f"{address}: sriov_numvfs = {count}: "
                               f"{exc}") from exc
        return [os.path.basename(os.readlink(os.path.join(path,
                                                          f'virtfn{i}')))
                for i in range(int(count))]

    def pci_devices(self):
        """{address: {vendor, device, numa_node, driver, iommu_group,
        physfn}} of every PCI function, from sysfs (the kernel's view:
        '' where a function has no driver, no IOMMU group or is no
        SR-IOV VF)."""
        found = {}
        for path in glob.glob(os.path.join(PCI_DIR, '*')):
            entry = {}
            for key in ('vendor', 'device', 'numa_node'):
                with open(os.path.join(path, key)) as f:
                    entry[key] = f.read().strip()
            for key in ('driver', 'iommu_group', 'physfn'):
                link = os.path.join(path, key)
                entry[key] = os.path.basename(os.readlink(link)) \
                    if os.path.islink(link) else ''
            found[os.path.basename(path)] = entry
        return found

    def node_meminfo(self):
        """{node: {field: kB}} of every node's ``meminfo`` in sysfs
        (MemTotal, MemFree, MemUsed, ...): the kernel's own per-node
        count of the memory a guest's QEMU takes and gives back."""
        nodes = {}
        for path in glob.glob(f'{NODE_DIR}/node*/meminfo'):
            node = os.path.basename(os.path.dirname(path))[len('node'):]
            fields = {}
            with open(path) as f:
                for line in f:
                    # "Node 1 MemFree:        1817096 kB"
                    words = line.split()
                    if len(words) == 5 and words[4] == 'kB':
                        fields[words[2].rstrip(':')] = int(words[3])
            nodes[node] = fields
        return nodes

    def qemu_pid(self, host, domain_name):
        return self.hosts[host].qemu_pid(domain_name)

    def node_distances(self):
        """{node: {node: distance}} (as strings) from sysfs: the table
        this kernel read from the machine's firmware (ACPI SLIT), or its
        own 10 / 20 where there is none."""
        table = {}
        paths = glob.glob(f'{NODE_DIR}/node*/distance')
        nodes = sorted(int(os.path.basename(os.path.dirname(p))[4:])
                       for p in paths)
        for node in nodes:
            with open(f'{NODE_DIR}/node{node}/distance') as f:
                values = f.read().split()
            table[str(node)] = {str(other): int(value)
                                for other, value in zip(nodes, values,
                                                        strict=True)}
        return table

    def qemu_numa_dist(self, pid):
        """["src,dst,val", ...] of a QEMU's ``-numa dist`` arguments:
        the table its guest's firmware was given at start."""
        with open(f'/proc/{int(pid)}/cmdline', 'rb') as f:
            argv = f.read().decode(errors='replace').split('\0')
        found = []
        for arg in argv:
            if arg.startswith('dist,'):
                fields = dict(item.partition('=')[::2]
                              for item in arg[5:].split(','))
                found.append(f"{fields.get('src')},{fields.get('dst')},"
                             f"{fields.get('val')}")
        return found

    def vcpu_affinity(self, pid):
        """{vCPU index (str): Cpus_allowed_list} of QEMU's vCPU threads."""
        return {str(k): v for k, v in
                libvirt_hosts.vcpu_thread_affinity(pid).items()}

    def thread_affinity(self, pid):
        """{thread name: [Cpus_allowed_list, ...]} of every QEMU thread."""
        found = {}
        for task in glob.glob(f'/proc/{pid}/task/*'):
            try:
                with open(f'{task}/comm') as f:
                    comm = f.read().strip()
                with open(f'{task}/status') as f:
                    allowed = [line.split(':', 1)[1].strip() for line in f
                               if line.startswith('Cpus_allowed_list:')]
            except OSError:      # the thread ended meanwhile
                continue
            found.setdefault(comm, []).extend(allowed)
        return found

    def numa_maps(self, pid):
        with open(f'/proc/{pid}/numa_maps') as f:
            return f.read()

    def migrate_pages(self, pid, from_nodes, to_nodes):
        """numactl's ``migratepages PID FROM TO``: the kernel moves the
        process's pages on nodes FROM to nodes TO (what displaces a
        floating guest's memory behind libvirt's back)."""
        for nodes in (from_nodes, to_nodes):
            if not re.fullmatch(r'[0-9,-]+', str(nodes)):
                raise ValueError(f"not a node list: {nodes!r}")
        return _command(['migratepages', str(int(pid)), str(from_nodes),
                         str(to_nodes)])

    def numa_balancing(self, value):
        """Set the kernel's automatic NUMA balancing (0 off, 1 on);
        return what it was. Left on, it moves a process's pages toward
        the threads touching them by itself, the locality watch's job."""
        path = '/proc/sys/kernel/numa_balancing'
        with open(path) as f:
            was = int(f.read().strip() or 0)
        with open(path, 'w') as f:
            f.write(str(int(value)))
        return was

    def set_vcpu_threads_affinity(self, pid, cpus):
        """Let QEMU's vCPU threads ("CPU n/KVM|TCG") run only on
        ``cpus`` (a list), by sched_setaffinity, not through libvirt:
        the domain XML pins nothing. Returns the threads' ids."""
        wanted = {int(c) for c in cpus}
        done = []
        for task in glob.glob(f'/proc/{int(pid)}/task/*'):
            try:
                with open(f'{task}/comm') as f:
                    comm = f.read().strip()
            except OSError:
                continue
            if re.fullmatch(r'CPU \d+/(KVM|TCG)', comm):
                os.sched_setaffinity(int(os.path.basename(task)), wanted)
                done.append(int(os.path.basename(task)))
        return done

    def maps(self, pid):
        """``/proc/PID/maps``: each mapping's extent (``numa_maps``
        gives its start only)."""
        with open(f'/proc/{pid}/maps') as f:
            return f.read()

    def numastat(self, pid):
        """``numastat -p`` of a process (it counts a 1 GiB page as 2 MB:
        read ``numa_maps`` or the sysfs counters for 1 GiB pages)."""
        return _command(['numastat', '-p', str(int(pid))])

    def write_dirtying_kernel(self, name, top_mib):
        """Write libvirt_hosts.dirtying_kernel(top_mib) as ``name`` where
        every host's libvirtd reads it; return its path."""
        if os.path.basename(name) != name or not name.endswith('.bin'):
            raise ValueError(f"not a kernel file name: {name!r}")
        os.makedirs(HOSTS_ROOT, exist_ok=True)
        path = os.path.join(HOSTS_ROOT, name)
        with open(path, 'wb') as f:
            f.write(libvirt_hosts.dirtying_kernel(int(top_mib)))
        return path

    def dumpxml(self, host, domain_name, inactive=False):
        """``virsh dumpxml`` (live or inactive), as virsh inside sees it."""
        argv = ['virsh', '-c', self.hosts[host].uri, 'dumpxml', domain_name]
        return _command(argv + (['--inactive'] if inactive else []))

    def shutdown(self):
        """Stop the hosts, then the agent (the machine powers off)."""
        self.stop_hosts()
        threading.Thread(target=self._server.shutdown).start()
        return True


def _flag_path(directory):
    return os.path.join(directory, 'fail-at')


def _install_hook(directory, hooks_dir=''):
    hooks = os.path.join(directory, 'etc', 'hooks')
    os.makedirs(hooks, exist_ok=True)
    path = os.path.join(hooks, 'qemu')
    with open(path, 'w') as f:
        f.write(FAIL_HOOK.format(flag=_flag_path(directory)))
    os.chmod(path, 0o755)
    if hooks_dir:
        # libvirt runs every executable of qemu.d after the main hook,
        # each a filter of the incoming migration's XML.
        link = os.path.join(hooks, 'qemu.d')
        if os.path.isdir(link) and not os.path.islink(link):
            os.rmdir(link)        # copied from /etc/libvirt: empty
        os.symlink(hooks_dir, link)


def _command(argv, timeout=COMMAND_TIMEOUT_S):
    """The output of a command; raises (the harness sees a Fault) when it
    fails or overruns ``timeout``."""
    proc = subprocess.run(argv, capture_output=True, text=True,
                          timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited with "
                           f"{proc.returncode}: {proc.stderr.strip()}")
    return proc.stdout


def reserve_pages(counts, size_kb=2048):
    """Reserve ``counts[n]`` pages of ``size_kb`` on node n; return what
    the kernel really gave (it may give fewer: read back, never trust)."""
    given = []
    for node, count in enumerate(counts):
        pool = (f'{NODE_DIR}/node{node}/hugepages/hugepages-{size_kb}kB/'
                f'nr_hugepages')
        with open(pool, 'w') as f:
            f.write(str(count))
        given.append(_read_int(pool))
    return given


def _read_int(path):
    with open(path) as f:
        return int(f.read())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--port', type=int, required=True)
    parser.add_argument('--hp2m', default='',
                        help="2 MiB pages per node, e.g. 64,64")
    args = parser.parse_args()
    if args.hp2m:
        counts = [int(c) for c in args.hp2m.split(',')]
        print(f"2 MiB pages asked {counts}, given {reserve_pages(counts)}",
              flush=True)
    agent = Agent()
    server = xmlrpc.server.SimpleXMLRPCServer(
        ('0.0.0.0', args.port), allow_none=True, logRequests=False)
    agent._server = server
    server.register_instance(agent)
    print(f"agent listening on {args.port}", flush=True)
    try:
        server.serve_forever()
    finally:
        agent.stop_hosts()


if __name__ == '__main__':
    main()
