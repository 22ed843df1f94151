"""Real tier: drain a host through a shaped link, against the link bound.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_drain_real.py \
        [--guests 5] [--memory 128] [--link 32] [--rounds 2]
        [--dirty 2,6] [--working-set 32] [--huge 2] [--scenarios idle,mixed]
        [--strategies numamig,fixed,serial] [--parallel N]

Needs root, libvirtd, QEMU, ``ip`` and ``tc``; without them it prints one
``SKIP real tier: <why>`` line and exits 0. Bad arguments: exit 2.

The machine: a source libvirtd host in this network namespace and two
destination hosts in a namespace of their own, joined by a veth pair
whose source end is shaped with tc's token bucket to ``--link`` MiB/s
(numamig_ci.shaped_link): every migration stream of the drain crosses
that one link, as a real host's streams share its NIC. The guests are
``--memory`` MiB 1-vCPU TCG guests pinned on the source's pCPUs 0-1,
running numamig_ci.libvirt_hosts.drain_kernel: their memory from 2 MiB
up is really written (no zero page QEMU could skip), then they either
halt (idle) or rewrite their first ``--working-set`` MiB at a set rate
paced by their own PIT (``--dirty``: one rate per dirtying guest).

Scenarios: ``idle`` (every guest idle) and ``mixed`` (the ``--dirty``
guests dirty, the rest idle). Strategies, each migration through
numamig's libvirt driver exactly as an agent calls it (``live_migrate``,
the shipped [libvirt] policy and settings, no bandwidth cap: the link
shapes):

* ``numamig``: the drain as shipped: at most ``--parallel`` moves at
  once (default ``[conductor] drain_parallel``), moves into one
  destination taking their claims in the plan's order: a move starts
  once the one before it into that host runs (numamig.db.drains.turns,
  the rule the conductor runs; here a started move is past its claim);
  the moves ordered by cost and started only while every dirtying
  guest copying keeps its share of the link, each under the policy its
  prediction at its share chooses (numamig.convergence.drain_link). The
  dirty rates are the source agent's estimate (its driver's page
  sampling, answered from its background sample as the shipped
  [conductor] drain_estimate_max_age allows); the link rate given is
  the goodput measured through it. The plan alternates the two
  destinations;
* ``fresh``: as ``numamig``, the estimate measured when the drain
  starts (one 1 s window before any move) instead of answered from the
  agent's background samples ([compute] dirty_rate_sample_interval,
  taken just before the drain here): the drain before those samples;
* ``cleanfirst``: as ``numamig`` with the moves ordered the other way
  (the least dirty first, where each destination's order allows): what
  the order itself is measured against;
* ``fixed``: the same turn rule with ``--parallel`` moves at once
  whatever the guests, in the plan's order (the drain before the
  cost-ordered, link-shared choice);
* ``before``: the drain before this benchmark's measurements: 2 at once,
  a move into a destination only after the one before it ended;
* ``serial``: one move at a time (Nova's ``host-evacuate-live`` way);
* ``all``: every move at once.

Each round runs every scenario under every strategy, the strategies'
order rotating between rounds so drift falls on each. Per run it prints
the total time, the physical bound, their ratio, and per guest its total
time, downtime, bytes sent again and what ended its migration.

The bound: the bytes that must cross (per guest, what a migration of the
written guest sends when nothing dirties: measured once, link unshaped,
from libvirt's job statistics) over the link's rate. Also printed: the
bound of the bytes actually sent, and the TCP payload rate the link
gives (goodput, ~3 % under the rate: packet headers). ``sent again`` is
a guest's bytes sent beyond what must cross. Bottleneck: the unshaped
calibration says how fast this machine's CPU moves a guest; during each
run the link's achieved rate and the machine's idle CPU are sampled.

Targets (issue 38), on the ``numamig`` strategy's median: an idle drain
within 1.15x of the bound, a mixed drain within 1.4x, no guest's
downtime above its policy's limit, never slower than ``serial`` (5 %
noise allowed). A missed target prints ``MISS: why`` and the run exits 1.
"""

import argparse
import collections
import dataclasses
import os
import statistics
import sys
import tempfile
import threading
import time

from numamig import exception
from numamig import objects
from numamig.compute import dirty_rates
from numamig.conf import CONF
from numamig.convergence import drain_link
from numamig.db import drains
from numamig.virt.libvirt import driver
from numamig.virt.libvirt import settings as lv_settings
from numamig_ci import libvirt_hosts
from numamig_ci import shaped_link

MIB = 1024 * 1024
IDLE_TARGET, MIXED_TARGET, SERIAL_NOISE = 1.15, 1.4, 1.05
STRATEGIES = ('numamig', 'fresh', 'cleanfirst', 'fixed', 'before',
              'serial', 'all')
DEFAULT_STRATEGIES = ('numamig', 'fixed', 'serial')
# [conductor] drain_parallel's default before this branch.
BEFORE_PARALLEL = 2
SCENARIOS = ('idle', 'mixed', 'postcopy')
DEFAULT_SCENARIOS = ('idle', 'mixed')
DESTINATIONS = ('dst-a', 'dst-b')
# Ports inside the destinations' own namespace: nothing else listens
# there, so fixed ones cannot collide.
DEST_PORTS = {'dst-a': (16509, 49200), 'dst-b': (16510, 49300)}
WRITE_WAIT_S = 60
RUN_LIMIT_S = 900
HUGE_PAGE_KIB = 2048
NR_HUGEPAGES = '/proc/sys/vm/nr_hugepages'
MEMINFO = '/proc/meminfo'
# Each libvirtd host mounts a hugetlbfs of its own (a guest keeps its
# pages under <mount>/libvirt/qemu/<id>-<name>, the same on both hosts
# of a move), as the nested tier's hosts do.
HUGETLBFS_SETUP = ('mount -t hugetlbfs -o pagesize=2M hugetlbfs '
                   '/dev/hugepages',)
SAMPLE_S = 0.2


def uuid_of(index):
    return f'5a1e0000-d7a1-4000-8000-{os.getpid() % 10**8:08d}{index:04d}'


def placement(pcpu, memory_mb, pagesize=None):
    cell = objects.InstanceNUMACell(
        id=0, host_cell=0, cpuset=set(), pcpuset={0}, cpu_pinning={0: pcpu},
        memory_mb=memory_mb, cpu_policy='dedicated', pagesize=pagesize)
    return objects.InstanceNUMATopology(cells=[cell])


@dataclasses.dataclass
class Guest:
    index: int
    dirty_mib_s: float      # as written by its kernel (0: idle)
    kernel: str
    # Backed by 2 MiB huge pages (hugetlbfs) on both hosts.
    huge: bool = False

    @property
    def pagesize(self):
        return HUGE_PAGE_KIB if self.huge else None

    @property
    def uuid(self):
        return uuid_of(self.index)

    @property
    def name(self):
        return f'drain-{self.index}'

    @property
    def pcpu(self):
        return self.index % 2


class Machine:
    """The shaped link, the source and destination hosts, drivers."""

    def __init__(self, root, args):
        self.root, self.args = root, args
        self.link = shaped_link.ShapedLink(f'{os.getpid() % 10**8}',
                                           args.link)
        self.hosts = {}
        self.drivers = {}
        self.pool = None
        # The source agent's kept dirty-rate samples.
        self.book = dirty_rates.DirtyRateBook()

    def start(self):
        self.pool = HugePagePool(self.args) if self.args.huge else None
        setup = HUGETLBFS_SETUP if self.pool else ()
        self.link.up()
        self.hosts['src'] = libvirt_hosts.LibvirtHost(
            'src', self.root, namespace_setup=setup)
        for name in DESTINATIONS:
            port, mig = DEST_PORTS[name]
            self.hosts[name] = libvirt_hosts.LibvirtHost(
                name, self.root, port=port, migration_port_min=mig,
                listen_addr=self.link.inner_addr, netns=self.link.netns,
                namespace_setup=setup)
        for host in self.hosts.values():
            host.start()
        for name, host in self.hosts.items():
            addr = '127.0.0.1' if name == 'src' else self.link.inner_addr
            self.drivers[name] = self._driver(name, host, addr)

    def _driver(self, name, host, addr):
        migration = dataclasses.replace(
            lv_settings.migration_from_conf(CONF.libvirt),
            inbound_addr=addr, libvirtd_port=host.port,
            progress_interval_s=SAMPLE_S)
        drv = driver.LibvirtDriver(dataclasses.replace(
            lv_settings.LibvirtSettings.from_conf(CONF),
            host=name, uri=host.uri, virt_type='qemu',
            cpu_dedicated_set=frozenset({0, 1}), reserved_host_memory_mb=0,
            migration=migration))
        drv.init_host(name)
        return drv

    def kernel(self, dirty_mib_s):
        """The path of a drain kernel dirtying at ``dirty_mib_s``; the
        rate it really writes."""
        data, rate = libvirt_hosts.drain_kernel(
            self.args.memory - 2, dirty_mib_s,
            self.args.working_set if dirty_mib_s else 0)
        path = os.path.join(self.root, f'drain-{dirty_mib_s:g}.bin')
        with open(path, 'wb') as f:
            f.write(data)
        return path, rate

    def spawn(self, guests):
        src = self.drivers['src']
        for guest in guests:
            base_xml = ("<domain type='qemu'><os><type arch='x86_64'>hvm"
                        f"</type><kernel>{guest.kernel}</kernel></os>"
                        "<devices><memballoon model='none'/></devices>"
                        "</domain>")
            instance = objects.Instance(uuid=guest.uuid, name=guest.name,
                                        vcpus=1, memory_mb=self.args.memory)
            src.spawn(instance, placement(guest.pcpu, self.args.memory,
                                          guest.pagesize),
                      base_xml=base_xml)
        for guest in guests:
            self._wait_written(guest)
        if self.pool is not None:
            self.pool.check_backed(guests, self.args.memory)

    def _wait_written(self, guest):
        """Until the guest's last written page holds its own address:
        its kernel has written everything once."""
        dom = self.drivers['src']._conn.lookupByUUIDString(guest.uuid)
        last = ((self.args.memory - 2) << 20) - 4096
        deadline = time.monotonic() + WRITE_WAIT_S
        while int.from_bytes(dom.memoryPeek(last, 4, 2), 'little') != last:
            # flags 2: VIR_MEMORY_PHYSICAL
            if time.monotonic() > deadline:
                raise RuntimeError(f"{guest.name} did not write its memory "
                                   f"in {WRITE_WAIT_S} s")
            time.sleep(SAMPLE_S)

    def remove(self, guests):
        for drv in self.drivers.values():
            present = drv.list_guests()
            for guest in guests:
                if guest.uuid in present:
                    drv.destroy(guest.uuid)

    def qemu_cpu(self):
        """{pid: CPU seconds} of every QEMU of the hosts now (the
        sources' and the destinations')."""
        seen = {}
        for host in self.hosts.values():
            piddir = os.path.join(host.directory, 'run', 'libvirt', 'qemu')
            for entry in os.listdir(piddir) if os.path.isdir(piddir) \
                    else ():
                # driver.pid is libvirtd's own.
                if not entry.endswith('.pid') or entry == 'driver.pid':
                    continue
                try:
                    with open(os.path.join(piddir, entry)) as f:
                        pid = int(f.read().strip())
                    with open(f'/proc/{pid}/stat') as f:
                        fields = f.read().rsplit(')', 1)[1].split()
                    seen[pid] = (int(fields[11]) + int(fields[12])) / \
                        os.sysconf('SC_CLK_TCK')
                except (OSError, ValueError):
                    continue
        return seen

    def stop(self):
        for drv in self.drivers.values():
            try:
                drv.cleanup_host()
            except Exception:   # noqa: BLE001 - tear-down goes on
                pass
        for host in self.hosts.values():
            host.stop()
        self.link.down()
        if self.pool is not None:
            self.pool.release()


def _huge_pages():
    """(total, free) 2 MiB pages of the machine's pool, from the kernel."""
    found = {}
    with open(MEMINFO) as f:
        for line in f:
            key, _, value = line.partition(':')
            found[key] = value.split()[0]
    return int(found['HugePages_Total']), int(found['HugePages_Free'])


class HugePagePool:
    """The machine's 2 MiB page pool, grown for the drain's huge-page
    guests and given back at the end.

    A move holds a guest's pages on both hosts until the source's QEMU
    exits, so the pool holds every huge guest twice (a drain may move
    all at once), plus the pages the pool held before.
    """

    def __init__(self, args):
        self.before, _free = _huge_pages()
        per_guest = args.memory * 1024 // HUGE_PAGE_KIB
        want = self.before + 2 * args.huge * per_guest
        os.makedirs('/dev/hugepages', exist_ok=True)
        with open(NR_HUGEPAGES, 'w') as f:
            f.write(str(want))
        total, _free = _huge_pages()
        if total < want:
            self.release()
            raise RuntimeError(
                f"the kernel gave {total - self.before} of the "
                f"{want - self.before} 2 MiB pages the {args.huge} huge-"
                f"page guests need (memory too fragmented: try fewer "
                f"guests or less --memory)")

    def check_backed(self, guests, memory_mb):
        """The huge guests' memory is really on huge pages: the kernel's
        pool lost at least their pages (each wrote all its memory)."""
        total, free = _huge_pages()
        want = sum(memory_mb * 1024 // HUGE_PAGE_KIB - 2
                   for g in guests if g.huge)
        if total - free - self.before < want:
            raise RuntimeError(
                f"only {total - free - self.before} 2 MiB pages are in "
                f"use, the huge-page guests wrote {want}: they are not "
                f"backed by the pool")

    def release(self):
        with open(NR_HUGEPAGES, 'w') as f:
            f.write(str(self.before))


class Move:
    """One guest's migration in a thread, with its samples."""

    def __init__(self, machine, guest, dest):
        self.machine, self.guest, self.dest = machine, guest, dest
        self.samples = []
        # When the first memory crossed: before it, the migration was
        # set up (connections, the destination's QEMU started).
        self.first_byte = self.last_byte = None
        self.result = self.error = None
        self.started = self.ended = None
        # A policy name chosen for this move (None: the shipped default).
        self.policy = None
        self.done = threading.Event()

    def start(self, on_end):
        src, dst = self.machine.drivers['src'], self.machine.drivers[
            self.dest]
        info = dst.build_migrate_info(
            placement(self.guest.pcpu, self.machine.args.memory,
                      self.guest.pagesize),
            dst.get_host_topology())
        dest_xml = src.get_destination_xml(self.guest.uuid, info)
        connect_uri, migration_uri = dst.migration_target()
        data = objects.LiveMigrateData(
            instance_uuid=self.guest.uuid, source_host='src',
            dest_host=self.dest,
            migration_uuid=self.guest.uuid[:-4] + 'ffff',
            dest_connect_uri=connect_uri, migration_uri=migration_uri)

        policy = None if self.policy is None else \
            src._settings.migration.catalog()[self.policy]

        def migrate():
            self.started = time.monotonic()
            try:
                self.result = src.live_migrate(
                    self.guest.uuid, dest_xml, data, self._sampled,
                    policy=policy)
            except exception.NumamigException as exc:
                self.error = exc
            finally:
                self.ended = time.monotonic()
                self.done.set()
                on_end()

        threading.Thread(target=migrate, daemon=True,
                         name=f'move-{self.guest.name}').start()

    def _sampled(self, sample):
        now = time.monotonic()
        if self.first_byte is None and sample.memory_processed:
            self.first_byte = now
        if not self.samples or \
                sample.memory_processed > self.samples[-1][1]:
            # The last sample that saw memory cross: the copy went on
            # until about then (within a sampling interval).
            self.last_byte = now
        self.samples.append((now, sample.memory_processed))

    @property
    def copying(self):
        """(from, to): when this move's memory crossed the link."""
        if self.first_byte is None:
            return None
        return self.first_byte, max(self.first_byte, self.last_byte)

    @property
    def setup_s(self):
        """Seconds from the start to the first memory sent."""
        return (self.first_byte or self.ended) - self.started


def plan(guests, strategy, args):
    """(moves as (guest, destination) in order, moves at once, when a
    move into a destination may follow the one before it: 'ended',
    'claimed' (its job runs), 'shared' (claimed, and the link's share
    kept) or None (at once))."""
    moves = [(g, DESTINATIONS[i % len(DESTINATIONS)])
             for i, g in enumerate(guests)]
    if strategy in ('numamig', 'fresh', 'cleanfirst'):
        # Ordered once the source's estimate is in (drain()).
        return moves, args.parallel, 'shared'
    if strategy == 'fixed':
        return moves, args.parallel, 'claimed'
    if strategy == 'before':
        return moves, BEFORE_PARALLEL, 'ended'
    if strategy == 'serial':
        return moves, 1, 'ended'
    return moves, len(moves), None


def cost(guest, args):
    """The drain_link.Cost of a guest as the conductor knows it: the
    source's estimate (sample_dirty_rates), its rate None when not
    sampled."""
    return args.estimate.get(guest.uuid) or drain_link.Cost(
        args.memory * MIB, None)


def link_rate(args):
    """Bytes/s the numamig strategy plans for: the goodput measured
    through the link (what [conductor] migration_link_rate's help asks
    an operator to give)."""
    return args.goodput * MIB


def policy_chooser(machine, args):
    """The conductor's policy chooser (DrainDriver._policy_chooser) with
    this source's settings: drain_link.policy_for with the estimate's
    figures, the shipped policy the guest's own."""
    mig = machine.drivers['src']._settings.migration
    catalog = mig.catalog()
    own = mig.select_policy()[0].name
    fallbacks = [n for n in args.fallbacks if n in catalog]

    def choose(record, cost_, share):
        if cost_.dirty_rate is None or not share or args.figures is None:
            return None
        name = drain_link.policy_for(
            cost_, share, own, fallbacks,
            drain_link.predictor(catalog, args.figures, cost_))
        if name == own:
            return None
        return {'name': name, 'post_copy': catalog[name].uses_post_copy}
    return choose


def estimate(machine, guests, args, max_age):
    """Sample the guests' dirty rates on the source as the drain driver
    has it sampled (compute API sample_dirty_rates, one window for
    all, a guest sampled at most ``max_age`` seconds ago answered from
    the agent's background sample: numamig.compute.dirty_rates); sets
    args.estimate, args.figures; returns the seconds it took."""
    began = time.monotonic()
    answer = dirty_rates.sample(machine.drivers['src'], machine.book,
                                [g.uuid for g in guests], 1, max_age)
    took = time.monotonic() - began
    args.figures = answer['figures']
    for guest in guests:
        found = answer['guests'].get(guest.uuid) or {}
        args.estimate[guest.uuid] = drain_link.Cost(
            found.get('memory') or args.memory * MIB,
            found.get('dirty_rate'))
    return took


def drain(machine, guests, strategy, args):
    """Run one drain; return (wall seconds, [Move], machine idle share,
    cores the QEMUs used)."""
    order, parallel, gate = plan(guests, strategy, args)
    pending = [Move(machine, g, d) for g, d in order]
    moves = list(pending)
    running = []
    changed = threading.Event()
    cpu0 = _cpu_times()
    # A source QEMU exits when its guest has left: CPU times are sampled
    # while they run, the last value kept.
    qemu0 = machine.qemu_cpu()
    qemu = dict(qemu0)
    args.estimate, args.figures, args.estimate_s = {}, None, None
    max_age = 0 if strategy == 'fresh' else \
        CONF.conductor.drain_estimate_max_age
    if gate == 'shared' and max_age:
        # The agent's background sample ([compute]
        # dirty_rate_sample_interval), taken before the drain as the
        # guests run: the drain's estimate is answered from it.
        dirty_rates.sample_all(machine.drivers['src'], machine.book, set,
                               1, 256)
    started = time.monotonic()
    if gate == 'shared':
        # As the drain driver: the source answers every guest's rate,
        # then the moves go by the estimate.
        args.estimate_s = estimate(machine, [m.guest for m in pending],
                                   args, max_age)
        pending = drain_link.order(
            pending, lambda m: m.dest,
            (lambda m: cost(m.guest, args))
            if strategy in ('numamig', 'fresh') else
            # The other way round: the least dirty first.
            (lambda m: dataclasses.replace(
                cost(m.guest, args),
                dirty_rate=-(cost(m.guest, args).dirty_rate or 0))))
        moves = list(pending)
    while pending or running:
        qemu.update(machine.qemu_cpu())
        running = [m for m in running if not m.done.is_set()]
        policies = {}
        for move in _turns(moves, pending, running, parallel, gate, args,
                           policies, machine):
            policy = policies.get(move)
            move.policy = policy and policy['name']
            pending.remove(move)
            running.append(move)
            move.start(changed.set)
        if time.monotonic() - started > RUN_LIMIT_S:
            raise RuntimeError(f"drain ({strategy}) still running after "
                               f"{RUN_LIMIT_S} s")
        changed.wait(SAMPLE_S)
        changed.clear()
    wall = max(m.ended for m in moves) - started
    cpu1 = _cpu_times()
    idle = (cpu1[0] - cpu0[0]) / max(1, cpu1[1] - cpu0[1])
    cores = sum(qemu[pid] - qemu0.get(pid, 0) for pid in qemu) / wall
    return wall, moves, idle, cores


def _turns(moves, pending, running, parallel, gate, args, policies,
           machine):
    """The moves to start now. ``claimed``: numamig's own rule
    (numamig.db.drains.turns), a started move counting as past its
    claim (Move.start builds its destination XML before it returns);
    ``shared``: the same with the link's rate and the moves' costs.
    ``ended``: the rule before, a move into a destination only after
    the one before it ended. None: as room allows."""
    if gate in ('claimed', 'shared'):
        records = [_Record(
            move=m, planned_host=m.dest, source_host=None,
            migration_uuid=id(m),
            status=drains.PENDING if m in pending else
            drains.MIGRATING if m in running else drains.COMPLETED)
            for m in moves]
        claimed = {id(m) for m in running}
        if gate == 'claimed':
            chosen = drains.turns(records, parallel, claimed)
        else:
            chosen_policies = {}
            chosen = drains.turns(records, parallel, claimed,
                                  link_rate(args),
                                  lambda r: _running_cost(r.move, args),
                                  args.margin,
                                  choose=policy_chooser(machine, args),
                                  policies=chosen_policies)
            policies.update({r.move: p for r, p in chosen_policies.items()})
        return [r.move for r in chosen]
    busy = {m.dest for m in running} if gate == 'ended' else set()
    chosen = []
    for move in pending:
        if len(running) + len(chosen) >= parallel:
            break
        if move.dest in busy:
            continue
        if gate:
            busy.add(move.dest)
        chosen.append(move)
    return chosen


@dataclasses.dataclass(eq=False)
class _Record:
    """A move as numamig.db.drains.turns reads it (hashable by
    identity, as the conductor's rows are)."""
    move: Move
    planned_host: str
    source_host: str
    migration_uuid: int
    status: str


def _running_cost(move, args):
    """A move's Cost, post-copy when its chosen policy ends so."""
    found = cost(move.guest, args)
    if move.policy and move.machine.drivers['src']._settings.migration.\
            catalog()[move.policy].uses_post_copy:
        return dataclasses.replace(found, post_copy=True)
    return found


def _cpu_times():
    """(idle jiffies, all jiffies) of the machine."""
    with open('/proc/stat') as f:
        values = [int(v) for v in f.readline().split()[1:]]
    return values[3] + values[4], sum(values)


def ended_by(move):
    """What ended a migration: the policy's last action, or how."""
    if move.error is not None:
        return f'FAILED {type(move.error).__name__}'
    res = move.result
    how = 'post-copy' if res.post_copy else 'paused' if res.paused else \
        'pre-copy'
    last = res.convergence_actions[-1] if res.convergence_actions else \
        'converged'
    return f'{how}, {last}'


def calibrate(machine, args):
    """Migrate one idle written guest with the link unshaped: the bytes
    that must cross per guest, and how fast this machine's CPU moves
    them (from the first memory sent to the end, switch-over included:
    a floor of the copy's rate, low for small guests)."""
    path, _rate = machine.kernel(0)
    guest = Guest(99, 0, path)
    machine.link.unshape()
    try:
        machine.spawn([guest])
        try:
            _wall, (move,), _idle, _cores = drain(machine, [guest], 'serial',
                                                  args)
        finally:
            machine.remove([guest])
    finally:
        machine.link.shape()
    if move.error is not None:
        raise RuntimeError(f"calibration migration failed: {move.error}")
    res = move.result
    # A copy quicker than the first progress sample has no first byte:
    # its whole time then bounds the rate from below.
    first = move.first_byte or move.started
    return (res.memory_processed, res.memory_processed / MIB / (
        move.ended - first), move.setup_s)


def run(args):
    results = collections.defaultdict(list)
    with tempfile.TemporaryDirectory() as root:
        machine = Machine(root, args)
        try:
            machine.start()
            goodput = machine.link.goodput()
            args.goodput = goodput
            must, ceiling, setup = calibrate(machine, args)
            print(f"link {args.link} MiB/s (tbf on {machine.link.outer_dev}"
                  f"), TCP goodput {goodput:.1f} MiB/s; unshaped, one "
                  f"guest's memory moves at {ceiling:.0f} MiB/s (the "
                  f"CPU's ceiling) after {setup:.1f} s of set-up; must "
                  f"cross per guest {must / MIB:.1f} MiB", flush=True)
            kernels = {}
            for rate in (0,) + tuple(args.dirty) + (args.fast,):
                kernels[rate] = machine.kernel(rate)
            for rnd in range(args.rounds):
                shift = rnd % len(args.strategies)
                order = args.strategies[shift:] + args.strategies[:shift]
                for scenario in args.scenarios:
                    rates = list(args.dirty) if scenario == 'mixed' else \
                        [args.fast] if scenario == 'postcopy' else []
                    rates += [0] * (args.guests - len(rates))
                    huge = huge_indices(args)
                    guests = [Guest(i, kernels[r][1], kernels[r][0],
                                    i in huge)
                              for i, r in enumerate(rates)]
                    for strategy in order:
                        machine.spawn(guests)
                        try:
                            out = drain(machine, guests, strategy, args)
                        finally:
                            machine.remove(guests)
                        line = report_run(args, rnd, scenario, strategy,
                                          out, must, goodput)
                        results[scenario, strategy].append(line)
        finally:
            machine.stop()
    return results, must, goodput, ceiling


def huge_indices(args):
    """The guests backed by huge pages: odd indices first, so that a
    mixed drain has both an idle and a dirtying one among them."""
    return set(sorted(range(args.guests),
                      key=lambda i: (i % 2 == 0, i))[:args.huge])


def report_run(args, rnd, scenario, strategy, out, must, goodput):
    wall, moves, idle, cores = out
    n = len(moves)
    estimated = {uuid: c.dirty_rate / MIB
                 for uuid, c in args.estimate.items()
                 if c.dirty_rate is not None}
    bound = n * must / MIB / args.link
    sent = sum((m.result.memory_processed if m.result else 0)
               for m in moves)
    achieved = sent / MIB / wall
    ratio = wall / bound
    of_goodput = wall / (n * must / MIB / goodput)
    print(f"\nround {rnd + 1} {scenario:5} {strategy:8} total {wall:6.1f} s"
          f"  bound {bound:5.1f} s  ratio {ratio:4.2f}x  ({of_goodput:4.2f}"
          f"x of the goodput bound; bound "
          f"of bytes sent {sent / MIB / args.link:5.1f} s; link carried "
          f"{achieved:4.1f} MiB/s of {goodput:.1f}; machine idle "
          f"{idle:4.0%}; QEMUs used {cores:.2f} cores; load average "
          f"{os.getloadavg()[0]:.1f})", flush=True)
    downtimes = []
    resent = 0
    for m in moves:
        res = m.result
        if res is None:
            print(f"  {m.guest.name} -> {m.dest}: {ended_by(m)}: {m.error}")
            continue
        again = max(0, res.memory_processed - must)
        resent += again
        downtimes.append(res.downtime_ms or 0)
        est = estimated.get(m.guest.uuid)
        print(f"  {m.guest.name}{' (2M pages)' if m.guest.huge else ''}"
              f" dirty {m.guest.dirty_mib_s:4.1f} MiB/s "
              f"(estimated {'-' if est is None else f'{est:.0f}'}) -> "
              f"{m.dest}: {res.elapsed_ms / 1000:6.1f} s  downtime "
              f"{res.downtime_ms if res.downtime_ms is not None else '?':>4}"
              f" ms  sent again {again / MIB:6.1f} MiB  ended by "
              f"{ended_by(m)}"
              + (f" (policy {m.policy} chosen)" if m.policy else ''),
              flush=True)
    gaps = link_idle(moves)
    if args.estimate_s is not None:
        print(f"  estimate of {len(args.estimate)} guests' dirty rates: "
              f"{args.estimate_s:.2f} s (before any move)")
    tails = [m.ended - m.copying[1] for m in moves if m.copying]
    print(f"  link idle {sum(gaps):.1f} s of {wall:.1f}: {gaps[0]:.1f} s "
          f"before the first copy, {gaps[1]:.1f} s between copies, "
          f"{gaps[2]:.1f} s after the last; set-up per move (start to "
          f"first byte) {statistics.median(m.setup_s for m in moves):.2f} "
          f"s median; switch-over and end (last byte to end) "
          f"{statistics.median(tails or [0]):.2f} s median",
          flush=True)
    return {'wall': wall, 'bound': bound, 'ratio': ratio,
            'idle_before': gaps[0], 'idle_between': gaps[1],
            'idle_after': gaps[2],
            'must_mib': must / MIB,
            'failed': sum(m.result is None for m in moves),
            'hot_post_copy': all(m.result is not None and m.result.post_copy
                                 for m in moves
                                 if m.guest.dirty_mib_s > args.goodput),
            'downtime_max': max(downtimes, default=0),
            'achieved': achieved, 'idle': idle, 'cores': cores,
            'again_mib': resent / MIB, 'load': os.getloadavg()[0]}


def link_idle(moves):
    """Seconds the link carried no move's memory: (before the first
    copy, between copies, after the last), from the drain's start to
    its last move's end."""
    start = min(m.started for m in moves)
    end = max(m.ended for m in moves)
    spans = sorted(m.copying for m in moves if m.copying)
    if not spans:
        return end - start, 0.0, 0.0
    before = spans[0][0] - start
    between, reach = 0.0, spans[0][1]
    for begin, stop in spans[1:]:
        if begin > reach:
            between += begin - reach
        reach = max(reach, stop)
    return before, between, end - reach


def results_must(results):
    """MiB that must cross per guest (from the runs' records)."""
    for runs in results.values():
        for run in runs:
            return run['must_mib']
    return None


def verdict(args, results, goodput, ceiling):
    """Print the summary and the targets; return the misses."""
    print(f"\nmedians over {args.rounds} round(s), {args.guests} guests of "
          f"{args.memory} MiB, link {args.link} MiB/s:")
    med = {}
    for (scenario, strategy), runs in sorted(results.items()):
        med[scenario, strategy] = {
            k: statistics.median(r[k] for r in runs)
            for k in ('wall', 'bound', 'ratio', 'achieved', 'idle',
                      'again_mib', 'load', 'downtime_max', 'idle_before',
                      'idle_between', 'idle_after')}
        m = med[scenario, strategy]
        print(f"  {scenario:5} {strategy:8} {m['wall']:6.1f} s  bound "
              f"{m['bound']:5.1f} s  {m['ratio']:4.2f}x  link "
              f"{m['achieved']:4.1f} MiB/s  sent again "
              f"{m['again_mib']:5.1f} MiB  longest downtime "
              f"{m['downtime_max']:4.0f} ms  machine idle {m['idle']:4.0%}"
              f"  load {m['load']:.1f}  link idle {m['idle_before']:.1f} "
              f"s before, "
              f"{m['idle_between']:.1f} between, {m['idle_after']:.1f} "
              f"after the copies")
    must_mib = results_must(results)
    if ceiling > goodput:
        print(f"bottleneck of a copy: the link (unshaped, this machine "
              f"copies a guest at {ceiling:.0f} MiB/s; the link carries "
              f"{goodput:.1f} MiB/s)")
    else:
        print(f"bottleneck of a copy: the CPU (unshaped, this machine "
              f"copies a guest at {ceiling:.0f} MiB/s, under the link's "
              f"{goodput:.1f} MiB/s)")
    for scenario in SCENARIOS:
        serial = med.get((scenario, 'serial'))
        if serial and must_mib:
            per_move = serial['wall'] / args.guests
            copy = must_mib / goodput
            print(f"{scenario}: one at a time takes {per_move:.1f} s a "
                  f"move, {copy:.1f} s of it the copy at the link's "
                  f"goodput: {per_move - copy:.1f} s a move outside it "
                  f"(set-up, switch-over, sent again), which moves in "
                  f"parallel hide")
    limit = CONF.libvirt.live_migration_downtime
    misses = []
    for scenario, target in (('idle', IDLE_TARGET), ('mixed', MIXED_TARGET)):
        mine = med.get((scenario, 'numamig'))
        if mine is None:
            continue
        if mine['ratio'] > target:
            misses.append(f"{scenario} drain {mine['ratio']:.2f}x the bound "
                          f"(target {target}x)")
        serial = med.get((scenario, 'serial'))
        if serial and mine['wall'] > serial['wall'] * SERIAL_NOISE:
            misses.append(f"{scenario} drain {mine['wall']:.1f} s, slower "
                          f"than one at a time ({serial['wall']:.1f} s)")
    for scenario in args.scenarios:
        for run in results.get((scenario, 'numamig'), ()):
            if run['failed']:
                misses.append(f"{scenario}: {run['failed']} migration(s) "
                              f"failed")
            if run['downtime_max'] > limit:
                misses.append(f"{scenario}: a downtime of "
                              f"{run['downtime_max']} ms, over the policy's "
                              f"{limit} ms")
    for run in results.get(('postcopy', 'numamig'), ()):
        if not run['hot_post_copy']:
            misses.append("postcopy: the guest dirtying faster than the "
                          "link did not end by post-copy")
    for miss in misses:
        print(f"MISS: {miss}")
    return misses


def _rates(text):
    try:
        rates = tuple(float(r) for r in text.split(',') if r)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: MiB/s,MiB/s,...")
    if any(r <= 0 for r in rates):
        raise argparse.ArgumentTypeError("dirty rates are > 0 MiB/s")
    return rates


def _names(choices):
    def parse(text):
        names = tuple(n for n in text.split(',') if n)
        bad = set(names) - set(choices)
        if bad or not names:
            raise argparse.ArgumentTypeError(
                f"{','.join(sorted(bad)) or 'none'}: choose from "
                f"{','.join(choices)}")
        return names
    return parse


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--guests', type=int, default=5)
    parser.add_argument('--memory', type=int, default=128,
                        help='MiB per guest (64-1024)')
    parser.add_argument('--link', type=float, default=32,
                        help='the link rate, MiB/s (1-1000)')
    parser.add_argument('--rounds', type=int, default=2)
    parser.add_argument('--parallel', type=int,
                        help="numamig's moves at once, as 'host drain "
                             "--parallel' (default [conductor] "
                             "drain_parallel)")
    parser.add_argument('--margin', type=float,
                        default=drain_link.SHARE_MARGIN,
                        help="numamig's share of the link a dirtying "
                             "guest keeps, in times its dirty rate (1-8)")
    parser.add_argument('--dirty', type=_rates, default=(2.0, 6.0),
                        help='MiB/s of each dirtying guest (mixed)')
    parser.add_argument('--huge', type=int, default=2,
                        help='guests backed by 2 MiB huge pages (the '
                             'benchmark grows the kernel\'s pool for them '
                             'and gives it back)')
    parser.add_argument('--working-set', type=int, default=32,
                        help='MiB a dirtying guest rewrites')
    parser.add_argument('--scenarios', type=_names(SCENARIOS),
                        default=DEFAULT_SCENARIOS)
    parser.add_argument('--fast', type=float, default=40.0,
                        help='MiB/s of the postcopy scenario\'s guest, '
                             'dirtying faster than the link')
    parser.add_argument('--fallbacks', type=lambda t: tuple(
        n for n in t.split(',') if n), default=None,
                        help="the policies numamig may choose instead of "
                             "a guest's own (default [conductor] "
                             "convergence_fallback_policies)")
    parser.add_argument('--strategies', type=_names(STRATEGIES),
                        default=DEFAULT_STRATEGIES)
    args = parser.parse_args(argv)
    if not 1 <= args.guests <= 16 or len(args.dirty) > args.guests:
        parser.error("--guests: 1-16, at least one per --dirty rate")
    if not 64 <= args.memory <= 1024 or not 1 <= args.link <= 1000:
        parser.error("--memory 64-1024 MiB, --link 1-1000 MiB/s")
    if not 0 <= args.huge <= args.guests:
        parser.error("--huge: 0 to --guests")
    if not 1 <= args.margin <= 8:
        parser.error("--margin: 1-8")
    if not 1 <= args.working_set <= args.memory - 4 or args.rounds < 1:
        parser.error("--working-set 1 to --memory less 4; --rounds >= 1")
    CONF([], project='numamig', default_config_files=[])
    args.parallel = args.parallel or CONF.conductor.drain_parallel
    args.fallbacks = args.fallbacks or tuple(
        CONF.conductor.convergence_fallback_policies)
    if not 1 <= args.fast <= 200:
        parser.error("--fast: 1-200 MiB/s")
    if not 1 <= args.parallel <= 64:
        parser.error("--parallel: 1-64")
    reason = (libvirt_hosts.missing_requirements()
              or shaped_link.missing_requirements())
    if reason:
        print(f"SKIP real tier: {reason}")
        return 0
    results, _must, goodput, ceiling = run(args)
    return 1 if verdict(args, results, goodput, ceiling) else 0


if __name__ == '__main__':
    sys.exit(main())
