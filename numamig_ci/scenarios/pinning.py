"""CPU placement scenarios: pins, collocation, emulator and I/O threads,
mixed and thread policies, QEMU's real thread affinity."""

from oslo_utils import uuidutils

from numamig import exception
from numamig import objects
from numamig.numa import constraints
from numamig.numa import fit
from numamig_ci import domain
from numamig_ci.results import brief
from numamig_ci.scenarios import kernel_view
from numamig_ci.scenarios.registry import scenario
from numamig_ci.session import DEDICATED
from numamig_ci.session import FLOATING


def _vcpus(s, src, dst, copies=2):
    """vCPUs per guest so that ``copies`` guests fit one node of ``dst``."""
    vcpus = min(2, s.dedicated_in_node(dst) // copies,
                s.dedicated_in_node(src))
    s.require(vcpus >= 1, f"host {dst} cannot hold {copies} pinned guests "
                          f"in one NUMA node")
    return vcpus


@scenario('pins-recomputed',
          "Two guests start with identical pins on two hosts; after one "
          "moves onto the other's host their pins are disjoint, and usage "
          "is exactly the union there and empty of it on the source.")
def pins_recomputed(s):
    src, dst = s.pair()
    vcpus = _vcpus(s, src, dst)
    resident = s.create(dst, vcpus, label='resident')
    mover = s.create(src, vcpus, label='mover')
    before = mover.numa_topology.cpu_pinning
    if before == resident.numa_topology.cpu_pinning:
        s.say(f"both guests hold pins {before}: a copied XML would "
              f"double-book them on {dst}")
    else:
        s.say(f"note: the guests' first pins differ ({before} vs "
              f"{resident.numa_topology.cpu_pinning}); copying is caught "
              f"by the set checks only")
    migration = s.migrate(mover, dst)
    if not s.expect_status(migration, mover, 'completed'):
        return
    moved = s.check_placed(mover, dst)
    s.check_placed(resident, dst)
    overlap = (set(moved.numa_topology.cpu_pinning.values()) &
               set(resident.numa_topology.cpu_pinning.values()))
    if overlap:
        s.fail(mover, dst, 'record numa_topology.cpu_pinning',
               f"pCPUs disjoint from {resident.name}'s",
               f"shares {domain.fmt(frozenset(overlap))}")
    s.check_host(dst)
    s.check_host(src)


@scenario('collocation',
          "Dedicated and floating guests share a destination: pins within "
          "its dedicated set and disjoint, floating guests' <vcpu cpuset> "
          "equal to its shared set.")
def collocation(s):
    src, dst = s.pair(dest_shared=True)
    guests = [s.create(dst, 1, specs=FLOATING, label='floating')]
    if s.dedicated_in_node(dst) >= 2:
        guests.append(s.create(dst, 1, label='resident'))
    movers = [s.create(src, 1, label='mover')]
    if s.host(src).shared:
        movers.append(s.create(src, 1, specs=FLOATING, label='floater'))
    for mover in movers:
        migration = s.migrate(mover, dst)
        s.expect_status(migration, mover, 'completed')
    for guest in guests + movers:
        s.check_placed(guest, dst)
    s.check_host(dst)


def _migrate_and_check(s, guest, src, dst):
    migration = s.migrate(guest, dst)
    if s.expect_status(migration, guest, 'completed'):
        s.check_placed(guest, dst)
        s.check_host(dst)
        s.check_host(src)


def _create_or_skip(s, host, vcpus, specs, label):
    try:
        return s.create(host, vcpus, specs=specs, label=label)
    except exception.InstanceBuildError as exc:
        s.require(False, f"host {host} cannot create the guest: "
                         f"{brief(exc)}")


@scenario('emulator-threads-share',
          "hw:emulator_threads_policy=share: <emulatorpin> is the "
          "destination's shared set after the move.")
def emulator_threads_share(s):
    src, dst = s.pair(dest_shared=True)
    specs = dict(DEDICATED, **{'hw:emulator_threads_policy': 'share'})
    guest = _create_or_skip(s, src, 1, specs, 'share')
    _migrate_and_check(s, guest, src, dst)


@scenario('emulator-threads-isolate',
          "hw:emulator_threads_policy=isolate: <emulatorpin> is one "
          "dedicated pCPU of the destination outside the vCPU pins.")
def emulator_threads_isolate(s):
    src, dst = s.pair()
    for host in (src, dst):
        s.require(s.dedicated_in_node(host) >= 2,
                  f"host {host} has no NUMA node with 2 dedicated pCPUs "
                  f"(a vCPU plus its isolated emulator thread)")
    specs = dict(DEDICATED, **{'hw:emulator_threads_policy': 'isolate'})
    s.create(dst, 1, specs=specs, label='resident')
    guest = _create_or_skip(s, src, 1, specs, 'isolate')
    _migrate_and_check(s, guest, src, dst)
    if kernel_view.available(s):
        kernel_view.check_emulator(s, guest, dst)


IOTHREAD_XML = """<domain type='{type}'>
  <os><type{arch}>hvm</type></os>
  <iothreads>1</iothreads>
  <cputune><iothreadpin iothread='1' cpuset='0'/></cputune>
  <devices>{devices}</devices>
</domain>"""


def _spawn_with_iothread(s, host):
    """Create a guest with an I/O thread straight in libvirt, then have
    numamig adopt it (numamig creates guests without I/O threads)."""
    uuid = uuidutils.generate_uuid()
    specs = dict(DEDICATED, **{'hw:numa_nodes': '1'})
    instance = objects.Instance(
        uuid=uuid, name=f'ci-iothread-{uuid[:8]}', project_id='numamig-ci',
        vcpus=1, memory_mb=s.backend.guest_memory_mb, extra_specs=specs)
    request = constraints.get_numa_request(1, instance.memory_mb, specs, {})
    placed = fit.fit(s.topology(host), request)
    s.require(placed.fits, f"no room on {host}: {placed.reason}")
    topology = placed.topology
    topology.instance_uuid = uuid
    probe = s.backend.probe(host)
    test = probe.hypervisor_type == 'test'
    base_xml = IOTHREAD_XML.format(
        type='test' if test else 'qemu',
        arch='' if test else " arch='x86_64'",
        devices='' if test else "<memballoon model='none'/>")
    s.created.append(uuid)
    probe.spawn(instance, topology, base_xml=base_xml)
    adopted = [i for i in s.api.instance_adopt(s.ctxt, host)
               if i.uuid == uuid]
    s.require(adopted, f"host {host} did not adopt guest {uuid}")
    s.say(f"adopted {instance.name} with one I/O thread on {host}")
    return adopted[0]


@scenario('iothreadpin',
          "A guest with an I/O thread: <iothreadpin> follows the emulator "
          "threads to the destination's pCPUs.")
def iothreadpin(s):
    src, dst = s.pair()
    guest = _spawn_with_iothread(s, src)
    xml = domain.parse(s.backend.domain_xml(src, guest.uuid))
    s.require(xml.iothread_pins, f"host {src} dropped the I/O thread pin")
    _migrate_and_check(s, guest, src, dst)


@scenario('mixed-policy',
          "hw:cpu_policy=mixed: the pinned vCPU gets a dedicated pCPU, the "
          "floating one the destination node's shared pCPUs.")
def mixed_policy(s):
    src, dst = s.pair(dest_shared=True, source_shared=True)
    specs = {'hw:cpu_policy': 'mixed', 'hw:cpu_dedicated_mask': '^0',
             'hw:numa_nodes': '1'}
    guest = _create_or_skip(s, src, 2, specs, 'mixed')
    _migrate_and_check(s, guest, src, dst)


@scenario('thread-policies',
          "hw:cpu_thread_policy isolate and require on SMT hosts: after "
          "the move, isolate owns whole cores, require uses siblings.",
          requires=('smt',))
def thread_policies(s):
    src, dst = s.pair()
    s.create(dst, 1, label='resident')
    for policy in ('isolate', 'require'):
        specs = dict(DEDICATED, **{'hw:cpu_thread_policy': policy})
        guest = s.create(src, 2, specs=specs, label=policy)
        migration = s.migrate(guest, dst)
        if s.expect_status(migration, guest, 'completed'):
            record = s.check_placed(guest, dst)
            _check_threads(s, record, dst, policy)
    s.check_host(dst)


def _check_threads(s, record, host, policy):
    pins = set(record.numa_topology.cpu_pinning.values())
    siblings = [frozenset(g) for c in s.topology(host).cells
                for g in c.siblings]
    cores = [g for g in siblings if g & pins]
    if policy == 'require' and any(not g <= pins for g in cores):
        s.fail(record, host, '<vcpupin> thread siblings',
               'whole sibling pairs', domain.fmt(frozenset(pins)))
    if policy == 'isolate':
        others = set()
        for guest in s.api.instance_get_all(s.ctxt, host=host):
            if guest.uuid != record.uuid and guest.numa_topology:
                others |= set(guest.numa_topology.cpu_pinning.values())
        shared = [g for g in cores if g & others or len(g & pins) > 1]
        if shared:
            s.fail(record, host, '<vcpupin> cores',
                   'one vCPU per core, no sibling used by another guest',
                   f"cores {[domain.fmt(g) for g in shared]} shared")


@scenario('qemu-affinity',
          "Real hosts: the QEMU vCPU threads' CPU affinity matches the "
          "<vcpupin> of the XML, before and after the move.",
          requires=('qemu_threads',))
def qemu_affinity(s):
    src, dst = s.pair()
    guest = s.create(src, 1, label='affinity')
    s.check_placed(guest, src)
    _migrate_and_check(s, guest, src, dst)
