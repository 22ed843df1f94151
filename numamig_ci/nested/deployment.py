"""A numamig deployment whose libvirtd hosts run in a nested NUMA host.

One virtual machine (numamig_ci.nested.vm) with a multi-node layout runs
two (or more) libvirtd hosts side by side, each in its own mount
namespace with its own hugetlbfs mounts; the conductor and one compute
agent per host run here, as in --local-libvirt, and reach their libvirtd
over the forwarded TCP port (``qemu+tcp://127.0.0.1:PORT/system``). A
libvirtd inside dials its migration peer at that same address, which
inside the machine is the peer's own port.

The hosts share one kernel, so its resources are split between them by
numamig's own configuration: every huge page pool is divided (each host
reserves the other hosts' part with ``reserved_huge_pages``), and the
CPU sets differ (see ``host_sets``). Page counts are split from what
the kernel really reserved, read back after boot.

With one layout per host instead, each host gets a machine of its own
(so the hosts may differ in node count: the spec's missing-node
problem); the two machines are joined by a second NIC on a QEMU socket
network, over which each libvirtd reaches its peer at 10.1.0.N.

The last host (Session.pair's destination) runs numamig's migration
guard, as a compute host set up for a rolling upgrade does: its agent
writes the hook and its claims to the machine's state share, which the
libvirtd inside sees at the very same paths (``_share_paths``), and the
hook runs with the agent's own interpreter and code. Any host's agent
may be restarted as an older release (``restart_agent``); the
conductor lets NUMA guests migrate while one is (``[workarounds]
enable_numa_live_migration``), so that an old source can be shown
sending its XML verbatim into the guard.

A host's agent may also be moved into its machine (``move_agents``),
where it reads the /proc of the kernel its QEMUs run on, as on a real
compute host (the migration threads' placement needs that): the
machine's agent starts it with this interpreter and code (the paths
``_share_paths`` gives them inside), its configuration and log on the
machine's state share, its broker reached through QEMU's user network
(``machine_transport_url``) and its libvirtd at the same URI as from
here.
"""

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import time
import xmlrpc.client

from numamig import exception
from numamig import filemodes
from numamig.conf import CONF
from numamig.virt.libvirt import guard_install
from numamig.virt.libvirt import settings as lv_settings
from numamig_ci import libvirt_hosts
from numamig_ci import local_deployment
from numamig_ci.nested import image
from numamig_ci.nested import vm as nested_vm

MIGRATION_PORT_BASE = 49200
LINK_NET = '10.1.0'
# This machine's loopback as a nested machine reaches it (QEMU's user
# network forwards the gateway's connections to 127.0.0.1 here).
USER_NET_GATEWAY = '10.0.2.2'
# An agent's [compute] device_detach_timeout on a machine with devices:
# short, for the scenario whose guest never releases one (device-stuck;
# device-move's unplugs took 0.5-0.9 s).
DEVICE_DETACH_TIMEOUT_S = 10
# The [pci] alias flavors ask a machine's devices by (Layout.devices).
PCI_ALIAS = 'nested-nic'


class NestedHost:
    """A libvirtd host inside the machine, as the daemons here see it."""

    def __init__(self, name, port, machine):
        self.name = name
        self.port = port
        self.uri = f'qemu+tcp://127.0.0.1:{port}/system'
        self.machine = machine

    def qemu_pid(self, domain_name):
        return self.machine.agent.qemu_pid(self.name, domain_name)

    def stop(self):
        """Nothing here: the machine's power-off stops every daemon."""


class NestedDeployment(local_deployment.LocalDeployment):
    """``count`` libvirtd hosts in nested machines, daemons here.

    :param layouts: one Layout (every host in one machine) or one per
        host (a machine each; two hosts only).

    After ``start_hosts``: ``machines`` the running NestedVMs and
    ``pools`` {host: {(node, size KiB): (pages in the pool, pages it may
    give guests)}}.
    """

    def __init__(self, count=2, layouts=None, transport_url=None,
                 db_url=None, state_dir=None, log=print,
                 boot_timeout=nested_vm.BOOT_TIMEOUT_S):
        super().__init__(count, transport_url=transport_url, db_url=db_url,
                         state_dir=state_dir)
        self.layouts = tuple(layouts or (nested_vm.Layout(),))
        if len(self.layouts) != 1 and (len(self.layouts) != count
                                       or count != 2):
            raise exception.Invalid(
                reason=f"give one nested layout for all hosts, or one per "
                       f"host for two hosts; got {len(self.layouts)} for "
                       f"{count} hosts")
        self.boot_timeout = boot_timeout
        self.log = log
        self.machines = []
        self.pools = {}
        # {host: guard.GuardSettings} of the guarded host once started;
        # empty, with the reason in guard_unavailable, when its hook
        # cannot run inside the machine.
        self.guards = {}
        self.guard_unavailable = None
        # Hosts whose compute agent runs inside its machine.
        self.inside = set()

    @property
    def shared_machine(self):
        return len(self.layouts) == 1

    def start_hosts(self):
        """Build or find the image, boot the machines, start the hosts.

        :raises image.ImageUnavailable: no image and none can be built.
        :raises RuntimeError: a machine or a daemon did not start.
        """
        image_dir = image.ensure(log=self.log)
        os.makedirs(self.state_dir, exist_ok=True)
        from numamig.db import api as db_api
        db_api.Database(self.db_url).sync()
        groups = [self.host_names] if self.shared_machine else \
            [[name] for name in self.host_names]
        link_port = libvirt_hosts.free_port()
        for index, (layout, names) in enumerate(zip(self.layouts, groups,
                                                         strict=True)):
            link = None if self.shared_machine else \
                (index, 'listen' if index == 0 else 'connect', link_port)
            self.machines.append(nested_vm.NestedVM(
                layout, image_dir, code_dir=_code_dir(),
                state_dir=os.path.join(self.state_dir, f'vm{index}'),
                # libvirt probes QEMU again when /dev/kvm comes or goes:
                # machines with KVM keep a cache of their own.
                caps_dir=image_dir + ('.qemu-caps-kvm' if layout.kvm
                                      else '.qemu-caps'),
                ports=len(names),
                boot_timeout=self.boot_timeout, link=link))
        for machine in self.machines:   # the listening end first
            machine.boot()
            if machine.link is not None and machine.link[1] == 'listen':
                _wait_listening(link_port, self.boot_timeout)
        for machine, names in zip(self.machines, groups, strict=True):
            self._wait_ready(machine)
            self._start_in(machine, names)

    def _wait_ready(self, machine):
        """Wait for ``machine``'s agent; boot it once more if its QEMU
        died by a signal on the way.

        Debian's QEMU under TCG has aborted on its own assertion while
        the machine's kernel set up a device (``msix_table_mmio_write``,
        SIGABRT), once in dozens of boots and before anything of
        numamig ran inside; the next boot of the same image came up.
        Nothing of the run lives in the machine yet (its disk is a
        snapshot), so a second boot loses nothing. Only once, and only
        for a death by signal of a machine without a link to another:
        an exit status is QEMU refusing its arguments, which a second
        boot would only repeat, and a linked pair would need both ends
        booted again together.
        """
        try:
            machine.wait_ready()
        except nested_vm.QemuExited as exc:
            if not exc.by_signal or machine.link is not None:
                raise
            index = self.machines.index(machine)
            said = [line for line in str(exc).splitlines() if line.strip()]
            self.log(f"numamig-ci: nested machine {index}: QEMU died by "
                     f"signal {-exc.returncode} while booting ({said[-1]}); "
                     f"booting it once more")
            machine.stop()
            machine.boot()
            machine.wait_ready()

    def _start_in(self, machine, names):
        if machine.link is not None:
            index = machine.link[0]
            machine.agent.link_up(f'{nested_vm.LINK_MAC_PREFIX}:{index:02x}',
                                  f'{LINK_NET}.{index + 1}/24')
        if machine.layout.kvm:
            # Before the libvirtd hosts: they look for /dev/kvm at start.
            present, said = machine.agent.load_kvm()
            if not present:
                raise RuntimeError(f"no /dev/kvm in the nested machine "
                                   f"with kvm=1: {said}")
        if machine.layout.devices:
            present, said = machine.agent.load_vfio()
            if not present:
                raise RuntimeError(f"no vfio-pci driver in the nested "
                                   f"machine with devices: {said}")
        # Before the libvirtd hosts and the compute agents: numamig
        # reads the host's PCI functions from libvirt at start.
        for pf, expected in sorted(machine.layout.vf_addresses().items()):
            if not expected:
                continue
            made = tuple(machine.agent.create_vfs(pf, len(expected)))
            if made != expected:
                raise RuntimeError(f"{pf}: the nested machine's kernel "
                                   f"made VFs {made}, not {expected}")
        kernel = machine.agent.huge_pages()
        moved = pages_not_as_asked(machine.layout, kernel)
        if moved:
            index = self.machines.index(machine)
            self.log(f"numamig-ci: nested machine {index}: {moved}")
        self.pools.update(split_pools(kernel, names))
        shared = self._share_paths(machine)
        for offset, name in enumerate(names):
            index = self.host_names.index(name)
            port = machine.ports[offset]
            hooks_dir = ''
            if name == self.host_names[-1] and shared:
                hooks_dir = self._install_guard(machine, name)
            machine.agent.start_host(name, port,
                                     MIGRATION_PORT_BASE + 64 * index,
                                     hooks_dir)
            self.libvirt[name] = NestedHost(name, port, machine)
            self.sets[name] = host_sets(index, machine.layout)

    def _share_paths(self, machine):
        """Give the code, the interpreter and the machine's state share
        the paths they have here, inside ``machine``; return whether
        the migration guard's hook can run there (else say why in
        ``guard_unavailable``)."""
        python = agent_python()
        code = _code_dir()
        inner = tuple(machine.agent.python_version())
        if inner != tuple(sys.version_info[:2]):
            self.guard_unavailable = (
                f"the nested host's Python {'.'.join(map(str, inner))} "
                f"cannot run the guard hook with this interpreter's "
                f"packages (Python {sys.version_info[0]}."
                f"{sys.version_info[1]})")
        elif not os.path.realpath(python).startswith(code + os.sep) and \
                not python.startswith(code + os.sep):
            self.guard_unavailable = (
                f"the compute agent's interpreter {python} is outside "
                f"{code}, the one directory shared with the nested host")
        if self.guard_unavailable:
            return False
        machine.agent.alias(code, nested_vm.CODE_SHARE)
        machine.agent.alias(machine.state_dir, nested_vm.STATE_SHARE)
        # A virtual environment names its base interpreter by the path it
        # has here; inside, the machine's own Python of the same version.
        if sys.base_prefix != '/usr':
            machine.agent.alias(sys.base_prefix, '/usr')
        return True

    def _install_guard(self, machine, name):
        """Write host ``name``'s guard hook where its libvirtd, started
        next, finds it; return that hooks directory."""
        directory = os.path.join(machine.state_dir, 'guard', name)
        settings = dataclasses.replace(
            lv_settings.guard_from_conf(CONF.libvirt),
            hook_path=os.path.join(directory, 'qemu.d',
                                   'numamig-migration-guard'),
            claims_file=os.path.join(directory, 'claims.json'),
            log_file=os.path.join(directory, 'guard.log'),
            python=agent_python())
        # numamig's own installer, as the agent runs it at its start
        # (which finds the same hook there and leaves it).
        state, _changed = guard_install.install(settings, name)
        if state != guard_install.ON:
            raise RuntimeError(f"the migration guard of {name} could not "
                               f"be installed at {settings.hook_path}")
        self.guards[name] = settings
        return os.path.dirname(settings.hook_path)

    def inbound_address(self, name):
        """Where the other hosts' libvirtd reach host ``name``."""
        if self.shared_machine:
            return '127.0.0.1'
        return f'{LINK_NET}.{self.host_names.index(name) + 1}'

    def _config(self, name, host, sets):
        text = super()._config(name, host, sets)
        with_devices = any(layout.devices for layout in self.layouts)
        with_vfs = any(layout.vfs for layout in self.layouts)
        if host is None:
            return text + ('[workarounds]\n'
                           'enable_numa_live_migration = true\n') + \
                (pci_config(False, with_vfs) if with_devices else '')
        text = text.replace('live_migration_inbound_addr = 127.0.0.1',
                            f'live_migration_inbound_addr = '
                            f'{self.inbound_address(name)}')
        machine = getattr(host, 'machine', None)
        layout = getattr(machine, 'layout', None)
        if layout is not None and layout.kvm and layout.cpu:
            # A machine of a named CPU runs its guests under KVM, so that
            # what they may be given is its CPU (its domain capabilities
            # and compareHypervisorCPU are KVM's; TCG's are the same on
            # every machine): the CPU model checks then tell hosts apart.
            text = text.replace('virt_type = qemu', 'virt_type = kvm')
        lines = [f'reserved_huge_pages = node:{node},size:{size},'
                 f'count:{total - mine}'
                 for (node, size), (total, mine)
                 in sorted(self.pools[name].items()) if total > mine]
        if layout is not None and layout.devices:
            # Still in [compute]: device-stuck waits this long.
            lines.append(f'device_detach_timeout = '
                         f'{DEVICE_DETACH_TIMEOUT_S:g}')
            lines.append(pci_config(True, bool(layout.vfs)).rstrip('\n'))
        settings = self.guards.get(name)
        if settings is not None:
            lines += ['[libvirt]', 'migration_guard = true',
                      f'migration_guard_hook_path = {settings.hook_path}',
                      f'migration_guard_claims_file = '
                      f'{settings.claims_file}',
                      f'migration_guard_log_file = {settings.log_file}']
        return text + ''.join(line + '\n' for line in lines)

    def move_agents(self, names, inside, extra_config=''):
        """Stop the compute agents of hosts ``names`` and start them again
        inside their machine (``inside``) or here, their configuration
        followed by ``extra_config``; the hosts' libvirtd and guests run
        on.

        :raises exception.Invalid: the machine cannot run this
            interpreter and code (``guard_unavailable`` says why).
        """
        if inside and self.guard_unavailable:
            raise exception.Invalid(
                reason=f"no compute agent can run inside the nested "
                       f"machine: {self.guard_unavailable}")
        self.stop_agents(names)
        for name in names:
            if inside:
                self.inside.add(name)
            else:
                self.inside.discard(name)
        for name in names:
            self._spawn(name, 'numamig-compute', self.libvirt[name],
                        self.sets[name], extra_config)

    def stop_agents(self, names):
        """Stop the compute agents of hosts ``names`` (those running)."""
        local_deployment.terminate([self.procs.pop(name) for name in names
                                    if name in self.procs])

    def log_path(self, name):
        if name in self.inside:
            return os.path.join(self.libvirt[name].machine.state_dir,
                                f'{name}.log')
        return super().log_path(name)

    def _spawn(self, name, command, host=None, sets=None, extra_config=''):
        if name not in self.inside:
            return super()._spawn(name, command, host, sets, extra_config)
        machine = self.libvirt[name].machine
        config = os.path.join(machine.state_dir, f'{name}.conf')
        filemodes.write_private(config, in_machine_config(
            self._config(name, host, sets), self.transport_url,
            machine.state_dir) + extra_config)
        # The script and the interpreter its first line names have the
        # same paths inside (``_share_paths``). The harness's PYTHONPATH
        # goes with it, as to the agents here: its entries under the
        # shared directory name the same code inside.
        script = os.path.join(os.path.dirname(sys.executable), command)
        env = {'PYTHONPATH': os.environ['PYTHONPATH']} \
            if os.environ.get('PYTHONPATH') else {}
        machine.agent.start_daemon(name, [script, '--config-file', config],
                                   self.log_path(name), env)
        self.procs[name] = (MachineDaemon(machine.agent, name), _NoLog())
        return None

    def stop(self):
        try:
            super().stop()
        finally:
            for machine in self.machines:
                machine.stop()
            self.machines = []


class MachineDaemon:
    """A daemon the agent of a nested machine runs, with the part of
    subprocess.Popen's interface the deployment's tear-down uses.

    A machine whose agent no longer answers runs no daemon of the
    harness's any more (its power-off ends them): ``poll`` then reports
    it ended, with status -SIGKILL.
    """

    POLL_S = 0.2
    # The harness asks whether its daemons live ten times a second while
    # it waits for reports: the machine's agent (one thread, under TCG)
    # is asked at most this often.
    STATUS_TTL_S = 1.0

    def __init__(self, agent, name, clock=time.monotonic):
        self.agent = agent
        self.name = name
        self.returncode = None
        self._clock = clock
        self._asked = None

    def poll(self):
        if self.returncode is None and (
                self._asked is None
                or self._clock() - self._asked >= self.STATUS_TTL_S):
            self._asked = self._clock()
            try:
                self.returncode = self.agent.daemon_status(self.name)
            except (OSError, xmlrpc.client.Error):
                self.returncode = -signal.SIGKILL
        return self.returncode

    def send_signal(self, signum):
        if self.returncode is None:
            try:
                self.returncode = self.agent.signal_daemon(self.name,
                                                           int(signum))
            except (OSError, xmlrpc.client.Error):
                self.returncode = -signal.SIGKILL
            self._asked = self._clock()

    def kill(self):
        self.send_signal(signal.SIGKILL)

    def wait(self, timeout=None):
        deadline = None if timeout is None else self._clock() + timeout
        while True:
            self._asked = None          # ask now
            if self.poll() is not None:
                return self.returncode
            if deadline is not None and self._clock() > deadline:
                raise subprocess.TimeoutExpired(self.name, timeout)
            time.sleep(self.POLL_S)


class _NoLog:
    """The log file a daemon inside a machine leaves the harness to
    close: none (the machine's agent holds it)."""

    def close(self):
        pass


def pci_config(device_spec, vfs=False):
    """The ``[pci]`` section of a deployment whose machines have
    devices (Layout.devices): the alias PCI_ALIAS, NUMA affinity
    required, for conductor and agents; with ``device_spec``, an
    agent's allow-list of the machine's e1000e functions.

    With ``vfs`` (Layout.vfs) the alias asks for the igb's virtual
    functions (type-VF, 8086:10ca) and the allow-list admits the
    physical functions (8086:10c9) too: what keeps a PF from a guest is
    then numamig's matching (no PF unless type-PF is asked for), not
    the allow-list.
    """
    vendor = nested_vm.DEVICE_VENDOR_ID
    if vfs:
        wanted = {'vendor_id': vendor, 'product_id': nested_vm.VF_PRODUCT_ID}
        spec = [{'vendor_id': vendor, 'product_id': nested_vm.PF_PRODUCT_ID},
                wanted]
        device_type = 'type-VF'
    else:
        wanted = {'vendor_id': vendor,
                  'product_id': nested_vm.DEVICE_PRODUCT_ID}
        spec = wanted
        device_type = 'type-PCI'
    lines = ['[pci]', 'alias = ' + json.dumps(
        dict(name=PCI_ALIAS, device_type=device_type,
             numa_policy='required', **wanted), sort_keys=True)]
    if device_spec:
        lines.append('device_spec = ' + json.dumps(spec, sort_keys=True))
    return '\n'.join(lines) + '\n'


def machine_transport_url(url):
    """``url`` (an oslo.messaging transport URL) as a daemon inside a
    nested machine reaches the same broker: a host named as this
    machine's loopback becomes QEMU's user-network gateway."""
    return re.sub(r'(?<=[@,/])(?:127\.0\.0\.1|localhost)(?=[:/,]|$)',
                  USER_NET_GATEWAY, url)


def in_machine_config(text, transport_url, state_dir):
    """A daemon's configuration ``text`` (LocalDeployment._config) for
    its life inside a nested machine: the broker as reached from there,
    its state on the machine's share (the run's directory here is not
    shared). The database is left named: a compute agent never opens
    it."""
    lines = []
    for line in text.splitlines():
        key = line.partition('=')[0].strip()
        if key == 'transport_url':
            line = f'transport_url = {machine_transport_url(transport_url)}'
        elif key == 'state_path':
            line = f'state_path = {state_dir}'
        lines.append(line)
    return '\n'.join(lines) + '\n'


def split_pools(kernel, hosts):
    """{host: {(node, size KiB): (pages in the pool, pages it may use)}}.

    ``kernel`` is the agent's ``huge_pages()``: {node: {size: [free,
    total]}} as strings. Each pool is divided evenly; the remainder goes
    to the hosts after an offset that turns with the node, so that a
    pool of one page per node gives each host one node's page.
    """
    count = len(hosts)
    result = {host: {} for host in hosts}
    for node, sizes in kernel.items():
        for size, (_free, total) in sizes.items():
            for index, host in enumerate(hosts):
                extra = 1 if (index - int(node)) % count < total % count \
                    else 0
                result[host][(int(node), int(size))] = (
                    total, total // count + extra)
    return result


NOT_AS_ASKED = 'the kernel did not reserve the huge pages as asked'
PAGE_SIZES_KB = (('pages_2m', 2048), ('pages_1g', 1024 * 1024))


def pages_not_as_asked(layout, kernel):
    """A line naming the pools the kernel filled otherwise than
    ``layout`` asked (``kernel`` as in ``split_pools``), or None.

    Linux puts a boot-time 1 GiB page on another node when the asked
    one has no free aligned block, and gives fewer 2 MiB pages when a
    node's memory is fragmented: the hosts then get what the kernel
    gave, and scenarios needing more are skipped; this says why.
    """
    wrong = []
    for field, size in PAGE_SIZES_KB:
        asked = dict(enumerate(getattr(layout, field)))
        given = {int(node): int(sizes.get(str(size), (0, 0))[1])
                 for node, sizes in kernel.items()}
        if {n: c for n, c in asked.items() if c} != \
                {n: c for n, c in given.items() if c}:
            wrong.append(f"{size} KiB pages per node {_counts(given)}, "
                         f"not {_counts(asked)}")
    if not wrong:
        return None
    return f"{NOT_AS_ASKED}: {'; '.join(wrong)}"


def _counts(per_node):
    return ', '.join(f'node{n} {c}' for n, c in sorted(per_node.items())) \
        or 'none'


def host_sets(index, layout):
    """(dedicated, shared) of the ``index``-th host (from 0).

    The first host keeps the last core of every node (all its threads)
    shared, the others only node 0's last CPU: the sets differ, every
    host has a shared set (mixed and shared emulator policies need one
    on both sides), the first host keeps whole dedicated cores (thread
    policies) and has less room per node than the others (a guest can
    fit on the others only: ``refusal``).
    """
    cpus = [cpu for node in range(layout.nodes)
            for cpu in layout.node_cpus(node)]
    if len(cpus) < 2:
        return frozenset(cpus), None
    if index == 0:
        shared = frozenset(cpu for node in range(layout.nodes)
                           for cpu in layout.node_cpus(node)[-layout.threads:])
    else:
        shared = frozenset(layout.node_cpus(0)[-1:])
    if shared == frozenset(cpus):       # one core per node: keep one CPU
        shared = frozenset(layout.node_cpus(0)[-1:])
    return frozenset(cpus) - shared, shared


def _wait_listening(port, timeout):
    """Return once a socket listens on TCP ``port`` here (read from
    /proc/net/tcp: connecting would take the place of the peer QEMU)."""
    deadline = time.monotonic() + timeout
    needle = f':{port:04X} '
    while True:
        with open('/proc/net/tcp') as f:
            if any(needle in line and line.split()[3] == '0A'
                   for line in f.readlines()[1:]):
                return
        if time.monotonic() > deadline:
            raise RuntimeError(f"the first nested machine did not listen "
                               f"on its link port {port} within {timeout} s")
        time.sleep(0.2)


def agent_python():
    """The interpreter the compute agents run with (their script's
    ``#!`` line): the one the guard's hook is written to run."""
    script = os.path.join(os.path.dirname(sys.executable), 'numamig-compute')
    try:
        with open(script) as f:
            first = f.readline()
    except OSError:
        return sys.executable
    return first[2:].strip() if first.startswith('#!/') else sys.executable


def _code_dir():
    """The directory holding the numamig_ci package (the agent's code)."""
    import numamig_ci
    return os.path.dirname(os.path.dirname(os.path.abspath(
        numamig_ci.__file__)))
