"""A migration link of a fixed rate between two network namespaces.

A drain's time is bounded by the bytes that must cross the source's
migration link divided by the link's rate. On one machine, loopback has
no such rate: QEMU copies as fast as the CPU lets it, so the bound would
measure the CPU instead. A ShapedLink gives the real tier a link:

    caller's namespace                 namespace NAME
    (the source host)                  (destination hosts)
    veth A  10.201.N.1/30  <------->  veth B  10.201.N.2/30
    tc tbf on A's egress: the source's migration stream into B

Destination hosts run their libvirtd and QEMU in the namespace
(``LibvirtHost(netns=link.netns, listen_addr=link.inner_addr)``) and
their drivers name ``inner_addr`` as the migration inbound address, so
every migration stream from the source crosses the shaped veth; nothing
leaves the machine. ``down`` deletes the namespace, which removes the
veth pair and its queueing discipline with it; it may be called at any
time and more than once.

Only the caller's namespace, veth and qdisc are touched: their names
carry ``tag`` (the benchmark uses its pid), so two runs side by side
each have their own.
"""

import ipaddress
import re
import shutil
import socket
import subprocess
import sys
import time

MIB = 1024 * 1024
# A tbf bucket must hold at least a packet; this one holds a few ms of
# the rates used here, so the shaping is smooth at TCP's scale.
BURST_BYTES = 256 * 1024
# Packets wait at most this long in the bucket's queue before drops.
LATENCY_MS = 200
COMMAND_TIMEOUT_S = 20
SUBNET = ipaddress.ip_network('10.201.0.0/16')


def missing_requirements():
    """Why a shaped link cannot be made here, or None."""
    for tool in ('ip', 'tc'):
        if shutil.which(tool, path='/usr/sbin:/usr/bin:/sbin:/bin') is None:
            return f"{tool} is not installed"
    probe = subprocess.run(['ip', 'netns', 'list'], capture_output=True,
                           timeout=COMMAND_TIMEOUT_S)
    if probe.returncode != 0:
        return (f"ip netns fails here: "
                f"{probe.stderr.decode().strip()}")
    return None


def _run(*args):
    """Run one command; raise RuntimeError with its output on failure."""
    proc = subprocess.run(args, capture_output=True,
                          timeout=COMMAND_TIMEOUT_S)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: "
                           f"{proc.stderr.decode().strip()}")
    return proc.stdout.decode()


class ShapedLink:
    """A veth pair into namespace ``netns``, shaped to ``rate_mib`` MiB/s.

    :param tag: short text unique to the caller (1-8 characters of
        [a-z0-9]): names ``nmig-link-TAG`` and veths ``nmTAGa``/``nmTAGb``.
    :param rate_mib: the link's rate in MiB/s of IP packets (TCP payload
        is ~3 % less: headers of 1500-byte packets; ``goodput`` measures
        it).
    """

    def __init__(self, tag, rate_mib):
        if not re.fullmatch('[a-z0-9]{1,8}', tag):
            raise ValueError(f"tag {tag!r}: 1-8 characters a-z0-9")
        if not 0 < rate_mib <= 10000:
            raise ValueError(f"link rate {rate_mib} MiB/s: 0-10000")
        self.tag = tag
        self.rate_mib = rate_mib
        self.netns = f'nmig-link-{tag}'
        self.outer_dev, self.inner_dev = f'nm{tag}a', f'nm{tag}b'
        self.outer_addr = self.inner_addr = None
        self._up = False

    def up(self):
        """Create namespace, veth pair, addresses and the shaping; on
        failure undo what was made. :raises RuntimeError: why."""
        try:
            self._up = True
            subnet = self._free_subnet()
            outer, inner = list(subnet.hosts())[:2]
            self.outer_addr, self.inner_addr = str(outer), str(inner)
            _run('ip', 'netns', 'add', self.netns)
            _run('ip', 'link', 'add', self.outer_dev, 'type', 'veth',
                 'peer', 'name', self.inner_dev, 'netns', self.netns)
            _run('ip', 'addr', 'add', f'{outer}/30', 'dev', self.outer_dev)
            _run('ip', 'link', 'set', self.outer_dev, 'up')
            inside = ('ip', '-n', self.netns)
            _run(*inside, 'addr', 'add', f'{inner}/30', 'dev',
                 self.inner_dev)
            _run(*inside, 'link', 'set', self.inner_dev, 'up')
            _run(*inside, 'link', 'set', 'lo', 'up')
            self.shape()
        except BaseException:
            self.down()
            raise
        return self

    def _free_subnet(self):
        """A /30 of SUBNET no interface of this namespace uses, chosen
        from the tag so that concurrent links start apart."""
        used = _run('ip', '-o', '-4', 'addr', 'show')
        count = SUBNET.num_addresses // 4
        start = int.from_bytes(self.tag.encode(), 'big') % count
        for i in range(64):
            first = SUBNET.network_address + 4 * ((start + i) % count)
            net = ipaddress.ip_network(f'{first}/30')
            if f' {first + 1}/' not in used and f' {first + 2}/' not in used:
                return net
        raise RuntimeError(f"no free /30 in {SUBNET} near {start}")

    def shape(self, rate_mib=None):
        """(Re)apply a token bucket of ``rate_mib`` (default: the link's)
        to the outer end's egress."""
        self.rate_mib = rate_mib or self.rate_mib
        _run('tc', 'qdisc', 'replace', 'dev', self.outer_dev, 'root', 'tbf',
             'rate', f'{int(self.rate_mib * MIB * 8)}bit',
             'burst', str(BURST_BYTES), 'latency', f'{LATENCY_MS}ms')

    def unshape(self):
        """Remove the bucket: the veth runs at the CPU's speed."""
        _run('tc', 'qdisc', 'del', 'dev', self.outer_dev, 'root')

    def qdisc_stats(self):
        """``tc -s`` of the outer end (bytes sent, drops, overlimits)."""
        return _run('tc', '-s', 'qdisc', 'show', 'dev', self.outer_dev)

    def goodput(self, seconds=3.0):
        """Measure TCP payload MiB/s through the link now: a sink in the
        namespace, this process sending for ``seconds``."""
        sink = subprocess.Popen(
            ['ip', 'netns', 'exec', self.netns, sys.executable, '-c',
             _SINK, self.inner_addr], stdout=subprocess.PIPE,
            stderr=subprocess.PIPE)
        try:
            port = int(sink.stdout.readline() or 0)
            if not port:
                raise RuntimeError(f"link sink did not start: "
                                   f"{sink.stderr.read().decode()}")
            block = b'\x5a' * (256 * 1024)
            sent = 0
            with socket.create_connection((self.inner_addr, port),
                                          timeout=COMMAND_TIMEOUT_S) as conn:
                started = time.monotonic()
                while time.monotonic() - started < seconds:
                    conn.sendall(block)
                    sent += len(block)
                conn.shutdown(socket.SHUT_WR)
                conn.recv(1)        # the sink read everything
                elapsed = time.monotonic() - started
            return sent / MIB / elapsed
        finally:
            sink.kill()
            sink.wait(timeout=COMMAND_TIMEOUT_S)

    def down(self):
        """Delete the namespace (and so the veth pair and its qdisc)."""
        if not self._up:
            return
        subprocess.run(['ip', 'netns', 'del', self.netns],
                       capture_output=True, timeout=COMMAND_TIMEOUT_S)
        # A pair whose inner end never moved into the namespace.
        subprocess.run(['ip', 'link', 'del', self.outer_dev],
                       capture_output=True, timeout=COMMAND_TIMEOUT_S)
        self._up = False

    def __enter__(self):
        return self.up()

    def __exit__(self, *exc):
        self.down()


# Accept one connection, read to its end, answer one byte.
_SINK = '''
import socket, sys
srv = socket.socket()
srv.bind((sys.argv[1], 0))
srv.listen(1)
print(srv.getsockname()[1], flush=True)
srv.settimeout(60)
conn, _ = srv.accept()
conn.settimeout(60)
while conn.recv(1 << 20):
    pass
conn.sendall(b'.')
'''
