"""Real libvirtd hosts side by side on one machine (numamig-ci, tests).

Each host runs its own ``libvirtd --listen`` inside a private mount (and
UTS) namespace, where /etc/libvirt, /run, /var/lib/libvirt,
/var/log/libvirt and /var/cache/libvirt are bind mounts of the host's own
directories; it has its own host_uuid (libvirt refuses a migration
between equal UUIDs), TCP port and migration port range on loopback.
QEMU runs as root without security driver, cgroups or virtlogd, so two
daemons do not fight over shared host state.

The QEMU capability cache (the first probe of QEMU takes ~8 s) is kept
under CACHE_ROOT between runs and shared by every host on the machine:
each host starts with a private copy and publishes what its daemon
probed afresh when it stops, by an atomic rename. No daemon ever writes
into the shared cache, so hosts of concurrent runs cannot corrupt it or
read a half-written file.

Tear-down destroys every guest, kills any QEMU left by its pid file, and
stops the daemon by the pid recorded at start, even after a failure.
The harness ships this with the package (its users have no tests tree);
tests/fixtures/libvirt_daemons.py wraps it in a fixture.
"""

import filecmp
import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
import uuid

import libvirt

CACHE_ROOT = '/var/tmp/numamig-libvirt-cache'
# Where libvirt keeps the probed QEMU capabilities, under /var/cache/libvirt.
QEMU_CAPS_DIR = os.path.join('qemu', 'capabilities')
BIND_DIRS = (('etc', '/etc/libvirt'), ('run', '/run'),
             ('lib', '/var/lib/libvirt'), ('log', '/var/log/libvirt'),
             ('cache', '/var/cache/libvirt'))
START_TIMEOUT_S = 20


def missing_requirements():
    """Return why real hosts cannot run here, or None when they can."""
    if os.geteuid() != 0:
        return "real libvirt hosts need root (mount namespaces)"
    for tool in ('unshare', 'libvirtd', 'qemu-system-x86_64'):
        if shutil.which(tool, path='/usr/sbin:/usr/bin:/sbin:/bin') is None:
            return f"{tool} is not installed"
    probe = subprocess.run(['unshare', '--mount', '--uts', 'true'],
                           capture_output=True)
    if probe.returncode != 0:
        return (f"unshare --mount fails here: "
                f"{probe.stderr.decode().strip()}")
    return None


def free_port():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def accepts(port):
    """Whether something accepts TCP connections on 127.0.0.1:``port``."""
    try:
        socket.create_connection(('127.0.0.1', port), timeout=1).close()
        return True
    except OSError:
        return False


class LibvirtHost:
    """One libvirtd host. After ``start``: ``uri`` (local client),
    ``peer_uri`` (what another host's libvirtd dials), ``port``,
    ``directory``. ``stop`` tears it down and may be called at any time.

    :param cache_root: the QEMU capability cache shared between runs
        and hosts (see ``seed_cache`` and ``publish_cache``).
    :param port, migration_port_min: fixed ports (default: free ones);
        a nested host takes the ports its virtual machine forwards.
    :param listen_addr: where libvirtd listens for TCP clients.
    :param namespace_setup: shell commands run inside the host's mount
        namespace before libvirtd starts (a nested host mounts its own
        hugetlbfs instances there, so that two daemons' per-domain page
        directories never collide).
    :param netns: a network namespace (``ip netns`` name) the daemon and
        its QEMU run in, so that migrations into this host cross the
        link into that namespace (numamig_ci.shaped_link); None: the
        caller's. The unix socket of ``uri`` is a file, reachable from
        every namespace.
    """

    def __init__(self, name, root, cache_root=CACHE_ROOT, before_start=None,
                 port=None, migration_port_min=None, listen_addr='127.0.0.1',
                 namespace_setup=(), netns=None):
        self.name = name
        # Called with the host's directory once its configuration is
        # written, before libvirtd starts: libvirtd runs only the hooks
        # present at its start (``<directory>/etc/hooks``).
        self.before_start = before_start
        self.directory = os.path.join(root, name)
        self.cache_root = cache_root
        self.port = port or free_port()
        self.migration_port_min = migration_port_min or free_port()
        self.listen_addr = listen_addr
        self.namespace_setup = tuple(namespace_setup)
        self.netns = netns
        self.host_uuid = str(uuid.uuid4())
        self.pid = None
        self._proc = None
        self._out = None

    @property
    def socket_path(self):
        return os.path.join(self.directory, 'run', 'libvirt', 'libvirt-sock')

    @property
    def uri(self):
        return f'qemu+unix:///system?socket={self.socket_path}'

    @property
    def peer_uri(self):
        return f'qemu+tcp://127.0.0.1:{self.port}/system'

    def start(self):
        """Start the daemon; on failure everything started is stopped.

        :raises RuntimeError: naming the host and the daemon's output.
        """
        self._prepare_dirs()
        self._write_config()
        if self.before_start is not None:
            self.before_start(self.directory)
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def _prepare_dirs(self):
        for sub, _target in BIND_DIRS:
            os.makedirs(os.path.join(self.directory, sub), exist_ok=True)
        os.makedirs(os.path.join(self.directory, 'run', 'libvirt'),
                    exist_ok=True)
        seed_cache(self.cache_root, os.path.join(self.directory, 'cache'))
        etc = os.path.join(self.directory, 'etc')
        shutil.rmtree(etc)
        shutil.copytree('/etc/libvirt', etc, symlinks=True)
        autostart = os.path.join(etc, 'qemu', 'networks', 'autostart',
                                 'default.xml')
        if os.path.lexists(autostart):
            os.unlink(autostart)

    def _write_config(self):
        etc = os.path.join(self.directory, 'etc')
        with open(os.path.join(etc, 'libvirtd.conf'), 'a') as f:
            f.write(f'\n# numamig test host {self.name}\n'
                    f'host_uuid = "{self.host_uuid}"\n'
                    'listen_tls = 0\nlisten_tcp = 1\n'
                    f'listen_addr = "{self.listen_addr}"\n'
                    f'tcp_port = "{self.port}"\n'
                    'auth_tcp = "none"\nauth_unix_rw = "none"\n'
                    'log_outputs = "3:file:/var/log/libvirt/libvirtd.log"\n')
        # migration_address must stay unset on loopback: libvirtd refuses
        # to start with 127.0.0.1 there.
        with open(os.path.join(etc, 'qemu.conf'), 'a') as f:
            f.write(f'\n# numamig test host {self.name}\n'
                    'user = "root"\ngroup = "root"\n'
                    'dynamic_ownership = 0\nsecurity_driver = "none"\n'
                    'stdio_handler = "file"\nnamespaces = [ ]\n'
                    'cgroup_controllers = [ ]\n'
                    f'migration_port_min = {self.migration_port_min}\n'
                    f'migration_port_max = {self.migration_port_min + 15}\n')

    def _start(self):
        mounts = ' && '.join(
            f'mount --bind {self._source(sub)} {target}'
            for sub, target in BIND_DIRS)
        mounts = ' && '.join((mounts,) + self.namespace_setup)
        script = (f'hostname {self.name} && {mounts} && exec libvirtd '
                  f'--listen --pid-file /run/libvirt/libvirtd-numamig.pid')
        self._out = open(os.path.join(self.directory, 'daemon.out'), 'wb')
        # ip netns exec, unshare and sh all exec, so the recorded pid is
        # libvirtd's.
        netns = ['ip', 'netns', 'exec', self.netns] if self.netns else []
        proc = subprocess.Popen(
            netns + ['unshare', '--mount', '--uts', '--propagation',
                     'private', '--', '/bin/sh', '-c', script],
            stdout=self._out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True)
        self.pid = proc.pid
        self._proc = proc
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _accepting(self.socket_path):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"libvirtd host {self.name} did not start: "
                    f"{self._daemon_output()}")
            time.sleep(0.1)

    def _source(self, sub):
        return os.path.join(self.directory, sub)

    def _daemon_output(self):
        with open(os.path.join(self.directory, 'daemon.out'), 'rb') as f:
            return f.read().decode(errors='replace')[-2000:]

    def qemu_pid(self, domain_name):
        """Return the pid of a running guest's QEMU on this host."""
        path = os.path.join(self.directory, 'run', 'libvirt', 'qemu',
                            f'{domain_name}.pid')
        with open(path) as f:
            return int(f.read().strip())

    def stop(self):
        """Destroy the guests, kill leftover QEMU, stop the daemon."""
        if self._proc is not None and self._proc.poll() is None:
            self._destroy_guests()
        self._kill_leftover_qemu()
        if self._proc is not None and self._proc.poll() is None:
            os.kill(self.pid, signal.SIGTERM)
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(self.pid, signal.SIGKILL)
                self._proc.wait(timeout=10)
        if self._out is not None:
            self._out.close()
            self._out = None
        if self._proc is not None:
            # Only a daemon that stopped cleanly wrote whole cache files.
            if self._proc.returncode == 0:
                publish_cache(os.path.join(self.directory, 'cache'),
                              self.cache_root)
            self._proc = None

    def _destroy_guests(self):
        try:
            conn = libvirt.open(self.uri)
        except libvirt.libvirtError:
            return
        try:
            for dom in conn.listAllDomains():
                try:
                    if dom.isActive():
                        dom.destroy()
                    if dom.isPersistent():
                        dom.undefine()
                except libvirt.libvirtError:
                    pass
        finally:
            conn.close()

    def _kill_leftover_qemu(self):
        piddir = os.path.join(self.directory, 'run', 'libvirt', 'qemu')
        if not os.path.isdir(piddir):
            return
        for entry in os.listdir(piddir):
            if not entry.endswith('.pid'):
                continue
            try:
                with open(os.path.join(piddir, entry)) as f:
                    pid = int(f.read().strip())
                with open(f'/proc/{pid}/comm') as f:
                    if not f.read().startswith('qemu'):
                        continue
                # A stale pid file may name a pid reused since, maybe by
                # another host's QEMU: only a process that sees this
                # host's bind mounts is this host's.
                if not self._mounts_visible_to(pid):
                    continue
                os.kill(pid, signal.SIGKILL)
            except (OSError, ValueError):
                continue

    def _mounts_visible_to(self, pid):
        # A mount's line gives its source relative to the source's own
        # filesystem: match the part of the path unique to this host.
        unique = os.path.join(*self.directory.split(os.sep)[-2:])
        with open(f'/proc/{pid}/mountinfo') as f:
            return unique in f.read()


def seed_cache(cache_root, private):
    """Give a host's ``private`` cache directory the shared cache's files.

    Files are copied, not linked: the host's libvirtd rewrites a file it
    finds stale (after a QEMU or libvirt upgrade) in place, which must
    not reach the shared copy while another host reads it.
    """
    target = os.path.join(private, QEMU_CAPS_DIR)
    os.makedirs(target, exist_ok=True)
    source = os.path.join(cache_root, QEMU_CAPS_DIR)
    if not os.path.isdir(source):
        return
    for entry in os.listdir(source):
        if entry.endswith('.xml'):
            shutil.copy2(os.path.join(source, entry),
                         os.path.join(target, entry))


def publish_cache(private, cache_root):
    """Copy what a stopped host's libvirtd probed into the shared cache.

    Each file lands under a temporary name first and is renamed into
    place, so a host seeding concurrently reads either the old or the
    new file, never a partial one; two hosts publishing the same file
    at once both write a complete, equally valid copy.
    """
    source = os.path.join(private, QEMU_CAPS_DIR)
    if not os.path.isdir(source):
        return
    target = os.path.join(cache_root, QEMU_CAPS_DIR)
    os.makedirs(target, exist_ok=True)
    for entry in os.listdir(source):
        path = os.path.join(source, entry)
        shared = os.path.join(target, entry)
        if not entry.endswith('.xml') or (
                os.path.exists(shared)
                and filecmp.cmp(path, shared, shallow=False)):
            continue
        fd, partial = tempfile.mkstemp(dir=target, prefix=f'.{entry}.')
        os.close(fd)
        try:
            shutil.copy2(path, partial)
            os.replace(partial, shared)
        except BaseException:
            os.unlink(partial)
            raise


def qemu_pid_of(instance_uuid, settle_s=5.0):
    """Return the pid of the one QEMU on this machine running a guest.

    For guests of hosts whose directories the caller does not know (a
    --deployment on this machine): libvirt gives QEMU ``-uuid``. Just
    after a migration the source's QEMU may still be exiting, so two
    are tolerated for up to ``settle_s`` seconds.

    :raises LookupError: none, or still several, run the guest.
    """
    deadline = time.monotonic() + settle_s
    while True:
        pids = _qemu_pids(instance_uuid)
        if len(pids) == 1:
            return pids[0]
        if not pids or time.monotonic() > deadline:
            found = ', '.join(map(str, pids)) or 'none'
            raise LookupError(f"QEMU processes running guest "
                              f"{instance_uuid} on this machine: {found}; "
                              f"expected exactly one")
        time.sleep(0.1)


def _qemu_pids(instance_uuid):
    wanted = ['-uuid', instance_uuid]
    pids = []
    for entry in os.listdir('/proc'):
        if not entry.isdigit():
            continue
        try:
            with open(f'/proc/{entry}/cmdline', 'rb') as f:
                args = f.read().decode(errors='replace').split('\0')
        except OSError:  # the process ended meanwhile
            continue
        if os.path.basename(args[0]).startswith('qemu') and any(
                args[i:i + 2] == wanted for i in range(len(args) - 1)):
            pids.append(int(entry))
    return sorted(pids)


def vcpu_thread_affinity(pid):
    """Return {vCPU index: Cpus_allowed_list} of a QEMU's vCPU threads."""
    result = {}
    for tid in os.listdir(f'/proc/{pid}/task'):
        with open(f'/proc/{pid}/task/{tid}/comm') as f:
            comm = f.read().strip()
        if not comm.startswith('CPU ') or '/' not in comm:
            continue
        index = int(comm[4:comm.index('/')])
        with open(f'/proc/{pid}/task/{tid}/status') as f:
            for line in f:
                if line.startswith('Cpus_allowed_list:'):
                    result[index] = line.split(':', 1)[1].strip()
    return result


def dirtying_kernel(top_mib=96):
    """Return a multiboot kernel that rewrites one word per 4 KiB page of
    guest memory from 2 MiB to ``top_mib`` MiB forever.

    QEMU loads it with ``<os><kernel>``. A guest of zero pages migrates
    too fast to be caught mid-job; this one never converges under a
    bandwidth limit, so an abort can be tested deterministically.
    """
    if not 3 <= top_mib <= 4095:
        raise ValueError(f"the dirtied range ends at 3-4095 MiB, not "
                         f"{top_mib}")
    magic, flags = 0x1BADB002, 0x00010000
    load = 0x100000
    header = struct.pack('<8I', magic, flags, (-(magic + flags)) & 0xFFFFFFFF,
                         load, load, 0, 0, load + 32)
    code = bytes([
        0xBF, 0x00, 0x00, 0x20, 0x00,         # start: mov edi, 0x200000
        0x89, 0x07,                           # loop:  mov [edi], eax
        0x81, 0xC7, 0x00, 0x10, 0x00, 0x00,   #        add edi, 0x1000
        0x40,                                 #        inc eax
        0x81, 0xFF,                           #        cmp edi, top
    ]) + struct.pack('<I', top_mib << 20) + bytes([
        0x72, 0xEF,                           #        jb loop
        0xEB, 0xE8,                           #        jmp start
    ])
    return header + code


# The drain guest (drain_kernel), assembled from this source (GNU as,
# --32; LOAD 0x100000, IDT 0x80000), header first:
#
#   start: cli; mov $0x200000,%edi
#   fill:  mov %edi,(%edi); add $0x1000,%edi; cmp $TOP,%edi; jb fill
#          mov $PAGES,%esi; test %esi,%esi; jz idle
#          (every IDT vector -> handler; lidt idtr)
#          PIT channel 0 mode 2 (out $0x34,0x43), divisor DIVISOR
#          PIC: unmask IRQ0 only (0x21 <- 0xfe, 0xa1 <- 0xff)
#          mov $0x200000,%edi; sti
#   tick:  hlt; mov %esi,%ecx
#   dirty: incl (%edi); add $0x1000,%edi; cmp $WS_END,%edi; jb next
#          mov $0x200000,%edi
#   next:  loop dirty; jmp tick
#   idle:  hlt; jmp idle
#   handler: push %eax; mov $0x20,%al; out %al,$0x20; pop %eax; iret
#   idtr:  .word 2047; .long 0x80000
_DRAIN_CODE = bytes.fromhex(
    'fabf00002000893f81c70010000081ff0000e00772f0be0000000085f67478b8'
    'ba00100089c225ffff000031db668ccbc1e31009d881e20000ffff81ca008e00'
    '00bf00000800b90001000089078957048 3c708e2f60f011dc4001000b034e643'
    .replace(' ', '') +
    'b99c2e000088c8e64088e8e640b0fee621b0ffe6a1bf00002000fbf489f1ff07'
    '81c70010000081ff00002002720 5bf00002000e2e9ebe4f4ebfd50b020e62058'
    .replace(' ', '') +
    'cf8d7600ff0700000800')
# Offsets of the patched immediates in _DRAIN_CODE.
_TOP, _PAGES, _DIVISOR, _WS_END = 0x10, 0x17, 0x61, 0x88
PIT_HZ = 1193182


def drain_kernel(top_mib, dirty_mib_s=0.0, working_set_mib=0, hz=100):
    """Return a multiboot kernel whose guest memory is really written.

    It writes one word (its own address) into every 4 KiB page from
    2 MiB to ``top_mib`` MiB once, so that no page of that range is a
    zero page QEMU sends as a flag: a migration must carry it all. Then,
    with ``dirty_mib_s`` 0, it halts with interrupts off (an idle guest:
    no CPU, no page written again). Otherwise it programs the PIT to
    ``hz`` ticks per second and, at each tick, rewrites the next pages of
    the first ``working_set_mib`` MiB above 2 MiB, round and round: a
    set dirty rate paced by the guest's own clock, which holds while
    the guest gets CPU at all (it sleeps in ``hlt`` between ticks, so it
    takes little; TCG slows only if the host starves it).

    :returns: (kernel bytes, the dirty rate it writes in MiB/s: whole
        pages per tick, so ``dirty_mib_s`` rounded).
    :raises ValueError: a range outside 3-4095 MiB, a working set
        larger than the written range, or a rate without a working set.
    """
    if not 3 <= top_mib <= 4095:
        raise ValueError(f"the written range ends at 3-4095 MiB, not "
                         f"{top_mib}")
    if dirty_mib_s < 0 or working_set_mib < 0 or not 18 < hz <= 10000:
        raise ValueError("dirty rate and working set are >= 0, hz 19-10000")
    pages = round(dirty_mib_s * 256 / hz)
    if dirty_mib_s and pages < 1:
        raise ValueError(f"{dirty_mib_s} MiB/s is under one page per tick "
                         f"at {hz} Hz")
    if pages and not 1 <= working_set_mib <= top_mib - 2:
        raise ValueError(f"a working set of 1-{top_mib - 2} MiB is needed "
                         f"to dirty, not {working_set_mib}")
    magic, flags = 0x1BADB002, 0x00010000
    load = 0x100000
    header = struct.pack('<8I', magic, flags, (-(magic + flags)) & 0xFFFFFFFF,
                         load, load, 0, 0, load + 32)
    code = bytearray(_DRAIN_CODE)
    struct.pack_into('<I', code, _TOP, top_mib << 20)
    struct.pack_into('<I', code, _PAGES, pages)
    struct.pack_into('<I', code, _DIVISOR, round(PIT_HZ / hz))
    struct.pack_into('<I', code, _WS_END, (2 + working_set_mib) << 20)
    return header + bytes(code), pages * hz / 256


def _accepting(path):
    """Whether a daemon accepts connections on the unix socket ``path``.

    The socket file appears when libvirtd binds it, a moment before it
    listens: a client connecting then is refused.
    """
    if not os.path.exists(path):
        return False
    with socket.socket(socket.AF_UNIX) as probe:
        try:
            probe.connect(path)
        except OSError:
            return False
    return True
