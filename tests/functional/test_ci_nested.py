"""numamig-ci --nested: the multi-NUMA real tier, in a nested QEMU host.

One QEMU (TCG) virtual machine with two NUMA nodes, SMT siblings and
2 MiB and 1 GiB page pools per node runs two real libvirtd hosts; the
conductor and two compute agents run here over RabbitMQ. Always on: the
spec's huge-page problem with 2 MiB and with 1 GiB pages (the
destination's node 0 pages are full, the guest lands on node 1's pages,
read back from the kernel inside the machine), a two-cell guest across
two host nodes, an operator's abort while QEMU copies a huge-page
guest (every kernel page counter as before), an old-release source's
verbatim XML rewritten by the destination's migration guard to its
claim on node 1 and a claim the XML cannot meet refused by it
(guard-old-source), and a host of three pinned huge-page guests drained
through the conductor, each guest on its planned node afterwards
(drain-huge-pages). Should the kernel have put
a boot-time 1 GiB page on another node than asked (it says so at start),
huge-pages-1g may be skipped, with the reason printed.
With NUMAMIG_NESTED_FULL=1, every scenario the nested backend can
express in one machine (15-25 minutes on two busy cores before
guard-old-source, drain-huge-pages and defragment-node added about 6
more), and the
missing-node problem on two machines of 3 and 2 nodes (97-124 s: opt-in
because two TCG machines hold both of CI's cores for two minutes, which
slowed the other worker's tests as much; CI's whole run then took 27
minutes). With NUMAMIG_NESTED_THREADS=1 (or the full run), the
placement of both QEMUs' migration threads, read from /proc inside the
machine while the copy runs, with the compute agents moved into the
machine for it (migration-threads: opt-in, as starting two agents under
TCG alone takes about a minute). With NUMAMIG_NESTED_VIRTIO_MEM=1 (or
the full run), virtio-mem per host node on a machine of its own with KVM
inside it (virtio-mem-per-node: a real guest kernel, its memory grown
and reclaimed on one host node by numamig-manage, read back from the
guest kernel, libvirt and the host kernel's per-node counters; opt-in,
see VIRTIO_MEM). With NUMAMIG_NESTED_DISTANCES=1 (or the full run),
a two-cell guest on the nearest pair of nodes of two 4-node machines
of different distance tables, its guest distances following it
(nearest-pair: opt-in, see DISTANCES). With NUMAMIG_NESTED_DEVICES=1
(or the full run), a guest kernel holding a passed-through e1000e on
node 1 of one machine, its migration aborted (the device plugged back)
and then completed to another machine (the destination's own device
plugged), read from both libvirtd, both kernels' sysfs and the guest's
PCI bus (device-move: opt-in, see DEVICES). With NUMAMIG_NESTED_VFS=1
(or the full run), the same with SR-IOV virtual functions of an igb on
node 1 (QEMU 10.0 from bookworm-backports in a private prefix,
tools/nested-qemu.sh): the guest holds a VF, never a PF (vf-move:
opt-in, see VFS). Where root, the build tools, a
cached image or the Debian mirror, or RabbitMQ are missing it skips with the
reason printed, and
that skip fails the test command's run (only the opt-ins of
tests/intended-skips.yaml may skip; the command installs the tools and
builds the image first).
Never hangs CI: the run has a hard deadline, after which numamig-ci is
stopped (it powers the machine off) and then killed with its QEMU.
"""

import os
import re
import signal
import subprocess
import sys

import fixtures
from lxml import etree

from numamig_ci.nested import deployment
from numamig_ci.nested import image
from numamig_ci.nested import vm as nested_vm
from numamig_ci.scenarios import registry
from tests import base
from tests.fixtures import rpc as rpc_fixture

# Measured warm on two cores with other jobs beside it, this test at
# load 11: the machine's start and power-off 96 s, huge-pages 62 s,
# huge-pages-1g 70 s, multi-node 36 s, abort-copying 67 s,
# guard-old-source 90 s (two agent restarts), drain-huge-pages 112 s:
# 8 m 53 s in all (numamig-ci alone at load 16: 10 m 29 s), within the
# always-on budget of 12 minutes. defragment-node (57-102 s) would
# overrun it at such loads: FULL only.
ALWAYS = ('huge-pages', 'huge-pages-1g', 'multi-node', 'abort-copying',
          'guard-old-source', 'drain-huge-pages')
# Skipped only when the deployment said why: the kernel placed the pages
# otherwise than the layout asked (numamig_ci.nested.deployment).
MAY_SKIP = {'huge-pages-1g'}
# Measured warm on two cores with other jobs beside it: 93-116 s at
# load 2-5, 147-153 s at load 6 (the whole test 198 s), of which
# 48-80 s the two compute agents' start inside the machine (their
# imports alone take 35 s under TCG) and a few more their move back:
# over what the always-on budget has room for (about 90 s), so a test
# of its own.
THREADS = ('migration-threads',)
# A guest kernel with the virtio_mem driver on a two-node machine with
# KVM inside it (an AMD CPU, whose SVM TCG emulates: the guest kernel
# reaches its init 10-16 s after create instead of 113-173 s under TCG
# inside TCG), grown and reclaimed per host node from the command line.
# Measured warm: the whole test 102 s at load 2-3, 189 s at load 11-12
# (its machine's boot and power-off included; the scenario 44-53 s and
# 112 s, of which libvirt's create 15-48 s, reading the 66 MB kernel
# over 9p, and the guest's init 10-23 s later). A machine of its own
# besides the always-on one's (8 m 53 s at load 11): the always-on set's
# 12 minutes have no room for it, so a test of its own, opt-in.
VIRTIO_MEM = ('virtio-mem-per-node',)
VIRTIO_MEM_LAYOUT = 'cores=2,threads=1,memory=2048:2048,pages_2m=0:0,kvm=1'
# Hosts of two CPU generations: two machines of different -cpu models,
# KVM inside each (under TCG every machine offers guests the same CPU).
# AMD's max (TCG emulates its SVM) against Opteron_G3 with SVM. Two
# machines hold both of CI's cores, as the missing-node run's do: opt-in
# (figures in test_cpu_models_between_generations).
CPU_MODELS = ('cpu-model-generations',)
# CPU power management across a migration, read from the kernel: two
# machines (one kernel per host) with the compute agents inside them.
# Opt-in: two TCG machines and two agents' start under TCG.
CPU_POWER = ('cpu-power-hotplug',)
CPU_POWER_LAYOUTS = ('cores=4,threads=1,memory=1536,pages_2m=0',
                     'cores=4,threads=1,memory=1536,pages_2m=0')
CPU_MODEL_LAYOUTS = (
    'cores=2,threads=1,memory=2048,pages_2m=0,kvm=1,cpu=amd-max',
    'cores=2,threads=1,memory=2048,pages_2m=0,kvm=1,cpu=opteron-g3')
# The compute agents' locality watch on the hosts' own kernel: like the
# threads' test, it moves the agents into the machine (35-80 s under
# TCG), over what the always-on budget has room for: a test of its own.
LOCALITY = ('locality-watch',)
# Two machines of four nodes, each with a distance table of two close
# pairs, other pairs on each (issue 39). Measured warm on two cores:
# numamig-ci alone 124 s at load 4 (both machines' boot and power-off;
# the scenario 44 s), this test 110 s at load 5-6 (the scenario 31 s):
# over the always-on budget (about 90 s), a test of its own, opt-in.
DISTANCES = ('nearest-pair',)
_FOUR_NODES = 'cores=1,threads=1,memory=1024:1024:1024:1024,pages_2m=0:0:0:0'
DISTANCE_MACHINES = (
    _FOUR_NODES + ',distances=10:12:21:21:12:10:21:21:21:21:10:12:21:21:12:10',
    _FOUR_NODES + ',distances=10:31:13:31:31:10:31:13:13:31:10:31:31:13:31:10')
# A guest holding a passed-through PCI function (issue 41): two
# machines with KVM inside, each with two e1000e behind a PCIe expander
# bridge on node 1 and an emulated IOMMU (Layout.devices), a real guest
# kernel answering the hot-unplug. Two machines hold both of CI's
# cores: opt-in (figures in test_device_moves_with_its_guest).
DEVICES = ('device-move',)
# A guest that does not release its device (paused), then does: the
# same machines, a test of its own (opt-in with the same variable).
DEVICE_STUCK = ('device-stuck',)
DEVICE_LAYOUTS = (
    'cores=2,threads=1,memory=2048:2048,pages_2m=0:0,kvm=1,devices=2',) * 2
# The same with SR-IOV virtual functions (issue 41): each machine's two
# functions on node 1 are igb (82576) PFs with two VFs each, the guest's
# alias type-VF; the machines run the private QEMU 10.0 (igb), the
# guest a VF. Opt-in as DEVICES (both cores).
VFS = ('vf-move',)
VF_LAYOUTS = (DEVICE_LAYOUTS[0] + ',vfs=2',) * 2
# Every scenario one machine can express: not fewer-nodes (both hosts
# see its node count; it runs on two machines below), nor the threads',
# virtio-mem's, the CPU models', CPU power's, locality's, the distance
# tables' or the devices' (their own tests below, which the full run
# runs too).
FULL = ALWAYS + tuple(sorted(set(registry.SCENARIOS) - set(ALWAYS)
                             - {'fewer-nodes'} - set(THREADS)
                             - set(VIRTIO_MEM) - set(CPU_MODELS)
                             - set(CPU_POWER) - set(LOCALITY)
                             - set(DISTANCES) - set(DEVICES)
                             - set(VFS) - set(DEVICE_STUCK)))
# Two machines: 3 nodes and 2 nodes, one CPU per node dedicated.
TWO_MACHINES = ('cores=2,threads=1,memory=1536:1536:1536,pages_2m=0:0:0',
                'cores=2,threads=1,memory=1536:1536,pages_2m=0:0')
# A cold image build (~3-8 min) plus boot and the scenarios.
DEADLINE_S = {ALWAYS: 1800, FULL: 3600, ('fewer-nodes',): 1200,
              THREADS: 1200, VIRTIO_MEM: 1500, CPU_MODELS: 1500,
              CPU_POWER: 1800, LOCALITY: 1200, DISTANCES: 1200,
              DEVICES: 1200, VFS: 1200, DEVICE_STUCK: 1200}
STOP_GRACE_S = 120


class NestedHarnessTest(base.TestCase):

    def setUp(self):
        super().setUp()
        reason = (image.missing_requirements()
                  or rpc_fixture.rabbit_unreachable_reason())
        if reason:
            print(f"SKIP numamig-ci --nested: {reason}")
            self.skipTest(reason)
        self.top = self.useFixture(fixtures.TempDir()).path

    def run_nested(self, scenarios, layouts=()):
        """Run numamig-ci --nested; return its output once all passed."""
        state = os.path.join(self.top, 'state')
        junit = os.path.join(self.top, 'nested.xml')
        argv = [os.path.join(os.path.dirname(sys.executable), 'numamig-ci'),
                '--nested', '--junit', junit, '--state-dir', state]
        for layout in layouts:
            argv += ['--nested-layout', layout]
        for scenario in scenarios:
            argv += ['--scenario', scenario]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
        self.addCleanup(_reap, proc)
        out = _communicate(proc, DEADLINE_S[scenarios])
        # For the CI log: each scenario's verdict and time, the kernel's
        # page counters around each move, what the migration guard did,
        # each drain's outcome, pools not placed as asked.
        print(''.join(re.findall(
            rf'^(?:  (?:PASS|FAIL|ERROR|SKIP) |    kernel view: free |'
            rf'    guard log: |    drain of |    kernel view: node |'
            rf'    read from /proc |    kernel and record agree|'
            rf'    compute agents started |'
            rf'    kernel view before: |    kernel view after |'
            rf'    vCPUs sent |'
            rf'    guest kernel booted |    at boot: |'
            rf'    instance memory |    host reclaim |'
            rf'    negative control |    virtio-mem per host node: |'
            rf'    refused naming |    baseline of |    migration of ci-cpu|'
            rf'    \S+: host CPU |    \S+ lacks |'
            rf'    \S+ online CPUs |    \S+ reports powered down |'
            rf'    nearest pair: |    guest distances |'
            rf'    QEMU -numa dist |'
            rf'    \S+: assignable functions |    while copying |'
            rf'    after the abort: |    guest PCI bus: |    device move: |'
            rf'    stuck migration: |    after the deadline: |'
            rf'    late release: |    second migration: |'
            rf'.*{deployment.NOT_AS_ASKED}).*\n', out, re.MULTILINE)),
            end='')
        # CI shows the last line of a failure: make it name each scenario
        # that failed and the last line it gave as its reason.
        failed = _failed_scenarios(out)
        self.assertEqual([], failed, out + '\n' + '; '.join(failed))
        skipped = set(re.findall(r'^  SKIP (\S+) ', out, re.MULTILINE))
        if skipped:
            allowed = MAY_SKIP if deployment.NOT_AS_ASKED in out else set()
            self.assertLessEqual(skipped, allowed, out)
            print(f"SKIP {', '.join(sorted(skipped))}: "
                  f"{_lines_naming(out, deployment.NOT_AS_ASKED)}")
        # A scenario named with --scenario that skips fails the run.
        self.assertEqual(1 if skipped else 0, proc.returncode, out)
        self.assertIn(f'numamig-ci: {len(scenarios) - len(skipped)} passed, '
                      f'0 failed, {len(skipped)} skipped', out)
        cases = etree.parse(junit).getroot().findall('testcase')
        self.assertEqual(sorted(scenarios),
                         sorted(c.get('name') for c in cases))
        # The machines are gone: no QEMU still serves this run's state.
        self.assertEqual([], _processes_naming(state))
        return out

    def test_nested_scenarios_pass(self):
        full = bool(os.environ.get('NUMAMIG_NESTED_FULL'))
        out = self.run_nested(FULL if full else ALWAYS)
        # The kernel inside the machine was read, not only libvirt: its
        # 1 GiB counters too, unless it reserved them elsewhere.
        self.assertIn('kernel view of', out)
        if deployment.NOT_AS_ASKED not in out:
            self.assertIn('kernel view: free 1048576 KiB pages', out)
        # The old source's XML went through the guard's hook in the
        # destination's libvirtd: rewritten once, refused once.
        self.assertRegex(out, r'guard log: .* incoming migration of '
                              r'ci-old-source-\S+: rewritten ')
        self.assertRegex(out, r'guard log: .* incoming migration of '
                              r'ci-refused-\S+: refused ')

    def test_migration_threads_on_the_hosts_kernel(self):
        if not (os.environ.get('NUMAMIG_NESTED_THREADS')
                or os.environ.get('NUMAMIG_NESTED_FULL')):
            self.skipTest("compute agents moved into the nested machine: "
                          "opt-in with NUMAMIG_NESTED_THREADS=1")
        out = self.run_nested(THREADS)
        # Both QEMUs' threads were read while the copy ran, and the
        # agents' record agreed with the kernel.
        self.assertRegex(out, r'read from /proc while copying .* QEMU '
                              r'\d+: live_migration .* QEMU \d+: '
                              r'multifdrecv_0 ')
        self.assertIn('kernel and record agree: ', out)

    def test_locality_watch_on_the_hosts_kernel(self):
        if not (os.environ.get('NUMAMIG_NESTED_LOCALITY')
                or os.environ.get('NUMAMIG_NESTED_FULL')):
            self.skipTest("compute agents moved into the nested machine: "
                          "opt-in with NUMAMIG_NESTED_LOCALITY=1")
        out = self.run_nested(LOCALITY)
        # numa_maps read before and after from the machine's kernel, the
        # watch's own record in the live XML, and its log leaving the
        # guest alone once its two moves were spent.
        self.assertRegex(out, r'kernel view before: .* memory per node '
                              r'\{.*\}')
        self.assertRegex(out, r"kernel view after the watch's move 1: "
                              r'memory per node .* live metadata '
                              r'<\S*move [^>]*node="\d"')
        self.assertRegex(out, r'the agent moved it 2 times; locality '
                              r'watch leaves guest \S+ alone')

    def test_virtio_mem_per_host_node(self):
        if not (os.environ.get('NUMAMIG_NESTED_VIRTIO_MEM')
                or os.environ.get('NUMAMIG_NESTED_FULL')):
            self.skipTest("a guest kernel in the nested machine: opt-in "
                          "with NUMAMIG_NESTED_VIRTIO_MEM=1")
        out = self.run_nested(VIRTIO_MEM, (VIRTIO_MEM_LAYOUT,))
        # The guest kernel booted, both commands ran, and the node check
        # made against the other host node failed after each.
        self.assertIn('guest kernel booted in the nested host', out)
        self.assertRegex(out, r'instance memory \(\d')
        self.assertRegex(out, r'host reclaim \(\d')
        self.assertEqual(2, out.count('negative control after '))

    def test_cpu_models_between_generations(self):
        if not (os.environ.get('NUMAMIG_NESTED_CPU_MODELS')
                or os.environ.get('NUMAMIG_NESTED_FULL')):
            self.skipTest("two nested machines of different CPU models: "
                          "opt-in with NUMAMIG_NESTED_CPU_MODELS=1")
        out = self.run_nested(CPU_MODELS, CPU_MODEL_LAYOUTS)
        self.assertRegex(out, r'refused naming \S')
        self.assertRegex(out, r'baseline of \S+ and \S+: \S+')
        self.assertEqual(2, len(re.findall(
            r'migration of ci-cpu-rich-\S+ \S+ -> \S+: completed', out)))

    def test_cpu_power_across_a_migration(self):
        if not (os.environ.get('NUMAMIG_NESTED_CPU_POWER')
                or os.environ.get('NUMAMIG_NESTED_FULL')):
            self.skipTest("CPU hotplug in two nested machines with the "
                          "compute agents inside: opt-in with "
                          "NUMAMIG_NESTED_CPU_POWER=1")
        out = self.run_nested(CPU_POWER, CPU_POWER_LAYOUTS)
        for moment in ('before', 'during (claim held)', 'after the abort',
                       'after the move', 'after the guest left'):
            self.assertRegex(out, rf'online CPUs {re.escape(moment)}: ')

    def test_nearest_pair_on_two_distance_tables(self):
        if not (os.environ.get('NUMAMIG_NESTED_DISTANCES')
                or os.environ.get('NUMAMIG_NESTED_FULL')):
            self.skipTest("two nested machines of four nodes: opt-in with "
                          "NUMAMIG_NESTED_DISTANCES=1")
        out = self.run_nested(DISTANCES, DISTANCE_MACHINES)
        # Both hosts' nearest pairs (2-3 of the first table, 1-3 of the
        # second: node 0's CPU is each host's shared one), then the
        # guest's distances: booted with 12, persistent 13 after the
        # move, 13 live after its next start.
        self.assertRegex(out, r'nearest pair: \S+ on \S+-1 nodes 2, 3 '
                              r'\(distance 12;')
        self.assertRegex(out, r'nearest pair: \S+ on \S+-2 nodes 1, 3 '
                              r'\(distance 13;')
        self.assertRegex(out, r'guest distances \(persistent\) .*'
                              r'\(\(0, 1\), 13\)')
        self.assertRegex(out, r'QEMU -numa dist .*\(after its next '
                              r'start\): \[\(\(0, 1\), 13\)')

    def test_device_moves_with_its_guest(self):
        if not (os.environ.get('NUMAMIG_NESTED_DEVICES')
                or os.environ.get('NUMAMIG_NESTED_FULL')):
            self.skipTest("two nested machines with assignable PCI "
                          "devices and a guest kernel: opt-in with "
                          "NUMAMIG_NESTED_DEVICES=1")
        # Measured warm on two shared cores at load 2-4: this test 82 s
        # (both machines' boot and power-off included), numamig-ci alone
        # 77 s; the scenario 37-44 s, of which the move 10.2-10.6 s and
        # the guest kernel's create 7-10 s, its bus 5.5-6.5 s later.
        out = self.run_nested(DEVICES, DEVICE_LAYOUTS)
        # Unplugged while the aborted copy ran, back after the abort,
        # gone from the guest's bus before the move's copy and plugged
        # on the destination.
        self.assertRegex(out, r'while copying .* live <hostdev> \[\]; '
                              r'guest bus without the device: yes')
        self.assertRegex(out, r"after the abort: \S+ live <hostdev> "
                              r"\['0000:8[12]:00.0'\]; guest bus holds")
        self.assertRegex(out, r'guest PCI bus: device gone on \S+ before '
                              r'the copy: yes; on \S+: 0000:')

    def test_vf_moves_with_its_guest(self):
        if not (os.environ.get('NUMAMIG_NESTED_VFS')
                or os.environ.get('NUMAMIG_NESTED_FULL')):
            self.skipTest("two nested machines with SR-IOV virtual "
                          "functions (QEMU with igb) and a guest kernel: "
                          "opt-in with NUMAMIG_NESTED_VFS=1")
        try:
            nested_vm.vf_qemu()
        except nested_vm.QemuUnavailable as exc:
            # Opted in: a missing QEMU is a failure, not a skip.
            self.fail(str(exc))
        # Measured on two shared cores at load 5-11 (other sessions'
        # benchmarks beside): this test 270 s, the scenario 88-132 s, of
        # which the move 20-38 s, the guest's create 23 s and its bus
        # 13-20 s later. Once (of three runs) the guest kernel stalled
        # after its first console byte while the nested machine's
        # kernel reported an RCU stall (a starved TCG vCPU): a FAIL.
        out = self.run_nested(VFS, VF_LAYOUTS)
        # The guest holds a VF of a PF left to igb, at boot and after
        # the move, and the device came and went on its bus as with
        # device-move.
        self.assertRegex(out, r'sysfs at boot: 0000:8[12]:10\.[0246] '
                              r'physfn 0000:8[12]:00\.0 \(driver igb\)')
        self.assertRegex(out, r'sysfs after the move: 0000:8[12]:10\.'
                              r'[0246] physfn 0000:8[12]:00\.0 \(driver '
                              r'igb\)')
        self.assertRegex(out, r"after the abort: \S+ live <hostdev> "
                              r"\['0000:8[12]:10\.[0246]'\]; guest bus "
                              r"holds")
        self.assertRegex(out, r'guest PCI bus: device gone on \S+ before '
                              r'the copy: yes; on \S+: 0000:')

    def test_device_the_guest_does_not_release(self):
        if not (os.environ.get('NUMAMIG_NESTED_DEVICES')
                or os.environ.get('NUMAMIG_NESTED_FULL')):
            self.skipTest("two nested machines with assignable PCI "
                          "devices and a guest kernel: opt-in with "
                          "NUMAMIG_NESTED_DEVICES=1")
        # Measured at load 7-11 beside another nested run: this test
        # 238 s, the scenario 129 s (the stuck migration 10.9 s, the
        # late release 2.5 s after the resume, plugged back 6.5 s).
        out = self.run_nested(DEVICE_STUCK, DEVICE_LAYOUTS)
        # Failed at the deadline naming the function; the source's guest
        # kept it; released late and plugged back; then moved.
        self.assertRegex(out, r'stuck migration: failed after .*'
                              r'0000:8[12]:00\.0.*within 10 s')
        self.assertRegex(out, r"after the deadline: \S+ live <hostdev> "
                              r"\['0000:8[12]:00.0'\]; \S+ guest absent")
        self.assertRegex(out, r"late release: guest bus without the device "
                              r"[0-9.]+ s after the resume; \S+ live "
                              r"<hostdev> \['0000:8[12]:00.0'\] .* guest bus "
                              r"slot 0000:")
        self.assertRegex(out, r'second migration: completed')

    def test_missing_node_on_two_machines(self):
        if not os.environ.get('NUMAMIG_NESTED_FULL'):
            self.skipTest("two nested machines: opt-in with "
                          "NUMAMIG_NESTED_FULL=1")
        self.run_nested(('fewer-nodes',), TWO_MACHINES)


def _failed_scenarios(out):
    """``name: last reason line`` for each scenario that failed or erred."""
    failed = []
    lines = out.splitlines()
    for i, line in enumerate(lines):
        match = re.match(r'  (?:FAIL|ERROR) (\S+) ', line)
        if not match:
            continue
        reason = ''
        for later in lines[i + 1:]:
            if not later.startswith('    '):
                break
            if later.strip():
                reason = later.strip()
        failed.append(f"{match.group(1)}: {reason or 'no reason given'}")
    return failed


def _lines_naming(out, text):
    return ' '.join(line.strip() for line in out.splitlines()
                    if text in line)


def _communicate(proc, deadline):
    """The run's output; past ``deadline`` s numamig-ci is stopped (it
    tears the machine down) and the test fails with what it printed."""
    try:
        return proc.communicate(timeout=deadline)[0]
    except subprocess.TimeoutExpired:
        out = _reap(proc)
        raise AssertionError(f"numamig-ci --nested overran {deadline} s:\n"
                             f"{out}")


def _reap(proc):
    """SIGTERM numamig-ci (it powers the machine off), then kill its
    whole session (QEMU included) if it lingers."""
    if proc.poll() is not None:
        return ''
    proc.terminate()
    try:
        return proc.communicate(timeout=STOP_GRACE_S)[0]
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        return proc.communicate()[0]


def _processes_naming(path):
    found = []
    for entry in os.listdir('/proc'):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f'/proc/{entry}/cmdline', 'rb') as f:
                text = f.read().decode(errors='replace')
        except OSError:  # ended meanwhile
            continue
        if path in text:
            found.append(f"{entry}: {text.replace(chr(0), ' ')[:200]}")
    return found


class FailedScenariosTest(base.TestCase):
    """What CI's last line says when a nested scenario fails."""

    def test_names_each_failure_with_its_last_reason_line(self):
        out = ("[1/3] x.huge-pages\n"
               "  PASS huge-pages (61.0 s)\n"
               "[2/3] x.guard-old-source\n"
               "  FAIL guard-old-source (90.2 s)\n"
               "    Traceback (most recent call last):\n"
               "    AssertionError: pins lost on host-1\n"
               "  ERROR drain-huge-pages (3.0 s)\n"
               "numamig-ci: 1 passed, 2 failed, 0 skipped\n")
        self.assertEqual(
            ['guard-old-source: AssertionError: pins lost on host-1',
             'drain-huge-pages: no reason given'],
            _failed_scenarios(out))

    def test_all_passed_names_none(self):
        self.assertEqual([], _failed_scenarios(
            "  PASS multi-node (36.0 s)\n"
            "    kernel view: free 512 KiB pages\n"))
